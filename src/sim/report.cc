// Rendering simulator reports as a terminal table and as JSON; see report.h.
#include "sim/report.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace trainyard::sim {
namespace {

double PerSecond(double count, double seconds) { return seconds > 0 ? count / seconds : 0; }

nlohmann::ordered_json DistributionJson(const Distribution& d) {
  return {{"count", d.count}, {"mean", d.mean}, {"p50", d.p50}, {"p99", d.p99}, {"max", d.max}};
}

nlohmann::ordered_json IssuesJson(const std::vector<JobIssue>& issues) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const JobIssue& i : issues) out.push_back({{"job", i.job}, {"reason", i.reason}});
  return out;
}

nlohmann::ordered_json ReportJson(const SimReport& r) {
  return {
      {"queue_policy", r.queue_policy},
      {"placement", r.placement},
      {"input", {{"nodes_file", r.nodes_source}, {"trace_file", r.trace_source},
                 {"trace_format", r.trace_format}, {"topology_assumed", r.topology_assumed},
                 {"fill", r.fill},
                 {"nodes", r.nodes}, {"gpus", r.gpus}, {"jobs", r.jobs}, {"tasks", r.tasks},
                 {"rounded_up_tasks", r.rounded_up_tasks}}},
      {"jobs", {{"started", r.jobs_started}, {"finished", r.jobs_finished},
                {"running_at_end", r.jobs_running_at_end},
                {"pending_at_end", r.jobs_pending_at_end},
                {"unschedulable", r.jobs_unschedulable},
                {"unschedulable_examples", IssuesJson(r.unschedulable)},
                {"pending_examples", IssuesJson(r.pending_at_end)}}},
      {"tasks_placed", r.tasks_placed},
      {"preemptions", r.preemptions},
      {"preempted_jobs", r.preempted_jobs},
      {"gpu_allocation", {{"mean", r.gpu_alloc_mean}, {"peak", r.gpu_alloc_peak},
                          {"peak_time_s", r.gpu_alloc_peak_time_s},
                          {"timeline_step_s", r.gpu_alloc_timeline_step_s},
                          {"timeline", r.gpu_alloc_timeline}}},
      {"wait_s", DistributionJson(r.wait_s)},
      {"completion_s", DistributionJson(r.completion_s)},
      {"makespan_s", r.makespan_s},
      {"fragmentation", {{"gpu4", r.frag4_mean}, {"gpu8", r.frag8_mean}}},
      {"scheduler", {{"calls", r.scheduler_calls}, {"decisions", r.decisions},
                     {"wall_s", r.scheduler_wall_s},
                     {"decisions_per_s", r.DecisionsPerSecond()},
                     {"placements_per_s", r.PlacementsPerSecond()}}},
      {"sim_wall_s", r.sim_wall_s},
  };
}

std::string Pct(double share) { return absl::StrFormat("%.1f%%", 100 * share); }
std::string Secs(double s) { return absl::StrFormat("%.0f", s); }
std::string Rate(double r) { return absl::StrFormat("%.0f", r); }

using Row = std::pair<std::string, std::function<std::string(const SimReport&)>>;

