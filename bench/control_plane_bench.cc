// Control-plane benchmarks (issue 4 targets), each against a real
// `trainyard server` child process (fsync on, no job masters) and simulated
// agents in this process, each with its own gRPC channel and AgentChannel
// stream (bench/control_plane_fleet.h):
//   latency    submit-to-RUNNING of one-task jobs on 2 nodes x 8 GPUs, one job
//              at a time: from the Submit call until DescribeJob shows
//              JOB_RUNNING (the agent answers each launch with RUNNING at
//              once). Target p50 < 50 ms.
//   up         the same on a real `trainyard up` cluster (server + 2 agents
//              as processes; tasks are real `sleep` processes).
//   sustained  1,000 agents; Submit calls offered at 2,000/s (the target), then
//              back to back (the most the server takes), then back to back
//              with the server's group commit off (--no-group-commit); jobs
//              acknowledged (Submit OK = durable) and placed (launch received
//              by an agent) per second, and the server process's CPU
//              (utime+stime from /proc/PID/stat). Targets >= 2,000 jobs/s, <= 1 core.
//              With --http the server also serves HTTP, and a client here
//              scrapes /metrics and reads /api/v1/nodes every second during
//              the window (a Prometheus and a dashboard): the same figures
//              with the HTTP API in use. --dashboards=N adds N dashboard tabs
//              (bench/dashboard_clients.h: a watch stream each, refreshing
//              the overview or the nodes page on its events, paced as the
//              pages pace it). With --secure security is on as
//              a cluster runs it (issue 13): the server with --tls-dir and
//              token auth (not --no-auth), each agent with its node's
//              certificate, the client over TLS verifying the cluster CA and
//              sending a user's bearer token; the per-user limits are set far
//              above the load so they never refuse a Submit.
//              --store=etcd keeps the state in etcd (--etcd-members=N
//              members, default 3, on loopback; TLS to etcd with a client
//              certificate; --etcd-max-txn-ops=N raises etcd's limit on
//              keys per transaction, for the members and the server) and
//              prints the members' CPU too; --store=both
//              runs each case on SQLite, then on etcd (issue 33's target:
//              etcd >= 2,000 acknowledged/s at <= 1 core, beside SQLite).
//   heartbeat  1,000 agents heartbeating every second: the server's CPU as a
//              share of one core. Target < 10%. With --tls the server serves
//              TLS (--tls-dir) and each agent's channel presents its node's
//              certificate (made here, signed by a CA made for the run).
//              Agents send delta heartbeats as real ones do to a server
//              that takes them; --full-heartbeats sends every beat whole (as
//              before deltas: the baseline against an older server). A
//              beat with nothing new is left out as an agent leaves it out,
//              up to the server's quiet interval (--quiet-heartbeat-ms=MS
//              sets its quietHeartbeatIntervalMs; 0: every beat). The
//              server's agent door is opened to every agent
//              (maxAgentConnections) and nodes are given 120 s of silence
//              (nodeTimeoutMs) so that 10,000 registering ones are not
//              judged lost before their first beat. Issue 30's targets at
//              --agents=10000 --tls: < 25% of a core, registration < 2 s of
//              server CPU. --callgrind-dumps: with the server run under
//              callgrind (--trainyard=a script that execs valgrind
//              --tool=callgrind ... trainyard "$@"), dump its counts at the
//              end of each phase (registration, idle, heartbeats).
// A plain main() that prints a table; Google Benchmark flags are ignored.
//   build/<dir>/bench/control_plane_bench [--only=latency|up|sustained|heartbeat]
//       [--samples=N] [--up-samples=N] [--agents=N] [--sustained-s=S] [--heartbeat-s=S]
//       [--rate=JOBS_PER_S (0 = back to back)] [--no-group-commit] [--http [--dashboards=N]] [--tls] [--secure] [--inflight=N] [--task-ms=MS] [--server-log-level=info] [--trainyard=PATH]
//       [--full-heartbeats] [--quiet-heartbeat-ms=MS] [--callgrind-dumps]
//       [--store=sqlite|etcd|both] [--etcd-members=N] [--etcd-max-txn-ops=N]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "control_plane_fleet.h"
#include "httplib.h"
#include "dashboard_clients.h"
#include "security/certs.h"
#include "security/crypto.h"
#include "security/tokens.h"
#include "tests/etcd/etcd_test_cluster.h"

