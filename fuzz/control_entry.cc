// The control state's fuzz entry point: arbitrary bytes are a script of
// events in any order (server/control/control_harness.h: agents that pause, lose
// their stream, reconnect twice or crash; statuses of older attempts;
// kills, deletes, job master verdicts; server restarts from the store)
// through the server's ControlState. A CHECK inside it, or an invariant
// broken after any event (a task in two places, a GPU given twice, the core
// holding what no record has), aborts.
#include <string>

#include "common/check.h"
#include "fuzz/entry_points.h"
#include "server/control/control_harness.h"

namespace trainyard::fuzz {

void ControlEvents(std::string_view data) {
  absl::Status st = server::RunControlScript(data);
  TY_CHECK(st.ok(), "control state: %s", std::string(st.message()).c_str());
}

}  // namespace trainyard::fuzz
