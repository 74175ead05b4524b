// Picks a queue policy by name.
#include "core/policy/queue_policy.h"

#include "absl/strings/str_cat.h"
#include "core/policy/queue_tree.h"

namespace trainyard::core {

absl::StatusOr<QueuePolicyPtr> MakeQueuePolicy(std::string_view name,
                                                const QueuesConfig& config) {
  if (name == "fifo" || name.empty()) return MakeFifoPolicy();
  if (name != "capacity" && name != "fair") {
    return absl::InvalidArgumentError(absl::StrCat(
        "queue policy \"", std::string(name), "\" is unknown; use fifo, capacity or fair"));
  }
  if (absl::Status s = ValidateQueues(config); !s.ok()) return s;
  if (name == "capacity") return MakeCapacityPolicy(config);
  return MakeFairPolicy(config);
}

}  // namespace trainyard::core
