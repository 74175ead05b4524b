// The client verbs: submit, jobs, describe, kill, nodes, queues (logs: logs_verb.cc).
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "api/roles.h"
#include "api/states.h"
#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "cli/client.h"
#include "cli/submit_with_master.h"
#include "cli/table.h"
#include "cli/verbs.h"
#include "core/resources/gpu_set.h"
#include "api/job_spec.h"

namespace trainyard::cli {
namespace {

struct Common {
  std::string server;
  std::string output = "table";
};

void AddCommon(CLI::App* cmd, Common* c, bool listing) {
  cmd->add_option("--server", c->server, "server address host:port (default $TRAINYARD_SERVER or 127.0.0.1:7450)");
  if (listing) cmd->add_option("-o,--output", c->output, "table or json")->check(CLI::IsMember({"table", "json"}));
}

std::string StateName(v1::JobState s) { return api::JobStateName(s); }


std::string PortsText(const google::protobuf::RepeatedPtrField<v1::PortRange>& ports) {
  std::vector<std::string> parts;
  for (const auto& p : ports) parts.push_back(p.begin() == p.end() ? absl::StrCat(p.begin()) : absl::StrCat(p.begin(), "-", p.end()));
  return parts.empty() ? "-" : absl::StrJoin(parts, ",");
}

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

// A listing verb (jobs, nodes, queues): one call to the server, printed as
// JSON with -o json, else as the table `render` makes of it.
template <typename Request, typename Response, typename Render>
int RunListing(const char* verb, const Common& f,
               grpc::Status (v1::Trainyard::Stub::*rpc)(grpc::ClientContext*, const Request&, Response*),
               const Request& req, Render render) {
  std::string address = ServerAddress(f.server);
  auto stub = MakeStub(address);
  Response resp;
  auto ctx = Context();
  grpc::Status st = ((*stub).*rpc)(ctx.get(), req, &resp);
  if (!st.ok()) return ReportError(verb, address, st);
  if (f.output == "json") {
    std::cout << ToJson(resp) << "\n";
  } else {
    std::cout << render(resp).Render();
  }
  return kExitOk;
}

// ---- submit ----
struct SubmitFlags : Common {
  std::string file;
  bool wait = false;
  bool master_in_client = false;
  std::string advertise_host;
};

int WaitForJob(v1::Trainyard::Stub& stub, const std::string& address, const std::string& job) {
  std::string last;
  for (;;) {
    v1::DescribeJobRequest req;
    req.set_job(job);
    v1::JobView v;
    auto ctx = Context();
    grpc::Status st = stub.DescribeJob(ctx.get(), req, &v);
    if (!st.ok()) return ReportError("submit", address, st);
    std::string line = StateName(v.state()) + (v.reason().empty() ? "" : ": " + v.reason());
    if (line != last) {
      std::cout << job << ": " << line << std::endl;
      last = line;
    }
    if (api::IsTerminal(v.state())) return v.state() == v1::JOB_SUCCEEDED ? kExitOk : kExitFailure;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // polling the server
  }
}

// The spec's text: the file, or standard input for "-".
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
  auto stub = MakeStub(address);
  if (f.master_in_client) return SubmitWithMaster(*stub, address, *parsed, f.advertise_host);
  v1::SubmitRequest req;
  req.set_yaml(text);
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
  std::cout << "job " << resp.job() << " submitted" << std::endl;
  return f.wait ? WaitForJob(*stub, address, resp.job()) : kExitOk;
}

// ---- jobs ----
struct JobsFlags : Common {
  bool all = false;
};

int Jobs(JobsFlags& f) {
  v1::ListJobsRequest req;
  req.set_include_finished(f.all);
  return RunListing("jobs", f, &v1::Trainyard::Stub::ListJobs, req, [](const v1::ListJobsResponse& resp) {
    Table t({"NAME", "STATE", "QUEUE", "PRIORITY", "TASKS", "GPUS", "AGE", "REASON"});
    int64_t now = NowMs();
    for (const auto& j : resp.jobs()) {
      // The job master is the server's, not one of the user's tasks.
      int running = 0, tasks = 0;
      for (const auto& task : j.tasks()) {
        if (api::IsJobMasterRole(task.role())) continue;
        ++tasks;
        running += task.state() == v1::TASK_RUNNING;
      }
      std::string prio = v1::PriorityClass_Name(j.priority()).substr(9);
      for (auto& c : prio) c = static_cast<char>(std::tolower(c));
      t.Add({j.name(), StateName(j.state()), j.queue(), prio, absl::StrCat(running, "/", tasks),
             absl::StrCat(j.gpus()), Age(now - j.submit_time_unix_ms()), j.reason()});
    }
    return t;
  });
}

// ---- describe ----
struct DescribeFlags : Common {
  std::string job;
};

std::string ExitText(const v1::TaskView& task) {
  std::string exit = "-";
  if (task.has_last_exit() && (task.last_exit().exit_code() != 0 || task.last_exit().signal() != 0 ||
                               task.last_exit().oom_killed() || !task.last_exit().message().empty())) {
    const auto& e = task.last_exit();
    exit = e.oom_killed() ? "OOM-killed" : e.signal() ? absl::StrCat("signal ", e.signal()) : absl::StrCat("code ", e.exit_code());
    if (!e.message().empty()) exit += " (" + e.message() + ")";
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

void PrintJob(const v1::JobView& j) {
  int64_t now = NowMs();
  std::cout << "Name:       " << j.name() << "\n"
            << "State:      " << StateName(j.state()) << "\n";
  if (!j.reason().empty()) std::cout << "Reason:     " << j.reason() << "\n";
  std::string prio = v1::PriorityClass_Name(j.priority()).substr(9);
  for (auto& c : prio) c = static_cast<char>(std::tolower(c));
  std::cout << "User:       " << j.user() << "\n"
            << "Queue:      " << j.queue() << "\n"
            << "Priority:   " << prio << "\n"
            << "Submitted:  " << Age(now - j.submit_time_unix_ms()) << " ago\n";
  if (std::string master = MasterText(j); !master.empty()) std::cout << "Master:     " << master << "\n";
  Table t({"TASK", "STATE", "NODE", "CPU", "MEMORY", "GPUS", "BITMAP", "PORTS", "RESTARTS", "LAST EXIT"});
  for (const auto& task : j.tasks()) {
    if (api::IsJobMasterRole(task.role())) continue;  // on the Master line
    std::string gpus = task.gpu_mask() ? core::GpuSet(task.gpu_mask()).ToString() : "-";
    std::string exit = ExitText(task);
    t.Add({task.name(), api::TaskStateName(task.state()), task.node().empty() ? "-" : task.node(),
           api::CpuQuantityText(task.vcores_milli()), api::MemoryQuantityText(task.memory_mb()), gpus,
           task.node_gpu_count() ? GpuBitmap(task.gpu_mask(), task.node_gpu_count()) : "-",
           PortsText(task.ports()), absl::StrCat(task.restarts()), exit});
  }
  std::cout << "\nTasks:\n" << t.Render();
  std::cout << "\nEvents:\n";
  for (const auto& e : j.events()) {
    std::cout << absl::StrFormat("  %-6s %-15s %s\n", Age(now - e.time_unix_ms()), e.kind(), e.text());
  }
}

int Describe(DescribeFlags& f) {
  std::string address = ServerAddress(f.server);
  auto stub = MakeStub(address);
  v1::DescribeJobRequest req;
  req.set_job(f.job);
  v1::JobView v;
  auto ctx = Context();
  grpc::Status st = stub->DescribeJob(ctx.get(), req, &v);
  if (!st.ok()) return ReportError("describe", address, st);
  if (f.output == "json") {
    std::cout << ToJson(v) << "\n";
  } else {
    PrintJob(v);
  }
  return kExitOk;
}

// ---- kill ----
struct KillFlags : Common {
  std::string job;
};

int Kill(KillFlags& f) {
  std::string address = ServerAddress(f.server);
  auto stub = MakeStub(address);
  v1::KillJobRequest req;
  req.set_job(f.job);
  v1::KillJobResponse resp;
  auto ctx = Context();
  grpc::Status st = stub->KillJob(ctx.get(), req, &resp);
  if (!st.ok()) return ReportError("kill", address, st);
  std::cout << "job " << f.job << ": " << StateName(resp.state()) << "\n";
  return kExitOk;
}

// ---- nodes ----
int Nodes(Common& f) {
  return RunListing("nodes", f, &v1::Trainyard::Stub::ListNodes, v1::ListNodesRequest(),
                    [](const v1::ListNodesResponse& resp) {
    Table t({"NODE", "STATE", "GPUS (■ used)", "USED", "MEMORY FREE/ALL", "VCORES FREE/ALL", "PORTS USED", "TASKS",
             "LABELS"});
    for (const auto& n : resp.nodes()) {
      const auto& info = n.info();
      int count = info.topology().gpu_count();
      uint64_t all = count >= 64 ? ~0ull : ((1ull << count) - 1);
      uint64_t used = all & ~n.free_gpu_mask();
      std::vector<std::string> labels;
      for (const auto& [k, v] : info.labels()) labels.push_back(k + "=" + v);
      std::sort(labels.begin(), labels.end());
      std::string state = v1::NodeState_Name(info.state()).substr(5);
      t.Add({info.name(), state, GpuBitmap(used, count), used ? core::GpuSet(used).ToString() : "-",
             absl::StrCat(n.free_memory_mb(), "/", info.capacity().memory_mb(), " MB"),
             absl::StrFormat("%.1f/%.1f", n.free_vcores_milli() / 1000.0, info.capacity().vcores_milli() / 1000.0),
             absl::StrCat(n.ports_in_use()), absl::StrCat(n.tasks_size()),
             labels.empty() ? "-" : absl::StrJoin(labels, ",")});
    }
    return t;
  });
}

// ---- queues ----
int Queues(Common& f) {
  return RunListing("queues", f, &v1::Trainyard::Stub::ListQueues, v1::ListQueuesRequest(),
                    [](const v1::ListQueuesResponse& resp) {
    Table t({"QUEUE", "CAPACITY", "MAX", "GPUS USED", "MEMORY USED", "VCORES USED", "RUNNING", "PENDING"});
    for (const auto& q : resp.queues()) {
      t.Add({q.name(), absl::StrFormat("%.0f%%", q.capacity_percent()),
             absl::StrFormat("%.0f%%", q.max_capacity_percent()), absl::StrCat(q.used().gpus(), "/", resp.cluster().gpus()),
             absl::StrCat(q.used().memory_mb(), " MB"), absl::StrFormat("%.1f", q.used().vcores_milli() / 1000.0),
             absl::StrCat(q.running_jobs()), absl::StrCat(q.pending_jobs())});
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
  AddCommon(c, &submit, false);
  c->callback([exit_code] { *exit_code = Submit(submit); });

  static JobsFlags jobs;
  c = app.add_subcommand("jobs", "List jobs");
  c->add_flag("-a,--all", jobs.all, "include finished jobs");
  AddCommon(c, &jobs, true);
  c->callback([exit_code] { *exit_code = Jobs(jobs); });

  static DescribeFlags describe;
  c = app.add_subcommand("describe", "Show a job: tasks, nodes, GPUs, ports, events, pending reason");
  c->add_option("job", describe.job, "job name")->required();
  AddCommon(c, &describe, true);
  c->callback([exit_code] { *exit_code = Describe(describe); });

  static KillFlags kill;
  c = app.add_subcommand("kill", "Kill a job");
  c->add_option("job", kill.job, "job name")->required();
  AddCommon(c, &kill, false);
  c->callback([exit_code] { *exit_code = Kill(kill); });

  RegisterLogs(app, exit_code);

  static Common nodes;
  c = app.add_subcommand("nodes", "List nodes with their GPU bitmaps");
  AddCommon(c, &nodes, true);
  c->callback([exit_code] { *exit_code = Nodes(nodes); });

  static Common queues;
  c = app.add_subcommand("queues", "List queues: capacity, use, pending jobs");
  AddCommon(c, &queues, true);
  c->callback([exit_code] { *exit_code = Queues(queues); });
}

}  // namespace trainyard::cli
