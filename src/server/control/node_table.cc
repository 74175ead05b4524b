// NodeTable (see node_table.h).
#include "server/control/node_table.h"

#include <algorithm>

#include "absl/strings/str_join.h"

namespace trainyard::server {

NodeRt* NodeTable::Find(const std::string& name) {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

const NodeRt* NodeTable::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

NodeRt& NodeTable::Add(const std::string& name, std::unique_ptr<NodeRt> node) {
  NodeRt& added = *node;
  index_[name] = &added;
  nodes_[name] = std::move(node);
  return added;
}

void NodeTable::Remove(const std::string& name) {
  index_.erase(name);
  nodes_.erase(name);
}

v1::NodeState NodeTable::ShownState(const NodeRt& node) {
  if (node.state == v1::NODE_LOST) return v1::NODE_LOST;
  if (node.draining || node.agent_stopping || !node.health_reason.empty()) return v1::NODE_DRAINING;
  if (node.cordoned) return v1::NODE_CORDONED;
  if (node.degraded()) return v1::NODE_DEGRADED;
  return v1::NODE_READY;
}

std::string NodeTable::ShownReason(const NodeRt& node) {
  std::vector<std::string> why;
  if (node.agent_stopping) why.push_back(node.stop_reason);
  if (node.draining || node.cordoned) why.push_back(node.admin_reason);
  if (!node.health_reason.empty()) why.push_back(node.health_reason);
  if (!node.fault_reason.empty()) why.push_back(node.fault_reason);
  if (!node.disk_reason.empty()) why.push_back(node.disk_reason);
  return absl::StrJoin(why, "; ");
}

bool NodeTable::TakesTasks(const NodeRt& node) {
  return node.connected() && node.state == v1::NODE_READY && !node.agent_stopping && !node.cordoned &&
         !node.draining && !node.degraded() && node.health_reason.empty();
}

void NodeTable::ExcuseStall(absl::Duration gap) {
  for (auto& [name, node] : nodes_) {
    if (node->state != v1::NODE_READY) continue;
    node->last_heartbeat += gap;
    node->heard += gap;  // the server itself did not run: no silence of the node's
  }
}

void NodeTable::ExcuseOverload(absl::Duration gap, absl::Time now, absl::Duration timeout, int silence_factor) {
  for (auto& [name, node] : nodes_) {
    if (node->state != v1::NODE_READY) continue;
    absl::Time latest = std::min(now, node->heard + (silence_factor - 1) * timeout);
    node->last_heartbeat = std::max(node->last_heartbeat, std::min(node->last_heartbeat + gap, latest));
  }
}

std::vector<NodeRt*> NodeTable::SilentPast(absl::Time now, absl::Duration timeout) {
  std::vector<NodeRt*> out;
  for (auto& [name, node] : nodes_) {
    if (node->state == v1::NODE_READY && now - node->last_heartbeat > timeout) out.push_back(node.get());
  }
  return out;
}

}  // namespace trainyard::server
