// YAML loader for queue configuration; see queue_config_yaml.h.
#include "api/queue_config_yaml.h"

#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "yaml-cpp/yaml.h"

namespace trainyard::api {
namespace {

// Whole numbers a queue config may hold: within int64, with room to spare.
constexpr double kMaxWhole = 9.0e18;
// Cores of a min_share: as a job spec's cpu.
constexpr double kMaxVcores = 1e9;

class Loader {
 public:
  explicit Loader(std::string_view source) : source_(source) {}

  absl::Status Err(const YAML::Node& at, const std::string& where, const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ":", at.Mark().line + 1, ": ", where, what));
  }

  absl::Status CheckKeys(const YAML::Node& map, const std::string& where,
                         const std::vector<std::string>& known) {
    if (!map.IsMap()) return Err(map, where, "expected a mapping of keys");
    for (const auto& kv : map) {
      std::string key = kv.first.as<std::string>();
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        return Err(kv.first, where,
                   absl::StrCat("unknown key \"", key, "\"; known keys: ",
                                absl::StrJoin(known, ", ")));
      }
    }
    return absl::OkStatus();
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

  absl::Status MinShare(const YAML::Node& node, const std::string& where, core::Resource* out) {
    const YAML::Node m = node["min_share"];
    if (!m) return absl::OkStatus();
    std::string at = absl::StrCat(where, "min_share: ");
    if (absl::Status s = CheckKeys(m, at, {"memory_mb", "vcores", "gpus"}); !s.ok()) return s;
    double vcores = 0;
    int64_t gpus = 0;
    if (absl::Status s = Integer(m, "memory_mb", at, &out->memory_mb); !s.ok()) return s;
    if (absl::Status s = Number(m, "vcores", at, &vcores); !s.ok()) return s;
    if (absl::Status s = Integer(m, "gpus", at, &gpus); !s.ok()) return s;
    if (!(std::fabs(vcores) <= kMaxVcores)) {
      return Err(m["vcores"], at, absl::StrCat("vcores: ", vcores, " is out of range (at most ",
                                               kMaxVcores, " cores)"));
    }
    if (gpus > std::numeric_limits<int32_t>::max() || gpus < std::numeric_limits<int32_t>::min()) {
      return Err(m["gpus"], at, absl::StrCat("gpus: ", gpus, " is out of range"));
    }
    out->vcores_milli = static_cast<int64_t>(vcores * 1000);
    out->gpus = static_cast<int32_t>(gpus);
    return absl::OkStatus();
  }

  absl::Status Queue(const YAML::Node& node, const std::string& parent, core::QueueConfig* q) {
    std::string where = absl::StrCat("queue ", parent.empty() ? "" : parent + ".");
    if (!node.IsMap()) return Err(node, where, "expected a mapping with a name");
    if (!node["name"] || !node["name"].IsScalar()) return Err(node, where, "name is missing");
    q->name = node["name"].Scalar();
    std::string path = parent.empty() ? q->name : absl::StrCat(parent, ".", q->name);
    where = absl::StrCat("queue ", path, ": ");
    if (absl::Status s = CheckKeys(node, where,
                                   {"name", "capacity", "max_capacity", "user_limit", "weight",
                                    "min_share", "queues"});
        !s.ok()) {
      return s;
    }
    for (auto [key, field] : {std::pair{"capacity", &q->capacity_percent},
                              std::pair{"max_capacity", &q->max_capacity_percent},
                              std::pair{"user_limit", &q->user_limit_percent},
                              std::pair{"weight", &q->weight}}) {
      if (absl::Status s = Number(node, key, where, field); !s.ok()) return s;
    }
    if (absl::Status s = MinShare(node, where, &q->min_share); !s.ok()) return s;
    return Children(node["queues"], path, &q->children);
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

  absl::Status Top(const YAML::Node& root, QueueConfigFile* out) {
    if (absl::Status s = CheckKeys(root, "", {"policy", "reclaim_timeout", "queues"}); !s.ok()) {
      return s;
    }
    if (root["policy"]) out->policy = root["policy"].Scalar();
    if (const YAML::Node t = root["reclaim_timeout"]) {
      absl::Duration d;
      if (!t.IsScalar() || !absl::ParseDuration(t.Scalar(), &d)) {
        return Err(t, "", absl::StrCat("reclaim_timeout: expected a duration like 5m or 300s, "
                                       "got \"", t.IsScalar() ? t.Scalar() : "?", "\""));
      }
      out->queues.reclaim_timeout = d;
    }
    if (!root["queues"]) return Err(root, "", "queues: missing; list at least one queue");
    return Children(root["queues"], "root", &out->queues.root.children);
  }

 private:
  std::string source_;
};

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
  return out;
}

absl::StatusOr<QueueConfigFile> LoadQueueConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the queue config file"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ParseQueueConfigYaml(buffer.str(), path);
}

}  // namespace trainyard::api
