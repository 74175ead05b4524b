// Requests the client gRPC API answered, by method and status code, for
// /metrics (trainyard_grpc_requests_total). Lock-free: a handler bumps one
// relaxed atomic, so counting costs a submission nothing it would notice.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace trainyard::server {

class GrpcCounters {
 public:
  enum Method {
    kSubmit,
    kListJobs,
    kDescribeJob,
    kKillJob,
    kListNodes,
    kListQueues,
    kReportJobOutcome,
    kReportWorkerFailure,
    kDeleteJob,
    kCordonNode,
    kUncordonNode,
    kDrainNode,
    kRemoveNode,
    kCreateToken,
    kReportJobMasterSummary,
    kWatchJob,
    kReleaseJob,
    kReportCheckpoint,
    kHistory,
    kUsage,
    kJobResources,
    kCreateSchedule,
    kListSchedules,
    kUpdateSchedule,
    kServiceLink,
    kGetClusterStatus,
    kMethods
  };
  // gRPC's codes, OK (0) to UNAUTHENTICATED (16).
  static constexpr int kCodes = 17;

  static const char* MethodName(int m) {
    static constexpr const char* kNames[kMethods] = {
        "Submit",    "ListJobs",   "DescribeJob", "KillJob",      "ListNodes", "ListQueues", "ReportJobOutcome",
        "ReportWorkerFailure", "DeleteJob", "CordonNode", "UncordonNode", "DrainNode", "RemoveNode", "CreateToken",
        "ReportJobMasterSummary", "WatchJob", "ReleaseJob", "ReportCheckpoint", "History", "Usage", "JobResources", "CreateSchedule", "ListSchedules", "UpdateSchedule",
        "ServiceLink", "GetClusterStatus"};
    return kNames[m];
  }
  static const char* CodeName(int code) {
    static constexpr const char* kNames[kCodes] = {
        "OK",        "CANCELLED",         "UNKNOWN",      "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
        "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
        "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
    return kNames[code];
  }

  void Count(Method m, int code) {
    if (code < 0 || code >= kCodes) code = 2;  // UNKNOWN
    counts_[m][code].fetch_add(1, std::memory_order_relaxed);
  }
  int64_t Get(int m, int code) const { return counts_[m][code].load(std::memory_order_relaxed); }

 private:
  std::array<std::array<std::atomic<int64_t>, kCodes>, kMethods> counts_{};
};

}  // namespace trainyard::server
