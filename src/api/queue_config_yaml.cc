// YAML loader for queue configuration; see queue_config_yaml.h.
#include "api/queue_config_yaml.h"

#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/ascii.h"
#include "absl/time/time.h"
#include "api/job_spec.h"
#include "api/time_limits.h"
#include "yaml-cpp/yaml.h"

namespace trainyard::api {
namespace {

// Whole numbers a queue config may hold: within int64, with room to spare.
constexpr double kMaxWhole = 9.0e18;

// Earlier files spelled keys in snake_case: each is read as the camelCase
// key it stands for (min_share's memory_mb and vcores as memory and cpu).
std::string CamelKey(const std::string& key) {
  static const std::pair<const char*, const char*> kOld[] = {
      {"max_capacity", "maxCapacity"},       {"user_limit", "userLimit"}, {"min_share", "minShare"},
      {"reclaim_timeout", "reclaimTimeout"}, {"memory_mb", "memory"},     {"vcores", "cpu"},
      {"default_queue", "defaultQueue"}};
  for (const auto& [old_key, camel] : kOld) {
    if (key == old_key) return camel;
  }
  return key;
}

class Loader {
 public:
  explicit Loader(std::string_view source) : source_(source) {}

  absl::Status Err(const YAML::Node& at, const std::string& where, const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ":", at.Mark().line + 1, ": ", where, what));
  }

