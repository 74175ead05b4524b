// The client verbs: submit, jobs, describe, kill, delete, queues (logs:
// logs_verb.cc; the node verbs: node_verbs.cc).
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "api/job_array.h"
#include "api/restart_budgets.h"
#include "api/roles.h"
#include "api/states.h"
#include "api/task_limits.h"
#include "api/time_limits.h"
#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "cli/client.h"
#include "cli/failover.h"
#include "cli/submit_with_master.h"
#include "cli/table.h"
#include "cli/text.h"
#include "cli/verb_common.h"
#include "cli/verbs.h"
#include "cli/watch.h"
#include "core/resources/gpu_set.h"
#include "core/resources/resource.h"
#include "api/job_spec.h"

namespace trainyard::cli {

// The spec's text: the file, or standard input for "-" (verb_common.h).
bool ReadSpec(const std::string& file, std::string* text) {
  std::stringstream buffer;
  if (file == "-") {
    buffer << std::cin.rdbuf();
    *text = buffer.str();
    return !std::cin.bad();
  }
  std::ifstream in(file);
  if (!in) return false;
  buffer << in.rdbuf();
  *text = buffer.str();
  return true;
}

namespace {

std::string StateName(v1::JobState s) { return api::JobStateName(s); }


std::string PortsText(const google::protobuf::RepeatedPtrField<v1::PortRange>& ports) {
  std::vector<std::string> parts;
  for (const auto& p : ports) parts.push_back(p.begin() == p.end() ? absl::StrCat(p.begin()) : absl::StrCat(p.begin(), "-", p.end()));
  return parts.empty() ? "-" : absl::StrJoin(parts, ",");
}

// ---- submit ----
struct SubmitFlags : Common {
  std::string file;
  bool wait = false;
  bool master_in_client = false;
  std::string advertise_host;
  bool hold = false;
  std::string after_ok, after_any;  // JOB[,JOB...]
  std::string array;
};

// Prints each new state (and reason) of `job` until it ends; the exit code
// says whether it SUCCEEDED. Follows the server's WatchJob stream; polls
// describe when the server has no watch for it (an older server, or its
// watches are all taken). A stream or call that found no server is made
// again at the server that answers next (a failover, a restart), for up
// to a minute (cli/failover.h).
int WaitForJob(const std::string& address, std::shared_ptr<grpc::Channel> channel, const std::string& job) {
  std::string last;
  auto show = [&job, &last](const v1::JobView& v) {
    std::string line = StateName(v.state()) + (v.reason().empty() ? "" : ": " + v.reason());
    if (line != last) {
      std::cout << job << ": " << line << std::endl;
      last = line;
    }
    return api::IsTerminal(v.state());
  };
  auto outcome = [](const v1::JobView& v) { return v.state() == v1::JOB_SUCCEEDED ? kExitOk : kExitFailure; };
  Failover failover("submit", address, std::move(channel));  // the submission's connection
  failover.Answered();  // the submission was
  for (;;) {
    v1::WatchJobRequest req;
    req.set_job(job);
    // A watch a minute long, then another: a server host that died or a
    // network that parted ends the wait within a minute (DEADLINE_EXCEEDED,
    // then the next watch or describe fails), rather than never.
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    Authorize(&ctx);
    std::unique_ptr<grpc::ClientReader<v1::JobView>> reader = failover.stub().WatchJob(&ctx, req);
    v1::JobView v;
    bool read = false;
    while (reader->Read(&v)) {
      read = true;
      failover.Answered();
      if (show(v)) {
        ctx.TryCancel();
        reader->Finish();
        return outcome(v);
      }
    }
    grpc::Status st = reader->Finish();
    // Ended before the job did (its minute passed): watch again.
    if (st.ok() || (read && st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)) continue;
    // No watch there (an older server, or its watches are all taken):
    // describe says which, and polls.
    if (st.error_code() == grpc::StatusCode::UNIMPLEMENTED || st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      break;
    }
    if (failover.Retry(st)) continue;
    return ReportError("submit", address, st);
  }
  int result = kExitFailure;
  int rc = WatchLoop("submit", address, [&](v1::Trainyard::Stub& stub, bool* done) {
    v1::DescribeJobRequest req;
    req.set_job(job);
    v1::JobView v;
    auto ctx = Context();
    grpc::Status st = stub.DescribeJob(ctx.get(), req, &v);
    if (!st.ok()) return st;
    *done = show(v);
    if (*done) result = outcome(v);
    return grpc::Status::OK;
  }, absl::Milliseconds(200));  // polling the server
  return rc == kExitOk ? result : rc;
}

int Submit(SubmitFlags& f) {
  std::string text;
  const std::string source = f.file == "-" ? "standard input" : f.file;
  if (!ReadSpec(f.file, &text)) {
    std::cerr << "trainyard submit: cannot read " << source << "\n";
    return kExitUsage;
  }
  // Check the spec here first so mistakes are reported without a server:
  // every problem at once, but the allocation limits, which only the server
  // knows.
  auto parsed = api::LoadJobSpec(text, api::UnboundedLimits());
  if (!parsed.ok()) {
    std::cerr << "trainyard submit: " << source << ":\n" << parsed.status().message() << "\n";
    return kExitUsage;
  }
  std::string address = ServerAddress(f.server);
  std::shared_ptr<grpc::Channel> channel = MakeChannel(address);
  auto stub = v1::Trainyard::NewStub(channel);
  if (!f.array.empty()) {
    if (absl::StatusOr<api::ArrayRange> range = api::ParseArrayRange(f.array); !range.ok()) {
      std::cerr << "trainyard submit: --" << range.status().message() << "\n";
      return kExitUsage;
    }
  }
  const bool array = !f.array.empty() || !parsed->array().empty();
  if (f.wait && array) {
    std::cerr << "trainyard submit: --wait follows one job; not with an array (--array or the spec's array): "
                 "trainyard jobs shows its elements\n";
    return kExitUsage;
  }
  const v1::JobDependencies& deps = parsed->dependencies();
  bool gated = f.hold || !f.after_ok.empty() || !f.after_any.empty() || array || parsed->hold() ||
               deps.after_ok_size() > 0 || deps.after_any_size() > 0;
  if (f.master_in_client && gated) {
    std::cerr << "trainyard submit: --jobmaster-in-client runs one job now; not with --hold, --after-ok, "
                 "--after-any or --array, nor a spec with hold, dependencies or array\n";
    return kExitUsage;
  }
  if (f.master_in_client && parsed->has_jobmaster() && !parsed->jobmaster()) {
    std::cerr << "trainyard submit: --jobmaster-in-client runs the job's master here, but " << source
              << " says jobmaster: false: drop one of the two\n";
    return kExitUsage;
  }
  if (f.master_in_client && api::IsElastic(*parsed)) {
    std::cerr << "trainyard submit: --jobmaster-in-client: " << source
              << " is elastic (minCount): its master must be a task of the job, started at each size with "
                 "the workers of that size (docs/elastic.md); submit it without --jobmaster-in-client\n";
    return kExitUsage;
  }
  if (f.master_in_client) return SubmitWithMaster(*stub, address, *parsed, f.advertise_host);
  v1::SubmitRequest req;
  req.set_yaml(text);
  req.set_hold(f.hold);
  for (absl::string_view j : absl::StrSplit(f.after_ok, ',', absl::SkipEmpty())) req.add_after_ok(std::string(j));
  for (absl::string_view j : absl::StrSplit(f.after_any, ',', absl::SkipEmpty())) req.add_after_any(std::string(j));
  req.set_array(f.array);
  v1::SubmitResponse resp;
  auto ctx = Context();
  grpc::Status st = stub->Submit(ctx.get(), req, &resp);
  if (st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
    // gRPC's own refusal of a message above the server's receive limit.
    std::cerr << "trainyard submit: " << source << ": " << text.size()
              << " bytes is far above what the server takes (" << st.error_message() << ")\n";
    return kExitUsage;
  }
  if (!st.ok()) return ReportError("submit", address, st);
  if (resp.array_jobs_size() > 0) {
    std::cout << "array " << resp.job() << " submitted: " << resp.array_jobs_size() << " jobs ("
              << resp.array_jobs(0) << (resp.array_jobs_size() > 1 ? " ... " + resp.array_jobs(resp.array_jobs_size() - 1) : "")
              << ")" << std::endl;
    return kExitOk;  // --wait with an array was refused above
  }
  std::cout << "job " << resp.job() << " submitted" << (f.hold ? " (held: trainyard release " + resp.job() + ")" : "")
            << std::endl;
  return f.wait ? WaitForJob(address, std::move(channel), resp.job()) : kExitOk;
}

// ---- jobs ----
struct JobsFlags : Common {
  bool all = false;
  bool watch = false;
  std::string user;
  std::string queue;
  std::vector<std::string> states;
};


Table JobsTable(const v1::ListJobsResponse& resp) {
  Table t({"NAME", "STATE", "QUEUE", "USER", "PRIORITY", "TASKS", "GPUS", "AGE", "REASON"});
  int64_t now = NowMs();
  for (const auto& j : resp.jobs()) {
    // The server counts the tasks (the job master's aside).
    int running = j.running_task_count(), tasks = j.task_count();
    std::string prio = v1::PriorityClass_Name(j.priority()).substr(9);
    for (auto& c : prio) c = static_cast<char>(std::tolower(c));
    t.Add({j.name(), StateName(j.state()), j.queue(), Printable(j.user()), prio, absl::StrCat(running, "/", tasks),
           absl::StrCat(j.gpus()), Age(now - j.submit_time_unix_ms()), Printable(j.reason())});
  }
  return t;
}

// Every page of the list, one after another, into one answer.
grpc::Status ListEveryJob(v1::Trainyard::Stub& stub, v1::ListJobsRequest req, v1::ListJobsResponse* out) {
  out->Clear();
  do {
    v1::ListJobsResponse page;
    auto ctx = Context();
    grpc::Status st = stub.ListJobs(ctx.get(), req, &page);
    if (!st.ok()) return st;
    for (auto& j : *page.mutable_jobs()) *out->add_jobs() = std::move(j);
    req.set_page_token(page.next_page_token());
  } while (!req.page_token().empty());
  return grpc::Status::OK;
}

// jobs -w: the list again whenever it changed.
int WatchJobs(const JobsFlags& f, const v1::ListJobsRequest& req) {
  std::string address = ServerAddress(f.server);
  std::string last;
  bool first = true;
  return WatchLoop("jobs", address, [&](v1::Trainyard::Stub& stub, bool*) {
    v1::ListJobsResponse resp;
    grpc::Status st = ListEveryJob(stub, req, &resp);
    if (!st.ok()) return st;
    std::string now = resp.SerializeAsString();
    // An empty list serializes to "": the first screen is printed whatever
    // it holds.
    if (!first && now == last) return grpc::Status::OK;  // another job's change, or none that shows
    last = std::move(now);
    PrintScreen(f.output == "json" ? ToJson(resp) + "\n" : JobsTable(resp).Render(), first);
    first = false;
    return grpc::Status::OK;
  });
}

int Jobs(JobsFlags& f) {
  v1::ListJobsRequest req;
  req.set_include_finished(f.all);
  req.set_user(f.user);
  req.set_queue(f.queue);
  for (const std::string& given : f.states) {
    for (absl::string_view part : absl::StrSplit(given, ',', absl::SkipEmpty())) {
      std::optional<v1::JobState> state = api::ParseJobState(part);
      if (!state) {
        std::vector<std::string> names;
        for (v1::JobState s : api::JobStates()) names.push_back(api::JobStateName(s));
        std::cerr << "trainyard jobs: --state: '" << part << "' is not one of " << absl::StrJoin(names, ", ") << "\n";
        return kExitUsage;
      }
      req.add_states(*state);
    }
  }
  // The table needs only the counts: pages of summaries are small. The
  // JSON form keeps each job's tasks.
  if (f.output != "json") {
    req.set_without_tasks(true);
    req.set_page_size(5000);
  }
  if (f.watch) return WatchJobs(f, req);
  std::string address = ServerAddress(f.server);
  auto stub = MakeStub(address);
  v1::ListJobsResponse resp;
  grpc::Status st = ListEveryJob(*stub, req, &resp);
  if (!st.ok()) return ReportError("jobs", address, st);
  std::cout << (f.output == "json" ? ToJson(resp) + "\n" : JobsTable(resp).Render());
  return kExitOk;
}

// ---- describe ----
struct DescribeFlags : Common {
  std::string job;
  bool watch = false;
};

std::string ExitText(const v1::TaskView& task) {
  std::string exit = "-";
  if (task.has_last_exit() && (task.last_exit().exit_code() != 0 || task.last_exit().signal() != 0 ||
                               task.last_exit().oom_killed() || !task.last_exit().message().empty())) {
    const auto& e = task.last_exit();
    exit = e.oom_killed() ? "OOM-killed" : e.signal() ? absl::StrCat("signal ", e.signal()) : absl::StrCat("code ", e.exit_code());
    if (!e.message().empty()) exit += " (" + Printable(e.message()) + ")";
  }
  return exit;
}

// The job master, apart from the job's tasks: where it listens, and how it
// stands (a master stopped at its job's end is shown as such, not as a kill).
std::string MasterText(const v1::JobView& j) {
  for (const auto& task : j.tasks()) {
    if (!api::IsJobMasterRole(task.role())) continue;
    std::string where = j.job_master().empty() ? "not placed" : j.job_master() + " on " + task.node();
    std::string state = api::TaskStateName(task.state());
    if (task.state() == v1::TASK_SUCCEEDED && task.last_exit().message() == "stopped with the job") {
      state = "stopped with the job";
    } else if (api::IsTerminal(task.state()) && ExitText(task) != "-") {
      state += ", " + ExitText(task);
    }
    if (task.restarts() > 0) absl::StrAppend(&state, ", ", task.restarts(), task.restarts() == 1 ? " restart" : " restarts");
    return where + " (" + state + ")";
  }
  if (!j.job_master().empty()) return j.job_master() + " (in the submitting client)";
  return "";
}

// Each task's limits as its node enforces them (its agent's report), the
// job master's too: a node without writable cgroups says its limits are
// not enforced and why.
void PrintLimits(const v1::JobView& j, std::ostream& os) {
  std::string lines;
  for (const auto& task : j.tasks()) {
    if (!task.has_limits()) continue;
    // The master is shown apart (the Master line), not as one of the tasks.
    std::string who = api::IsJobMasterRole(task.role()) ? "master" : task.name();
    absl::StrAppend(&lines, "  ", who, ": ", Printable(api::EnforcedLimitsText(task.limits())), "\n");
  }
  if (!lines.empty()) os << "\nLimits (as each task's node enforces them):\n" << lines;
}

// Each task's ended attempts with their class and exit, and the restarts
// its budgets have left per class.
void PrintAttempts(const v1::JobView& j, std::ostream& os) {
  Table t({"TASK", "ATTEMPT", "CLASS", "EXIT", "NODE", "THEN"});
  std::string budgets;
  bool any = false;
  for (const auto& task : j.tasks()) {
    // The job master is shown apart (the Master line), with the job's life.
    if (api::IsJobMasterRole(task.role())) continue;
    for (const v1::AttemptEnd& a : task.attempts()) {
      any = true;
      std::string exit = a.signal() ? absl::StrCat("signal ", a.signal()) : absl::StrCat("code ", a.exit_code());
      t.Add({task.name(), absl::StrCat(a.attempt()), api::AttemptClassName(a.attempt_class()), exit,
             a.node().empty() ? "-" : a.node(), a.restarted() ? "restarted" : "ended"});
    }
    if (task.budgets().empty()) continue;
    std::vector<std::string> parts;
    for (const v1::RestartBudgetView& b : task.budgets()) parts.push_back(api::BudgetText(b));
    absl::StrAppend(&budgets, "  ", task.name(), ": ", absl::StrJoin(parts, ", "), "\n");
  }
  if (any) os << "\nAttempts:\n" << t.Render();
  if (!budgets.empty()) os << "\nRestart budgets:\n" << budgets;
}

void PrintJob(const v1::JobView& j, std::ostream& os) {
  int64_t now = NowMs();
  os << "Name:       " << j.name() << "\n"
            << "State:      " << StateName(j.state()) << "\n";
  if (!j.reason().empty()) os << "Reason:     " << Printable(j.reason()) << "\n";
  std::string prio = v1::PriorityClass_Name(j.priority()).substr(9);
  for (auto& c : prio) c = static_cast<char>(std::tolower(c));
  os << "User:       " << Printable(j.user()) << "\n"
            << "Queue:      " << j.queue() << "\n"
            << "Priority:   " << prio << "\n"
            << "Submitted:  " << TimeText(j.submit_time_unix_ms()) << " (" << Age(now - j.submit_time_unix_ms())
            << " ago)\n"
            << "Started:    " << TimeText(j.start_time_unix_ms()) << "\n"
            << "Ended:      " << TimeText(j.end_time_unix_ms()) << "\n"
            << "Elapsed:    " << ElapsedText(j.start_time_unix_ms(), j.end_time_unix_ms(), now)
            << (j.start_time_unix_ms() > 0 && j.end_time_unix_ms() == 0 ? " (running)" : "") << "\n"
            << "Time limit: " << api::TimeLimitLine(j, now) << "\n";
  if (std::string master = MasterText(j); !master.empty()) os << "Master:     " << Printable(master) << "\n";
  if (!j.array_job().empty()) os << "Array:      " << j.array_job() << " (index " << j.array_index() << ")\n";
  if (j.held()) os << "Held:       yes (trainyard release " << j.name() << ")\n";
  if (j.checkpoint_order().id() > 0) {
    int64_t left_ms = std::max<int64_t>(0, j.checkpoint_order().deadline_unix_ms() - now);
    os << "Checkpoint: ordered (" << Printable(j.checkpoint_order().reason()) << "); tasks stop once saved, at the "
       << "latest " << TimeText(j.checkpoint_order().deadline_unix_ms()) << " (in " << Age(left_ms) << ")\n";
  }
  if (j.has_resume_step()) os << "Resumes at: step " << j.resume_step() << " (its last coordinated checkpoint)\n";
  if (j.membership_epoch() > 0) {
    int placed = 0, all = 0;  // its master aside
    for (const auto& task : j.tasks()) {
      if (api::IsJobMasterRole(task.role())) continue;
      ++all;
      placed += task.node().empty() ? 0 : 1;
    }
    os << "Elastic:    membership epoch " << j.membership_epoch() << ", " << placed << " of " << all
       << " tasks placed (docs/elastic.md)\n";
  }
  if (!j.after_ok().empty()) os << "After ok:   " << absl::StrJoin(j.after_ok(), ", ") << "\n";
  if (!j.after_any().empty()) os << "After any:  " << absl::StrJoin(j.after_any(), ", ") << "\n";
  if (!j.checkpoint_dir().empty()) os << "Checkpoints: " << Printable(j.checkpoint_dir()) << "\n";
  for (const auto& task : j.tasks()) {
    if (task.service()) os << "Service:    " << task.name() << " (`trainyard url " << j.name() << " " << task.role()
                           << "/" << task.index() << "` prints its address)\n";
  }
  Table t({"TASK", "STATE", "NODE", "CPU", "MEMORY", "GPUS", "BITMAP", "PORTS", "RESTARTS", "LAST EXIT"});
  for (const auto& task : j.tasks()) {
    if (api::IsJobMasterRole(task.role())) continue;  // on the Master line
    std::string gpus = task.gpu_mask() ? core::GpuSet(task.gpu_mask()).ToString() : "-";
    if (task.gpu_milli() > 0) {
      absl::StrAppend(&gpus, " (", core::FormatVcores(task.gpu_milli()), " share",
                      task.gpu_memory_mb() > 0 ? absl::StrCat(", ", api::MemoryQuantityText(task.gpu_memory_mb())) : "",
                      ")");
    }
    std::string exit = ExitText(task);
    t.Add({task.name(), api::TaskStateName(task.state()), task.node().empty() ? "-" : task.node(),
           api::CpuQuantityText(task.vcores_milli()), api::MemoryQuantityText(task.memory_mb()), gpus,
           task.node_gpu_count() ? GpuBitmap(task.gpu_mask(), task.node_gpu_count()) : "-",
           PortsText(task.ports()), absl::StrCat(task.restarts()), exit});
  }
  os << "\nTasks:\n" << t.Render();
  PrintLimits(j, os);
  PrintAttempts(j, os);
  os << "\nEvents:\n";
  for (const auto& e : j.events()) {
    os << absl::StrFormat("  %-6s %-15s %s\n", Age(now - e.time_unix_ms()), e.kind(), Printable(e.text()));
  }
}

std::string DescribeText(const DescribeFlags& f, const v1::JobView& v) {
  if (f.output == "json") return ToJson(v) + "\n";
  std::ostringstream os;
  PrintJob(v, os);
  return os.str();
}

// describe -w: the job again whenever its view changed, until it ends.
int WatchDescribe(const DescribeFlags& f, const std::string& address) {
  v1::DescribeJobRequest req;
  req.set_job(f.job);
  std::string last;
  bool first = true;
  return WatchLoop("describe", address, [&](v1::Trainyard::Stub& stub, bool* done) {
    v1::JobView v;
    auto ctx = Context();
    grpc::Status st = stub.DescribeJob(ctx.get(), req, &v);
    if (!st.ok()) return st;
    *done = api::IsTerminal(v.state());
    std::string now = v.SerializeAsString();
    if (!first && now == last) return grpc::Status::OK;
    last = std::move(now);
    PrintScreen(DescribeText(f, v), first);
    first = false;
    return grpc::Status::OK;
  });
}

int Describe(DescribeFlags& f) {
  std::string address = ServerAddress(f.server);
  if (f.watch) return WatchDescribe(f, address);
  auto stub = MakeStub(address);
  v1::DescribeJobRequest req;
  req.set_job(f.job);
  v1::JobView v;
  auto ctx = Context();
  grpc::Status st = stub->DescribeJob(ctx.get(), req, &v);
  if (!st.ok()) return ReportError("describe", address, st);
  std::cout << DescribeText(f, v);
  return kExitOk;
}

// ---- kill, delete ----
struct JobsArgFlags : Common {
  std::vector<std::string> jobs;
};

// Runs `one` for each job named; the exit code is the first failure's (each
// failure is reported as it comes), else 0.
template <typename One>
int ForEachJob(const JobsArgFlags& f, One one) {
  std::string address = ServerAddress(f.server);
  auto stub = MakeStub(address);
  int rc = kExitOk;
  for (const std::string& job : f.jobs) {
    int r = one(*stub, address, job);
    if (rc == kExitOk) rc = r;
    if (r == kExitUnavailable) break;  // no server: the others would fail alike
  }
  return rc;
}

int Kill(JobsArgFlags& f) {
  return ForEachJob(f, [](v1::Trainyard::Stub& stub, const std::string& address, const std::string& job) {
    v1::KillJobRequest req;
    req.set_job(job);
    v1::KillJobResponse resp;
    auto ctx = Context();
    grpc::Status st = stub.KillJob(ctx.get(), req, &resp);
    if (!st.ok()) return ReportError("kill", address, st);
    std::cout << "job " << job << ": " << StateName(resp.state()) << "\n";
    return kExitOk;
  });
}

int Release(JobsArgFlags& f) {
  return ForEachJob(f, [](v1::Trainyard::Stub& stub, const std::string& address, const std::string& job) {
    v1::ReleaseJobRequest req;
    req.set_job(job);
    v1::ReleaseJobResponse resp;
    auto ctx = Context();
    grpc::Status st = stub.ReleaseJob(ctx.get(), req, &resp);
    if (!st.ok()) return ReportError("release", address, st);
    for (const std::string& r : resp.released()) std::cout << "job " << r << " released\n";
    return kExitOk;
  });
}

int Delete(JobsArgFlags& f) {
  return ForEachJob(f, [](v1::Trainyard::Stub& stub, const std::string& address, const std::string& job) {
    v1::DeleteJobRequest req;
    req.set_job(job);
    v1::DeleteJobResponse resp;
    auto ctx = Context();
    grpc::Status st = stub.DeleteJob(ctx.get(), req, &resp);
    if (!st.ok()) return ReportError("delete", address, st);
    std::cout << "job " << job << " deleted (its history is kept in the store as " << resp.kept_as()
              << "); the name is free\n";
    return kExitOk;
  });
}

// ---- queues ----
// GPUS USED counts a share as its fraction (used.gpu_milli: 2.25 for two
// whole GPUs and a 0.25 share), as the REST view and /metrics do. A server
// older than gpu_milli leaves it 0: its whole used.gpus are shown then.
int64_t GpuMilliUsed(const v1::Resource& used) {
  return used.gpu_milli() == 0 && used.gpus() > 0 ? int64_t{1000} * used.gpus() : used.gpu_milli();
}

int Queues(Common& f) {
  return RunListing("queues", f, &v1::Trainyard::Stub::ListQueues, v1::ListQueuesRequest(),
                    [](const v1::ListQueuesResponse& resp) {
    Table t({"QUEUE", "CAPACITY", "MAX", "GPUS USED", "MEMORY USED", "VCORES USED", "RUNNING", "PENDING",
             "MAX TIME", "DEFAULT TIME"});
    auto time = [](int64_t ms) { return ms > 0 ? api::TimeLimitText(ms) : std::string("-"); };
    for (const auto& q : resp.queues()) {
      t.Add({q.name(), absl::StrFormat("%.0f%%", q.capacity_percent()),
             absl::StrFormat("%.0f%%", q.max_capacity_percent()), absl::StrCat(core::FormatVcores(GpuMilliUsed(q.used())), "/", resp.cluster().gpus()),
             absl::StrCat(q.used().memory_mb(), " MB"), absl::StrFormat("%.1f", q.used().vcores_milli() / 1000.0),
             absl::StrCat(q.running_jobs()), absl::StrCat(q.pending_jobs()), time(q.max_time_ms()),
             time(q.default_time_ms())});
    }
    return t;
  });
}

}  // namespace

void RegisterClientVerbs(CLI::App& app, int* exit_code) {
  static SubmitFlags submit;
  auto* c = app.add_subcommand("submit", "Submit a job spec (YAML)");
  c->add_option("file", submit.file, "job spec file, or - for standard input")->required();
  c->add_flag("--wait", submit.wait, "follow the job to its end; exit 0 only if it SUCCEEDED");
  c->add_flag("--jobmaster-in-client", submit.master_in_client,
              "run the job's master in this client (which stays attached until the job ends)");
  c->add_option("--advertise-host", submit.advertise_host,
                "address tasks reach this client's job master on (default: 127.0.0.1 for a local server)");
  c->add_flag("--hold", submit.hold, "accept the job but place it only after `trainyard release JOB`");
  // Strings, not lists: a list option would take the spec file as one more job.
  c->add_option("--after-ok", submit.after_ok,
                "JOB[,JOB]: start only after these jobs (or arrays) SUCCEEDED; fail if one does not");
  c->add_option("--after-any", submit.after_any, "JOB[,JOB]: start only after these jobs (or arrays) ended, however they ended");
  c->add_option("--array", submit.array,
                "submit one job per index, named NAME-INDEX: 0-99, 1,3,5-7, 0-15:4; %N runs at most N at once");
  AddCommon(c, &submit, false);
  c->callback([exit_code] { *exit_code = Submit(submit); });

  static JobsFlags jobs;
  c = app.add_subcommand("jobs", "List jobs");
  c->add_flag("-a,--all", jobs.all, "include finished jobs");
  c->add_flag("-w,--watch", jobs.watch, "print the list again whenever it changes, until Ctrl-C");
  c->add_option("--user", jobs.user, "only this user's jobs");
  c->add_option("--queue", jobs.queue, "only the jobs of this queue");
  c->add_option("--state", jobs.states, "only jobs in these states (e.g. running,queued; a finished state implies -a)")
      ->delimiter(',');
  AddCommon(c, &jobs, true);
  c->callback([exit_code] { *exit_code = Jobs(jobs); });

  static DescribeFlags describe;
  c = app.add_subcommand("describe", "Show a job: tasks, nodes, GPUs, ports, events, pending reason");
  c->add_option("job", describe.job, "job name")->required();
  c->add_flag("-w,--watch", describe.watch, "print the job again whenever it changes, until it ends (or Ctrl-C)");
  AddCommon(c, &describe, true);
  c->callback([exit_code] { *exit_code = Describe(describe); });

  static JobsArgFlags kill;
  c = app.add_subcommand("kill", "Kill jobs");
  c->add_option("jobs", kill.jobs, "job names")->required();
  AddCommon(c, &kill, false);
  c->callback([exit_code] { *exit_code = Kill(kill); });

  static JobsArgFlags release;
  c = app.add_subcommand("release", "Release held jobs (submit --hold) so they may be placed; an array's name releases all of it");
  c->add_option("jobs", release.jobs, "job or array names")->required();
  AddCommon(c, &release, false);
  c->callback([exit_code] { *exit_code = Release(release); });

  RegisterLogs(app, exit_code);
  RegisterExecVerbs(app, exit_code);
  RegisterServiceVerbs(app, exit_code);

  static JobsArgFlags del;
  c = app.add_subcommand("delete", "Delete finished jobs: their names are free again; history stays in the store");
  c->add_option("jobs", del.jobs, "job names")->required();
  AddCommon(c, &del, false);
  c->callback([exit_code] { *exit_code = Delete(del); });

  RegisterNodeVerbs(app, exit_code);
  RegisterTokenVerbs(app, exit_code);
  RegisterLoginVerb(app, exit_code);
  RegisterAccountingVerbs(app, exit_code);
  RegisterTopVerb(app, exit_code);
  RegisterScheduleVerbs(app, exit_code);

  static Common queues;
  c = app.add_subcommand("queues", "List queues: capacity, use, pending jobs");
  AddCommon(c, &queues, true);
  c->callback([exit_code] { *exit_code = Queues(queues); });
}

}  // namespace trainyard::cli
