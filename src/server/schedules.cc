#include "server/schedules.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace trainyard::server {
namespace {

// As a job's name: a-z, 0-9 and '-', not starting or ending with '-'.
bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > Schedules::kMaxNameLength || name.front() == '-' || name.back() == '-') {
    return false;
  }
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-'; });
}

}  // namespace

void Schedules::Recover(const std::map<std::string, std::string>& meta) {
  for (const auto& [key, value] : meta) {
    if (!absl::StartsWith(key, kKeyPrefix)) continue;
    v1::ScheduleRecord rec;
    if (!rec.ParseFromString(value) || rec.name().empty()) continue;
    Parsed p;
    absl::StatusOr<api::CronSchedule> cron = api::CronSchedule::Parse(rec.cron());
    absl::StatusOr<absl::TimeZone> zone = api::LoadScheduleZone(rec.time_zone());
    if (cron.ok() && zone.ok()) {
      p.cron = *cron;
      p.zone = *zone;
    }
    parsed_[rec.name()] = p;
    for (const v1::ScheduleRun& run : rec.runs()) {
      if (!run.job().empty()) active_[rec.name()].push_back(run.job());
    }
    records_[rec.name()] = std::move(rec);
  }
  changed_ = true;
  earliest_.reset();
}

absl::Status Schedules::CheckName(const std::string& name) {
  if (ValidName(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("name: '", name, "' must be 1-", kMaxNameLength,
                                                 " characters of a-z, 0-9 and '-', not starting or ending with "
                                                 "'-' (its runs are named NAME-UNIXSECONDS)"));
}

absl::Status Schedules::CheckInterval(const v1::ScheduleRecord& rec, absl::Duration min, absl::Time now) {
  absl::StatusOr<api::CronSchedule> cron = api::CronSchedule::Parse(rec.cron());
  absl::StatusOr<absl::TimeZone> zone = api::LoadScheduleZone(rec.time_zone());
  if (!cron.ok() || !zone.ok()) return absl::OkStatus();  // Create names what is wrong
  absl::Time t = cron->Next(now, *zone);
  for (int i = 0; i < 50 && t != absl::InfiniteFuture(); ++i) {
    absl::Time next = cron->Next(t, *zone);
    if (next - t < min) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cron: '", rec.cron(), "' comes due ", absl::FormatDuration(next - t), " apart; this server runs a schedule at "
          "most once every ", absl::FormatDuration(min), " (scheduleMinIntervalSeconds)"));
    }
    t = next;
  }
  return absl::OkStatus();
}

absl::Status Schedules::Create(v1::ScheduleRecord rec, absl::Time now) {
  if (absl::Status st = CheckName(rec.name()); !st.ok()) return st;
  absl::StatusOr<api::CronSchedule> cron = api::CronSchedule::Parse(rec.cron());
  if (!cron.ok()) return absl::InvalidArgumentError(absl::StrCat("cron: ", cron.status().message()));
  absl::StatusOr<absl::TimeZone> zone = api::LoadScheduleZone(rec.time_zone());
  if (!zone.ok()) return absl::InvalidArgumentError(absl::StrCat("time_zone: ", zone.status().message()));
  if (cron->Next(now, *zone) == absl::InfiniteFuture()) {
    return absl::InvalidArgumentError(absl::StrCat("cron: '", rec.cron(), "' names no time in the next five years"));
  }
  if (records_.count(rec.name())) {
    return absl::AlreadyExistsError(absl::StrCat("schedule ", rec.name(), " already exists"));
  }
  if (records_.size() >= static_cast<size_t>(kMaxSchedules)) {
    return absl::ResourceExhaustedError(absl::StrCat("this server keeps at most ", kMaxSchedules, " schedules"));
  }
  int mine = static_cast<int>(std::count_if(records_.begin(), records_.end(),
                                            [&](const auto& r) { return r.second.user() == rec.user(); }));
  if (mine >= kMaxPerUser) {
    return absl::ResourceExhaustedError(
        absl::StrCat("user ", rec.user(), " has ", mine, " schedules, the most one user may have"));
  }
  if (rec.concurrency() == v1::CONCURRENCY_UNSPECIFIED) rec.set_concurrency(v1::CONCURRENCY_SKIP);
  rec.set_created_unix_ms(absl::ToUnixMillis(now));
  rec.set_last_due_unix_ms(absl::ToUnixMillis(now));
  rec.clear_runs();
  rec.set_paused(false);
  parsed_[rec.name()] = Parsed{*cron, *zone};
  std::string name = rec.name();
  records_[name] = std::move(rec);
  Touch(name);
  return absl::OkStatus();
}

