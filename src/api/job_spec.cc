// Job spec YAML parsing and validation. The parser walks the YAML tree with a
// path string and collects every problem instead of stopping at the first.
#include "api/job_spec.h"

#include <cmath>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "core/resources/gpu_set.h"
#include "core/resources/port_ranges.h"
#include "core/resources/resource.h"
#include "api/convert.h"
#include "yaml-cpp/yaml.h"

namespace trainyard::api {
namespace {

using Errors = std::vector<std::string>;

bool ConsumeSuffix(std::string* s, std::string_view suffix) {
  if (s->size() < suffix.size() || s->compare(s->size() - suffix.size(), suffix.size(), suffix) != 0) {
    return false;
  }
  s->resize(s->size() - suffix.size());
  return true;
}

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : absl::StrCat(path, ".", key);
}

// Checks that `node` is a map with only `allowed` keys.
bool CheckMap(const YAML::Node& node, const std::string& path,
              const std::set<std::string>& allowed, Errors* errors) {
  if (!node.IsMap()) {
    errors->push_back(absl::StrCat(path.empty() ? "spec" : path, ": must be a mapping"));
    return false;
  }
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    if (!allowed.count(key)) {
      errors->push_back(absl::StrCat(Join(path, key), ": unknown field (known: ",
                                     absl::StrJoin(allowed, ", "), ")"));
    }
  }
  return true;
}

bool GetString(const YAML::Node& node, const std::string& path, std::string* out,
               Errors* errors) {
  if (!node.IsScalar()) {
    errors->push_back(absl::StrCat(path, ": must be a string"));
    return false;
  }
  *out = node.Scalar();
  return true;
}

bool GetInt(const YAML::Node& node, const std::string& path, int64_t* out, Errors* errors) {
  if (!node.IsScalar() || !absl::SimpleAtoi(node.Scalar(), out)) {
    errors->push_back(absl::StrCat(path, ": must be an integer"));
    return false;
  }
  return true;
}

bool GetBool(const YAML::Node& node, const std::string& path, bool* out, Errors* errors) {
  std::string s = node.IsScalar() ? absl::AsciiStrToLower(node.Scalar()) : "";
  if (s == "true" || s == "yes") {
    *out = true;
  } else if (s == "false" || s == "no") {
    *out = false;
  } else {
    errors->push_back(absl::StrCat(path, ": must be true or false"));
    return false;
  }
  return true;
}

void GetStringList(const YAML::Node& node, const std::string& path,
                   google::protobuf::RepeatedPtrField<std::string>* out, Errors* errors) {
  if (node.IsScalar()) {  // a single string is a one-element list
    out->Add(std::string(node.Scalar()));
    return;
  }
  if (!node.IsSequence()) {
    errors->push_back(absl::StrCat(path, ": must be a list of strings"));
    return;
  }
  for (size_t i = 0; i < node.size(); ++i) {
    if (!node[i].IsScalar()) {
      errors->push_back(absl::StrCat(path, "[", i, "]: must be a string"));
      continue;
    }
    out->Add(std::string(node[i].Scalar()));
  }
}

void GetStringMap(const YAML::Node& node, const std::string& path,
                  google::protobuf::Map<std::string, std::string>* out, Errors* errors) {
  if (!node.IsMap()) {
    errors->push_back(absl::StrCat(path, ": must be a mapping of strings"));
    return;
  }
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    if (!kv.second.IsScalar()) {
      errors->push_back(absl::StrCat(Join(path, key), ": must be a string"));
      continue;
    }
    (*out)[key] = kv.second.Scalar();
  }
}

