#include "server/leadership.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"

namespace trainyard::server {
namespace {

int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

namespace {

// Puts `key` = `value` bound to `lease` (0: none).
absl::Status Put(EtcdClient* client, const std::string& key, const std::string& value, int64_t lease) {
  etcdserverpb::TxnRequest txn;
  etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  put->set_lease(lease);
  return client->Txn(txn).status();
}

// Who leads now: the election key's value and the URL under `http_key`,
// read together. `present` false: the key is gone (its lease ended).
struct LeaderNow {
  bool present = false;
  std::string identity;
  std::string http_url;
};

void ReadInto(const etcdserverpb::ResponseOp& op, std::string* value, bool* present = nullptr) {
  const auto& kvs = op.response_range().kvs();
  if (present != nullptr) *present = !kvs.empty();
  if (!kvs.empty()) *value = kvs[0].value();
}

absl::StatusOr<LeaderNow> ReadLeader(EtcdClient* client, const LeadershipOptions& options) {
  etcdserverpb::TxnRequest txn;
  txn.add_success()->mutable_request_range()->set_key(options.key);
  if (!options.http_key.empty()) txn.add_success()->mutable_request_range()->set_key(options.http_key);
  absl::StatusOr<etcdserverpb::TxnResponse> read = client->Txn(txn);
  if (!read.ok()) return read.status();
  LeaderNow now;
  if (read->responses_size() > 0) ReadInto(read->responses(0), &now.identity, &now.present);
  if (read->responses_size() > 1) ReadInto(read->responses(1), &now.http_url);
  return now;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Leadership>> Leadership::Campaign(EtcdClient* client,
                                                                 LeadershipOptions options,
                                                                 const std::atomic<bool>* stop) {
  LeaderNow last;
  auto seen = [&](const LeaderNow& now) {
    if ((now.identity != last.identity || now.http_url != last.http_url) && options.on_standby) {
      options.on_standby(now.identity, now.http_url);
    }
    last = now;
  };
  const absl::Duration poll = std::min(options.ttl / 8, absl::Milliseconds(100));
  bool unreachable = false;
  // etcd out of reach (this host cut off, every member down) is waited out:
  // a standby campaigns once it can. Any other error ends the campaign.
  auto wait_out = [&](const absl::Status& st) {
    if (st.code() != absl::StatusCode::kUnavailable && st.code() != absl::StatusCode::kDeadlineExceeded) return false;
    if (!unreachable) Log(LogLevel::kWarning, "leader", "cannot reach etcd (%s); trying again", st.ToString());
    unreachable = true;
    absl::SleepFor(std::max(poll, absl::Milliseconds(100)));
    return true;
  };
  // A campaign whose answer was lost (etcd slow past the call timeout) may
  // have won: its lease, and when it was asked for.
  int64_t unanswered_lease = 0, unanswered_started = 0;
  auto winner = [&](int64_t lease, int64_t started, int64_t revision) {
    std::unique_ptr<Leadership> won(new Leadership(client, std::move(options), lease, revision));
    won->valid_until_ns_ = started + absl::ToInt64Nanoseconds(won->options_.ttl);
    won->since_unix_ms_ = absl::ToUnixMillis(absl::Now());
    etcdserverpb::RangeRequest terms;
    terms.set_key(won->options_.terms_key);
    if (absl::StatusOr<etcdserverpb::RangeResponse> read = client->Range(terms); read.ok() && read->kvs_size() > 0) {
      won->terms_ = read->kvs(0).version();
    }
    return won;
  };
  while (stop == nullptr || !stop->load()) {
    int64_t started = SteadyNanos();
    absl::StatusOr<int64_t> lease = client->GrantLease(options.ttl);
    if (!lease.ok()) {
      if (wait_out(lease.status())) continue;
      return lease.status();
    }
    unreachable = false;
    etcdserverpb::TxnRequest txn;
    etcdserverpb::Compare* absent = txn.add_compare();
    absent->set_key(options.key);
    absent->set_target(etcdserverpb::Compare::CREATE);
    absent->set_result(etcdserverpb::Compare::EQUAL);
    absent->set_create_revision(0);
    etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
    put->set_key(options.key);
    put->set_value(options.identity);
    put->set_lease(*lease);
    // Each win puts the terms key once more: its version counts the
    // leaderships the cluster has had.
    etcdserverpb::PutRequest* term = txn.add_success()->mutable_request_put();
    term->set_key(options.terms_key);
    term->set_value(options.identity);
    txn.add_failure()->mutable_request_range()->set_key(options.key);
    if (!options.http_key.empty()) txn.add_failure()->mutable_request_range()->set_key(options.http_key);
    absl::StatusOr<etcdserverpb::TxnResponse> response = client->Txn(txn);
    if (!response.ok()) {
      if (!wait_out(response.status())) return response.status();
      unanswered_lease = *lease;  // it may have won; else it expires
      unanswered_started = started;
      continue;
    }
    if (response->succeeded()) return winner(*lease, started, response->header().revision());
    const auto& kvs = response->responses(0).response_range().kvs();
    if (!kvs.empty() && unanswered_lease != 0 && kvs[0].lease() == unanswered_lease) {
      // The campaign whose answer was lost won: that is this leadership.
      // Best effort: a lease not revoked ends at its TTL all the same.
      (void)client->RevokeLease(*lease);
      return winner(unanswered_lease, unanswered_started, kvs[0].create_revision());
    }
    LeaderNow now;
    ReadInto(response->responses(0), &now.identity, &now.present);
    if (response->responses_size() > 1) ReadInto(response->responses(1), &now.http_url);
    seen(now);
    // Known as a standby while the lease lives (the leader lists them); the
    // lease in the key keeps servers given the same --listen apart.
    absl::Status listed =
        Put(client, absl::StrCat(options.standby_prefix, options.identity, "#", *lease), options.identity, *lease);
    if (!listed.ok() && !wait_out(listed)) return listed;
    // Wait until the key is gone (its leader's lease ended), then try again;
    // meanwhile the URL the leader publishes once it serves.
    int64_t renewed = SteadyNanos();
    const int64_t renew_every = absl::ToInt64Nanoseconds(options.ttl / 3);
    bool gone = false;
    while (!gone && (stop == nullptr || !stop->load())) {
      if (SteadyNanos() - renewed >= renew_every) {
        renewed = SteadyNanos();
        absl::StatusOr<int64_t> ttl = client->KeepAliveOnce(*lease);
        if (ttl.ok() && *ttl <= 0) break;  // expired (paused, cut off): list it again
      }
      absl::StatusOr<LeaderNow> now = ReadLeader(client, options);
      if (!now.ok()) {
        if (wait_out(now.status())) continue;
        return now.status();
      }
      gone = !now->present;
      if (!gone) {
        seen(*now);
        absl::SleepFor(poll);
      }
    }
    (void)client->RevokeLease(*lease);  // best effort (it expires anyway): no longer a standby
  }
  return absl::CancelledError("stopped while waiting to lead");
}

Leadership::Leadership(EtcdClient* client, LeadershipOptions options, int64_t lease,
                       int64_t revision)
    : client_(client),
      options_(std::move(options)),
      lease_(lease),
      revision_(revision),
      valid_until_ns_(0) {
  renewer_ = std::thread([this] { Renew(); });
}

Leadership::~Leadership() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  renewer_.join();
  // Best effort, on the way out: a lease not revoked (etcd unreachable)
  // ends at its TTL, and a standby wins then instead of at once.
  (void)client_->RevokeLease(lease_);
}

absl::Status Leadership::PublishHttpUrl(const std::string& url) {
  if (options_.http_key.empty()) return absl::OkStatus();
  etcdserverpb::TxnRequest txn;
  etcdserverpb::Compare* ours = txn.add_compare();
  ours->set_key(options_.key);
  ours->set_target(etcdserverpb::Compare::CREATE);
  ours->set_result(etcdserverpb::Compare::EQUAL);
  ours->set_create_revision(revision_);
  etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(options_.http_key);
  put->set_value(url);
  put->set_lease(lease_);
  absl::StatusOr<etcdserverpb::TxnResponse> done = client_->Txn(txn);
  if (!done.ok()) return done.status();
  if (!done->succeeded()) return absl::FailedPreconditionError("the election key is no longer this server's");
  return absl::OkStatus();
}

bool Leadership::Valid() const { return SteadyNanos() < valid_until_ns_.load(); }

void Leadership::Renew() {
  const int64_t ttl_ns = absl::ToInt64Nanoseconds(options_.ttl);
  std::string lost;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping), options_.ttl / 3)) return;
    }
    if (!Valid()) {
      lost = "no renewal of the leader's lease succeeded within its TTL (paused or cut off from etcd)";
      break;
    }
    int64_t sent = SteadyNanos();
    absl::StatusOr<int64_t> ttl = client_->KeepAliveOnce(lease_);
    if (!Valid()) {
      lost = "no renewal of the leader's lease succeeded within its TTL (paused or cut off from etcd)";
      break;
    }
    if (ttl.ok() && *ttl <= 0) {
      lost = "the leader's lease has expired in etcd";
      break;
    }
    if (ttl.ok()) {
      valid_until_ns_ = sent + std::min<int64_t>(ttl_ns, *ttl * 1'000'000'000LL);
    } else {
      Log(LogLevel::kWarning, "leader", "lease renewal failed: %s", ttl.status().ToString());
    }
  }
  valid_until_ns_ = 0;
  if (options_.on_lost) options_.on_lost(lost);
}

}  // namespace trainyard::server
