// WorkerTable encoding and decoding: columns, deltas, interned strings, zlib.
#include "jobmaster/worker_table.h"

#include <zlib.h>

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "jobmaster/frame.h"

namespace trainyard::jobmaster {
namespace {

int32_t Delta(int64_t value, int64_t* last) {
  int64_t d = value - *last;
  *last = value;
  return static_cast<int32_t>(d);
}

std::string DerivedTaskName(const std::string& job, const pb::WorkerInfo& info) {
  return absl::StrCat(job, "-", info.role(), "-", info.index());
}

absl::Status Malformed(const std::string& what) {
  return absl::DataLossError(absl::StrCat("malformed worker table from the master: ", what));
}

}  // namespace

WorkerTableEncoder::WorkerTableEncoder(std::string job_name) {
  columns_.set_job_name(std::move(job_name));
  Intern("");
  columns_.add_resources();  // resources[0]: none
  resources_[pb::Resource().SerializeAsString()] = 0;
}

uint32_t WorkerTableEncoder::Intern(const std::string& s) {
  auto [it, added] = strings_.try_emplace(s, static_cast<uint32_t>(strings_.size()));
  if (added) columns_.add_strings(s);
  return it->second;
}

uint32_t WorkerTableEncoder::InternResource(const pb::Resource& resource) {
  auto [it, added] =
      resources_.try_emplace(resource.SerializeAsString(), static_cast<uint32_t>(resources_.size()));
  if (added) *columns_.add_resources() = resource;
  return it->second;
}

void WorkerTableEncoder::Add(const pb::WorkerInfo& info, const std::string& address,
                             int restart_count) {
  pb::WorkerColumns& c = columns_;
  c.add_id_gap(static_cast<uint32_t>(info.worker_id() - last_id_ - 1));
  last_id_ = info.worker_id();
  c.add_address_delta(Delta(Intern(address), &last_address_));
  c.add_port_delta(Delta(info.port(), &last_port_));
  c.add_node_ip_delta(Delta(Intern(info.node_ip()), &last_node_));
  c.add_role(Intern(info.role()));
  c.add_index_delta(Delta(info.index(), &last_index_));
  bool derived = info.task_name() == DerivedTaskName(c.job_name(), info);
  c.add_task_name(derived ? 0 : Intern(info.task_name()) + 1);
  c.add_rack(Intern(info.rack()));
  c.add_data_center(Intern(info.data_center()));
  c.add_restart_count(static_cast<uint32_t>(restart_count));
  c.add_ports_count(static_cast<uint32_t>(info.ports_size()));
  for (uint32_t p : info.ports()) c.add_ports_delta(Delta(p, &last_ports_));
  c.add_resource(InternResource(info.resource()));
}

std::string WorkerTableEncoder::Finish(int num_workers, int64_t version) {
  std::string raw = columns_.SerializeAsString();
  uLongf bound = compressBound(raw.size());
  std::string deflated(bound, '\0');
  int rc = compress2(reinterpret_cast<Bytef*>(deflated.data()), &bound,
                     reinterpret_cast<const Bytef*>(raw.data()), raw.size(), Z_DEFAULT_COMPRESSION);
  pb::WorkerTable table;
  table.set_num_workers(num_workers);
  table.set_version(version);
  table.set_columns_bytes(static_cast<uint32_t>(raw.size()));
  if (rc == Z_OK) {
    deflated.resize(bound);
    table.set_deflated_columns(std::move(deflated));
  }  // else (only out of memory): the table goes without columns and decodes as empty
  return table.SerializeAsString();
}

namespace {

// Reads the columns out of the table's zlib stream.
absl::Status Inflate(const pb::WorkerTable& table, pb::WorkerColumns* columns) {
  if (table.deflated_columns().empty()) return absl::OkStatus();
  if (table.columns_bytes() > kMaxResponseBytes) return Malformed("columns_bytes is over 256 MiB");
  std::string raw(table.columns_bytes(), '\0');
  uLongf size = raw.size();
  const std::string& in = table.deflated_columns();
  int rc = uncompress(reinterpret_cast<Bytef*>(raw.data()), &size,
                      reinterpret_cast<const Bytef*>(in.data()), in.size());
  if (rc != Z_OK || size != raw.size()) return Malformed("deflated_columns does not inflate");
  if (!columns->ParseFromString(raw)) return Malformed("the columns do not parse");
  return absl::OkStatus();
}

absl::Status CheckLengths(const pb::WorkerColumns& c) {
  int n = c.id_gap_size();
  for (int size : {c.address_delta_size(), c.port_delta_size(), c.node_ip_delta_size(),
                   c.role_size(), c.index_delta_size(), c.task_name_size(), c.rack_size(),
                   c.data_center_size(), c.restart_count_size(), c.ports_count_size(),
                   c.resource_size()}) {
    if (size != n) return Malformed(absl::StrFormat("a column has %d entries, not %d", size, n));
  }
  int64_t ports = 0;
  for (uint32_t k : c.ports_count()) ports += k;
  if (ports != c.ports_delta_size()) return Malformed("ports_count does not add up to ports_delta");
  return absl::OkStatus();
}

// Resolves one interned value; false when it is out of range.
bool Lookup(const pb::WorkerColumns& c, int64_t index, std::string* out) {
  if (index < 0 || index >= c.strings_size()) return false;
  *out = c.strings(static_cast<int>(index));
  return true;
}

}  // namespace

absl::Status DecodeWorkerTable(const pb::WorkerTable& table, std::vector<TableRow>* rows) {
  rows->clear();
  pb::WorkerColumns c;
  if (absl::Status s = Inflate(table, &c); !s.ok()) return s;
  if (absl::Status s = CheckLengths(c); !s.ok()) return s;
  int n = c.id_gap_size();
  if (n > table.num_workers()) return Malformed("more rows than the job has workers");
  rows->resize(n);
  int64_t id = -1, address = 0, port = 0, node = 0, index = 0, port_value = 0;
  int next_port = 0;
  for (int i = 0; i < n; ++i) {
    pb::WorkerInfo& info = (*rows)[i].info;
    id += int64_t{c.id_gap(i)} + 1;
    address += c.address_delta(i);
    port += c.port_delta(i);
    node += c.node_ip_delta(i);
    index += c.index_delta(i);
    if (id >= table.num_workers()) return Malformed(absl::StrFormat("worker id %d", id));
    bool ok = Lookup(c, address, info.mutable_ip()) && Lookup(c, node, info.mutable_node_ip()) &&
              Lookup(c, c.role(i), info.mutable_role()) && Lookup(c, c.rack(i), info.mutable_rack()) &&
              Lookup(c, c.data_center(i), info.mutable_data_center()) &&
              (c.task_name(i) == 0 || Lookup(c, int64_t{c.task_name(i)} - 1, info.mutable_task_name())) &&
              c.resource(i) < static_cast<uint32_t>(c.resources_size());
    if (!ok) return Malformed(absl::StrFormat("an index of worker %d is out of range", id));
    info.set_worker_id(static_cast<int32_t>(id));
    info.set_port(static_cast<int32_t>(port));
    info.set_index(static_cast<int32_t>(index));
    if (c.task_name(i) == 0) info.set_task_name(DerivedTaskName(c.job_name(), info));
    for (uint32_t k = 0; k < c.ports_count(i); ++k) {
      port_value += c.ports_delta(next_port++);
      info.add_ports(static_cast<uint32_t>(port_value));
    }
    if (c.resource(i) != 0) *info.mutable_resource() = c.resources(static_cast<int>(c.resource(i)));
    (*rows)[i].restart_count = static_cast<int>(c.restart_count(i));
  }
  return absl::OkStatus();
}

}  // namespace trainyard::jobmaster