// gpuMask: a list of indices [0, 1], a range string "0-3", or a number
// "0x0f" / 15.
void ParseGpuMask(const YAML::Node& node, const std::string& path, uint64_t* mask,
                  Errors* errors) {
  if (node.IsSequence()) {
    std::vector<int> indices;
    for (size_t i = 0; i < node.size(); ++i) {
      int64_t v;
      if (GetInt(node[i], absl::StrCat(path, "[", i, "]"), &v, errors)) {
        indices.push_back(static_cast<int>(std::clamp<int64_t>(v, -1, 1000)));
      }
    }
    auto set = core::GpuSet::FromIndices(indices);
    if (!set.ok()) {
      errors->push_back(absl::StrCat(path, ": ", set.status().message()));
      return;
    }
    *mask = set->bits();
    return;
  }
  std::string text;
  if (!GetString(node, path, &text, errors)) return;
  uint64_t value = 0;
  if (absl::StartsWithIgnoreCase(text, "0x")) {
    if (text.size() > 18 || !absl::SimpleHexAtoi(text.substr(2), &value)) {
      errors->push_back(absl::StrCat(path, ": '", text, "' is not a 64-bit hex mask"));
      return;
    }
    *mask = value;
    return;
  }
  auto set = core::GpuSet::Parse(text);
  if (!set.ok()) {
    errors->push_back(absl::StrCat(path, ": ", set.status().message()));
    return;
  }
  *mask = set->bits();
}

void ParseResources(const YAML::Node& node, const std::string& path, v1::Resource* r,
                    Errors* errors) {
  if (!CheckMap(node, path, {"cpu", "memory", "gpus", "gpuMask", "ports"}, errors)) return;
  if (node["cpu"]) {
    auto v = ParseCpuQuantity(node["cpu"].IsScalar() ? node["cpu"].Scalar() : "");
    if (v.ok()) {
      r->set_vcores_milli(*v);
    } else {
      errors->push_back(absl::StrCat(path, ".cpu: ", v.status().message()));
    }
  }
  if (node["memory"]) {
    auto v = ParseMemoryQuantity(node["memory"].IsScalar() ? node["memory"].Scalar() : "");
    if (v.ok()) {
      r->set_memory_mb(*v);
    } else {
      errors->push_back(absl::StrCat(path, ".memory: ", v.status().message()));
    }
  }
  int64_t n;
  if (node["gpus"] && GetInt(node["gpus"], path + ".gpus", &n, errors)) {
    r->set_gpus(static_cast<int32_t>(std::clamp<int64_t>(n, INT32_MIN, INT32_MAX)));
  }
  if (node["gpuMask"]) {
    uint64_t mask = 0;
    ParseGpuMask(node["gpuMask"], path + ".gpuMask", &mask, errors);
    r->set_gpu_mask(mask);
    if (!node["gpus"]) r->set_gpus(__builtin_popcountll(mask));
  }
  if (const YAML::Node& p = node["ports"]) {
    if (p.IsScalar() && absl::SimpleAtoi(p.Scalar(), &n)) {
      r->set_port_count(static_cast<int32_t>(std::clamp<int64_t>(n, INT32_MIN, INT32_MAX)));
    } else if (p.IsScalar()) {
      auto ranges = core::PortRanges::Parse(p.Scalar());
      if (!ranges.ok()) {
        errors->push_back(absl::StrCat(path, ".ports: ", ranges.status().message()));
        return;
      }
      for (const auto& range : ranges->ranges()) {
        auto* pr = r->add_ports();
        pr->set_begin(range.begin);
        pr->set_end(range.end);
      }
    } else {
      errors->push_back(absl::StrCat(path, ".ports: must be a count or ranges like 3000-3001"));
    }
  }
}

bool ParseRestartPolicy(const std::string& s, v1::RestartPolicy* out) {
  std::string l = absl::AsciiStrToLower(s);
  if (l == "never") *out = v1::RESTART_NEVER;
  else if (l == "onfailure") *out = v1::RESTART_ON_FAILURE;
  else if (l == "always") *out = v1::RESTART_ALWAYS;
  else return false;
  return true;
}