namespace trainyard::bench {
namespace {

struct Flags {
  std::string only;  // "" = all three
  int samples = 200;
  int up_samples = 100;
  int agents = 1000;
  double sustained_s = 10;
  double heartbeat_s = 20;
  double idle_s = 5;
  int inflight = 64;
  int task_ms = 1000;
  double rate = -1;  // sustained: jobs/s offered; 0 = open loop; -1 = 2000, open loop, open loop w/o group commit
  bool group_commit = true;  // sustained with --rate: false starts the server with --no-group-commit
  std::string server_log_level = "info";
  bool same_name = false;  // sustained: every job submitted under one name
  bool http = false;       // sustained: the server serves HTTP, scraped every second
  int dashboards = 0;      // sustained, with --http: dashboard tabs open (bench/dashboard_clients.h)
  bool tls = false;        // heartbeat: the server serves TLS, each agent with its node's certificate
  bool full_heartbeats = false;  // heartbeat: every beat whole, not deltas
  int quiet_heartbeat_ms = -1;    // heartbeat: the server's quietHeartbeatIntervalMs (-1: its default)
  bool callgrind_dumps = false;  // heartbeat: callgrind_control --dump at each phase's end
  // sustained: security fully on (TLS, node certificates, a user's token,
  // per-user limits set high); without it plaintext and --no-auth.
  bool secure = false;
  std::string trainyard = TRAINYARD_BINARY;
  // sustained: where the server keeps its state: "sqlite" (its data dir),
  // "etcd" (etcd_members members on loopback, TLS with a client
  // certificate, as docs/deploy.md runs them) or "both" (each run on SQLite,
  // then on etcd, in one sitting).
  std::string store = "sqlite";
  int etcd_members = 3;
  int etcd_max_txn_ops = 0;  // etcd's --max-txn-ops and the server's --etcd-max-txn-ops (0: etcd's 128)
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

double SelfCpuSeconds() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return absl::StrCat(a, " ", b, " ", c);
}

// A one-task job: 1 GPU, 1 vcore, 1 GiB, `true`.
v1::SubmitRequest OneTaskJob(const std::string& name) {
  v1::SubmitRequest req;
  v1::JobSpec* spec = req.mutable_spec();
  spec->set_name(name);
  spec->set_user("bench");
  v1::ReplicaSpec* rs = spec->add_replicas();
  rs->set_role("worker");
  rs->set_count(1);
  rs->mutable_resources()->set_gpus(1);
  rs->mutable_resources()->set_vcores_milli(1000);
  rs->mutable_resources()->set_memory_mb(1024);
  rs->add_command("true");
  return req;
}

// A client of the server at `address`: plaintext, or TLS verifying the
// server's certificate with `ca_pem` when that is not empty.
std::unique_ptr<v1::Trainyard::Stub> ClientStub(const std::string& address, const std::string& ca_pem = "") {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::shared_ptr<grpc::ChannelCredentials> creds =
      ca_pem.empty() ? grpc::InsecureChannelCredentials() : grpc::SslCredentials({.pem_root_certs = ca_pem});
  return v1::Trainyard::NewStub(grpc::CreateCustomChannel(address, creds, args));
}

void Row(const char* what, const std::string& value, const char* target) {
  printf("  %-46s %-28s %s\n", what, value.c_str(), target);
}

std::string Ms(double seconds) { return absl::StrFormat("%.1f ms", seconds * 1000); }

// ---- latency ----

// Prints "p50 / p90 / p99" of `v` (seconds) as one row.
void PercentileRow(const char* what, const std::vector<double>& v, const char* target) {
  Row(what, absl::StrCat(Ms(Percentile(v, 0.5)), " / ", Ms(Percentile(v, 0.9)), " / ", Ms(Percentile(v, 0.99))),
      target);
}

// Asks DescribeJob every millisecond until the job is RUNNING (or over);
// returns that state and the view.
v1::JobView WaitRunning(v1::Trainyard::Stub* stub, const std::string& job) {
  SteadyTime deadline = SteadyClock::now() + std::chrono::seconds(10);
  v1::JobView view;
  while (SteadyClock::now() < deadline) {
    grpc::ClientContext ctx;
    v1::DescribeJobRequest req;
    req.set_job(job);
    if (stub->DescribeJob(&ctx, req, &view).ok() &&
        (view.state() == v1::JOB_RUNNING || view.state() >= v1::JOB_SUCCEEDED)) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return view;
}

bool RunLatency(const Flags& f) {
  std::unique_ptr<ChildProcess> server_process = ServerProcess(f.trainyard, {.log_level = f.server_log_level});
  ChildProcess& server = *server_process;
  if (!server.Start()) return false;
  FleetOptions fo;
  fo.agents = 2;
  fo.heartbeat_ms = 1000;
  fo.task_ms = 200;  // long enough for RUNNING to be seen, short enough to free the GPUs
  Fleet fleet(server.FindInOutput("agents connect to "), fo);
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, SteadyTime> launched;
  fleet.set_launch_hook([&](const v1::TaskSpec& spec, SteadyTime at) {
    std::lock_guard<std::mutex> lock(mu);
    launched[spec.job()] = at;
    cv.notify_all();
  });
  if (!fleet.Start(std::chrono::seconds(30))) {
    fprintf(stderr, "control_plane_bench: the 2 agents did not register\n");
    return false;
  }
  fleet.StartHeartbeats();
  auto stub = ClientStub(server.address());
  std::vector<double> ack, launch, running;
  for (int i = 0; i < f.samples; ++i) {
    std::string name = absl::StrCat("lat-", i);
    SteadyTime t0 = SteadyClock::now();
    grpc::ClientContext ctx;
    v1::SubmitResponse resp;
    grpc::Status st = stub->Submit(&ctx, OneTaskJob(name), &resp);
    if (!st.ok()) {
      fprintf(stderr, "control_plane_bench: submit %s: %s\n", name.c_str(), st.error_message().c_str());
      return false;
    }
    SteadyTime t_ack = SteadyClock::now();
    SteadyTime t_launch;
    {
      std::unique_lock<std::mutex> lock(mu);
      if (!cv.wait_for(lock, std::chrono::seconds(10), [&] { return launched.count(resp.job()) > 0; })) {
        fprintf(stderr, "control_plane_bench: job %s was not launched within 10 s\n", resp.job().c_str());
        return false;
      }
      t_launch = launched[resp.job()];
    }
    // The RUNNING report is on its way; ask until the server shows it.
    v1::JobState state = WaitRunning(stub.get(), resp.job()).state();
    if (state != v1::JOB_RUNNING && state != v1::JOB_SUCCEEDED) {
      fprintf(stderr, "control_plane_bench: job %s not RUNNING within 10 s\n", resp.job().c_str());
      return false;
    }
    SteadyTime t_run = SteadyClock::now();
    ack.push_back(SecondsBetween(t0, t_ack));
    launch.push_back(SecondsBetween(t0, t_launch));
    running.push_back(SecondsBetween(t0, t_run));
  }
  printf("\nsubmit-to-RUNNING, one-task jobs one at a time, 2 nodes x 8 GPUs, %d samples\n", f.samples);
  printf("  (p50 / p90 / p99 from the Submit call; DescribeJob asked every 1 ms after the launch)\n");
  PercentileRow("Submit acknowledged (durable)", ack, "");
  PercentileRow("launch order received by the agent", launch, "");
  PercentileRow("DescribeJob shows JOB_RUNNING", running, "target p50 < 50 ms");
  return true;
}

// ---- latency on a `trainyard up` cluster (real agents, real processes) ----

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

bool RunUp(const Flags& f) {
  ChildProcess up(f.trainyard,
                  {"up", "--data-dir", "{DIR}/up", "--port", absl::StrCat(FreePort())},
                  "Trainyard is up: server ");
  if (!up.Start()) return false;
  auto stub = ClientStub(up.address());
  std::vector<double> running, server_side, scheduled, agent_side;
  for (int i = 0; i < f.up_samples; ++i) {
    v1::SubmitRequest req = OneTaskJob(absl::StrCat("up-", i));
    req.mutable_spec()->mutable_replicas(0)->clear_command();
    for (const char* c : {"sleep", "0.3"}) req.mutable_spec()->mutable_replicas(0)->add_command(c);
    SteadyTime t0 = SteadyClock::now();
    grpc::ClientContext ctx;
    v1::SubmitResponse resp;
    grpc::Status st = stub->Submit(&ctx, req, &resp);
    if (!st.ok()) {
      fprintf(stderr, "control_plane_bench: submit to the up cluster: %s\n", st.error_message().c_str());
      return false;
    }
    v1::JobView view = WaitRunning(stub.get(), resp.job());
    if (view.state() != v1::JOB_RUNNING) {
      fprintf(stderr, "control_plane_bench: job %s is %d, not RUNNING, after 10 s\n", resp.job().c_str(),
              static_cast<int>(view.state()));
      return false;
    }
    running.push_back(SecondsBetween(t0, SteadyClock::now()));
    server_side.push_back((view.start_time_unix_ms() - view.submit_time_unix_ms()) / 1000.0);
    for (const v1::JobEvent& e : view.events()) {
      if (e.kind() != "scheduled") continue;
      scheduled.push_back((e.time_unix_ms() - view.submit_time_unix_ms()) / 1000.0);
      agent_side.push_back((view.start_time_unix_ms() - e.time_unix_ms()) / 1000.0);
    }
  }
  printf("\nsubmit-to-RUNNING on `trainyard up` (server + 2 real agents, 8 simulated GPUs each), "
         "%d samples\n", f.up_samples);
  printf("  (tasks are `sleep 0.3` processes the agents start; DescribeJob asked every 1 ms)\n");
  PercentileRow("DescribeJob shows JOB_RUNNING", running, "target p50 < 50 ms");
  PercentileRow("server: submit time .. RUNNING time", server_side, "");
  PercentileRow("  of which submit .. scheduled", scheduled, "");
  PercentileRow("  of which scheduled .. RUNNING (agent)", agent_side, "");
  return true;
}

// ---- security: certificates and a user token ----

// A cluster CA and server certificate in a new directory, and agent i's
// channel credentials: a node certificate for "sim-i", made in memory.
struct BenchCerts {
  std::string dir;
  std::string ca_pem;
  trainyard::security::KeyPair ca;
  bool Make() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "trainyard-bench-certs-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) return false;
    dir = tmpl + "/certs";
    if (!trainyard::security::InitCertDir(dir, {}).ok()) return false;
    std::ifstream c(trainyard::security::CaCertPath(dir)), k(trainyard::security::CaKeyPath(dir));
    std::stringstream cs, ks;
    cs << c.rdbuf();
    ks << k.rdbuf();
    ca = {cs.str(), ks.str()};
    return true;
  }
  std::shared_ptr<grpc::ChannelCredentials> Agent(int i) const {
    std::string name = absl::StrCat("sim-", i);
    absl::StatusOr<trainyard::security::KeyPair> pair = trainyard::security::IssueCert(
        ca, {.common_name = name, .dns_names = {name}, .use = trainyard::security::CertUse::kClient});
    if (!pair.ok()) return grpc::InsecureChannelCredentials();
    return grpc::SslCredentials({.pem_root_certs = ca.cert_pem, .pem_private_key = pair->key_pem,
                                 .pem_cert_chain = pair->cert_pem});
  }
  ~BenchCerts() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(std::filesystem::path(dir).parent_path(), ec);
  }
};

// A token for the user "bench" (not an admin), added to the token file of
// the server's data dir before the server starts, as tests/integration's
// harness adds its admin token; "" when that failed.
std::string AddBenchUserToken(const ChildProcess& server) {
  absl::StatusOr<std::string> random = trainyard::security::RandomHex(32);
  if (!random.ok()) return "";
  std::string token = "ty_" + *random;
  absl::Status added =
      trainyard::security::AddToken(trainyard::security::TokenFilePath(ServerDataDir(server)), token, "bench", false);
  if (!added.ok()) {
    fprintf(stderr, "control_plane_bench: %s\n", std::string(added.message()).c_str());
    return "";
  }
  return token;
}

// ---- sustained submission ----

// Keeps `inflight` Submit calls going until `until`; counts the OK ones
// that completed before it.
class Submitter {
 public:
  // same_name: every job asks for the name "sus" (the server suffixes it).
  // `authorization` ("Bearer TOKEN"; "" = none) goes with every call.
  Submitter(v1::Trainyard::Stub* stub, SteadyTime start, SteadyTime until, bool same_name,
            std::string authorization = "")
      : stub_(stub), start_(start), until_(until), same_name_(same_name), authorization_(std::move(authorization)) {}

