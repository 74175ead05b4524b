// `trainyard top JOB`: what each running task of a job uses now — CPU,
// memory against its limit, its GPUs' load and memory — as its agent last
// sampled it (kubectl top's figures, per task), the job's sum below, and a
// flag on a task at 90 % of its memory limit or more. -o json prints the
// server's answer with each task's samples of the last 15 minutes.
#include <algorithm>
#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/states.h"
#include "cli/client.h"
#include "cli/text.h"
#include "cli/verb_common.h"

namespace trainyard::cli {
namespace {

struct TopFlags : Common {
  std::string job;
};

std::string Cores(int64_t milli) { return absl::StrFormat("%.2f", static_cast<double>(milli) / 1000.0); }

// 384Ki, 512Mi, 1.5Gi: binary units, as specs ask for memory.
std::string Bytes(int64_t bytes) {
  constexpr int64_t kMi = 1 << 20, kGi = int64_t{1} << 30;
  if (bytes >= 10 * kGi) return absl::StrFormat("%.0fGi", static_cast<double>(bytes) / kGi);
  if (bytes >= kGi) return absl::StrFormat("%.1fGi", static_cast<double>(bytes) / kGi);
  if (bytes >= kMi) return absl::StrFormat("%.0fMi", static_cast<double>(bytes) / kMi);
  return absl::StrFormat("%dKi", bytes >> 10);
}

std::string Percent(int64_t part, int64_t whole) {
  if (whole <= 0) return "-";
  return absl::StrFormat("%.0f%%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

int Top(const TopFlags& f) {
  std::string address = ServerAddress(f.server);
  auto stub = MakeStub(address);
  v1::JobResourcesRequest req;
  req.set_job(f.job);
  req.set_newest_only(f.output != "json");  // the newest is all a table shows
  v1::JobResourcesResponse resp;
  auto ctx = Context();
  grpc::Status st = stub->JobResources(ctx.get(), req, &resp);
  if (!st.ok()) return ReportError("top", address, st);
  if (f.output == "json") {
    std::cout << ToJson(resp) << "\n";
    return kExitOk;
  }
  Table t({"TASK", "NODE", "STATE", "CPU", "CPU-ASKED", "MEMORY", "LIMIT", "MEM%", "GPU-BUSY", "GPU-MEM", ""});
  int64_t cpu = 0, asked = 0, memory = 0, gpu_busy = 0, gpu_milli = 0, gpu_memory = 0;
  int sampled = 0, near = 0;
  for (const v1::TaskResourcesView& v : resp.tasks()) {
    std::string state = api::TaskStateName(v.state());
    // A task that is not running shows what it asked, and its last sample
    // counts in no sum.
    if (v.samples().empty() || v.state() != v1::TASK_RUNNING) {
      t.Add({Printable(v.task()), Printable(v.node()), state, "-", Cores(v.vcores_milli()), "-",
             v.memory_limit_bytes() > 0 ? Bytes(v.memory_limit_bytes()) : "-", "-", "-", "-", ""});
      continue;
    }
    const v1::TaskResourceSample& s = *v.samples().rbegin();
    ++sampled;
    asked += v.vcores_milli();
    gpu_milli += v.gpu_milli();
    cpu += s.cpu_milli();
    memory += s.memory_bytes();
    gpu_busy += std::max(s.gpu_busy_milli(), 0);
    gpu_memory += s.gpu_memory_bytes();
    if (v.near_memory_limit()) ++near;
    std::string busy = s.gpu_busy_milli() < 0 ? "?" : Cores(s.gpu_busy_milli());  // a GPU that does not tell
    std::string gpus = v.gpu_milli() > 0 ? absl::StrCat(busy, "/", Cores(v.gpu_milli())) : "-";
    t.Add({Printable(v.task()), Printable(v.node()), state, Cores(s.cpu_milli()), Cores(v.vcores_milli()),
           Bytes(s.memory_bytes()), v.memory_limit_bytes() > 0 ? Bytes(v.memory_limit_bytes()) : "-",
           Percent(s.memory_bytes(), v.memory_limit_bytes()), gpus,
           v.gpu_milli() > 0 ? Bytes(s.gpu_memory_bytes()) : "-", v.near_memory_limit() ? "NEAR MEMORY LIMIT" : ""});
  }
  t.Add({"TOTAL", "", "", Cores(cpu), Cores(asked), Bytes(memory), "", "", gpu_milli > 0 ? absl::StrCat(Cores(gpu_busy), "/", Cores(gpu_milli)) : "-",
         gpu_milli > 0 ? Bytes(gpu_memory) : "-", near > 0 ? Count(near, "task") + " near its memory limit" : ""});
  std::cout << t.Render();
  if (sampled == 0) {
    std::cerr << "no samples of a running task of job " << Printable(f.job) << " yet: its agents sample running tasks every "
              << (resp.sample_interval_ms() > 0 ? absl::StrCat(resp.sample_interval_ms() / 1000.0, " s")
                                                : std::string("... never (the server's taskSampleIntervalMs is 0)"))
              << "\n";
  }
  return kExitOk;
}

}  // namespace

void RegisterTopVerb(CLI::App& app, int* exit_code) {
  static TopFlags top;
  CLI::App* c = app.add_subcommand(
      "top", "What a job's running tasks use now: CPU, memory against its limit, GPU load and memory");
  c->add_option("job", top.job, "the job")->required();
  AddCommon(c, &top, /*listing=*/true);
  c->callback([exit_code] { *exit_code = Top(top); });
}

}  // namespace trainyard::cli
