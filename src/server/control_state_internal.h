// Private records of ControlState, shared by its handler files.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "api/states.h"
#include "core/resources/port_ranges.h"
#include "server/control_state.h"
#include "server/event_list.h"

namespace trainyard::server {

struct ControlState::JobRt {
  v1::JobRecord rec;            // spec, state, tasks (TaskRecord)
  bool in_scheduler = false;    // known to the scheduler core
  bool ending = false;          // final state decided; tasks being stopped
  bool preempting = false;      // victim; requeued once its tasks stop
  std::string preempted_by;
  // "preempted by job X (priority production) at T": leads the pending
  // reason until the job is placed again, so the queue's own reason does
  // not hide why a job that ran is waiting.
  std::string preempted_note;
  bool unschedulable = false;   // its last reason said it can never fit
  absl::Time preempt_deadline;
  std::string job_master;       // host:port of its master task, "" if none
  // Per task: the attempt number at which the current launch started; a
  // status with a lower attempt is from an older launch and ignored.
  std::vector<int> launch_base;
  bool recovered_placed = false;  // placed before a restart; waiting for nodes
  // Per task: heartbeats in a row from its node that did not list it, and
  // whether the agent has shown it has the current launch (a status or a
  // heartbeat entry of that attempt).
  std::vector<int> missing_beats;
  std::vector<bool> acked;
  // The event log as describe shows it. Jobs recovered from the store load
  // their earlier events on first describe (events_loaded false until then).
  EventList events;
  bool events_loaded = true;
};

struct ControlState::NodeRt {
  v1::NodeInfo info;
  uint64_t session = 0;          // the agent's connection; 0 while disconnected
  absl::Time last_heartbeat;
  v1::NodeState state = v1::NODE_READY;
  bool in_scheduler = false;
  core::PortRanges ports_in_use;
  uint64_t busy_gpus = 0;
  absl::Time registered;
  // The view last published and what it was built from (see NodeViewSig):
  // a node whose view would not change is not built again.
  std::shared_ptr<const v1::NodeView> view;
  uint64_t view_sig = 0;
  bool view_touched = false;  // a job's tasks here changed: check at the next publication
  // Its agent said it is stopping (Draining); Drained was sent once none of
  // its tasks were left. Both cleared when it registers again.
  bool draining = false;
  bool drained_sent = false;
  bool connected() const { return session != 0; }
};

int64_t ToMs(absl::Time t);
// Notes a launch of `t` at its attempt on its node (control_logs.cc): sets
// launch_attempt and appends to launches (a launch sent again is not new).
void RecordLaunch(v1::TaskRecord& t);
v1::JobEvent ToView(const v1::JobEventRecord& e);

}  // namespace trainyard::server
