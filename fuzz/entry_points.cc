// The fuzz targets' entry points (see entry_points.h). Each returns quietly
// for input that is refused with a Status; only a broken invariant aborts.
#include "fuzz/entry_points.h"

#include <optional>
#include <string>

#include "api/convert.h"
#include "api/job_spec.h"
#include "api/queue_config_yaml.h"
#include "api/roles.h"
#include "common/check.h"
#include "core/resources/gpu_topology.h"
#include "core/resources/port_ranges.h"
#include "sim/csv_reader.h"
#include "sim/trace_readers.h"

namespace trainyard::fuzz {

const std::vector<Target>& Targets() {
  static const std::vector<Target> targets = {
      {"job_spec", &JobSpec},         {"jobmaster", &JobMaster},
      {"topology", &Topology},        {"port_ranges", &PortRanges},
      {"queue_config", &QueueConfig}, {"traces", &Traces},
      {"http_request", &HttpRequest}, {"http_frame", &HttpFrame}, {"rest_body", &RestBody},
      {"query_string", &QueryString}, {"bearer_token", &BearerToken},
      {"join_request", &JoinRequest}, {"agent_messages", &AgentMessages},
      {"launch_order", &LaunchOrder}, {"log_lines", &LogLines},
      {"server_config", &ServerConfigFile}, {"client_config", &ClientConfigFile},
      {"task_user_map", &TaskUserMapFile}, {"barrier_record", &BarrierRecordFile},
      {"control_state", &ControlEvents}, {"rank_host", &RankHostWire},
  };
  return targets;
}

const Target* FindTarget(std::string_view name) {
  for (const Target& t : Targets()) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

void JobSpec(std::string_view data) {
  absl::StatusOr<v1::JobSpec> spec = api::LoadJobSpec(data, api::UnboundedLimits());
  if (!spec.ok()) return;
  // What the server does with an accepted spec: a record, then the core's request.
  v1::JobRecord record;
  record.set_name("fuzz");
  *record.mutable_spec() = *spec;
  absl::StatusOr<core::JobRequest> request = api::ToJobRequest(record);
  TY_CHECK(api::WorkerCount(*spec) >= 0, "negative worker count");
  (void)request;  // refusing a node selector is fine; only a crash is not
}

void Topology(std::string_view data) {
  if (absl::StatusOr<core::GpuTopology> t = core::GpuTopology::FromSpec(data); t.ok()) {
    absl::StatusOr<core::GpuTopology> again = core::GpuTopology::FromSpec(t->ToSpec());
    TY_CHECK(again.ok() && *again == *t, "spec '%s' does not round-trip", t->ToSpec().c_str());
  }
  if (absl::StatusOr<core::GpuTopology> t = core::GpuTopology::FromNvidiaSmiTopo(data); t.ok()) {
    TY_CHECK(t->gpu_count() >= 0 && t->gpu_count() <= core::kMaxGpus, "gpu count %d",
             t->gpu_count());
    absl::StatusOr<core::GpuTopology> again = core::GpuTopology::FromSpec(t->ToSpec());
    TY_CHECK(again.ok() && *again == *t, "nvidia-smi topology '%s' does not round-trip",
             t->ToSpec().c_str());
  }
}

void PortRanges(std::string_view data) {
  size_t cut = data.find('\n');
  absl::StatusOr<core::PortRanges> a = core::PortRanges::Parse(data.substr(0, cut));
  if (!a.ok()) return;
  absl::StatusOr<core::PortRanges> again = core::PortRanges::Parse(a->ToString());
  TY_CHECK(again.ok() && *again == *a, "'%s' does not round-trip", a->ToString().c_str());
  if (cut == std::string_view::npos) return;
  absl::StatusOr<core::PortRanges> b = core::PortRanges::Parse(data.substr(cut + 1));
  if (!b.ok()) return;
  core::PortRanges both = a->Union(*b), common = a->Intersect(*b), rest = a->Subtract(*b);
  TY_CHECK(both.ContainsAll(*a) && both.ContainsAll(*b), "union lost ports");
  TY_CHECK(both.Count() == a->Count() + b->Count() - common.Count(), "union count");
  TY_CHECK(rest.Intersect(*b).Empty() && rest.Count() == a->Count() - common.Count(),
           "subtract");
  if (std::optional<core::PortRanges> low = a->TakeLowest(b->Count()); low.has_value()) {
    TY_CHECK(low->Count() == b->Count() && a->ContainsAll(*low), "take lowest");
  } else {
    TY_CHECK(a->Count() < b->Count(), "take lowest refused %u of %u", b->Count(), a->Count());
  }
}

void QueueConfig(std::string_view data) {
  absl::StatusOr<api::QueueConfigFile> config = api::ParseQueueConfigYaml(data, "fuzz");
  (void)config;  // a refusal is the expected answer to most inputs
}

void Traces(std::string_view data) {
  absl::StatusOr<sim::CsvTable> table = sim::CsvTable::Parse(absl::string_view(data.data(), data.size()), "fuzz");
  if (!table.ok()) return;
  absl::StatusOr<sim::NodeList> nodes = sim::ParseNodeList(*table);
  absl::StatusOr<sim::Trace> trace = sim::ParseTrace(*table);
  if (trace.ok()) {
    int64_t tasks = 0;
    for (const sim::JobSpec& job : trace->jobs) tasks += job.TaskCount();
    TY_CHECK(tasks == trace->task_count, "task count %lld, roles sum to %lld",
             static_cast<long long>(trace->task_count), static_cast<long long>(tasks));
  }
  (void)nodes;
}

}  // namespace trainyard::fuzz
