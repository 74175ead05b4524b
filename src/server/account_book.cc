// AccountBook (see account_book.h): accounts by (end time, id); a query
// walks the period's range under a reader lock, so publication (a writer)
// waits at most for one page's walk.
#include "server/account_book.h"

#include <algorithm>
#include <functional>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "api/accounting.h"
#include "api/states.h"

namespace trainyard::server {
namespace {
constexpr int kDefaultPage = 500, kMaxPage = 5000;

// The period [since, until) a request asks for, checked.
absl::StatusOr<std::pair<int64_t, int64_t>> Period(int64_t since, int64_t until, absl::Time now) {
  if (since < 0) return absl::InvalidArgumentError(absl::StrCat("since_unix_ms: ", since, " is negative"));
  if (until < 0) return absl::InvalidArgumentError(absl::StrCat("until_unix_ms: ", until, " is negative"));
  // Now counts in: a job that ended this millisecond is in the period.
  if (until == 0) until = absl::ToUnixMillis(now) + 1;
  if (until <= since) {
    return absl::InvalidArgumentError(
        absl::StrCat("until_unix_ms: ", until, " is not after since_unix_ms ", since, " (the period is [since, until))"));
  }
  return std::make_pair(since, until);
}
}  // namespace

void AccountBook::SetLimits(Limits limits) {
  absl::MutexLock lock(&mu_);
  limits_ = limits;
  limits_.max_jobs = std::max<size_t>(1, limits_.max_jobs);
}

void AccountBook::Put(v1::JobAccount account) {
  absl::MutexLock lock(&mu_);
  PutLocked(std::move(account));
}

void AccountBook::PutMany(std::vector<v1::JobAccount> accounts) {
  absl::MutexLock lock(&mu_);
  for (v1::JobAccount& a : accounts) PutLocked(std::move(a));
}

void AccountBook::PutLocked(v1::JobAccount account) {
  uint64_t id = account.id();
  int64_t end = account.end_time_unix_ms();
  auto [at, fresh] = end_of_.try_emplace(id, end);
  if (!fresh && at->second != end) {
    by_end_.erase({at->second, id});
    at->second = end;
  }
  by_end_[{end, id}] = std::make_shared<const v1::JobAccount>(std::move(account));
  int64_t oldest = absl::ToUnixMillis(absl::FromUnixMillis(end) - limits_.retention);
  while (!by_end_.empty() && (by_end_.size() > limits_.max_jobs || by_end_.begin()->first.first < oldest)) {
    Erase(by_end_.begin());
  }
}

void AccountBook::Erase(std::map<Key, std::shared_ptr<const v1::JobAccount>>::iterator it) {
  end_of_.erase(it->first.second);
  by_end_.erase(it);
}

int64_t AccountBook::Oldest(absl::Time now) const { return absl::ToUnixMillis(now - limits_.retention); }

size_t AccountBook::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return by_end_.size();
}