absl::Status Schedules::SetPaused(const std::string& name, bool paused, absl::Time now) {
  auto it = records_.find(name);
  if (it == records_.end()) return absl::NotFoundError(absl::StrCat("schedule ", name, " not found"));
  if (it->second.paused() == paused) return absl::OkStatus();
  it->second.set_paused(paused);
  if (!paused) it->second.set_last_due_unix_ms(absl::ToUnixMillis(now));
  Touch(name);
  return absl::OkStatus();
}

absl::Status Schedules::Delete(const std::string& name) {
  if (records_.erase(name) == 0) return absl::NotFoundError(absl::StrCat("schedule ", name, " not found"));
  parsed_.erase(name);
  active_.erase(name);
  Touch(name);
  return absl::OkStatus();
}

const v1::ScheduleRecord* Schedules::Find(const std::string& name) const {
  auto it = records_.find(name);
  return it == records_.end() ? nullptr : &it->second;
}

absl::Time Schedules::NextDue(const v1::ScheduleRecord& rec) const {
  auto p = parsed_.find(rec.name());
  if (rec.paused() || p == parsed_.end() || !p->second.cron) return absl::InfiniteFuture();
  return p->second.cron->Next(absl::FromUnixMillis(rec.last_due_unix_ms()), p->second.zone);
}

absl::Time Schedules::EarliestDue() const {
  if (!earliest_) {
    absl::Time earliest = absl::InfiniteFuture();
    for (const auto& [name, rec] : records_) earliest = std::min(earliest, NextDue(rec));
    earliest_ = earliest;
  }
  return *earliest_;
}

std::vector<Schedules::Due> Schedules::TakeDue(absl::Time now) {
  std::vector<Due> out;
  for (auto& [name, rec] : records_) {
    absl::Time next = NextDue(rec);
    if (next > now) continue;
    const Parsed& p = parsed_[name];
    // The latest time it came due; those before it were missed (the server
    // did not run then). Counted up to 100, as a year of a per-second
    // schedule is not walked.
    Due d{.name = name, .due = next};
    for (absl::Time t = p.cron->Next(next, p.zone); t <= now; t = p.cron->Next(t, p.zone)) {
      d.due = t;
      if (++d.missed >= 100) {
        d.due = now;
        break;
      }
    }
    rec.set_last_due_unix_ms(absl::ToUnixMillis(d.due));
    Touch(name);
    out.push_back(std::move(d));
  }
  return out;
}

bool Schedules::AddRun(const std::string& name, v1::ScheduleRun run) {
  auto it = records_.find(name);
  if (it == records_.end()) return false;
  if (!run.job().empty()) {
    std::vector<std::string>& active = active_[name];
    active.push_back(run.job());
    if (active.size() > 1000) active.erase(active.begin());  // a queue policy's pile, bounded
  }
  auto* runs = it->second.mutable_runs();
  *runs->Add() = std::move(run);
  if (runs->size() > kMaxRuns) runs->DeleteSubrange(0, runs->size() - kMaxRuns);
  Touch(name);
  return true;
}

const std::vector<std::string>& Schedules::Active(const std::string& name) const {
  static const std::vector<std::string> kNone;
  auto it = active_.find(name);
  return it == active_.end() ? kNone : it->second;
}

void Schedules::DropEnded(const std::string& name, const std::function<bool(const std::string& job)>& ended) {
  auto it = active_.find(name);
  if (it == active_.end()) return;
  std::erase_if(it->second, ended);
}

std::vector<std::pair<std::string, std::optional<std::string>>> Schedules::TakeWrites(size_t max) {
  std::vector<std::pair<std::string, std::optional<std::string>>> out;
  for (auto it = dirty_.begin(); it != dirty_.end() && out.size() < max; it = dirty_.erase(it)) {
    const std::string& name = it->first;
    std::string key = absl::StrCat(kKeyPrefix, name);
    auto rec = records_.find(name);
    if (rec == records_.end()) {
      out.emplace_back(std::move(key), std::nullopt);
    } else {
      out.emplace_back(std::move(key), rec->second.SerializeAsString());
    }
  }
  return out;
}

void Schedules::Rewrite(const std::string& key) {
  if (!absl::StartsWith(key, kKeyPrefix)) return;
  std::string name = key.substr(std::string(kKeyPrefix).size());
  dirty_[name] = records_.count(name) > 0;
}

void Schedules::Touch(const std::string& name) {
  dirty_[name] = records_.count(name) > 0;
  changed_ = true;
  earliest_.reset();
}

v1::JobSpec RunSpec(const v1::ScheduleRecord& rec, absl::Time due) {
  v1::JobSpec spec = rec.spec();
  spec.set_name(absl::StrCat(rec.name(), "-", absl::ToUnixSeconds(due)));
  spec.set_user(rec.user());
  return spec;
}

}  // namespace trainyard::server