  // A copy of the mapping with its keys in camelCase; errors for a key
  // given twice (in both spellings) and for a key not in `known`.
  absl::StatusOr<YAML::Node> Keys(const YAML::Node& map, const std::string& where,
                                  const std::vector<std::string>& known) {
    if (!map.IsMap()) return Err(map, where, "expected a mapping of keys");
    YAML::Node out(YAML::NodeType::Map);
    for (const auto& kv : map) {
      std::string key = CamelKey(kv.first.as<std::string>());
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        return Err(kv.first, where,
                   absl::StrCat("unknown key \"", kv.first.as<std::string>(), "\"; known keys: ",
                                absl::StrJoin(known, ", ")));
      }
      if (out[key]) return Err(kv.first, where, absl::StrCat(key, ": given twice"));
      out[key] = kv.second;
    }
    return out;
  }

  absl::Status Number(const YAML::Node& map, const char* key, const std::string& where,
                      double* out) {
    const YAML::Node v = map[key];
    if (!v) return absl::OkStatus();
    try {
      if (!v.IsScalar()) throw YAML::Exception(v.Mark(), "not a scalar");
      *out = v.as<double>();
    } catch (const YAML::Exception&) {
      return Err(v, where, absl::StrCat(key, ": expected a number, got \"",
                                        v.IsScalar() ? v.Scalar() : "a list or mapping", "\""));
    }
    // YAML reads .inf and .nan as numbers; no quantity of a queue is one.
    if (!std::isfinite(*out)) {
      return Err(v, where, absl::StrCat(key, ": expected a finite number, got \"", v.Scalar(), "\""));
    }
    return absl::OkStatus();
  }

  absl::Status Integer(const YAML::Node& map, const char* key, const std::string& where,
                       int64_t* out) {
    double d = static_cast<double>(*out);
    if (absl::Status s = Number(map, key, where, &d); !s.ok()) return s;
    // Range first: casting a double beyond int64 is undefined behaviour.
    if (!(std::fabs(d) < kMaxWhole) || d != std::trunc(d)) {
      return Err(map[key], where, absl::StrCat(key, ": expected a whole number, got ", d));
    }
    *out = static_cast<int64_t>(d);
    return absl::OkStatus();
  }

  // A quantity as job specs write it (cpu: 1.5 or 500m; memory: 1024 (MiB)
  // or 4Gi), through the job spec's own parser.
  absl::Status Quantity(const YAML::Node& map, const char* key, const std::string& where,
                        absl::StatusOr<int64_t> (*parse)(std::string_view), int64_t* out) {
    const YAML::Node v = map[key];
    if (!v) return absl::OkStatus();
    if (!v.IsScalar()) return Err(v, where, absl::StrCat(key, ": expected a quantity, got a list or mapping"));
    absl::StatusOr<int64_t> q = parse(v.Scalar());
    if (!q.ok()) return Err(v, where, absl::StrCat(key, ": ", q.status().message()));
    *out = *q;
    return absl::OkStatus();
  }

  absl::Status MinShare(const YAML::Node& node, const std::string& where, core::Resource* out) {
    if (!node["minShare"]) return absl::OkStatus();
    std::string at = absl::StrCat(where, "minShare: ");
    absl::StatusOr<YAML::Node> m = Keys(node["minShare"], at, {"memory", "cpu", "gpus"});
    if (!m.ok()) return m.status();
    int64_t gpus = 0;
    if (absl::Status s = Quantity(*m, "memory", at, &ParseMemoryQuantity, &out->memory_mb); !s.ok()) return s;
    if (absl::Status s = Quantity(*m, "cpu", at, &ParseCpuQuantity, &out->vcores_milli); !s.ok()) return s;
    if (absl::Status s = Integer(*m, "gpus", at, &gpus); !s.ok()) return s;
    if (gpus > std::numeric_limits<int32_t>::max() || gpus < std::numeric_limits<int32_t>::min()) {
      return Err((*m)["gpus"], at, absl::StrCat("gpus: ", gpus, " is out of range"));
    }
    out->gpus = static_cast<int32_t>(gpus);
    return absl::OkStatus();
  }

  // An ACL list: a YAML list of user names, or one string of names
  // separated by commas ("*" = everyone). Absent: `out` is left as it is
  // (the parent's).
  absl::Status AclList(const YAML::Node& map, const char* key, const std::string& where,
                       std::vector<std::string>* out) {
    const YAML::Node v = map[key];
    if (!v) return absl::OkStatus();
    std::vector<std::string> names;
    if (v.IsScalar()) {
      for (absl::string_view n : absl::StrSplit(v.Scalar(), ',', absl::SkipWhitespace())) {
        names.emplace_back(absl::StripAsciiWhitespace(n));
      }
    } else if (v.IsSequence()) {
      for (const YAML::Node& n : v) {
        if (!n.IsScalar() || n.Scalar().empty()) {
          return Err(n, where, absl::StrCat(key, ": expected user names, got a list or mapping"));
        }
        names.push_back(n.Scalar());
      }
    } else {
      return Err(v, where, absl::StrCat(key, ": expected a list of user names or \"*\""));
    }
    *out = std::move(names);
    return absl::OkStatus();
  }

  absl::Status Acl(const YAML::Node& node, const std::string& where, QueueAcl* acl) {
    for (auto [key, field] : {std::pair{"aclSubmitJobs", &acl->submit_jobs},
                              std::pair{"aclAdministerJobs", &acl->administer_jobs},
                              std::pair{"aclProduction", &acl->production}}) {
      if (absl::Status s = AclList(node, key, where, field); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status Queue(const YAML::Node& given, const std::string& parent, core::QueueConfig* q) {
    std::string where = absl::StrCat("queue ", parent.empty() ? "" : parent + ".");
    if (!given.IsMap()) return Err(given, where, "expected a mapping with a name");
    if (!given["name"] || !given["name"].IsScalar()) return Err(given, where, "name is missing");
    q->name = given["name"].Scalar();
    std::string path = parent.empty() ? q->name : absl::StrCat(parent, ".", q->name);
    where = absl::StrCat("queue ", path, ": ");
    absl::StatusOr<YAML::Node> node =
        Keys(given, where, {"name", "capacity", "maxCapacity", "userLimit", "weight", "minShare", "queues",
                            "aclSubmitJobs", "aclAdministerJobs", "aclProduction", "maxTime", "defaultTime"});
    if (!node.ok()) return node.status();
    for (auto [key, field] : {std::pair{"capacity", &q->capacity_percent},
                              std::pair{"maxCapacity", &q->max_capacity_percent},
                              std::pair{"userLimit", &q->user_limit_percent},
                              std::pair{"weight", &q->weight}}) {
      if (absl::Status s = Number(*node, key, where, field); !s.ok()) return s;
    }
    if (absl::Status s = MinShare(*node, where, &q->min_share); !s.ok()) return s;
    if (absl::Status s = TimeLimits(*node, where, q); !s.ok()) return s;
    // The parent's lists, then this queue's own.
    QueueAcl acl = acls_->count(parent_name_) ? (*acls_)[parent_name_] : QueueAcl();
    if (absl::Status s = Acl(*node, where, &acl); !s.ok()) return s;
    (*acls_)[q->name] = acl;
    std::string saved = parent_name_;
    const core::QueueConfig* saved_limits = parent_limits_;
    parent_name_ = q->name;
    parent_limits_ = q;
    absl::Status children = Children((*node)["queues"], path, &q->children);
    parent_name_ = saved;
    parent_limits_ = saved_limits;
    return children;
  }

  // maxTime and defaultTime, durations as a job's activeDeadline is written.
  // A queue that sets neither has its parent's; one that sets only maxTime
  // has its parent's default cut to that maximum.
  absl::Status TimeLimits(const YAML::Node& node, const std::string& where, core::QueueConfig* q) {
    if (parent_limits_) {
      q->max_time = parent_limits_->max_time;
      q->default_time = parent_limits_->default_time;
    }
    for (auto [key, field] : {std::pair{"maxTime", &q->max_time}, std::pair{"defaultTime", &q->default_time}}) {
      const YAML::Node v = node[key];
      if (!v) continue;
      absl::StatusOr<int64_t> ms = v.IsScalar() ? ParseTimeLimit(v.Scalar())
                                                : absl::InvalidArgumentError("expected a duration like 2h or 30m");
      if (!ms.ok()) return Err(v, where, absl::StrCat(key, ": ", ms.status().message()));
      *field = absl::Milliseconds(*ms);
    }
    if (node["maxTime"] && !node["defaultTime"] && q->default_time > q->max_time) q->default_time = q->max_time;
    if (q->max_time > absl::ZeroDuration() && q->default_time > q->max_time) {
      return Err(node["defaultTime"], where,
                 absl::StrCat("defaultTime: ", TimeLimitText(absl::ToInt64Milliseconds(q->default_time)),
                              " is above maxTime ", TimeLimitText(absl::ToInt64Milliseconds(q->max_time))));
    }
    return absl::OkStatus();
  }

  absl::Status Children(const YAML::Node& list, const std::string& parent,
                        std::vector<core::QueueConfig>* out) {
    if (!list) return absl::OkStatus();
    if (!list.IsSequence()) {
      return Err(list, absl::StrCat("queue ", parent, ": "), "queues: expected a list");
    }
    for (const YAML::Node& child : list) {
      core::QueueConfig q;
      if (absl::Status s = Queue(child, parent, &q); !s.ok()) return s;
      out->push_back(std::move(q));
    }
    return absl::OkStatus();
  }

  absl::Status Top(const YAML::Node& given, QueueConfigFile* out) {
    acls_ = &out->acls;
    parent_name_ = "root";
    absl::StatusOr<YAML::Node> root = Keys(given, "", {"policy", "reclaimTimeout", "defaultQueue", "queues"});
    if (!root.ok()) return root.status();
    if ((*root)["policy"]) out->policy = (*root)["policy"].Scalar();
    if ((*root)["defaultQueue"]) out->default_queue = (*root)["defaultQueue"].Scalar();
    if (const YAML::Node t = (*root)["reclaimTimeout"]) {
      absl::Duration d;
      if (!t.IsScalar() || !absl::ParseDuration(t.Scalar(), &d)) {
        return Err(t, "", absl::StrCat("reclaimTimeout: expected a duration like 5m or 300s, "
                                       "got \"", t.IsScalar() ? t.Scalar() : "?", "\""));
      }
      out->queues.reclaim_timeout = d;
    }
    if (!(*root)["queues"]) return Err(given, "", "queues: missing; list at least one queue");
    return Children((*root)["queues"], "root", &out->queues.root.children);
  }

 private:
  std::string source_;
  QueueAcls* acls_ = nullptr;  // where Queue puts each queue's ACL
  std::string parent_name_;   // the queue whose children are being read
  const core::QueueConfig* parent_limits_ = nullptr;  // its time limits (nullptr: the root's, none)
};

// True when `name` is a leaf of the tree.
bool IsLeaf(const core::QueueConfig& q, const std::string& name) {
  if (q.children.empty()) return q.name == name;
  return std::any_of(q.children.begin(), q.children.end(),
                     [&](const core::QueueConfig& c) { return IsLeaf(c, name); });
}

}  // namespace

absl::StatusOr<QueueConfigFile> ParseQueueConfigYaml(std::string_view text,
                                                     std::string_view source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(source), ":", e.mark.line + 1, ": not valid YAML: ", e.msg));
  }
  QueueConfigFile out;
  Loader loader(source);
  try {
    if (absl::Status s = loader.Top(root, &out); !s.ok()) return s;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(source), ":", e.mark.line + 1, ": ", e.msg));
  }
  if (absl::Status s = core::ValidateQueues(out.queues); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(source), ": ", s.message()));
  }
  if (!out.default_queue.empty() && !IsLeaf(out.queues.root, out.default_queue)) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(source), ": defaultQueue: '", out.default_queue,
                                                   "' is not a leaf queue of the tree"));
  }
  return out;
}

absl::StatusOr<QueueConfigFile> LoadQueueConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the queue config file"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ParseQueueConfigYaml(buffer.str(), path);
}

bool IsLeafQueue(const core::QueuesConfig& queues, const std::string& name) { return IsLeaf(queues.root, name); }

bool AclAllows(const std::vector<std::string>& acl_list, const std::string& user) {
  return std::any_of(acl_list.begin(), acl_list.end(), [&](const std::string& n) { return n == "*" || n == user; });
}

}  // namespace trainyard::api