  // rate > 0: starts calls at that many per second (paced, at most
  // `inflight` outstanding); 0: keeps `inflight` calls going back to back.
  void Run(int inflight, double rate) {
    rate_ = rate;
    if (rate <= 0) {
      for (int i = 0; i < inflight; ++i) Next();
    } else {
      for (int64_t k = 0;; ++k) {
        auto due = start_ + std::chrono::duration_cast<SteadyClock::duration>(
                                std::chrono::duration<double>(static_cast<double>(k) / rate));
        if (due >= until_) break;
        std::this_thread::sleep_until(due);
        {
          std::unique_lock<std::mutex> lock(mu_);
          cv_.wait(lock, [&] { return outstanding_ < inflight; });
        }
        Next();
      }
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return outstanding_ == 0; });
  }
  int64_t acked() const { return acked_; }
  int64_t acked_total() const { return acked_total_; }
  // Acknowledgements in each second of the window.
  const std::vector<int64_t>& per_second() const { return per_second_; }
  int64_t failed() const { return failed_; }
  const std::string& first_error() const { return first_error_; }
  // Seconds from each call to its OK, for the calls counted in acked().
  const std::vector<double>& latencies() const { return latencies_; }

 private:
  struct Call {
    grpc::ClientContext ctx;
    v1::SubmitRequest req;
    v1::SubmitResponse resp;
    SteadyTime sent;
  };