absl::StatusOr<v1::HistoryResponse> AccountBook::History(const v1::HistoryRequest& req, absl::Time now) const {
  for (int s : req.states()) {
    auto state = static_cast<v1::JobState>(s);
    if (!api::IsTerminal(state)) {
      return absl::InvalidArgumentError(
          absl::StrCat("states: ", api::JobStateName(state), " is not a finished state (history lists finished jobs)"));
    }
  }
  if (req.page_size() < 0) return absl::InvalidArgumentError("page_size: must not be negative");
  int page = req.page_size() == 0 ? kDefaultPage : std::min(req.page_size(), kMaxPage);
  absl::StatusOr<std::pair<int64_t, int64_t>> period = Period(req.since_unix_ms(), req.until_unix_ms(), now);
  if (!period.ok()) return period.status();
  // The token is the (end time, id) of the previous page's last job.
  std::optional<Key> after;
  if (!req.page_token().empty()) {
    Key k;
    std::vector<std::string> parts = absl::StrSplit(req.page_token(), '.');
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &k.first) || !absl::SimpleAtoi(parts[1], &k.second)) {
      return absl::InvalidArgumentError(
          absl::StrCat("page_token: '", req.page_token(), "' is not a token this server gave (next_page_token)"));
    }
    after = k;
  }
  auto matches = [&req](const v1::JobAccount& a) {
    if (!req.user().empty() && a.user() != req.user()) return false;
    if (!req.queue().empty() && a.queue() != req.queue()) return false;
    if (!req.name().empty() && a.name() != req.name() && a.array_job() != req.name()) return false;
    return req.states().empty() || std::find(req.states().begin(), req.states().end(), a.state()) != req.states().end();
  };
  const int64_t oldest = [&] {
    absl::ReaderMutexLock lock(&mu_);
    return Oldest(now);
  }();
  // The period, cut to what is kept: [lo, hi) by key.
  const Key lo{std::max(period->first, oldest), 0};
  const Key hi{period->second, 0};
  v1::HistoryResponse out;
  {
    absl::ReaderMutexLock lock(&mu_);
    auto first = by_end_.lower_bound({oldest, 0});
    if (first != by_end_.end()) out.set_oldest_kept_unix_ms(first->first.first);
  }
  // Where the walk starts: after the token's job (before it, newest first).
  Cursor at;
  if (!req.newest_first()) {
    at = after && *after >= lo ? Cursor{*after, false} : Cursor{lo, true};
  } else {
    at = after && *after < hi ? Cursor{*after, false} : Cursor{hi, false};
  }
  Walk(lo, hi, req.newest_first(), at, [&](const std::shared_ptr<const v1::JobAccount>& p) {
    const v1::JobAccount& a = *p;
    if (!matches(a)) return true;
    if (out.jobs_size() == page) {
      const v1::JobAccount& last = out.jobs(out.jobs_size() - 1);
      out.set_next_page_token(absl::StrCat(last.end_time_unix_ms(), ".", last.id()));
      return false;
    }
    *out.add_jobs() = a;
    return true;
  });
  return out;
}

void AccountBook::Walk(Key lo, Key hi, bool newest_first, Cursor at,
                       const std::function<bool(const std::shared_ptr<const v1::JobAccount>&)>& visit) const {
  constexpr size_t kChunk = 2048;
  std::vector<std::shared_ptr<const v1::JobAccount>> chunk;
  while (true) {
    chunk.clear();
    {
      // A chunk at a time under the lock, visited outside it: a reader
      // holds back the control state's publication for one chunk's copy,
      // not for a whole scan of the book.
      absl::ReaderMutexLock lock(&mu_);
      if (!newest_first) {
        auto it = at.inclusive ? by_end_.lower_bound(at.key) : by_end_.upper_bound(at.key);
        for (; it != by_end_.end() && it->first < hi && chunk.size() < kChunk; ++it) chunk.push_back(it->second);
      } else {
        auto it = at.inclusive ? by_end_.upper_bound(at.key) : by_end_.lower_bound(at.key);
        while (it != by_end_.begin() && chunk.size() < kChunk) {
          --it;
          if (it->first < lo) break;
          chunk.push_back(it->second);
        }
      }
    }
    for (const auto& a : chunk) {
      if (!visit(a)) return;
    }
    if (chunk.size() < kChunk) return;
    at = {{chunk.back()->end_time_unix_ms(), chunk.back()->id()}, false};
  }
}

absl::StatusOr<v1::UsageResponse> AccountBook::Usage(const v1::UsageRequest& req, absl::Time now) const {
  if (!req.group_by().empty() && req.group_by() != "user" && req.group_by() != "queue") {
    return absl::InvalidArgumentError(absl::StrCat("group_by: '", req.group_by(), "' is not user or queue"));
  }
  absl::StatusOr<std::pair<int64_t, int64_t>> period = Period(req.since_unix_ms(), req.until_unix_ms(), now);
  if (!period.ok()) return period.status();
  const int64_t oldest = [&] {
    absl::ReaderMutexLock lock(&mu_);
    return Oldest(now);
  }();
  const Key lo{std::max(period->first, oldest), 0};
  std::vector<std::shared_ptr<const v1::JobAccount>> kept;  // held while summed
  Walk(lo, {period->second, 0}, false, {lo, true}, [&](const std::shared_ptr<const v1::JobAccount>& a) {
    if (!req.user().empty() && a->user() != req.user()) return true;
    if (!req.queue().empty() && a->queue() != req.queue()) return true;
    kept.push_back(a);
    return true;
  });
  std::vector<const v1::JobAccount*> in;
  in.reserve(kept.size());
  for (const auto& a : kept) in.push_back(a.get());
  v1::UsageResponse out = api::SumUsage(in, req.group_by() == "queue");
  out.set_since_unix_ms(period->first);
  out.set_until_unix_ms(period->second);
  return out;
}

}  // namespace trainyard::server
