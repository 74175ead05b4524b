// Server recovery: a store with 10,000 nodes and 100,000 running tasks
// (12,500 jobs of 8 one-GPU workers), then the server's restart path in one
// process: open the store, JobManager::Recover, all 10,000 agents register
// again (adopting their tasks), a new one-GPU job is submitted (durably) and
// the first scheduling round places it. "Restart to the first new scheduling
// decision" is the sum, from opening the store to that placement; printed
// per phase. gRPC and process start are not included there;
// BM_ServerProcessRestart adds them: a real `trainyard server` process started
// on the same store, 100 agents (bench/control_plane_fleet.h, each with its own
// gRPC stream) connecting as soon as it listens, one job submitted: from the
// process start to the agent receiving the launch order.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "control_plane_fleet.h"
#include "recovery_store.h"
#include "common/clock.h"
#include "common/wait_until.h"
#include "server/agent_streams.h"
#include "server/job_manager.h"
#include "store/etcd_state_store.h"
#include "store/sqlite_state_store.h"
#include "tests/etcd/etcd_test_cluster.h"

namespace trainyard::server {
namespace {

using bench::Fill;
using bench::kJobs;
using bench::kNodes;
using bench::NodeOf;
using bench::WorkerSpec;

// An agent's stream that drops what it is sent, noting when the first
// launch order of a "new-" job (the one submitted after the restart) came.
class NullLink : public AgentLink {
 public:
  explicit NullLink(absl::Time* first_launch = nullptr, absl::Mutex* mu = nullptr)
      : first_launch_(first_launch), mu_(mu) {}
  void Send(v1::ServerMessage m) override {
    if (!m.has_launch() || m.launch().job().rfind("new-", 0) != 0 || first_launch_ == nullptr) return;
    absl::MutexLock lock(mu_);
    if (*first_launch_ == absl::InfiniteFuture()) *first_launch_ = absl::Now();
  }