  void Next() {
    auto* call = new Call;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (SteadyClock::now() >= until_) {
        delete call;
        return;
      }
      ++outstanding_;
      call->req = OneTaskJob(same_name_ ? std::string("sus") : absl::StrCat("sus-", next_));
      ++next_;
    }
    if (!authorization_.empty()) call->ctx.AddMetadata("authorization", authorization_);
    call->sent = SteadyClock::now();
    stub_->async()->Submit(&call->ctx, &call->req, &call->resp, [this, call](grpc::Status st) {
      SteadyTime now = SteadyClock::now();
      bool in_time = now <= until_;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (st.ok() && in_time) {
          ++acked_;
          latencies_.push_back(SecondsBetween(call->sent, now));
          auto second = static_cast<size_t>(SecondsBetween(start_, SteadyClock::now()));
          if (per_second_.size() <= second) per_second_.resize(second + 1);
          ++per_second_[second];
        }
        if (st.ok()) ++acked_total_;
        if (!st.ok()) {
          ++failed_;
          if (first_error_.empty()) first_error_ = st.error_message();
        }
      }
      delete call;
      if (rate_ <= 0) Next();
      std::lock_guard<std::mutex> lock(mu_);
      --outstanding_;
      cv_.notify_all();
    });
  }

  v1::Trainyard::Stub* const stub_;
  const SteadyTime start_;
  const SteadyTime until_;
  const bool same_name_;
  const std::string authorization_;
  double rate_ = 0;
  std::vector<int64_t> per_second_;
  std::vector<double> latencies_;
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t next_ = 0;
  int64_t outstanding_ = 0;
  int64_t acked_ = 0;
  int64_t acked_total_ = 0;  // including calls that completed after `until`
  int64_t failed_ = 0;
  std::string first_error_;
};

// What a Prometheus and a dashboard ask of the server during the window:
// /metrics and /api/v1/nodes once a second (nothing when `address` is "").
class HttpScraper {
 public:
  // `authorization` ("Bearer TOKEN"; "" = none) goes with every request.
  HttpScraper(const std::string& address, SteadyTime until, const std::string& authorization = "") {
    if (address.empty()) return;
    thread_ = std::thread([this, address, until, authorization] {
      httplib::Client client("http://" + address);
      client.set_read_timeout(10, 0);
      if (!authorization.empty()) client.set_default_headers({{"Authorization", authorization}});
      while (SteadyClock::now() < until) {
        auto m = client.Get("/metrics");
        auto n = client.Get("/api/v1/nodes");
        bool ok = m && m->status == 200 && n && n->status == 200;
        ++rounds_;
        if (!ok) ++failures_;
        if (m) last_bytes_ = static_cast<int64_t>(m->body.size());
        std::this_thread::sleep_for(std::chrono::seconds(1));  // the scrape interval
      }
    });
  }
  ~HttpScraper() { Join(); }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  int64_t rounds() const { return rounds_; }
  int64_t failures() const { return failures_; }
  int64_t last_bytes() const { return last_bytes_; }

