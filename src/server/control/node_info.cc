// What an agent tells of its node, as the control state keeps it (node_info.h).
#include "server/control/node_info.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/convert.h"

namespace trainyard::server {

void LimitGpuFaults(v1::NodeInfo* info) {
  const int count = std::min(info->topology().gpu_count(), 64);
  google::protobuf::RepeatedPtrField<v1::GpuFault> kept;
  for (v1::GpuFault& f : *info->mutable_gpu_faults()) {
    if (f.gpu() < 0 || f.gpu() >= count || f.action() == v1::GPU_FAULT_ACTION_UNSPECIFIED) continue;
    std::string* m = f.mutable_message();
    if (m->size() > 512) {
      size_t cut = 512;
      while (cut > 0 && (static_cast<unsigned char>((*m)[cut]) & 0xC0) == 0x80) --cut;
      m->resize(cut);
    }
    auto same = std::find_if(kept.begin(), kept.end(), [&](const v1::GpuFault& k) { return k.gpu() == f.gpu(); });
    if (same != kept.end()) {
      *same = std::move(f);
    } else {
      *kept.Add() = std::move(f);
    }
  }
  info->mutable_gpu_faults()->Swap(&kept);
}

absl::Status CheckNodeInfo(const v1::NodeInfo& info) {
  if (info.name().empty()) return absl::InvalidArgumentError("register.name: must not be empty");
  int gpus = info.topology().gpu_count();
  if (gpus < 0 || gpus > 64) {
    return absl::InvalidArgumentError(absl::StrCat("register.topology.gpu_count: ", gpus, " is outside 0..64"));
  }
  // Refused, never flattened: a grouping that does not validate would
  // otherwise place tasks across switches without anyone knowing.
  if (absl::StatusOr<core::GpuTopology> t = api::ToCore(info.topology()); !t.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("register.topology.", t.status().message()));
  }
  if (info.capacity().gpus() != gpus) {
    return absl::InvalidArgumentError(absl::StrCat("register.capacity.gpus: ", info.capacity().gpus(),
                                                   " differs from the topology's ", gpus, " GPUs"));
  }
  if (info.capacity().memory_mb() < 0 || info.capacity().vcores_milli() < 0) {
    return absl::InvalidArgumentError("register.capacity: memory and vcores must not be negative");
  }
  return absl::OkStatus();
}

core::PortRanges RangesOf(const google::protobuf::RepeatedPtrField<v1::PortRange>& ranges) {
  core::PortRanges out;
  for (const v1::PortRange& r : ranges) {
    if (r.begin() >= core::kMinPort && r.begin() <= r.end() && r.end() <= core::kMaxPort) out.Add({r.begin(), r.end()});
  }
  return out;
}

core::PortRanges ServingPorts(const v1::NodeInfo& info, const std::string& default_range, std::string* warning) {
  core::PortRanges ephemeral = RangesOf(info.ephemeral_ports());
  core::PortRanges ports = RangesOf(info.capacity().ports());
  std::string from = "its agent's --port-range";
  if (ports.Empty() && !default_range.empty()) {
    ports = core::PortRanges::Parse(default_range).value_or(core::PortRanges());
    from = "the server's defaultPortRange";
  }
  if (ports.Empty()) return core::DefaultServingPorts(ephemeral);
  if (core::PortRanges overlap = ports.Intersect(ephemeral); !overlap.Empty()) {
    *warning = absl::StrFormat(
        "node %s: ports %s of %s %s lie in the node's ephemeral range %s (ip_local_port_range): the kernel "
        "may give them to outgoing connections, and a task given one may find it in use",
        info.name(), overlap.ToString(), from, ports.ToString(), ephemeral.ToString());
  }
  return ports;
}

std::string FaultName(const v1::GpuFault& f) {
  const std::string& m = f.message();
  size_t end = m.find("): ");
  return end == std::string::npos ? absl::StrCat("Xid ", f.xid()) : m.substr(0, end + 1);
}
std::string GpuFaultWhy(const NodeRt& node, uint64_t gpu_mask) {
  for (const v1::GpuFault& f : node.info.gpu_faults()) {
    bool drains = f.action() == v1::GPU_FAULT_DRAIN_NODE;
    bool held = f.gpu() >= 0 && f.gpu() < 64 && ((gpu_mask >> f.gpu()) & 1) != 0;
    if (held && (drains || f.action() == v1::GPU_FAULT_EXCLUDE_GPU)) {
      return absl::StrCat("GPU ", f.gpu(), " of node ", node.info.name(), " is faulty (", FaultName(f), ")");
    }
    if (drains) {
      return absl::StrCat("node ", node.info.name(), " is drained for its GPU ", f.gpu(), " (", FaultName(f), ")");
    }
  }
  return "";
}

v1::NodeRecord NodeRecordOf(const NodeRt& node) {
  v1::NodeRecord rec;
  *rec.mutable_info() = node.info;
  rec.mutable_info()->set_state(node.state);
  rec.set_cordoned(node.cordoned);
  rec.set_draining(node.draining);
  rec.set_admin_reason(node.admin_reason);
  rec.set_cordoned_gpus(node.cordoned_gpus);
  rec.set_registered_time_ms(absl::ToUnixMillis(node.registered));
  rec.set_last_seen_ms(absl::ToUnixMillis(node.last_heartbeat));
  return rec;
}

}  // namespace trainyard::server