void ParseReplica(const std::string& role, const YAML::Node& node, const std::string& path,
                  v1::ReplicaSpec* rs, Errors* errors) {
  rs->set_role(role);
  rs->set_count(1);
  rs->set_restart_policy(v1::RESTART_NEVER);
  if (!CheckMap(node, path,
                {"count", "replicas", "minAvailable", "resources", "command", "args", "env",
                 "workingDir", "restartPolicy", "maxRestarts"},
                errors)) {
    return;
  }
  int64_t n;
  for (const char* key : {"count", "replicas"}) {
    if (node[key] && GetInt(node[key], Join(path, key), &n, errors)) {
      rs->set_count(static_cast<int32_t>(std::clamp<int64_t>(n, INT32_MIN, INT32_MAX)));
    }
  }
  if (node["minAvailable"] && GetInt(node["minAvailable"], path + ".minAvailable", &n, errors)) {
    rs->set_min_available(static_cast<int32_t>(std::clamp<int64_t>(n, INT32_MIN, INT32_MAX)));
  }
  if (node["resources"]) ParseResources(node["resources"], path + ".resources", rs->mutable_resources(), errors);
  if (node["command"]) GetStringList(node["command"], path + ".command", rs->mutable_command(), errors);
  if (node["args"]) GetStringList(node["args"], path + ".args", rs->mutable_args(), errors);
  if (node["env"]) GetStringMap(node["env"], path + ".env", rs->mutable_env(), errors);
  std::string s;
  if (node["workingDir"] && GetString(node["workingDir"], path + ".workingDir", &s, errors)) {
    rs->set_working_dir(s);
  }
  if (node["restartPolicy"] && GetString(node["restartPolicy"], path + ".restartPolicy", &s, errors)) {
    v1::RestartPolicy policy;
    if (ParseRestartPolicy(s, &policy)) {
      rs->set_restart_policy(policy);
    } else {
      errors->push_back(absl::StrCat(path, ".restartPolicy: '", s,
                                     "' is not one of Never, OnFailure, Always"));
    }
  }
  if (node["maxRestarts"] && GetInt(node["maxRestarts"], path + ".maxRestarts", &n, errors)) {
    rs->set_max_restarts(static_cast<int32_t>(std::clamp<int64_t>(n, INT32_MIN, INT32_MAX)));
  }
}

void ParseEnumField(const YAML::Node& root, const char* key,
                    const std::vector<std::pair<std::string, int>>& values, int* out,
                    Errors* errors) {
  if (!root[key]) return;
  std::string s;
  if (!GetString(root[key], key, &s, errors)) return;
  std::string l = absl::AsciiStrToLower(s);
  std::vector<std::string> names;
  for (const auto& [name, value] : values) {
    if (absl::AsciiStrToLower(name) == l) {
      *out = value;
      return;
    }
    names.push_back(name);
  }
  errors->push_back(absl::StrCat(key, ": '", s, "' is not one of ", absl::StrJoin(names, ", ")));
}

void ParseTopLevel(const YAML::Node& root, v1::JobSpec* spec, Errors* errors) {
  std::string s;
  for (auto [key, setter] : std::vector<std::pair<const char*, void (v1::JobSpec::*)(const std::string&)>>{
           {"name", &v1::JobSpec::set_name}, {"user", &v1::JobSpec::set_user},
           {"queue", &v1::JobSpec::set_queue}, {"nodeName", &v1::JobSpec::set_node_name},
           {"rack", &v1::JobSpec::set_rack}}) {
    if (root[key] && GetString(root[key], key, &s, errors)) (spec->*setter)(s);
  }
  int v = v1::PRIORITY_ITERATION;
  ParseEnumField(root, "priority",
                 {{"production", v1::PRIORITY_PRODUCTION}, {"iteration", v1::PRIORITY_ITERATION},
                  {"ptr", v1::PRIORITY_PTR}},
                 &v, errors);
  spec->set_priority(static_cast<v1::PriorityClass>(v));
  v = v1::FRAMEWORK_NONE;
  ParseEnumField(root, "framework",
                 {{"tensorflow", v1::FRAMEWORK_TENSORFLOW}, {"pytorch", v1::FRAMEWORK_PYTORCH},
                  {"mpi", v1::FRAMEWORK_MPI}, {"none", v1::FRAMEWORK_NONE}},
                 &v, errors);
  spec->set_framework(static_cast<v1::Framework>(v));
  v = v1::SUCCESS_ALL_WORKERS;
  ParseEnumField(root, "successPolicy",
                 {{"AllWorkers", v1::SUCCESS_ALL_WORKERS}, {"Chief", v1::SUCCESS_CHIEF}}, &v,
                 errors);
  spec->set_success_policy(static_cast<v1::SuccessPolicy>(v));
  if (root["nodeSelector"]) GetStringMap(root["nodeSelector"], "nodeSelector", spec->mutable_node_selector(), errors);
  bool b;
  if (root["relaxLocality"] && GetBool(root["relaxLocality"], "relaxLocality", &b, errors)) {
    spec->set_relax_locality(b);
  }
}

}  // namespace

