// The reconcile rule between heartbeats and launches (reconcile_rule.h).
#include "server/control/reconcile_rule.h"

namespace trainyard::server {

void Acknowledge(TaskRt& rt) {
  if (rt.acked) return;
  rt.acked = true;
  rt.missing_beats = 0;
}

Unlisted OnBeat(TaskRt& rt, const TaskInBeat& beat) {
  if (beat.ended || beat.listed) {
    rt.missing_beats = 0;
    return Unlisted::kWait;
  }
  ++rt.missing_beats;
  if ((rt.acked || beat.stopping) && rt.missing_beats >= kMissingBeats) return Unlisted::kGone;
  if (!rt.acked && rt.missing_beats >= kUnackedBeats && beat.launching) return Unlisted::kLaunchAgain;
  return Unlisted::kWait;
}

}  // namespace trainyard::server
