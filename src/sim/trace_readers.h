// Readers of the simulator's input files: node lists (the Alibaba openb
// `sn,cpu_milli,memory_mib,gpu,model` format, or Trainyard's with optional
// rack and topology columns) and task traces (Alibaba openb pod lists, or
// Trainyard's job/role CSV). Columns are found by header name. Every error
// names the file, line and field, and says what a valid value looks like.
// The formats are documented in docs/sim.md.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "sim/csv_reader.h"
#include "sim/trace.h"

namespace trainyard::sim {

// The most GPUs one task of a trace may ask for.
constexpr int64_t kMaxGpusPerTask = 64;

// Node list columns: `sn` or `name`; `cpu_milli`; `memory_mib`; `gpu` or
// `gpus`; optional `model` or `gpu_model`, `rack`, `topology`. Errors: a
// missing column, a negative size, more than 64 GPUs, a duplicate name, an
// empty list.
absl::StatusOr<NodeList> ParseNodeList(const CsvTable& table);
absl::StatusOr<NodeList> ReadNodeList(const std::string& path);

// Alibaba openb pod list: `name,cpu_milli,memory_mib,num_gpu,gpu_milli` and
// optionally `gpu_spec` (acceptable models separated by '|'),
// `creation_time`, `deletion_time`, `scheduled_time` (seconds). Each pod is a
// one-task job. gpu_milli < 1000 is rounded up to one whole GPU and counted.
// Without creation_time, pod i (0-based, file order) arrives at second i;
// without deletion_time it runs until the end of the simulation. The run
// time is deletion_time minus scheduled_time (creation_time when the pod was
// never scheduled). Errors: missing columns, negative or non-integer values,
// num_gpu above 64, gpu_milli above 1000 or given with num_gpu 0,
// deletion before creation.
absl::StatusOr<Trace> ParseAlibabaPods(const CsvTable& table);

// Trainyard job trace, one row per role of a job:
// `job,submit_time,duration,role,count,gpus,cpu_milli,memory_mib` and
// optionally `queue,user,priority,gpu_model,gpu_milli`. Rows with the same
// job name form one gang; their job-level fields (submit_time, duration,
// queue, user, priority, gpu_model) must agree. An empty duration means the
// job runs until the end. Errors name the line and field.
absl::StatusOr<Trace> ParseTrainyardTrace(const CsvTable& table);

// Picks the format by the header (`num_gpu` → Alibaba, `job` → Trainyard)
// and parses. The error for an unknown header lists both formats' columns.
absl::StatusOr<Trace> ParseTrace(const CsvTable& table);
absl::StatusOr<Trace> ReadTrace(const std::string& path);

}  // namespace trainyard::sim