std::vector<Row> TableRows() {
  return {
      {"queue policy", [](const SimReport& r) { return r.queue_policy; }},
      {"placement", [](const SimReport& r) { return r.placement; }},
      {"jobs (tasks)", [](const SimReport& r) { return absl::StrCat(r.jobs, " (", r.tasks, ")"); }},
      {"tasks rounded up to 1 GPU", [](const SimReport& r) { return absl::StrCat(r.rounded_up_tasks); }},
      {"jobs started", [](const SimReport& r) { return absl::StrCat(r.jobs_started); }},
      {"jobs finished", [](const SimReport& r) { return absl::StrCat(r.jobs_finished); }},
      {"jobs running at end", [](const SimReport& r) { return absl::StrCat(r.jobs_running_at_end); }},
      {"jobs pending at end", [](const SimReport& r) { return absl::StrCat(r.jobs_pending_at_end); }},
      {"jobs unschedulable", [](const SimReport& r) { return absl::StrCat(r.jobs_unschedulable); }},
      {"GPU allocation mean", [](const SimReport& r) { return Pct(r.gpu_alloc_mean); }},
      {"GPU allocation peak", [](const SimReport& r) {
         return absl::StrCat(Pct(r.gpu_alloc_peak), " @", r.gpu_alloc_peak_time_s, "s"); }},
      {"wait mean / p50 / p99 (s)", [](const SimReport& r) {
         return absl::StrCat(Secs(r.wait_s.mean), " / ", Secs(r.wait_s.p50), " / ", Secs(r.wait_s.p99)); }},
      {"completion mean / p50 / p99 (s)", [](const SimReport& r) {
         return absl::StrCat(Secs(r.completion_s.mean), " / ", Secs(r.completion_s.p50), " / ",
                             Secs(r.completion_s.p99)); }},
      {"makespan (s)", [](const SimReport& r) { return absl::StrCat(r.makespan_s); }},
      {"fragmentation 4-GPU", [](const SimReport& r) { return Pct(r.frag4_mean); }},
      {"fragmentation 8-GPU", [](const SimReport& r) { return Pct(r.frag8_mean); }},
      {"preemptions (tasks / jobs)", [](const SimReport& r) {
         return absl::StrCat(r.preemptions, " / ", r.preempted_jobs); }},
      {"tasks placed", [](const SimReport& r) { return absl::StrCat(r.tasks_placed); }},
      {"scheduler calls", [](const SimReport& r) { return absl::StrCat(r.scheduler_calls); }},
      {"decisions / s (wall)", [](const SimReport& r) { return Rate(r.DecisionsPerSecond()); }},
      {"placements / s (wall)", [](const SimReport& r) { return Rate(r.PlacementsPerSecond()); }},
      {"scheduler wall (s)", [](const SimReport& r) { return absl::StrFormat("%.3f", r.scheduler_wall_s); }},
      {"simulation wall (s)", [](const SimReport& r) { return absl::StrFormat("%.3f", r.sim_wall_s); }},
  };
}

void AppendIssues(const SimReport& r, std::string* out) {
  auto list = [&](const char* what, int64_t total, const std::vector<JobIssue>& issues) {
    if (issues.empty()) return;
    absl::StrAppend(out, "\n", r.queue_policy, "/", r.placement, ": ", total, " jobs ", what,
                    total > static_cast<int64_t>(issues.size()) ? ", first ones" : "", ":\n");
    for (const JobIssue& i : issues) absl::StrAppend(out, "  ", i.job, ": ", i.reason, "\n");
  };
  list("unschedulable", r.jobs_unschedulable, r.unschedulable);
  list("pending at end", r.jobs_pending_at_end, r.pending_at_end);
}

}  // namespace

double SimReport::DecisionsPerSecond() const {
  return PerSecond(static_cast<double>(decisions), scheduler_wall_s);
}

double SimReport::PlacementsPerSecond() const {
  return PerSecond(static_cast<double>(tasks_placed), scheduler_wall_s);
}

nlohmann::ordered_json ReportsToJson(const std::vector<SimReport>& reports) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const SimReport& r : reports) out.push_back(ReportJson(r));
  return out;
}

std::string FormatReportTable(const std::vector<SimReport>& reports) {
  std::vector<Row> rows = TableRows();
  std::vector<std::vector<std::string>> cells;
  size_t label_width = 0;
  std::vector<size_t> widths(reports.size(), 0);
  for (const Row& row : rows) {
    label_width = std::max(label_width, row.first.size());
    std::vector<std::string> line;
    for (size_t i = 0; i < reports.size(); ++i) {
      line.push_back(row.second(reports[i]));
      widths[i] = std::max(widths[i], line.back().size());
    }
    cells.push_back(std::move(line));
  }
  std::string out;
  if (!reports.empty()) {
    const SimReport& r = reports.front();
    absl::StrAppend(&out, "nodes ", r.nodes_source, ": ", r.nodes, " nodes, ", r.gpus, " GPUs",
                    r.topology_assumed ? " (topology assumed by GPU count: switches of 2, 2 sockets)" : "",
                    "\ntrace ", r.trace_source, " (", r.trace_format, ")",
                    r.fill ? ", end times ignored (--fill): jobs run until the end" : "", "\n\n");
  }
  for (size_t k = 0; k < rows.size(); ++k) {
    absl::StrAppend(&out, absl::StrFormat("%-*s", static_cast<int>(label_width), rows[k].first));
    for (size_t i = 0; i < reports.size(); ++i) {
      absl::StrAppend(&out, "  ", absl::StrFormat("%*s", static_cast<int>(widths[i]), cells[k][i]));
    }
    absl::StrAppend(&out, "\n");
  }
  for (const SimReport& r : reports) AppendIssues(r, &out);
  return out;
}

}  // namespace trainyard::sim
