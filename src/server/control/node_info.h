// What an agent tells of its node (v1::NodeInfo), as the control state
// checks, keeps and stores it: the registration's checks, the GPU faults as
// they are kept, the ports the node serves, the names events give a fault,
// and the node's record for the store. Functions, no state; part of the
// control state (sans-IO).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "core/resources/port_ranges.h"
#include "proto/service.pb.h"
#include "server/control/node_table.h"

namespace trainyard::server {

// OK, or InvalidArgument naming the field of a registration that cannot be
// taken ("register.topology.gpu_count: 65 is outside 0..64").
absl::Status CheckNodeInfo(const v1::NodeInfo& info);

// An agent's GPU faults as they are kept, shown and stored: one per GPU of
// the node (the last given), with an action, the message at most 512 bytes
// (cut where a UTF-8 character starts).
void LimitGpuFaults(v1::NodeInfo* info);

// The valid ranges of `ranges` (within core::kMinPort..kMaxPort).
core::PortRanges RangesOf(const google::protobuf::RepeatedPtrField<v1::PortRange>& ranges);

// The ports a node serves: its agent's --port-range, else the server's
// defaultPortRange (`default_range`), else 1024-65535 minus the node's
// ephemeral range. A configured range is served as given even where it
// overlaps the ephemeral range, but the kernel may hand those ports to any
// outgoing connection at any time, so a task given one may find it taken:
// the overlap is said in `*warning` (else it is left as it is).
core::PortRanges ServingPorts(const v1::NodeInfo& info, const std::string& default_range, std::string* warning);

// A fault as events and reasons name it: "Xid 48 (double-bit ECC error)",
// the start of the agent's message, without the driver's line after it
// (`node describe` shows that).
std::string FaultName(const v1::GpuFault& f);

// Why a task on `node` holding `gpu_mask` is moved for the node's GPU faults
// ("GPU 3 of node n-1 is faulty (Xid 48 ...)"; "" when it is not).
std::string GpuFaultWhy(const NodeRt& node, uint64_t gpu_mask);

// The node's record as the store keeps it.
v1::NodeRecord NodeRecordOf(const NodeRt& node);

}  // namespace trainyard::server