 private:
  std::thread thread_;
  std::atomic<int64_t> rounds_{0}, failures_{0}, last_bytes_{0};
};

bool StartFleet(Fleet& fleet, int agents, double* seconds) {
  SteadyTime t0 = SteadyClock::now();
  // 10,000 agents' TLS handshakes on a loaded 2-core machine take minutes.
  if (!fleet.Start(std::chrono::seconds(agents > 2000 ? 600 : 120))) {
    fprintf(stderr, "control_plane_bench: only %lld of %d agents registered in time\n",
            static_cast<long long>(fleet.counters().registered.load()), agents);
    return false;
  }
  *seconds = SecondsBetween(t0, SteadyClock::now());
  return true;
}

// One ListJobs with `authorization` ("" = none), so the connection is up
// (its TLS handshake done) and the token accepted before the window opens.
// False (with the error on stderr) when the call fails.
bool WarmUp(v1::Trainyard::Stub* stub, const std::string& authorization) {
  grpc::ClientContext ctx;
  if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ListJobsRequest req;
  v1::ListJobsResponse resp;
  grpc::Status st = stub->ListJobs(&ctx, req, &resp);
  if (!st.ok()) fprintf(stderr, "control_plane_bench: the first ListJobs: %s\n", st.error_message().c_str());
  return st.ok();
}

// With --secure: the per-user limits of the server, set far above what the
// benchmark offers so that they never refuse a Submit (the limits are still
// counted on every one).
constexpr char kSecureMaxPendingPerUser[] = "10000000";
constexpr char kSecureMaxSubmitsPerSecondPerUser[] = "1000000";

// An etcd store for the server of one sustained run: `members` members on
// loopback serving TLS to clients with a certificate (their files in a
// temporary directory), and the server's flags for it.
struct BenchEtcd {
  std::string dir;
  std::unique_ptr<store_test::EtcdTestCluster> cluster;
  std::vector<std::string> server_args;
  // max_txn_ops: etcd's --max-txn-ops, given to the server as well (0: etcd's default, 128).
  bool Start(int members, int max_txn_ops) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "trainyard-bench-etcd-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) return false;
    dir = tmpl;
    absl::StatusOr<store_test::EtcdTlsFiles> tls = store_test::MakeEtcdTlsFiles(dir, {"127.0.0.1"});
    if (!tls.ok()) {
      fprintf(stderr, "control_plane_bench: etcd certificates: %s\n", tls.status().ToString().c_str());
      return false;
    }
    std::vector<std::string> flags;
    if (max_txn_ops > 0) flags = {"--max-txn-ops", absl::StrCat(max_txn_ops)};
    cluster = std::make_unique<store_test::EtcdTestCluster>(std::vector<store_test::EtcdMemberHost>(members), *tls,
                                                            flags);
    if (!cluster->status().ok()) {
      fprintf(stderr, "control_plane_bench: etcd: %s\n", cluster->status().ToString().c_str());
      return false;
    }
    server_args = {"--store", cluster->address(), "--etcd-ca", tls->ca_file, "--etcd-cert", tls->client_cert_file,
                   "--etcd-key", tls->client_key_file};
    if (max_txn_ops > 0) server_args.insert(server_args.end(), {"--etcd-max-txn-ops", absl::StrCat(max_txn_ops)});
    return true;
  }
  // The members' CPU seconds, together.
  double CpuSeconds() const {
    double total = 0;
    for (int i = 0; cluster != nullptr && i < cluster->size(); ++i) total += ProcessCpuSeconds(cluster->pid(i));
    return total;
  }
  ~BenchEtcd() {
    cluster.reset();
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
};

