// Job spec YAML parsing. The text is read in one pass into an api::YamlTree
// (libyaml's events: text that is not YAML, nesting or alias expansion past
// their bounds are one problem with its line); the parser walks the tree
// with a path string and collects every problem instead of stopping at the
// first, so no input can take down the client or the server that parses it. Validation of the
// parsed spec is in job_spec_validate.cc.
#include "api/job_spec.h"

#include "api/job_array.h"

#include <cmath>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "core/resources/gpu_set.h"
#include "core/resources/port_ranges.h"
#include "api/restart_budgets.h"
#include "api/time_limits.h"
#include "api/yaml_tree.h"

namespace trainyard::api {
namespace {

using Errors = std::vector<std::string>;
// The entries of one YAML mapping by key, each key a string seen once.
using Fields = std::map<std::string, const YamlNode*>;

bool ConsumeSuffix(std::string* s, std::string_view suffix) {
  if (s->size() < suffix.size() || s->compare(s->size() - suffix.size(), suffix.size(), suffix) != 0) {
    return false;
  }
  s->resize(s->size() - suffix.size());
  return true;
}

// A key as it may appear in a path: escaped when it holds bytes a terminal
// would not print as they are (a NUL, a newline).
std::string KeyText(const std::string& key) {
  for (char c : key) {
    if (!absl::ascii_isprint(static_cast<unsigned char>(c))) return absl::StrCat("\"", absl::CEscape(key), "\"");
  }
  return key;
}

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? KeyText(key) : absl::StrCat(path, ".", KeyText(key));
}

int LineOf(const YamlNode& node) { return node.Line(); }

// The entries of mapping `node` (at `path`). A key that is not a string, or
// that repeats an earlier key (the tree keeps both, as YAML readers differ
// on which wins), is a problem and left out.
Fields Entries(const YamlNode& node, const std::string& path, Errors* errors) {
  Fields out;
  std::map<std::string, int> first_line;
  for (const auto& [k, v] : node.entries()) {
    if (!k->IsScalar()) {
      errors->push_back(absl::StrCat(path.empty() ? "spec" : path, ": line ", LineOf(*k),
                                     ": a key must be a string, not a list or mapping"));
      continue;
    }
    const std::string& key = k->Scalar();
    auto [it, fresh] = first_line.emplace(key, LineOf(*k));
    if (!fresh) {
      errors->push_back(absl::StrCat(Join(path, key), ": duplicate key (first on line ", it->second, ")"));
      continue;
    }
    out.emplace(key, v);
  }
  return out;
}

// Checks that `node` is a map with only `allowed` keys; its entries go to
// *fields.
bool CheckMap(const YamlNode& node, const std::string& path, const std::set<std::string>& allowed,
              Fields* fields, Errors* errors) {
  if (!node.IsMap()) {
    errors->push_back(absl::StrCat(path.empty() ? "spec" : path, ": must be a mapping"));
    return false;
  }
  *fields = Entries(node, path, errors);
  for (const auto& [key, value] : *fields) {
    if (!allowed.count(key)) {
      errors->push_back(absl::StrCat(Join(path, key), ": unknown field (known: ",
                                     absl::StrJoin(allowed, ", "), ")"));
    }
  }
  return true;
}

// The value of `key`, or nullptr when the mapping does not have it.
const YamlNode* Find(const Fields& fields, const std::string& key) {
  auto it = fields.find(key);
  return it == fields.end() ? nullptr : it->second;
}

bool GetString(const YamlNode& node, const std::string& path, std::string* out, Errors* errors) {
  if (!node.IsScalar()) {
    errors->push_back(absl::StrCat(path, ": must be a string"));
    return false;
  }
  *out = node.Scalar();
  return true;
}

bool GetInt(const YamlNode& node, const std::string& path, int64_t* out, Errors* errors) {
  if (!node.IsScalar() || !absl::SimpleAtoi(node.Scalar(), out)) {
    errors->push_back(absl::StrCat(path, ": must be an integer"));
    return false;
  }
  return true;
}

int32_t ClampInt32(int64_t n) { return static_cast<int32_t>(std::clamp<int64_t>(n, INT32_MIN, INT32_MAX)); }

bool GetBool(const YamlNode& node, const std::string& path, bool* out, Errors* errors) {
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

// A command or args list. A single string is refused as Kubernetes refuses
// it: run as it stands it would be one program name with spaces in it (exit
// code 127 at run time), and splitting it ourselves would guess at quoting.
void GetStringList(const YamlNode& node, const std::string& path,
                   google::protobuf::RepeatedPtrField<std::string>* out, Errors* errors) {
  if (node.IsScalar()) {
    errors->push_back(absl::StrCat(path, ": must be a list of strings, e.g. [\"sh\", \"-c\", \"",
                                   absl::CEscape(node.Scalar()), "\"], not a string"));
    return;
  }
  if (!node.IsSequence()) {
    errors->push_back(absl::StrCat(path, ": must be a list of strings, e.g. [\"echo\", \"hi\"]"));
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

void GetStringMap(const YamlNode& node, const std::string& path,
                  google::protobuf::Map<std::string, std::string>* out, Errors* errors) {
  if (!node.IsMap()) {
    errors->push_back(absl::StrCat(path, ": must be a mapping of strings"));
    return;
  }
  for (const auto& [key, value] : Entries(node, path, errors)) {
    if (!value->IsScalar()) {
      errors->push_back(absl::StrCat(Join(path, key), ": must be a string"));
      continue;
    }
    (*out)[key] = value->Scalar();
  }
}

// env: NAME: VALUE, or NAME: {secret: VALUE} for a value the server keeps
// sealed (ReplicaSpec.secret_env).
void GetEnv(const YamlNode& node, const std::string& path, v1::ReplicaSpec* rs, Errors* errors) {
  if (!node.IsMap()) {
    errors->push_back(absl::StrCat(path, ": must be a mapping of strings"));
    return;
  }
  for (const auto& [key, value] : Entries(node, path, errors)) {
    if (value->IsScalar()) {
      (*rs->mutable_env())[key] = value->Scalar();
      continue;
    }
    const YamlNode* secret = value->IsMap() && value->size() == 1 ? value->Find("secret") : nullptr;
    if (secret != nullptr && secret->IsScalar()) {
      (*rs->mutable_secret_env())[key] = secret->Scalar();
      continue;
    }
    errors->push_back(absl::StrCat(Join(path, key), ": must be a string, or {secret: VALUE} for a secret value"));
  }
}

// gpuMask: a list of indices [0, 1], a range string "0-3", or a number
// "0x0f" / 15.
void ParseGpuMask(const YamlNode& node, const std::string& path, uint64_t* mask, Errors* errors) {
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

void ParsePorts(const YamlNode& p, const std::string& path, v1::Resource* r, Errors* errors) {
  int64_t n;
  if (p.IsScalar() && absl::SimpleAtoi(p.Scalar(), &n)) {
    r->set_port_count(ClampInt32(n));
  } else if (p.IsScalar()) {
    auto ranges = core::PortRanges::Parse(p.Scalar());
    if (!ranges.ok()) {
      errors->push_back(absl::StrCat(path, ": ", ranges.status().message()));
      return;
    }
    for (const auto& range : ranges->ranges()) {
      auto* pr = r->add_ports();
      pr->set_begin(range.begin);
      pr->set_end(range.end);
    }
  } else {
    errors->push_back(absl::StrCat(path, ": must be a count or ranges like 3000-3001"));
  }
}

// gpus: a whole number of GPUs, or a share of one GPU below 1 in
// thousandths (0.25 is gpuMilli 250).
bool ParseGpuCount(const YamlNode& node, const std::string& path, v1::Resource* r, Errors* errors) {
  int64_t n;
  if (node.IsScalar() && absl::SimpleAtoi(node.Scalar(), &n)) {
    r->set_gpus(ClampInt32(n));
    return true;
  }
  double x;
  if (node.IsScalar() && absl::SimpleAtod(node.Scalar(), &x) && x > 0 && x < 1) {
    double milli = x * 1000;
    if (std::fabs(milli - std::round(milli)) < 1e-6 && std::round(milli) >= 1) {
      r->set_gpu_milli(static_cast<int32_t>(std::lround(milli)));
      return true;
    }
  }
  errors->push_back(absl::StrCat(path, ": must be a whole number of GPUs, or a share of one GPU "
                                 "between 0 and 1 in thousandths (0.25, 0.125)"));
  return false;
}

// gpuModel: one model name or a list of them.
void ParseGpuModels(const YamlNode& node, const std::string& path, v1::Resource* r, Errors* errors) {
  if (node.IsScalar()) {
    r->add_gpu_models(node.Scalar());
    return;
  }
  if (!node.IsSequence()) {
    errors->push_back(absl::StrCat(path, ": must be a GPU model or a list of them, e.g. [V100M32, A10]"));
    return;
  }
  for (size_t i = 0; i < node.size(); ++i) {
    if (!node[i].IsScalar()) {
      errors->push_back(absl::StrCat(path, "[", i, "]: must be a string"));
      continue;
    }
    r->add_gpu_models(node[i].Scalar());
  }
}

void ParseGpuShare(const Fields& f, const std::string& path, v1::Resource* r, Errors* errors) {
  int64_t n;
  if (const YamlNode* v = Find(f, "gpuMilli")) {
    if (Find(f, "gpus") != nullptr) {
      errors->push_back(absl::StrCat(path, ".gpuMilli: give gpus or gpuMilli, not both"));
    } else if (GetInt(*v, path + ".gpuMilli", &n, errors)) {
      r->set_gpu_milli(ClampInt32(n));
    }
  }
  if (const YamlNode* v = Find(f, "gpuMemory")) {
    auto mb = ParseMemoryQuantity(v->IsScalar() ? v->Scalar() : "");
    if (mb.ok()) {
      r->set_gpu_memory_mb(*mb);
    } else {
      errors->push_back(absl::StrCat(path, ".gpuMemory: ", mb.status().message()));
    }
  }
  if (const YamlNode* v = Find(f, "gpuModel")) ParseGpuModels(*v, path + ".gpuModel", r, errors);
}

void ParseResources(const YamlNode& node, const std::string& path, v1::Resource* r, Errors* errors) {
  Fields f;
  if (!CheckMap(node, path, {"cpu", "memory", "gpus", "gpuMilli", "gpuMemory", "gpuModel", "gpuMask", "ports"},
                &f, errors)) {
    return;
  }
  if (const YamlNode* cpu = Find(f, "cpu")) {
    auto v = ParseCpuQuantity(cpu->IsScalar() ? cpu->Scalar() : "");
    if (v.ok()) {
      r->set_vcores_milli(*v);
    } else {
      errors->push_back(absl::StrCat(path, ".cpu: ", v.status().message()));
    }
  }
  if (const YamlNode* memory = Find(f, "memory")) {
    auto v = ParseMemoryQuantity(memory->IsScalar() ? memory->Scalar() : "");
    if (v.ok()) {
      r->set_memory_mb(*v);
    } else {
      errors->push_back(absl::StrCat(path, ".memory: ", v.status().message()));
    }
  }
  const YamlNode* gpus = Find(f, "gpus");
  if (gpus) ParseGpuCount(*gpus, path + ".gpus", r, errors);
  ParseGpuShare(f, path, r, errors);
  if (const YamlNode* m = Find(f, "gpuMask")) {
    uint64_t mask = 0;
    ParseGpuMask(*m, path + ".gpuMask", &mask, errors);
    r->set_gpu_mask(mask);
    if (!gpus) r->set_gpus(__builtin_popcountll(mask));
  }
  if (const YamlNode* p = Find(f, "ports")) ParsePorts(*p, path + ".ports", r, errors);
}

bool ParseRestartPolicy(const std::string& s, v1::RestartPolicy* out) {
  std::string l = absl::AsciiStrToLower(s);
  if (l == "never") *out = v1::RESTART_NEVER;
  else if (l == "onfailure") *out = v1::RESTART_ON_FAILURE;
  else if (l == "always") *out = v1::RESTART_ALWAYS;
  else return false;
  return true;
}

void ParseReplicaInts(const Fields& f, const std::string& path, v1::ReplicaSpec* rs, Errors* errors) {
  int64_t n;
  for (const char* key : {"count", "replicas"}) {
    const YamlNode* v = Find(f, key);
    if (v && GetInt(*v, Join(path, key), &n, errors)) rs->set_count(ClampInt32(n));
  }
  const YamlNode* v = Find(f, "minAvailable");
  if (v && GetInt(*v, path + ".minAvailable", &n, errors)) {
    // 0 on the wire means "not given" (the whole count is the gang), so a
    // written 0 would silently mean count: refuse it instead.
    if (n < 1) {
      errors->push_back(absl::StrCat(path, ".minAvailable: ", n,
                                     " must be at least 1 (leave it out to start all tasks of the role together)"));
    }
    rs->set_min_available(ClampInt32(n));
  }
  v = Find(f, "minCount");
  if (v && GetInt(*v, path + ".minCount", &n, errors)) {
    if (n < 1) errors->push_back(absl::StrCat(path, ".minCount: ", n, " must be at least 1"));
    rs->set_min_count(ClampInt32(n));
  }
  v = Find(f, "maxRestarts");
  if (v && GetInt(*v, path + ".maxRestarts", &n, errors)) rs->set_max_restarts(ClampInt32(n));
}

// One `restartBudgets` entry: a count of restarts (0 or more) or
// `unlimited` (kUnlimitedRestarts).
bool ParseBudget(const YamlNode& node, const std::string& path, int32_t* out, Errors* errors) {
  int64_t n = 0;
  if (node.IsScalar() && absl::AsciiStrToLower(node.Scalar()) == "unlimited") {
    *out = kUnlimitedRestarts;
    return true;
  }
  if (!node.IsScalar() || !absl::SimpleAtoi(node.Scalar(), &n) || n < 0) {
    errors->push_back(absl::StrCat(path, ": '", node.IsScalar() ? node.Scalar() : "(not a scalar)",
                                   "' must be a number of restarts (0 or more) or unlimited"));
    return false;
  }
  *out = ClampInt32(n);
  return true;
}

// `restartBudgets: {oom: 1, nodeLost: unlimited, gpuError: 2, preemption: 3}`:
// the restarts each class of end allows beside maxRestarts (program failures).
void ParseRestartBudgets(const YamlNode& node, const std::string& path, v1::RestartBudgets* b, Errors* errors) {
  Fields f;
  if (!CheckMap(node, path, {"oom", "nodeLost", "gpuError", "preemption"}, &f, errors)) return;
  int32_t n = 0;
  if (const YamlNode* v = Find(f, "oom"); v && ParseBudget(*v, path + ".oom", &n, errors)) b->set_oom(n);
  if (const YamlNode* v = Find(f, "nodeLost"); v && ParseBudget(*v, path + ".nodeLost", &n, errors)) {
    b->set_node_lost(n);
  }
  if (const YamlNode* v = Find(f, "gpuError"); v && ParseBudget(*v, path + ".gpuError", &n, errors)) {
    b->set_gpu_error(n);
  }
  if (const YamlNode* v = Find(f, "preemption"); v && ParseBudget(*v, path + ".preemption", &n, errors)) {
    b->set_preemption(n);
  }
}

// volumes: [{hostPath: /data, path: /data, readOnly: true}, ...]
void ParseVolumes(const YamlNode& node, const std::string& path, v1::ReplicaSpec* rs, Errors* errors) {
  if (!node.IsSequence()) {
    errors->push_back(absl::StrCat(path, ": must be a list of {hostPath, path, readOnly}"));
    return;
  }
  for (size_t i = 0; i < node.size(); ++i) {
    std::string at = absl::StrCat(path, "[", i, "]");
    Fields f;
    if (!CheckMap(node[i], at, {"hostPath", "path", "readOnly"}, &f, errors)) continue;
    v1::Volume* v = rs->add_volumes();
    std::string s;
    bool b = false;
    if (const YamlNode* n = Find(f, "hostPath"); n && GetString(*n, at + ".hostPath", &s, errors)) v->set_host_path(s);
    if (const YamlNode* n = Find(f, "path"); n && GetString(*n, at + ".path", &s, errors)) v->set_path(s);
    if (v->path().empty()) v->set_path(v->host_path());  // the same path in the container
    if (const YamlNode* n = Find(f, "readOnly"); n && GetBool(*n, at + ".readOnly", &b, errors)) v->set_read_only(b);
  }
}

void ParseReplica(const std::string& role, const YamlNode& node, const std::string& path,
                  v1::ReplicaSpec* rs, Errors* errors) {
  rs->set_role(role);
  rs->set_count(1);
  rs->set_restart_policy(v1::RESTART_NEVER);
  Fields f;
  if (!CheckMap(node, path,
                {"count", "replicas", "minAvailable", "minCount", "resources", "command", "args", "env",
                 "workingDir", "restartPolicy", "maxRestarts", "restartBudgets", "userCredential", "kind",
                 "image", "volumes"},
                &f, errors)) {
    return;
  }
  ParseReplicaInts(f, path, rs, errors);
  std::string s;
  bool user_credential = false;
  if (const YamlNode* v = Find(f, "userCredential");
      v && GetBool(*v, path + ".userCredential", &user_credential, errors)) {
    rs->set_user_credential(user_credential);
  }
  if (const YamlNode* v = Find(f, "kind"); v && GetString(*v, path + ".kind", &s, errors)) {
    if (s == "service") {
      rs->set_kind(v1::ROLE_KIND_SERVICE);
    } else if (s != "task") {
      errors->push_back(absl::StrCat(path, ".kind: '", s, "' is not one of task, service"));
    }
  }
  if (const YamlNode* v = Find(f, "image"); v && GetString(*v, path + ".image", &s, errors)) rs->set_image(s);
  if (const YamlNode* v = Find(f, "volumes")) ParseVolumes(*v, path + ".volumes", rs, errors);
  if (const YamlNode* v = Find(f, "restartBudgets")) {
    ParseRestartBudgets(*v, path + ".restartBudgets", rs->mutable_restart_budgets(), errors);
  }
  if (const YamlNode* v = Find(f, "resources")) ParseResources(*v, path + ".resources", rs->mutable_resources(), errors);
  if (const YamlNode* v = Find(f, "command")) GetStringList(*v, path + ".command", rs->mutable_command(), errors);
  if (const YamlNode* v = Find(f, "args")) GetStringList(*v, path + ".args", rs->mutable_args(), errors);
  if (const YamlNode* v = Find(f, "env")) GetEnv(*v, path + ".env", rs, errors);
  const YamlNode* v = Find(f, "workingDir");
  if (v && GetString(*v, path + ".workingDir", &s, errors)) rs->set_working_dir(s);
  v = Find(f, "restartPolicy");
  if (v && GetString(*v, path + ".restartPolicy", &s, errors)) {
    v1::RestartPolicy policy;
    if (ParseRestartPolicy(s, &policy)) {
      rs->set_restart_policy(policy);
    } else {
      errors->push_back(absl::StrCat(path, ".restartPolicy: '", s, "' is not one of Never, OnFailure, Always"));
    }
  }
}

void ParseEnumField(const Fields& root, const char* key, const std::vector<std::pair<std::string, int>>& values,
                    int* out, Errors* errors) {
  const YamlNode* node = Find(root, key);
  std::string s;
  if (!node || !GetString(*node, key, &s, errors)) return;
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

void ParseEnums(const Fields& root, v1::JobSpec* spec, Errors* errors) {
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
  ParseEnumField(root, "successPolicy", {{"AllWorkers", v1::SUCCESS_ALL_WORKERS}, {"Chief", v1::SUCCESS_CHIEF}},
                 &v, errors);
  spec->set_success_policy(static_cast<v1::SuccessPolicy>(v));
}

void ParseTopLevel(const Fields& root, v1::JobSpec* spec, Errors* errors) {
  std::string s;
  for (auto [key, setter] : std::vector<std::pair<const char*, void (v1::JobSpec::*)(const std::string&)>>{
           {"name", &v1::JobSpec::set_name}, {"user", &v1::JobSpec::set_user},
           {"queue", &v1::JobSpec::set_queue}, {"nodeName", &v1::JobSpec::set_node_name},
           {"rack", &v1::JobSpec::set_rack}}) {
    const YamlNode* v = Find(root, key);
    if (v && GetString(*v, key, &s, errors)) (spec->*setter)(s);
  }
  ParseEnums(root, spec, errors);
  if (const YamlNode* v = Find(root, "nodeSelector")) {
    GetStringMap(*v, "nodeSelector", spec->mutable_node_selector(), errors);
  }
  bool b;
  const YamlNode* v = Find(root, "relaxLocality");
  if (v && GetBool(*v, "relaxLocality", &b, errors)) spec->set_relax_locality(b);
  v = Find(root, "jobmaster");
  if (v && GetBool(*v, "jobmaster", &b, errors)) spec->set_jobmaster(b);
  v = Find(root, "activeDeadline");
  if (v && GetString(*v, "activeDeadline", &s, errors)) {
    absl::StatusOr<int64_t> ms = ParseTimeLimit(s);
    if (ms.ok()) {
      spec->set_active_deadline_ms(*ms);
    } else {
      errors->push_back(absl::StrCat("activeDeadline: ", ms.status().message()));
    }
  }
}

// `hold`, `dependencies: {afterOk: [..], afterAny: [..]}` and `array`
// (api/job_array.h).
void ParseArrayAndDependencies(const Fields& root, v1::JobSpec* spec, Errors* errors) {
  bool b;
  const YamlNode* v = Find(root, "hold");
  if (v && GetBool(*v, "hold", &b, errors)) spec->set_hold(b);
  std::string s;
  v = Find(root, "array");
  if (v && GetString(*v, "array", &s, errors)) {
    absl::StatusOr<ArrayRange> range = ParseArrayRange(s);
    if (range.ok()) {
      spec->set_array(s);
    } else {
      errors->push_back(std::string(range.status().message()));
    }
  }
  v = Find(root, "dependencies");
  if (!v) return;
  Fields f;
  if (!CheckMap(*v, "dependencies", {"afterOk", "afterAny"}, &f, errors)) return;
  v1::JobDependencies* deps = spec->mutable_dependencies();
  for (auto [key, list] : {std::pair{"afterOk", deps->mutable_after_ok()}, std::pair{"afterAny", deps->mutable_after_any()}}) {
    const YamlNode* l = Find(f, key);
    if (!l) continue;
    std::string path = Join("dependencies", key);
    if (l->IsScalar()) {
      list->Add(std::string(l->Scalar()));  // one job, written without a list
    } else {
      GetStringList(*l, path, list, errors);
    }
  }
}

void ParseReplicas(const Fields& root, v1::JobSpec* spec, Errors* errors) {
  const YamlNode* replicas = Find(root, "replicas");
  if (!replicas) {
    errors->push_back("replicas: required (a mapping of role name to its spec)");
  } else if (!replicas->IsMap() || replicas->size() == 0) {
    errors->push_back("replicas: must be a non-empty mapping of role name to its spec");
  } else {
    for (const auto& [role, node] : Entries(*replicas, "replicas", errors)) {
      ParseReplica(role, *node, Join("replicas", role), spec->add_replicas(), errors);
    }
  }
}

void ParseRoot(const YamlNode& root, v1::JobSpec* spec, Errors* errors) {
  if (root.IsNull()) {
    errors->push_back("spec: is empty (a job spec is a mapping with name and replicas)");
    return;
  }
  Fields f;
  if (!CheckMap(root, "",
                {"name", "user", "queue", "priority", "framework", "replicas", "successPolicy",
                 "nodeSelector", "relaxLocality", "nodeName", "rack", "activeDeadline", "hold", "dependencies",
                 "array", "jobmaster"},
                &f, errors)) {
    return;
  }
  ParseTopLevel(f, spec, errors);
  ParseArrayAndDependencies(f, spec, errors);
  ParseReplicas(f, spec, errors);
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
  // 1e15 Ti is ~10^21 MiB: the range is checked before the cast, which is
  // undefined behaviour for a double beyond int64.
  double mib = std::ceil(value * bytes_per_unit / 1048576.0);
  if (!(std::fabs(mib) < 9.0e18)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", std::string(text), "' is more memory than can be counted"));
  }
  return static_cast<int64_t>(mib);
}

std::string CpuQuantityText(int64_t milli) {
  return milli % 1000 == 0 ? absl::StrCat(milli / 1000) : absl::StrCat(milli, "m");
}

std::string MemoryQuantityText(int64_t mb) {
  if (mb != 0 && mb % (1 << 20) == 0) return absl::StrCat(mb / (1 << 20), "Ti");
  if (mb != 0 && mb % 1024 == 0) return absl::StrCat(mb / 1024, "Gi");
  return absl::StrCat(mb, "Mi");
}

std::vector<std::string> ParseJobSpecYamlInto(std::string_view yaml, v1::JobSpec* spec) {
  Errors errors;
  // What allocations may throw on hostile input.
  try {
    // Every document is counted, so a second one is refused rather than
    // quietly dropped.
    YamlTree tree = YamlTree::Parse(yaml);
    if (!tree.ok()) {
      errors.push_back(absl::StrCat("spec: not valid YAML: ", tree.error()));
    } else if (tree.several_documents()) {
      errors.push_back("spec: holds more than one YAML document (---); a job spec is one");
    } else {
      ParseRoot(tree.root(), spec, &errors);
    }
  } catch (const std::exception& e) {
    errors.push_back(absl::StrCat("spec: cannot be read: ", e.what()));
  }
  return errors;
}

absl::StatusOr<v1::JobSpec> ParseJobSpecYaml(std::string_view yaml) {
  v1::JobSpec spec;
  std::vector<std::string> errors = ParseJobSpecYamlInto(yaml, &spec);
  if (!errors.empty()) return ProblemsStatus(errors);
  return spec;
}

}  // namespace trainyard::api
