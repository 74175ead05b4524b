// Picks a queue policy by name.
#include "core/policy/queue_policy.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/policy/queue_tree.h"

namespace trainyard::core {
namespace {

// Every queue policy: its name, how it is made, and whether it reads the
// queue tree (validated first). The one list of names.
struct QueuePolicyMaker {
  std::string_view name;
  QueuePolicyPtr (*make)(const QueuesConfig&);
  bool reads_queues;
};
constexpr QueuePolicyMaker kQueuePolicies[] = {
    {"fifo", [](const QueuesConfig&) { return MakeFifoPolicy(); }, false},
    {"capacity", &MakeCapacityPolicy, true},
    {"fair", &MakeFairPolicy, true},
};

}  // namespace

std::vector<std::string> QueuePolicyNames() {
  std::vector<std::string> names;
  for (const QueuePolicyMaker& p : kQueuePolicies) names.emplace_back(p.name);
  return names;
}

absl::StatusOr<QueuePolicyPtr> MakeQueuePolicy(std::string_view name,
                                                const QueuesConfig& config) {
  if (name.empty()) name = kQueuePolicies[0].name;
  for (const QueuePolicyMaker& p : kQueuePolicies) {
    if (p.name != name) continue;
    if (p.reads_queues) {
      if (absl::Status s = ValidateQueues(config); !s.ok()) return s;
    }
    return p.make(config);
  }
  std::vector<std::string> names = QueuePolicyNames();
  return absl::InvalidArgumentError(absl::StrCat(
      "queue policy \"", std::string(name), "\" is unknown; use ",
      absl::StrJoin(names.begin(), names.end() - 1, ", "), " or ", names.back()));
}

}  // namespace trainyard::core
