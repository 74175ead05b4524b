// The lock-free part of a submission's admission (see admission.h).
#include "server/admission.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/job_spec.h"
#include "api/roles.h"
#include "api/time_limits.h"

namespace trainyard::server {
namespace {

// The leaf `queue` of the tree; nullptr, with the problem in *problem
// (naming the leaves), when the tree has no such leaf.
const core::QueueConfig* FindLeafQueue(const std::string& queue, const core::QueueConfig& root, std::string* problem) {
  std::vector<const core::QueueConfig*> stack = {&root};
  std::vector<std::string> leaves;
  while (!stack.empty()) {
    const core::QueueConfig* q = stack.back();
    stack.pop_back();
    if (q->children.empty()) {
      if (q->name == queue) return q;
      leaves.push_back(q->name);
    }
    for (const auto& c : q->children) stack.push_back(&c);
  }
  std::sort(leaves.begin(), leaves.end());
  *problem = absl::StrCat("queue: '", queue, "' is not a leaf queue (known: ", absl::StrJoin(leaves, ", "), ")");
  return nullptr;
}

// As a Slurm partition's DefaultTime and MaxTime: a job that asks no limit
// gets its queue's default (noted in `set`), and one that asks more than its
// queue's maximum is refused (in `invalid`).
void ApplyTimeLimit(const core::QueueConfig& queue, v1::JobSpec* spec, std::vector<std::string>* set,
                    std::vector<std::string>* invalid) {
  int64_t max_ms = absl::ToInt64Milliseconds(queue.max_time);
  int64_t default_ms = absl::ToInt64Milliseconds(queue.default_time);
  if (spec->active_deadline_ms() == 0 && default_ms > 0) {
    spec->set_active_deadline_ms(default_ms);
    set->push_back(absl::StrCat("activeDeadline ", api::TimeLimitText(default_ms), " (queue ", queue.name,
                                "'s defaultTime)"));
  }
  if (max_ms > 0 && spec->active_deadline_ms() > max_ms) {
    invalid->push_back(absl::StrCat("activeDeadline: ", api::TimeLimitText(spec->active_deadline_ms()),
                                    " is above the maximum of queue ", queue.name, ", ",
                                    api::TimeLimitText(max_ms), " (maxTime in the queue config)"));
  }
}

// As a Kubernetes LimitRange's default: a role that asks for no cpu or no
// memory gets the server's, so its tasks are limited on their node and
// counted against it and their queue (without, hundreds of them would pile
// onto one node). Returns what it set, for the job's first event.
std::vector<std::string> ApplyResourceDefaults(const ServerConfig& config, v1::JobSpec* spec) {
  std::vector<std::string> set;
  for (auto& rs : *spec->mutable_replicas()) {
    v1::Resource* r = rs.mutable_resources();
    std::vector<std::string> parts;
    if (r->vcores_milli() == 0 && config.default_vcores_milli > 0) {
      r->set_vcores_milli(config.default_vcores_milli);
      parts.push_back(absl::StrCat("cpu ", api::CpuQuantityText(config.default_vcores_milli)));
    }
    if (r->memory_mb() == 0 && config.default_memory_mb > 0) {
      r->set_memory_mb(config.default_memory_mb);
      parts.push_back(absl::StrCat("memory ", api::MemoryQuantityText(config.default_memory_mb)));
    }
    if (!parts.empty()) set.push_back(absl::StrCat(rs.role(), " ", absl::StrJoin(parts, ", ")));
  }
  return set;
}

}  // namespace

absl::StatusOr<CheckedSpec> CheckSubmission(v1::JobSpec spec, std::vector<std::string> parse_problems,
                                            const ServerConfig& config, const core::QueueConfig& queues) {
  // The bounds come first and alone: a spec of 5,000 roles is answered in
  // one line, not with a problem or a default per role.
  if (std::vector<std::string> over = api::CheckSpecBounds(spec, config.spec_bounds); !over.empty()) {
    return api::ProblemsStatus(api::MergeProblems(std::move(parse_problems), over));
  }
  if (spec.user().empty()) spec.set_user("default");
  if (spec.queue().empty()) spec.set_queue(config.default_queue.empty() ? "default" : config.default_queue);
  CheckedSpec out;
  std::vector<std::string> set = ApplyResourceDefaults(config, &spec);
  std::vector<std::string> invalid = api::ValidateJobSpec(spec, config.limits);
  std::string no_queue;
  if (const core::QueueConfig* leaf = FindLeafQueue(spec.queue(), queues, &no_queue)) {
    ApplyTimeLimit(*leaf, &spec, &set, &invalid);
  } else {
    invalid.push_back(std::move(no_queue));
  }
  if (!set.empty()) {
    out.defaulted = absl::StrCat("; server defaults for what the spec leaves out: ", absl::StrJoin(set, "; "));
  }
  std::vector<std::string> problems = api::MergeProblems(std::move(parse_problems), invalid);
  if (!problems.empty()) return api::ProblemsStatus(problems);
  // Frameworks address tasks by port: make sure each task that needs one has one.
  for (auto& rs : *spec.mutable_replicas()) {
    bool needs = api::TraitsOf(spec.framework(), rs).default_port;
    if (needs && rs.resources().port_count() == 0 && rs.resources().ports().empty()) {
      rs.mutable_resources()->set_port_count(1);
    }
  }
  out.spec = std::move(spec);
  return out;
}

}  // namespace trainyard::server