 private:
  absl::Time* first_launch_;
  absl::Mutex* mu_;
};

double Ms(absl::Time a, absl::Time b) { return absl::ToDoubleMilliseconds(b - a); }

// A fresh temporary data dir holding the filled store; "" (and the benchmark
// marked failed) when it could not be made.
std::string FilledStore(const char* name, benchmark::State& state) {
  std::string dir = absl::StrCat(std::filesystem::temp_directory_path().string(), "/", name, "-", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  if (absl::Status s = Fill(dir); !s.ok()) {
    state.SkipWithError(std::string(s.message()).c_str());
    return "";
  }
  return dir;
}

// Opens the store a restart loads (the timed part starts before it).
using StoreOpener = std::function<absl::StatusOr<StateStorePtr>()>;

// `etcd_address`: the store is etcd there, and the server is configured as
// `server --store` configures it (its writes cut to etcd's limits, launches
// sent once their write is durable); "" for SQLite.
void RestartToFirstPlacement(benchmark::State& state, const char* store_name, const StoreOpener& open,
                             const std::string& etcd_address = "") {
  for (auto _ : state) {
    RealClock clock;
    ServerConfig config;
    config.jobmaster_enabled = false;
    config.node_timeout_ms = 60000;
    config.store = etcd_address;
    config.launch_after_durable = !etcd_address.empty();
    absl::Time t0 = absl::Now();
    absl::StatusOr<StateStorePtr> store = open();
    if (!store.ok()) {
      state.SkipWithError(std::string(store.status().message()).c_str());
      return;
    }
    // The agents' streams outlive the manager: on etcd the store's thread
    // sends launches until the manager is gone.
    absl::Time first_launch = absl::InfiniteFuture();
    absl::Mutex launch_mu;
    std::vector<NullLink> links(kNodes, NullLink(&first_launch, &launch_mu));
    auto sched = core::Scheduler::Create(core::SchedulerOptions());
    AgentStreams streams;
    JobManager manager(config, store->get(), std::move(*sched), &streams, &clock);
    absl::Time t_open = absl::Now();
    if (absl::Status s = manager.Recover(); !s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
    absl::Time t_recover = absl::Now();
    for (int n = 0; n < kNodes; ++n) (void)manager.RegisterAgent(NodeOf(n), streams.Open(&links[n]));
    absl::Time t_registered = absl::Now();
    absl::StatusOr<v1::SubmitResponse> sub =
        manager.Submit(WorkerSpec(absl::StrCat("new-", state.iterations()), 1));
    absl::Time t_submitted = absl::Now();
    int64_t before = manager.Stats().placements;
    manager.ScheduleNowForTest();
    absl::Time t_placed = absl::Now();
    bool placed = sub.ok() && manager.Stats().placements > before;
    state.SetIterationTime(absl::ToDoubleSeconds(t_placed - t0));
    // The round sends the launch order (on etcd once the round's write is
    // in etcd: waited for here, up to 60 s); the views it changed are
    // published after it (the loop does the same), which "first round"
    // includes.
    if (config.launch_after_durable) {
      // Its outcome is read below ("NO LAUNCH ORDER" when none came).
      WaitUntil([&] {
        absl::MutexLock lock(&launch_mu);
        return first_launch != absl::InfiniteFuture();
      }, absl::Seconds(60), absl::Milliseconds(1));
    }
    absl::MutexLock lock(&launch_mu);
    bool launched = first_launch != absl::InfiniteFuture();
    std::string launch = launched ? absl::StrFormat(", its launch order after %.1f ms", Ms(t_submitted, first_launch))
                                  : " (NO LAUNCH ORDER)";
    std::string to_launch = launched ? absl::StrFormat(", to the launch order %.1f ms", Ms(t0, first_launch)) : "";
    std::printf(
        "restart (%s) with %d nodes, %d tasks: open %.1f ms, Recover %.1f ms, %d agents register %.1f ms, "
        "durable submit %.1f ms, first round %.1f ms%s%s; total %.1f ms%s\n",
        store_name, kNodes, kJobs * 8, Ms(t0, t_open), Ms(t_open, t_recover), kNodes, Ms(t_recover, t_registered),
        Ms(t_registered, t_submitted), Ms(t_submitted, t_placed), placed ? " (placed)" : " (NOT PLACED)",
        launch.c_str(), Ms(t0, t_placed), to_launch.c_str());
  }
}

void BM_RestartToFirstPlacement(benchmark::State& state) {
  std::string dir = FilledStore("recovery_bench", state);
  if (dir.empty()) return;
  RestartToFirstPlacement(state, "SQLite", [&] { return SqliteStateStore::Open(dir, SqliteStoreOptions()); });
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_RestartToFirstPlacement)->UseManualTime()->Iterations(1)->Repetitions(1)->Unit(benchmark::kMillisecond);

// The same restart of a server whose store is etcd (one member on this
// machine): "open" is the recovery, every key under the prefix read at one
// revision.
void BM_RestartToFirstPlacementFromEtcd(benchmark::State& state) {
  store_test::EtcdTestCluster etcd(1);
  if (!etcd.status().ok()) {
    state.SkipWithError(std::string(etcd.status().message()).c_str());
    return;
  }
  EtcdStoreOptions options;
  options.connect.endpoints = etcd.endpoints();
  {
    absl::StatusOr<std::unique_ptr<EtcdStateStore>> fill = EtcdStateStore::Open(options);
    if (!fill.ok()) {
      state.SkipWithError(std::string(fill.status().message()).c_str());
      return;
    }
    absl::Mutex mu;
    int pending = 0;
    absl::Status failed;
    bench::ForEachBatch([&](WriteBatch batch) {
      {
        absl::MutexLock lock(&mu);
        ++pending;
      }
      (*fill)->CommitAsync(std::move(batch), [&](absl::Status s) {
        absl::MutexLock lock(&mu);
        --pending;
        if (!s.ok()) failed = s;
      });
    });
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(+[](int* n) { return *n == 0; }, &pending));
    if (!failed.ok()) {
      state.SkipWithError(std::string(failed.message()).c_str());
      return;
    }
  }
  RestartToFirstPlacement(state, "etcd", [&]() -> absl::StatusOr<StateStorePtr> {
    absl::StatusOr<std::unique_ptr<EtcdStateStore>> store = EtcdStateStore::Open(options);
    if (!store.ok()) return store.status();
    return StateStorePtr(std::move(*store));
  }, etcd.address());
}
BENCHMARK(BM_RestartToFirstPlacementFromEtcd)->UseManualTime()->Iterations(1)->Repetitions(1)->Unit(benchmark::kMillisecond);

void BM_ServerProcessRestart(benchmark::State& state) {
  std::string dir = FilledStore("recovery_bench_proc", state);
  if (dir.empty()) return;
  for (auto _ : state) {
    using trainyard::bench::SteadyClock;
    auto t0 = SteadyClock::now();
    trainyard::bench::ChildProcess server(TRAINYARD_BINARY,
                                          {"server", "--listen", "127.0.0.1:0", "--data-dir", dir, "--no-jobmaster",
                                           "--node-timeout-ms", "60000", "--log-level", "warning", "--no-auth"},
                                          "listening on ");
    if (!server.Start()) {
      state.SkipWithError("the server did not start");
      return;
    }
    auto t_listening = SteadyClock::now();
    trainyard::bench::FleetOptions fo;
    fo.agents = 100;
    fo.heartbeat_ms = 1000;
    fo.task_ms = 60000;
    trainyard::bench::Fleet fleet(server.FindInOutput("agents connect to "), fo);
    std::mutex mu;
    std::condition_variable cv;
    SteadyClock::time_point launched{};
    fleet.set_launch_hook([&](const v1::TaskSpec&, SteadyClock::time_point at) {
      std::lock_guard<std::mutex> lock(mu);
      if (launched == SteadyClock::time_point{}) launched = at;
      cv.notify_all();
    });
    if (!fleet.Start(std::chrono::seconds(60))) {
      state.SkipWithError("the agents did not register");
      return;
    }
    auto t_registered = SteadyClock::now();
    auto stub = v1::Trainyard::NewStub(grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    v1::SubmitRequest req;
    *req.mutable_spec() = WorkerSpec("after-restart", 1);
    v1::SubmitResponse resp;
    grpc::Status st = stub->Submit(&ctx, req, &resp);
    bool placed;
    {
      std::unique_lock<std::mutex> lock(mu);
      placed = cv.wait_for(lock, std::chrono::seconds(30), [&] { return launched != SteadyClock::time_point{}; });
    }
    auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    state.SetIterationTime(placed ? ms(t0, launched) / 1000 : 0);
    std::printf(
        "server process restart on %d nodes, %d tasks: listening after %.1f ms (Recover included), 100 agents "
        "registered after %.1f ms, first launch order after %.1f ms%s\n",
        kNodes, kJobs * 8, ms(t0, t_listening), ms(t0, t_registered), placed ? ms(t0, launched) : -1.0,
        st.ok() && placed ? "" : absl::StrCat(" (NOT PLACED: ", st.error_message(), ")").c_str());
    fleet.Stop();
  }
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_ServerProcessRestart)->UseManualTime()->Iterations(1)->Repetitions(3)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace trainyard::server

BENCHMARK_MAIN();