bool RunSustained(const Flags& f, double rate, bool group_commit = true, bool etcd_store = false) {
  BenchCerts certs;
  if (f.secure && !certs.Make()) {
    fprintf(stderr, "control_plane_bench: cannot make the certificates\n");
    return false;
  }
  BenchEtcd etcd;
  if (etcd_store && !etcd.Start(f.etcd_members, f.etcd_max_txn_ops)) return false;
  ServerProcessOptions so{.log_level = f.server_log_level, .group_commit = group_commit, .http = f.http};
  if (f.secure) {
    so.tls_dir = certs.dir;
    so.authentication = true;
    so.extra_args = {"--max-pending-jobs-per-user", kSecureMaxPendingPerUser, "--max-submissions-per-second-per-user",
                     kSecureMaxSubmitsPerSecondPerUser, "--config", "{DIR}/sustained.yaml"};
  }
  so.extra_args.insert(so.extra_args.end(), etcd.server_args.begin(), etcd.server_args.end());
  std::unique_ptr<ChildProcess> server_process = ServerProcess(f.trainyard, so);
  ChildProcess& server = *server_process;
  // The per-user call rate limit on Submit, as high as the others.
  if (f.secure) std::ofstream(server.dir() + "/sustained.yaml") << "rateLimits: {submit: " << kSecureMaxSubmitsPerSecondPerUser << "}\n";
  std::string authorization;
  if (f.secure) {
    std::string token = AddBenchUserToken(server);
    if (token.empty()) return false;
    authorization = "Bearer " + token;
  }
  if (!server.Start()) return false;
  FleetOptions fo;
  fo.agents = f.agents;
  fo.task_ms = f.task_ms;
  if (f.secure) fo.credentials = [&certs](int i) { return certs.Agent(i); };
  std::string http_address = f.http ? server.FindInOutput("/metrics on http://") : "";
  Fleet fleet(server.FindInOutput("agents connect to "), fo);
  std::atomic<int64_t> placed_in_window{0};
  SteadyTime window_start, window_end;
  std::atomic<bool> window_open{false};
  fleet.set_launch_hook([&](const v1::TaskSpec&, SteadyTime at) {
    if (window_open.load() && at <= window_end) placed_in_window++;
  });
  double reg_s = 0;
  if (!StartFleet(fleet, f.agents, &reg_s)) return false;
  fleet.StartHeartbeats();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // let registration writes settle
  auto stub = ClientStub(server.address(), f.secure ? certs.ca.cert_pem : "");
  if (!WarmUp(stub.get(), authorization)) return false;
  window_start = SteadyClock::now();
  window_end = window_start + std::chrono::milliseconds(static_cast<int64_t>(f.sustained_s * 1000));
  window_open = true;
  int64_t launches0 = fleet.counters().launches.load();
  double cpu0 = server.CpuSeconds(), self0 = SelfCpuSeconds(), etcd0 = etcd.CpuSeconds();
  Submitter submitter(stub.get(), window_start, window_end, f.same_name, authorization);
  HttpScraper scraper(http_address, window_end, authorization);
  trainyard::bench::DashboardClients dashboards(http_address, f.dashboards, window_end, authorization);
  submitter.Run(f.inflight, rate);
  scraper.Join();
  dashboards.Join();
  double window = SecondsBetween(window_start, SteadyClock::now());
  double cpu = server.CpuSeconds() - cpu0, self = SelfCpuSeconds() - self0, etcd_cpu = etcd.CpuSeconds() - etcd0;
  // Jobs acknowledged but not yet placed when the window closed.
  SteadyTime drain_deadline = SteadyClock::now() + std::chrono::seconds(30);
  int64_t target = launches0 + submitter.acked_total();
  while (fleet.counters().launches.load() < target && SteadyClock::now() < drain_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  double drain = SecondsBetween(window_start, SteadyClock::now()) - window;
  double d = f.sustained_s;
  printf("\nsustained submission, %d agents (1 stream each), %s, at most %d Submit calls in flight, %.0f s%s%s\n",
         f.agents, rate > 0 ? absl::StrFormat("offered %.0f jobs/s", rate).c_str() : "as fast as acknowledged",
         f.inflight, d, f.same_name ? ", every job named \"sus\"" : "",
         group_commit ? "" : ", server with --no-group-commit (one transaction per write)");
  printf("  (single-task jobs, 1 GPU; tasks succeed %d ms after RUNNING; %.1f s to register the agents;"
         " load average %s)\n", f.task_ms, reg_s, LoadAverage().c_str());
  if (etcd_store) {
    printf("  store: etcd, %d members on loopback (one machine), TLS to etcd with a client certificate, "
           "--max-txn-ops %d\n", f.etcd_members, f.etcd_max_txn_ops > 0 ? f.etcd_max_txn_ops : 128);
  } else {
    printf("  store: SQLite in the server's data dir, fsync on\n");
  }
  if (f.secure) {
    printf("  security on: server with --tls-dir and token auth; agents present node certificates; the client\n"
           "  verifies the server's CA and sends user bench's bearer token; per-user limits %s pending,\n"
           "  %s submissions/s and Submit calls/s (far above the load)\n", kSecureMaxPendingPerUser, kSecureMaxSubmitsPerSecondPerUser);
  } else {
    printf("  security off: plaintext, --no-auth\n");
  }
  Row("jobs acknowledged (Submit OK, durable) /s", absl::StrCat(static_cast<int64_t>(submitter.acked() / d)),
      "target >= 2000/s");
  Row("jobs placed (launch received by an agent) /s", absl::StrCat(static_cast<int64_t>(placed_in_window / d)),
      "target >= 2000/s");
  Row("acknowledged but unplaced at the end", absl::StrCat(target - fleet.counters().launches.load(),
                                                           absl::StrFormat(" (after %.1f s more)", drain)), "");
  PercentileRow("Submit call to OK, p50 / p90 / p99", submitter.latencies(),
                rate > 0 ? absl::StrFormat("(%d in flight at most: %.0f ms)", f.inflight, 1000.0 * f.inflight / rate).c_str()
                         : "");
  Row("Submit errors", absl::StrCat(submitter.failed(), submitter.first_error().empty() ? "" : " first: ",
                                    submitter.first_error()), "");
  Row("server CPU (utime+stime / wall)", absl::StrFormat("%.2f cores", cpu / window),
      "target <= 1 core");
  Row("server CPU per acknowledged job", absl::StrFormat("%.3f ms", cpu * 1000 / std::max<int64_t>(1, submitter.acked())),
      "");
  Row("jobs/s the server could take with 1 core", absl::StrCat(static_cast<int64_t>(submitter.acked() / std::max(cpu, 1e-9))),
      "(if CPU-bound)");
  std::string seconds;
  for (int64_t n : submitter.per_second()) absl::StrAppend(&seconds, seconds.empty() ? "" : " ", n);
  printf("  acknowledged in each second: %s\n", seconds.c_str());
  Row("this process (clients + agents) CPU", absl::StrFormat("%.2f cores", self / window), "");
  if (etcd_store) Row("etcd members' CPU, together", absl::StrFormat("%.2f cores", etcd_cpu / window), "");
  if (f.http) {
    Row("HTTP: GET /metrics + /api/v1/nodes each second", absl::StrCat(scraper.rounds(), " rounds, ", scraper.failures(),
                                                                     " failed, last /metrics ", scraper.last_bytes(), " B"),
        "");
  }
  if (f.dashboards > 0) {
    Row(absl::StrCat("HTTP: ", f.dashboards, " dashboard tabs (watch, overview / nodes)").c_str(),
        absl::StrCat(dashboards.requests(), " requests, ", dashboards.failures(), " failed, ",
                     dashboards.bytes() / 1000, " kB, ", dashboards.events(), " events"),
        "");
  }
  fleet.Stop();
  return true;
}

// ---- heartbeats ----

bool RunHeartbeat(const Flags& f) {
  BenchCerts certs;
  if (f.tls && !certs.Make()) {
    fprintf(stderr, "control_plane_bench: cannot make the certificates\n");
    return false;
  }
  std::unique_ptr<ChildProcess> server_process =
      ServerProcess(f.trainyard, {.log_level = f.server_log_level,
                                  .tls_dir = f.tls ? certs.dir : "",
                                  .extra_args = {"--config", "{DIR}/heartbeat.yaml"}});
  ChildProcess& server = *server_process;
  std::ofstream(server.dir() + "/heartbeat.yaml")
      << "maxAgentConnections: " << f.agents + 64 << "\nnodeTimeoutMs: 120000\n"
      << (f.quiet_heartbeat_ms >= 0 ? absl::StrCat("quietHeartbeatIntervalMs: ", f.quiet_heartbeat_ms, "\n") : "");
  if (!server.Start()) return false;
  auto dump = [&](const char* phase) {
    if (!f.callgrind_dumps) return;
    std::string cmd = absl::StrCat("callgrind_control --dump=", phase, " ", server.pid(), " >/dev/null");
    if (system(cmd.c_str()) != 0) fprintf(stderr, "control_plane_bench: %s failed\n", cmd.c_str());
  };
  FleetOptions fo;
  fo.agents = f.agents;
  fo.heartbeat_ms = 1000;
  fo.full_heartbeats = f.full_heartbeats;
  if (f.tls) fo.credentials = [&certs](int i) { return certs.Agent(i); };
  Fleet fleet(server.FindInOutput("agents connect to "), fo);
  double reg_s = 0;
  dump("startup");
  double reg_cpu0 = server.CpuSeconds();
  if (!StartFleet(fleet, f.agents, &reg_s)) return false;
  double reg_cpu = server.CpuSeconds() - reg_cpu0;
  std::this_thread::sleep_for(std::chrono::seconds(1));  // registration writes settle
  dump("registration");
  // Connected but quiet: what the server costs with these nodes and no traffic.
  double cpu0 = server.CpuSeconds();
  SteadyTime t0 = SteadyClock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(f.idle_s * 1000)));
  double idle = (server.CpuSeconds() - cpu0) / SecondsBetween(t0, SteadyClock::now());
  dump("idle");
  fleet.StartHeartbeats();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // first round of beats
  int64_t beats0 = fleet.counters().heartbeats.load();
  cpu0 = server.CpuSeconds();
  double self0 = SelfCpuSeconds();
  t0 = SteadyClock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(f.heartbeat_s * 1000)));
  double wall = SecondsBetween(t0, SteadyClock::now());
  double busy = (server.CpuSeconds() - cpu0) / wall;
  double self = (SelfCpuSeconds() - self0) / wall;
  int64_t beats = fleet.counters().heartbeats.load() - beats0;
  dump("heartbeats");
  printf("\nheartbeats, %d agents every 1 s, %s, %.0f s, %s, %s (%.1f s to register; load average %s)\n", f.agents,
         f.quiet_heartbeat_ms < 0 ? "a beat with nothing new left out as the server's default quiet interval says"
         : f.quiet_heartbeat_ms == 0
             ? "every beat sent (quietHeartbeatIntervalMs 0)"
             : absl::StrFormat("a beat with nothing new left out up to %d ms (quietHeartbeatIntervalMs)",
                               f.quiet_heartbeat_ms).c_str(),
         f.heartbeat_s, f.tls ? "TLS, each agent with its node's certificate" : "plaintext",
         f.full_heartbeats ? "every beat full" : "deltas where the server takes them", reg_s, LoadAverage().c_str());
  Row("server CPU to register the agents", absl::StrFormat("%.2f s", reg_cpu),
      f.agents >= 10000 ? "target < 2 s (10,000 agents)" : "");
  Row("heartbeats sent /s", absl::StrCat(static_cast<int64_t>(beats / wall)), "");
  Row("server CPU, agents connected, no heartbeats", absl::StrFormat("%.1f %% of a core", idle * 100), "");
  Row("server CPU with heartbeats", absl::StrFormat("%.1f %% of a core", busy * 100),
      f.agents >= 10000 ? "target < 25% (10,000 agents)" : "target < 10%");
  Row("this process (agents) CPU", absl::StrFormat("%.1f %% of a core", self * 100), "");
  fleet.Stop();
  return true;
}

