// For the control state's tests that restart the server: its writes kept in
// a store as the shell keeps them (JobManager::SendWrite), and a fresh
// control state recovering what the store holds (JobManager::Recover).
#pragma once

#include <optional>
#include <utility>

#include "api/states.h"
#include "gtest/gtest.h"
#include "server/control/control_state.h"
#include "store/state_store.h"

namespace trainyard::server::testing {

// Commits every write `state` has for the store to `store`.
inline void FlushWrites(ControlState& state, StateStore& store) {
  while (std::optional<Persister::Write> w = state.TakeWrite()) {
    absl::Status st = store.Commit(w->batch);
    ASSERT_TRUE(st.ok()) << st;
    state.WriteDone(*w, st, false);
  }
}

// Hands `fresh` (a new control state) the live jobs, nodes and finished jobs
// `store` holds, as a restarted server does.
inline void RecoverFromStore(StateStore& store, ControlState& fresh, absl::Time now) {
  absl::StatusOr<StoreSnapshot> snap = store.LoadAll();
  ASSERT_TRUE(snap.ok()) << snap.status();
  JobFilter finished;
  finished.states = api::FinishedJobStates();
  absl::StatusOr<std::vector<v1::JobRecord>> ended = store.ListJobs(finished);
  ASSERT_TRUE(ended.ok()) << ended.status();
  fresh.Recover(std::move(*snap), std::move(*ended), now);
}

}  // namespace trainyard::server::testing