absl::StatusOr<int64_t> ParseCpuQuantity(std::string_view text) {
  std::string t(absl::StripAsciiWhitespace(std::string(text)));
  if (t.empty()) return absl::InvalidArgumentError("must be a number of cores like 2, 1.5 or 500m");
  if (ConsumeSuffix(&t, "m")) {
    int64_t milli;
    if (!absl::SimpleAtoi(t, &milli)) {
      return absl::InvalidArgumentError(absl::StrCat("'", std::string(text), "' is not a CPU quantity like 500m"));
    }
    return milli;
  }
  double cores;
  if (!absl::SimpleAtod(t, &cores) || !std::isfinite(cores) || std::fabs(cores) > 1e9) {
    return absl::InvalidArgumentError(absl::StrCat("'", std::string(text), "' is not a CPU quantity like 2, 1.5 or 500m"));
  }
  return static_cast<int64_t>(std::llround(cores * 1000));
}

absl::StatusOr<int64_t> ParseMemoryQuantity(std::string_view text) {
  std::string t(absl::StripAsciiWhitespace(std::string(text)));
  struct Unit {
    const char* suffix;
    double bytes;
  };
  static constexpr Unit kUnits[] = {{"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0},
                                    {"Ti", 1099511627776.0}, {"K", 1e3}, {"M", 1e6},
                                    {"G", 1e9}, {"T", 1e12}};
  double bytes_per_unit = 1048576.0;  // a bare number is MiB
  for (const Unit& u : kUnits) {
    if (ConsumeSuffix(&t, u.suffix)) {
      bytes_per_unit = u.bytes;
      break;
    }
  }
  double value;
  if (t.empty() || !absl::SimpleAtod(t, &value) || !std::isfinite(value) || std::fabs(value) > 1e15) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", std::string(text), "' is not a memory quantity like 1024 (MiB), 512Mi or 4Gi"));
  }
  return static_cast<int64_t>(std::ceil(value * bytes_per_unit / 1048576.0));
}

absl::StatusOr<v1::JobSpec> ParseJobSpecYaml(std::string_view yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("spec is not valid YAML: line ", e.mark.line + 1,
                                                   ", column ", e.mark.column + 1, ": ", e.msg));
  }
  Errors errors;
  v1::JobSpec spec;
  if (CheckMap(root, "",
               {"name", "user", "queue", "priority", "framework", "replicas", "successPolicy",
                "nodeSelector", "relaxLocality", "nodeName", "rack"},
               &errors)) {
    ParseTopLevel(root, &spec, &errors);
    const YAML::Node& replicas = root["replicas"];
    if (!replicas) {
      errors.push_back("replicas: required (a mapping of role name to its spec)");
    } else if (!replicas.IsMap() || replicas.size() == 0) {
      errors.push_back("replicas: must be a non-empty mapping of role name to its spec");
    } else {
      for (const auto& kv : replicas) {
        std::string role = kv.first.as<std::string>();
        ParseReplica(role, kv.second, Join("replicas", role), spec.add_replicas(), &errors);
      }
    }
  }
  if (!errors.empty()) {
    return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
  }
  return spec;
}

}  // namespace trainyard::api

namespace trainyard::api {
namespace {

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 63 || name.front() == '-' || name.back() == '-') return false;
  for (char c : name) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-')) return false;
  }
  return true;
}

const v1::ReplicaSpec* FindRole(const v1::JobSpec& spec, std::string_view role) {
  for (const auto& r : spec.replicas()) {
    if (r.role() == role) return &r;
  }
  return nullptr;
}