bool ParseFlag(const char* arg, Flags* f) {
  std::string a(arg);
  size_t eq = a.find('=');
  std::string key = a.substr(0, eq), value = eq == std::string::npos ? "" : a.substr(eq + 1);
  auto num = [&](double* out) { return absl::SimpleAtod(value, out); };
  auto integer = [&](int* out) { return absl::SimpleAtoi(value, out) && *out > 0; };
  if (key.rfind("--benchmark_", 0) == 0) return true;  // `make bench` passes these
  if (key == "--only") return (f->only = value), value == "latency" || value == "up" || value == "sustained" || value == "heartbeat";
  if (key == "--samples") return integer(&f->samples);
  if (key == "--up-samples") return integer(&f->up_samples);
  if (key == "--agents") return integer(&f->agents);
  if (key == "--inflight") return integer(&f->inflight);
  if (key == "--task-ms") return integer(&f->task_ms);
  if (key == "--sustained-s") return num(&f->sustained_s) && f->sustained_s > 0;
  if (key == "--heartbeat-s") return num(&f->heartbeat_s) && f->heartbeat_s > 0;
  if (key == "--idle-s") return num(&f->idle_s) && f->idle_s > 0;
  if (key == "--rate") return num(&f->rate) && f->rate >= 0;
  if (key == "--no-group-commit") return f->group_commit = false, true;
  if (key == "--same-name") return f->same_name = true;
  if (key == "--http") return f->http = true;
  if (key == "--dashboards") return integer(&f->dashboards) && f->dashboards >= 0;
  if (key == "--tls") return f->tls = true;
  if (key == "--full-heartbeats") return f->full_heartbeats = true;
  if (key == "--quiet-heartbeat-ms") return absl::SimpleAtoi(value, &f->quiet_heartbeat_ms) && f->quiet_heartbeat_ms >= 0;
  if (key == "--callgrind-dumps") return f->callgrind_dumps = true;
  if (key == "--secure") return f->secure = true;
  if (key == "--server-log-level") return (f->server_log_level = value), !value.empty();
  if (key == "--trainyard") return (f->trainyard = value), !value.empty();
  if (key == "--store") return (f->store = value), value == "sqlite" || value == "etcd" || value == "both";
  if (key == "--etcd-members") return integer(&f->etcd_members) && f->etcd_members >= 1;
  if (key == "--etcd-max-txn-ops") return integer(&f->etcd_max_txn_ops) && f->etcd_max_txn_ops >= 8;
  return false;
}

}  // namespace
}  // namespace trainyard::bench

