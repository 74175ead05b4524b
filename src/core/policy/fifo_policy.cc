// FIFO: one global order — higher priority class first, then submit time,
// then arrival — whatever queue a job names. No limits, no reclaim.
#include "core/policy/queue_tree.h"

namespace trainyard::core {
namespace {

class FifoPolicy : public QueuePolicy {
 public:
  std::string_view Name() const override { return "fifo"; }
  absl::Status CheckQueue(std::string_view) const override { return absl::OkStatus(); }
  void BeginRound(const ClusterState&, absl::Time) override {}
  QueueRank Rank(const ClusterState&, int32_t, const JobState& head) const override {
    return QueueRank{.order = -static_cast<int64_t>(head.request.priority),
                     .submit_ns = absl::ToUnixNanos(head.request.submit_time),
                     .seq = head.seq};
  }
  std::string Admit(const ClusterState&, const JobState&) const override { return ""; }
  std::string AdmitTask(const ClusterState&, const JobState&, const Resource&) override {
    return "";
  }
  bool MayReclaim(const ClusterState&, int32_t, absl::Time) const override { return false; }
  bool IsReclaimVictim(const ClusterState&, int32_t, int32_t) const override { return false; }
};

}  // namespace

QueuePolicyPtr MakeFifoPolicy() { return std::make_unique<FifoPolicy>(); }

}  // namespace trainyard::core