void ValidateFramework(const v1::JobSpec& spec, Errors* errors) {
  switch (spec.framework()) {
    case v1::FRAMEWORK_TENSORFLOW:
      if (!FindRole(spec, "worker") && !FindRole(spec, "chief")) {
        errors->push_back("framework: tensorflow needs a 'worker' or 'chief' role in replicas");
      }
      break;
    case v1::FRAMEWORK_PYTORCH: {
      const v1::ReplicaSpec* master = FindRole(spec, "master");
      if (master && master->count() != 1) {
        errors->push_back(absl::StrCat("replicas.master.count: pytorch needs exactly one master rank, got ",
                                       master->count()));
      }
      if (!master && !FindRole(spec, "worker")) {
        errors->push_back("framework: pytorch needs a 'master' role of count 1 or a 'worker' role");
      }
      break;
    }
    case v1::FRAMEWORK_MPI:
      if (!FindRole(spec, "worker") && !FindRole(spec, "launcher")) {
        errors->push_back("framework: mpi needs a 'worker' role in replicas");
      }
      break;
    default:
      break;
  }
  if (spec.success_policy() == v1::SUCCESS_CHIEF && !FindRole(spec, "chief") &&
      !FindRole(spec, "master")) {
    errors->push_back("successPolicy: Chief needs a 'chief' (or 'master') role in replicas");
  }
}

}  // namespace

std::vector<std::string> ValidateJobSpec(const v1::JobSpec& spec,
                                         const core::AllocationLimits& limits) {
  Errors errors;
  if (!ValidName(spec.name())) {
    errors.push_back(absl::StrCat("name: '", spec.name(),
                                  "' must be 1-63 characters of a-z, 0-9 and '-', not starting or "
                                  "ending with '-'"));
  }
  if (spec.replicas().empty()) errors.push_back("replicas: at least one role is needed");
  for (const auto& r : spec.replicas()) {
    std::string path = absl::StrCat("replicas.", r.role());
    if (!ValidName(r.role())) {
      errors.push_back(absl::StrCat(path, ": role name must be of a-z, 0-9 and '-'"));
    }
    if (r.count() < 1 || r.count() > 10000) {
      errors.push_back(absl::StrCat(path, ".count: ", r.count(), " must be between 1 and 10000"));
    }
    if (r.min_available() < 0 || r.min_available() > r.count()) {
      errors.push_back(absl::StrCat(path, ".minAvailable: ", r.min_available(),
                                    " must be between 0 and count ", r.count()));
    }
    if (r.max_restarts() < 0) {
      errors.push_back(absl::StrCat(path, ".maxRestarts: ", r.max_restarts(), " must not be negative"));
    }
    if (r.command().empty()) errors.push_back(absl::StrCat(path, ".command: required"));
    for (const auto& p : r.resources().ports()) {
      if (p.begin() < core::kMinPort || p.end() > core::kMaxPort || p.begin() > p.end()) {
        errors.push_back(absl::StrCat(path, ".resources.ports: ", p.begin(), "-", p.end(),
                                      " is not a range inside 1-65535"));
      }
    }
    absl::Status st = core::ValidateRequest(ToCore(r.resources()), limits);
    if (!st.ok()) errors.push_back(absl::StrCat(path, ".resources.", st.message()));
  }
  ValidateFramework(spec, &errors);
  return errors;
}

absl::StatusOr<v1::JobSpec> LoadJobSpec(std::string_view yaml, const core::AllocationLimits& limits) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpecYaml(yaml);
  if (!spec.ok()) return spec.status();
  if (spec->user().empty()) spec->set_user("default");
  if (spec->queue().empty()) spec->set_queue("default");
  std::vector<std::string> errors = ValidateJobSpec(*spec, limits);
  if (!errors.empty()) return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
  return spec;
}

std::string FrameworkName(v1::Framework f) {
  switch (f) {
    case v1::FRAMEWORK_TENSORFLOW: return "tensorflow";
    case v1::FRAMEWORK_PYTORCH: return "pytorch";
    case v1::FRAMEWORK_MPI: return "mpi";
    default: return "none";
  }
}

std::string PriorityName(v1::PriorityClass p) {
  switch (p) {
    case v1::PRIORITY_PRODUCTION: return "production";
    case v1::PRIORITY_PTR: return "ptr";
    default: return "iteration";
  }
}

std::string RestartPolicyName(v1::RestartPolicy p) {
  switch (p) {
    case v1::RESTART_ON_FAILURE: return "OnFailure";
    case v1::RESTART_ALWAYS: return "Always";
    default: return "Never";
  }
}

}  // namespace trainyard::api
