// Schedules: job specs submitted on a cron schedule (`trainyard schedule`,
// docs/schedules.md), as the control state keeps them. Sans-IO: the
// records, when each comes due, and the history of its runs; the control
// state persists each change (metadata key "schedule/NAME") and decides
// what a due run does with its last run still going (concurrency), and the
// shell submits the runs as their owners' jobs.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/cron.h"
#include "proto/trainyard.pb.h"

namespace trainyard::server {

// A run to submit: the schedule, the time it came due, its spec.
struct ScheduleFire {
  std::string name;
  absl::Time due;
  bool by_hand = false;
  v1::JobSpec spec;       // named NAME-UNIXSECONDS, its owner's
  std::string message;    // said with its run ("replaced job X", "2 runs missed")
};

class Schedules {
 public:
  static constexpr int kMaxRuns = 20;          // kept per schedule
  static constexpr int kMaxPerUser = 50;
  static constexpr int kMaxSchedules = 1000;
  static constexpr size_t kMaxNameLength = 40;  // NAME-UNIXSECONDS stays a valid job name
  static constexpr const char* kKeyPrefix = "schedule/";
  // A schedule's spec, at most (a record is written whole on each change:
  // 16 of them fit one etcd transaction).
  static constexpr size_t kMaxSpecBytes = 64 << 10;
  static constexpr size_t kWritesPerBatch = 16;

  // InvalidArgument naming `name` unless it is 1-kMaxNameLength characters
  // of a-z, 0-9 and '-', not starting or ending with '-'.
  static absl::Status CheckName(const std::string& name);

  // InvalidArgument naming `cron` when `rec`'s cron comes due more often
  // than once every `min` (checked over its next 50 times from `now`).
  static absl::Status CheckInterval(const v1::ScheduleRecord& rec, absl::Duration min, absl::Time now);

  // Takes in the records the store's metadata holds; a record that no
  // longer parses (its cron or zone) is kept, and never comes due.
  void Recover(const std::map<std::string, std::string>& meta);

  // Adds a schedule. `rec` names it, its user, cron, zone, policy and spec.
  // Errors: InvalidArgument naming `name`, `cron` or `time_zone`;
  // AlreadyExists; ResourceExhausted past the limits.
  absl::Status Create(v1::ScheduleRecord rec, absl::Time now);
  // Pause keeps it from coming due; Resume counts from `now` (what came due
  // while paused is not run). NotFound naming it.
  absl::Status SetPaused(const std::string& name, bool paused, absl::Time now);
  absl::Status Delete(const std::string& name);

  const v1::ScheduleRecord* Find(const std::string& name) const;
  const std::map<std::string, v1::ScheduleRecord>& all() const { return records_; }
  // When it next comes due; InfiniteFuture while paused or never.
  absl::Time NextDue(const v1::ScheduleRecord& rec) const;
  // The earliest NextDue of all.
  absl::Time EarliestDue() const;

  // The schedules due at `now`, each with the latest time it came due (the
  // runs missed before it counted in `missed`); their last due time moves
  // to it.
  struct Due {
    std::string name;
    absl::Time due;
    int missed = 0;
  };
  std::vector<Due> TakeDue(absl::Time now);
  // Adds a run to its history (the last kMaxRuns kept); a run's job joins
  // the schedule's jobs that may still run. False: no such schedule
  // (deleted meanwhile).
  bool AddRun(const std::string& name, v1::ScheduleRun run);
  // The jobs of its runs that may still run, oldest first: kept apart from
  // the history (a long run outlives 20 skipped ones), in memory (after a
  // restart, those of the history). `ended` drops the ones that ended.
  const std::vector<std::string>& Active(const std::string& name) const;
  void DropEnded(const std::string& name, const std::function<bool(const std::string& job)>& ended);

  // A write of metadata key `key` failed: when it is a schedule's, its
  // record (or its deletion) is written again by the next TakeWrites.
  void Rewrite(const std::string& key);
  // Up to `max` of the records that changed since they were last taken
  // (the rest stay for the next call): the control state writes them, keyed
  // schedule/NAME (a nullopt value: deleted).
  std::vector<std::pair<std::string, std::optional<std::string>>> TakeWrites(size_t max = SIZE_MAX);
  // True when any record changed since the views were last published.
  bool changed() const { return changed_; }
  void ClearChanged() { changed_ = false; }

 private:
  struct Parsed {
    std::optional<api::CronSchedule> cron;
    absl::TimeZone zone;
  };
  void Touch(const std::string& name);

  std::map<std::string, v1::ScheduleRecord> records_;
  std::map<std::string, Parsed> parsed_;
  std::map<std::string, std::vector<std::string>> active_;
  std::map<std::string, bool> dirty_;  // name -> still exists
  bool changed_ = false;
  mutable std::optional<absl::Time> earliest_;  // EarliestDue, until a record changes
};

// The job spec of a run of `rec` due at `due`: its spec, named
// NAME-UNIXSECONDS, as its user.
v1::JobSpec RunSpec(const v1::ScheduleRecord& rec, absl::Time due);

}  // namespace trainyard::server
