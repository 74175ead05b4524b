// A registration as a simulated agent sends it, for the server's tests:
// `gpus` GPUs in switch pairs on one socket, 64 GiB, 32 cores, ports
// 30000-30999.
#pragma once

#include <map>
#include <string>

#include "proto/trainyard.pb.h"

namespace trainyard::server::testing {

inline v1::NodeInfo TestNode(const std::string& name, int gpus, const std::string& address = "127.0.0.1",
                             const std::map<std::string, std::string>& labels = {}) {
  v1::NodeInfo n;
  n.set_name(name);
  n.set_address(address);
  n.mutable_capacity()->set_memory_mb(65536);
  n.mutable_capacity()->set_vcores_milli(32000);
  n.mutable_capacity()->set_gpus(gpus);
  auto* p = n.mutable_capacity()->add_ports();
  p->set_begin(30000);
  p->set_end(30999);
  n.mutable_topology()->set_gpu_count(gpus);
  for (int s = 0; s < gpus / 2; ++s) n.mutable_topology()->add_switches(3ull << (2 * s));
  if (gpus) n.mutable_topology()->add_sockets((1ull << gpus) - 1);
  for (const auto& [k, v] : labels) (*n.mutable_labels())[k] = v;
  return n;
}

}  // namespace trainyard::server::testing