int main(int argc, char** argv) {
  using namespace trainyard::bench;
  Flags f;
  for (int i = 1; i < argc; ++i) {
    if (!ParseFlag(argv[i], &f)) {
      fprintf(stderr,
              "control_plane_bench: bad flag '%s'. Flags: --only=latency|up|sustained|heartbeat --samples=N --up-samples=N "
              "--agents=N --same-name --http --dashboards=N --tls --secure --rate=JOBS_PER_S --no-group-commit --inflight=N --task-ms=MS --sustained-s=S --heartbeat-s=S --idle-s=S "
              "--server-log-level=LEVEL --trainyard=PATH --full-heartbeats --quiet-heartbeat-ms=MS --callgrind-dumps "
              "--store=sqlite|etcd|both --etcd-members=N --etcd-max-txn-ops=N\n",
              argv[i]);
      return 2;
    }
  }
  if (f.dashboards > 0 && !f.http) {
    fprintf(stderr, "control_plane_bench: --dashboards needs --http (the tabs read the HTTP API)\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  printf("control-plane benchmarks: server = %s (separate process, fsync on), %u CPUs here\n",
         f.trainyard.c_str(), std::thread::hardware_concurrency());
  bool ok = true;
  if (ok && (f.only.empty() || f.only == "latency")) ok = RunLatency(f);
  if (ok && (f.only.empty() || f.only == "up")) ok = RunUp(f);
  if (ok && (f.only.empty() || f.only == "sustained")) {
    std::vector<bool> stores;  // on etcd?
    if (f.store != "etcd") stores.push_back(false);
    if (f.store != "sqlite") stores.push_back(true);
    for (bool etcd : stores) {
      if (!ok) break;
      if (f.rate >= 0) {
        ok = RunSustained(f, f.rate, f.group_commit, etcd);
      } else {
        // The target; the most it takes; the same without group commit.
        ok = RunSustained(f, 2000, true, etcd) && RunSustained(f, 0, true, etcd) &&
             RunSustained(f, 0, /*group_commit=*/false, etcd);
      }
    }
  }
  if (ok && (f.only.empty() || f.only == "heartbeat")) ok = RunHeartbeat(f);
  fflush(stdout);
  return ok ? 0 : 1;
}
