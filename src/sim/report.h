// SimReport: what one simulated run (one trace, one queue policy, one
// placement strategy) measured, and its two renderings: a terminal table
// with one column per run, and JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "sim/stats.h"

namespace trainyard::sim {

// A job that could not run, and why, in words a person can act on.
struct JobIssue {
  std::string job;
  std::string reason;
};

struct SimReport {
  // What was run.
  std::string queue_policy;
  std::string placement;
  std::string nodes_source;
  std::string trace_source;
  std::string trace_format;
  bool topology_assumed = false;
  bool fill = false;  // the trace's end times were ignored
  int64_t nodes = 0;
  int64_t gpus = 0;
  int64_t jobs = 0;
  int64_t tasks = 0;
  int64_t rounded_up_tasks = 0;  // gpu_milli < 1000 rounded up to one GPU

  // What happened to the jobs.
  int64_t jobs_started = 0;
  int64_t jobs_finished = 0;
  int64_t jobs_running_at_end = 0;  // jobs that never end and were placed
  int64_t jobs_pending_at_end = 0;  // could fit some day, never got room
  int64_t jobs_unschedulable = 0;   // can never fit on this cluster
  std::vector<JobIssue> unschedulable;   // the first few, with reasons
  std::vector<JobIssue> pending_at_end;  // the first few, with reasons
  int64_t tasks_placed = 0;              // placements, preempted ones again
  int64_t preemptions = 0;               // victim tasks
  int64_t preempted_jobs = 0;

  // Simulated-time measures (seconds).
  double gpu_alloc_mean = 0;  // allocated / total GPUs, time-weighted
  double gpu_alloc_peak = 0;
  int64_t gpu_alloc_peak_time_s = 0;
  // The allocation ratio over time: the mean of each of (up to) 100 equal
  // spans of the makespan, each gpu_alloc_timeline_step_s long. JSON only.
  std::vector<double> gpu_alloc_timeline;
  int64_t gpu_alloc_timeline_step_s = 0;
  Distribution wait_s;        // first placement - submit, started jobs
  Distribution completion_s;  // finish - submit, finished jobs
  int64_t makespan_s = 0;     // first submit to last event
  // Share of free GPUs that cannot serve a 4-GPU (8-GPU) request as tightly
  // as an idle node of their kind could; time-weighted. Nodes with fewer
  // GPUs than the request do not count.
  double frag4_mean = 0;
  double frag8_mean = 0;

  // Wall-time measures.
  int64_t scheduler_calls = 0;
  int64_t decisions = 0;  // task placements + preemptions + pending reasons
  double scheduler_wall_s = 0;
  double sim_wall_s = 0;
  double DecisionsPerSecond() const;
  double PlacementsPerSecond() const;
};

// One JSON object per report, in an array.
nlohmann::ordered_json ReportsToJson(const std::vector<SimReport>& reports);

// A table with one row per measure and one column per report, followed by
// the unschedulable and pending jobs (first few) of each report.
std::string FormatReportTable(const std::vector<SimReport>& reports);

}  // namespace trainyard::sim
