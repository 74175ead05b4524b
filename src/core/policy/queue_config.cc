// Validation of the queue tree.
#include "core/policy/queue_config.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace trainyard::core {
namespace {

absl::Status Err(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("queue ", path, ": ", what));
}

absl::Status CheckPercent(const std::string& path, absl::string_view field, double v) {
  if (!(v >= 0 && v <= 100)) {
    return Err(path, absl::StrCat(field, " ", v, " is outside 0..100"));
  }
  return absl::OkStatus();
}

absl::Status CheckTimeLimits(const std::string& path, const QueueConfig& q) {
  if (q.max_time < absl::ZeroDuration() || q.default_time < absl::ZeroDuration()) {
    return Err(path, "max_time and default_time must not be negative");
  }
  if (q.max_time > absl::ZeroDuration() && q.default_time > q.max_time) {
    return Err(path, absl::StrCat("default_time ", absl::FormatDuration(q.default_time), " is above max_time ",
                                  absl::FormatDuration(q.max_time)));
  }
  return absl::OkStatus();
}

absl::Status ValidateQueue(const QueueConfig& q, const std::string& parent,
                           absl::flat_hash_set<std::string>* names) {
  std::string path = parent.empty() ? q.name : absl::StrCat(parent, ".", q.name);
  if (q.name.empty()) return Err(parent.empty() ? "(root)" : parent + ".(unnamed)", "name is empty");
  if (q.name.find('.') != std::string::npos) return Err(path, "name must not contain '.'");
  if (!names->insert(q.name).second) return Err(path, "name is used by another queue");
  if (absl::Status s = CheckPercent(path, "capacity_percent", q.capacity_percent); !s.ok()) return s;
  if (absl::Status s = CheckPercent(path, "max_capacity_percent", q.max_capacity_percent);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckPercent(path, "user_limit_percent", q.user_limit_percent); !s.ok()) {
    return s;
  }
  if (q.user_limit_percent <= 0) return Err(path, "user_limit_percent must be above 0");
  if (q.max_capacity_percent < q.capacity_percent) {
    return Err(path, absl::StrCat("max_capacity_percent ", q.max_capacity_percent,
                                  " is below capacity_percent ", q.capacity_percent));
  }
  if (!(q.weight > 0)) return Err(path, absl::StrCat("weight ", q.weight, " must be above 0"));
  const Resource& m = q.min_share;
  if (m.memory_mb < 0 || m.vcores_milli < 0 || m.gpus < 0) {
    return Err(path, absl::StrCat("min_share has a negative quantity: ", m.ToString()));
  }
  if (absl::Status s = CheckTimeLimits(path, q); !s.ok()) return s;
  double sum = 0;
  for (const QueueConfig& child : q.children) {
    if (absl::Status s = ValidateQueue(child, path, names); !s.ok()) return s;
    sum += child.capacity_percent;
  }
  if (sum > 100 + 1e-9) {
    return Err(path, absl::StrCat("children's capacity_percent add up to ", sum,
                                  ", more than 100"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateQueues(const QueuesConfig& config) {
  absl::flat_hash_set<std::string> names;
  if (absl::Status s = ValidateQueue(config.root, "", &names); !s.ok()) return s;
  if (config.reclaim_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("queues: reclaim_timeout must not be negative");
  }
  return absl::OkStatus();
}

QueuesConfig DefaultQueues() {
  QueuesConfig config;
  config.root.children.push_back(
      QueueConfig{.name = "default", .capacity_percent = 100, .max_capacity_percent = 100});
  return config;
}

}  // namespace trainyard::core
