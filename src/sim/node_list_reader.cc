// Reading node lists for the simulator; see trace_readers.h.
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "sim/trace_readers.h"

namespace trainyard::sim {
namespace {

constexpr int kMaxNodeGpus = 64;

// The first of `names` that the table has, or "" when none.
absl::string_view FirstColumn(const CsvTable& table, std::initializer_list<absl::string_view> names) {
  for (absl::string_view n : names) {
    if (table.HasColumn(n)) return n;
  }
  return {};
}

absl::StatusOr<NodeSpec> ParseNode(const CsvRow& row, absl::string_view name_col,
                                   absl::string_view gpu_col, absl::string_view model_col) {
  NodeSpec node;
  node.line = row.line();
  node.name = std::string(row.Text(name_col));
  if (node.name.empty()) return row.Error(name_col, "the node name is empty");
  auto cpu = row.Int("cpu_milli");
  if (!cpu.ok()) return cpu.status();
  auto mem = row.Int("memory_mib");
  if (!mem.ok()) return mem.status();
  auto gpus = row.Int(gpu_col);
  if (!gpus.ok()) return gpus.status();
  if (*gpus > kMaxNodeGpus) {
    return row.Error(gpu_col, absl::StrCat(*gpus, " GPUs is above the most a node may have, ",
                                           kMaxNodeGpus));
  }
  node.cpu_milli = *cpu;
  node.memory_mib = *mem;
  node.gpus = static_cast<int>(*gpus);
  if (!model_col.empty()) node.gpu_model = std::string(row.Text(model_col));
  node.rack = std::string(row.Text("rack"));
  node.topology = std::string(row.Text("topology"));
  return node;
}

}  // namespace

absl::StatusOr<NodeList> ParseNodeList(const CsvTable& table) {
  absl::string_view name_col = FirstColumn(table, {"sn", "name"});
  absl::string_view gpu_col = FirstColumn(table, {"gpu", "gpus"});
  absl::string_view model_col = FirstColumn(table, {"model", "gpu_model"});
  if (name_col.empty()) return table.RequireColumns({"sn"});
  if (gpu_col.empty()) return table.RequireColumns({"gpu"});
  if (auto s = table.RequireColumns({"cpu_milli", "memory_mib"}); !s.ok()) return s;
  NodeList list;
  list.source = table.source();
  absl::flat_hash_set<std::string> names;
  for (size_t i = 0; i < table.size(); ++i) {
    CsvRow row = table.row(i);
    auto node = ParseNode(row, name_col, gpu_col, model_col);
    if (!node.ok()) return node.status();
    if (!names.insert(node->name).second) {
      return row.Error(name_col, absl::StrCat("node '", node->name, "' is listed twice"));
    }
    if (node->topology.empty()) list.topology_assumed = true;
    list.nodes.push_back(std::move(*node));
  }
  if (list.nodes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(table.source(), ": the node list is empty"));
  }
  return list;
}

absl::StatusOr<NodeList> ReadNodeList(const std::string& path) {
  auto table = CsvTable::ReadFile(path);
  if (!table.ok()) return table.status();
  return ParseNodeList(*table);
}

}  // namespace trainyard::sim
