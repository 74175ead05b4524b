// For the control state's tests: the status an agent sends for a launch
// order it was given (the order's job, task and attempt, in state `s`).
#pragma once

#include "proto/service.pb.h"

namespace trainyard::server::testing {

inline v1::TaskStatus StatusOf(const v1::TaskSpec& t, v1::TaskState s) {
  v1::TaskStatus st;
  st.set_job(t.job());
  st.set_job_id(t.job_id());
  st.set_role(t.role());
  st.set_index(t.index());
  st.set_attempt(t.attempt());
  st.set_launch_attempt(t.attempt());
  st.set_state(s);
  return st;
}

}  // namespace trainyard::server::testing
