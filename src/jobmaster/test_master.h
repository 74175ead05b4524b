// Test fixture helper: a real JobMasterServer on a loopback port, run on its
// own thread, with a FakeJobTerminator. Used by the job master's tests only
// (header-only so the library does not carry it).
#pragma once

#include <functional>
#include <memory>
#include <thread>

#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/wait_until.h"
#include "jobmaster/jobmaster_server.h"

namespace trainyard::jobmaster {

class TestMaster {
 public:
  // The master reads `clock` (the real one when null; a FakeClock makes
  // pings and timeouts move only when the test advances it).
  explicit TestMaster(JobMasterConfig config, const Clock* clock = nullptr) {
    config.bind_address = "127.0.0.1";
    auto server = JobMasterServer::Create(config, &terminator_, clock != nullptr ? clock : &real_clock_);
    if (!server.ok()) {
      status_ = server.status();
      return;
    }
    server_ = std::move(*server);
    port_ = server_->port();
    thread_ = std::thread([this] { status_ = server_->Run(); });
  }
  ~TestMaster() { Shutdown(); }

  // Stops the loop, waits for its thread and closes every connection (as
  // when the master's process dies).
  void Shutdown() {
    if (!thread_.joinable()) return;
    server_->Stop();
    thread_.join();
    server_.reset();
  }
  int port() const { return port_; }
  const absl::Status& status() const { return status_; }
  FakeJobTerminator& terminator() { return terminator_; }
  // The server's own counters (caps, cut-off connections); any thread.
  const JobMasterServer& server() const { return *server_; }

  // Reads the master's state on its loop.
  template <typename T>
  T Read(const std::function<T(const MasterState&)>& fn) {
    T value{};
    server_->Inspect([&](const MasterState& s) { value = fn(s); });
    return value;
  }
  // Polls `condition` on the loop until it holds or `timeout` passes.
  bool WaitUntil(const std::function<bool(const MasterState&)>& condition,
                 absl::Duration timeout = absl::Seconds(10)) {
    return ::trainyard::WaitUntil([&] { return Read<bool>(condition); }, timeout);
  }

 private:
  RealClock real_clock_;
  FakeJobTerminator terminator_;
  std::unique_ptr<JobMasterServer> server_;
  std::thread thread_;
  absl::Status status_;
  int port_ = 0;
};

}  // namespace trainyard::jobmaster
