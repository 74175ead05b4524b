// GateBook: what keeps accepted jobs out of the scheduler, and which of
// them to look at again. A job is gated while it is held (until `trainyard
// release`), waits for its dependencies (after-ok, after-any: judged by
// how they ended, by id), or is an array element beyond its array's %N
// (docs/job-spec.md, "Arrays, dependencies, hold"). The book keeps the gated
// jobs, those something woke, who waits for which job or array, how every
// job ended, and each array's elements; it judges a job's gate (GateOf).
// ControlState acts on it: opens a gate (the scheduler), fails a job whose
// after-ok dependency failed, sets reasons. Part of the control state:
// single-threaded, no I/O.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "proto/service.pb.h"
#include "server/control/job_map.h"

namespace trainyard::server {

class GateBook {
 public:
  // REQUIRES: `jobs` (the control state's) outlives this object.
  explicit GateBook(const JobMap& jobs) : jobs_(jobs) {}

  // Whether a new or recovered queued job starts behind a gate.
  static bool Gated(const v1::JobRecord& rec);

  struct Gate {
    enum Kind : uint8_t { kOpen, kWait, kFail } kind = kOpen;
    std::string text;          // the pending reason (kWait) or why the job fails (kFail)
    uint64_t waiting_on = 0;   // kWait: the dependency (id) it waits for, if any
    bool throttled = false;    // kWait: held back by its array's %N
  };
  // `job`'s gate now. `active`: per array, its elements in the scheduler
  // and not ended, counted once per round (filled as asked).
  Gate GateOf(const JobRt& job, std::map<std::string, int>* active) const;

  // ---- the gated ----
  // `rec` is gated: looked at by the next round.
  void Keep(const v1::JobRecord& rec);
  // Look at job `id` again at the next round (released, recovered).
  void Recheck(uint64_t id) { recheck_.insert(id); }
  // The gated jobs something woke since the last call (CheckGates).
  std::set<uint64_t> TakeRecheck();
  bool RecheckDue() const { return !recheck_.empty(); }
  // The name of gated job `id`; nullptr when it is not gated.
  const std::string* GatedName(uint64_t id) const;
  void Ungate(uint64_t id) { gated_.erase(id); }
  // Gated job `id` waits for job `dependency` to end, or for an element of
  // `array` to end: it is woken then (Wake), not looked at before.
  void WaitOn(uint64_t dependency, uint64_t id) { waiters_[dependency].push_back(id); }
  void Throttle(const std::string& array, uint64_t id) { throttled_[array].push_back(id); }
  // Job `rec` ended: it is not gated; the jobs waiting for it and the
  // throttled elements of its array are woken. True when any was (a round
  // should look at them).
  bool Wake(const v1::JobRecord& rec);

  // ---- how jobs ended ----
  // Every job that has ended, by id: its end state and the name it had. A
  // dependency is judged here, so one deleted since (or recovered only as a
  // deleted record) still counts by how it ended.
  void Ended(uint64_t id, v1::JobState state, std::string name);

  // ---- arrays and dependencies ----
  void AddElement(const std::string& array, const std::string& name) { arrays_[array].push_back(name); }
  void DropArray(const std::string& array) { arrays_.erase(array); }
  bool IsArray(const std::string& name) const { return arrays_.count(name) > 0; }
  // Orders every array's elements by `index` (after a recovery).
  void SortArrays(const std::function<int(const std::string& element)>& index);
  // The jobs `name` stands for in a dependency: an array's elements, or the
  // job itself; empty when neither exists.
  std::vector<std::string> DependencyTargets(const std::string& name) const;
  // The dependencies that name no job, as submission problems.
  std::vector<std::string> UnknownDependencies(const v1::JobSpec& spec) const;
  // The spec's dependencies resolved to the ids of the jobs they name now.
  void ResolveDependencies(const v1::JobSpec& spec, v1::JobRecord* rec) const;

 private:
  int ActiveElements(const std::string& array) const;

  const JobMap& jobs_;
  // Jobs kept out of the scheduler by a gate, by id: the order they were
  // submitted in.
  std::map<uint64_t, std::string> gated_;
  // What CheckGates looks at: only the gated jobs whose gate may have opened
  // (new, recovered, released, or woken by Wake). A held job is in none of
  // these until released; a job waiting for a dependency is in waiters_
  // under that dependency's id; a throttled element in throttled_ under its
  // array. So a round costs nothing per gated job that nothing woke.
  std::set<uint64_t> recheck_;
  std::map<uint64_t, std::vector<uint64_t>> waiters_;
  std::map<std::string, std::vector<uint64_t>, std::less<>> throttled_;
  struct EndedJob {
    v1::JobState state;
    std::string name;
  };
  std::map<uint64_t, EndedJob> ended_;
  // Job arrays: the array's name -> its elements' names, by index.
  std::map<std::string, std::vector<std::string>, std::less<>> arrays_;
};

}  // namespace trainyard::server
