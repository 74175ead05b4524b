// `-o json` output (see json_view.h), written by reflection so that every
// view (jobs, describe, nodes, queues, admin answers) follows the same rules.
#include "cli/json_view.h"

#include <cctype>

#include "absl/strings/match.h"

namespace trainyard::cli {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Fields that hold a GPU bitmap (bit i = GPU i).
bool IsGpuMask(const FieldDescriptor* f) {
  if (f->cpp_type() != FieldDescriptor::CPPTYPE_UINT64) return false;
  const std::string& n = f->name();
  return absl::EndsWith(n, "_mask") || n == "excluded_gpus" || n == "switches" || n == "sockets" ||
         n == "nvlink_islands";
}

nlohmann::json Indices(uint64_t mask) {
  nlohmann::json out = nlohmann::json::array();
  for (int i = 0; i < 64; ++i) {
    if ((mask >> i) & 1) out.push_back(i);
  }
  return out;
}

nlohmann::json Scalar(const Message& m, const Reflection* r, const FieldDescriptor* f, int i) {
  bool rep = f->is_repeated();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: return rep ? r->GetRepeatedInt32(m, f, i) : r->GetInt32(m, f);
    case FieldDescriptor::CPPTYPE_INT64: return rep ? r->GetRepeatedInt64(m, f, i) : r->GetInt64(m, f);
    case FieldDescriptor::CPPTYPE_UINT32: return rep ? r->GetRepeatedUInt32(m, f, i) : r->GetUInt32(m, f);
    case FieldDescriptor::CPPTYPE_UINT64: return rep ? r->GetRepeatedUInt64(m, f, i) : r->GetUInt64(m, f);
    case FieldDescriptor::CPPTYPE_DOUBLE: return rep ? r->GetRepeatedDouble(m, f, i) : r->GetDouble(m, f);
    case FieldDescriptor::CPPTYPE_FLOAT: return rep ? r->GetRepeatedFloat(m, f, i) : r->GetFloat(m, f);
    case FieldDescriptor::CPPTYPE_BOOL: return rep ? r->GetRepeatedBool(m, f, i) : r->GetBool(m, f);
    case FieldDescriptor::CPPTYPE_STRING: return rep ? r->GetRepeatedString(m, f, i) : r->GetString(m, f);
    case FieldDescriptor::CPPTYPE_ENUM:
      return EnumText(rep ? r->GetRepeatedEnum(m, f, i) : r->GetEnum(m, f));
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return ViewJson(rep ? r->GetRepeatedMessage(m, f, i) : r->GetMessage(m, f));
  }
  return nullptr;
}

// A map field (repeated entries of key, value) as a JSON object.
nlohmann::json MapJson(const Message& m, const Reflection* r, const FieldDescriptor* f) {
  nlohmann::json out = nlohmann::json::object();
  for (int i = 0; i < r->FieldSize(m, f); ++i) {
    const Message& entry = r->GetRepeatedMessage(m, f, i);
    const Reflection* er = entry.GetReflection();
    nlohmann::json key = Scalar(entry, er, entry.GetDescriptor()->map_key(), 0);
    out[key.is_string() ? key.get<std::string>() : key.dump()] =
        Scalar(entry, er, entry.GetDescriptor()->map_value(), 0);
  }
  return out;
}

}  // namespace

std::string EnumText(const google::protobuf::EnumValueDescriptor* value) {
  static const std::pair<const char*, const char*> kPrefixes[] = {
      {"trainyard.v1.JobState", "JOB_"},          {"trainyard.v1.TaskState", "TASK_"},
      {"trainyard.v1.NodeState", "NODE_"},        {"trainyard.v1.PriorityClass", "PRIORITY_"},
      {"trainyard.v1.Framework", "FRAMEWORK_"},   {"trainyard.v1.RestartPolicy", "RESTART_"},
      {"trainyard.v1.SuccessPolicy", "SUCCESS_"}, {"trainyard.v1.AttemptClass", "ATTEMPT_"}};
  std::string name = value->name();
  const std::string& type = value->type()->full_name();
  for (const auto& [enum_type, prefix] : kPrefixes) {
    if (type != enum_type || !absl::StartsWith(name, prefix)) continue;
    name = name.substr(std::string(prefix).size());
    // Priorities and frameworks are written in lower case in job specs and tables.
    if (type == "trainyard.v1.PriorityClass" || type == "trainyard.v1.Framework") {
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  return name;
}

nlohmann::json ViewJson(const Message& m) {
  nlohmann::json out = nlohmann::json::object();
  const Reflection* r = m.GetReflection();
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  for (int k = 0; k < d->field_count(); ++k) {
    const FieldDescriptor* f = d->field(k);
    if (f->is_map()) {
      out[f->name()] = MapJson(m, r, f);
    } else if (f->is_repeated()) {
      nlohmann::json list = nlohmann::json::array(), indices = nlohmann::json::array();
      for (int i = 0; i < r->FieldSize(m, f); ++i) {
        list.push_back(Scalar(m, r, f, i));
        if (IsGpuMask(f)) indices.push_back(Indices(r->GetRepeatedUInt64(m, f, i)));
      }
      out[f->name()] = std::move(list);
      if (IsGpuMask(f)) out[f->name() + "_indices"] = std::move(indices);
    } else if (f->has_optional_keyword() && !r->HasField(m, f)) {
      out[f->name()] = nullptr;  // an `optional` field left unset: "none", not 0
    } else {
      out[f->name()] = Scalar(m, r, f, 0);
      if (IsGpuMask(f)) out[f->name() + "_indices"] = Indices(r->GetUInt64(m, f));
    }
  }
  return out;
}

}  // namespace trainyard::cli
