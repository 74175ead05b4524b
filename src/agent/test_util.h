// Helpers for the agent's tests: temporary directories, file reading,
// waiting on a condition with a deadline, and a listener that records every
// status change.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/supervisor.h"
#include "api/log_lines.h"
#include "common/wait_until.h"

namespace trainyard::agent::testing {

// The one wait-with-a-deadline of every room's tests (common/wait_until.h).
using ::trainyard::WaitUntil;

// How long an agent test waits for a task or a process to get somewhere.
constexpr absl::Duration kTimeout = absl::Seconds(20);

// Whether a task has ended (a predicate for Supervisor::WaitFor).
inline bool Final(const TaskStatus& s) { return IsFinal(s.state); }

// A fresh directory under $TMPDIR, removed with its contents at destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "trainyard-agent-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// A log's text without the keeper's line stamps (api/log_lines.h).
inline std::string Unstamped(const std::string& log) {
  std::string text;
  api::LogSplitter s;
  auto take = [&](const api::LogPiece& p) { text.append(p.text.data(), p.text.size()); };
  s.Add(log, take);
  s.Finish(take);
  return text;
}

// Path of a file under src/agent/testdata: from $TRAINYARD_SOURCE_DIR (set
// by ctest), else found beside this header (__FILE__ is relative when ccache
// rewrites paths, so it is only the fallback).
inline std::string TestDataPath(const std::string& name) {
  if (const char* root = std::getenv("TRAINYARD_SOURCE_DIR"); root != nullptr && *root) {
    return (std::filesystem::path(root) / "src/agent/testdata" / name).string();
  }
  return (std::filesystem::path(__FILE__).parent_path() / "testdata" / name).string();
}

// Records every status change it receives.
class RecordingListener : public TaskListener {
 public:
  void OnTaskStatus(const TaskStatus& status) override {
    absl::MutexLock lock(&mu_);
    statuses_.push_back(status);
  }
  std::vector<TaskStatus> statuses() const {
    absl::MutexLock lock(&mu_);
    return statuses_;
  }
  // The states reported for `key`, in order.
  std::vector<TaskState> StatesOf(const TaskKey& key) const {
    std::vector<TaskState> states;
    for (const TaskStatus& s : statuses()) {
      if (s.key == key) states.push_back(s.state);
    }
    return states;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<TaskStatus> statuses_ ABSL_GUARDED_BY(mu_);
};

}  // namespace trainyard::agent::testing
