// Test helper of the example tests: starts a program as a child process
// with a given environment, its stdout and stderr in a file, and waits for
// lines to appear or for the process to exit, each with a deadline. Every
// process started is stopped by its PID (SIGKILL) when the helper goes away.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace trainyard::examples {

class TestProcess {
 public:
  // Starts `argv` with exactly `env` (plus PATH and HOME from this process),
  // output to `log_path`. started() is false when fork failed.
  TestProcess(std::vector<std::string> argv, std::map<std::string, std::string> env,
              std::string log_path);
  ~TestProcess();
  TestProcess(const TestProcess&) = delete;
  TestProcess& operator=(const TestProcess&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // The output so far.
  std::string Output() const;
  // Waits until the output matches `pattern` (ECMAScript regex, searched
  // anywhere) or `timeout`; returns the first match's groups.
  std::optional<std::smatch> WaitForOutput(const std::string& pattern, absl::Duration timeout);
  // Waits for the exit; returns the exit code (128 + signal when killed) or
  // nullopt on timeout.
  std::optional<int> WaitForExit(absl::Duration timeout);
  // SIGKILL and reap.
  void Kill();

 private:
  pid_t pid_ = -1;
  std::string log_path_;
  std::optional<int> exit_code_;
  mutable std::string last_output_;  // keeps smatch iterators valid
};

// A TCP port of 127.0.0.1 that was free a moment ago, outside the kernel's
// ephemeral range (test_process.cc).
int PickFreePort();

// Parses "epoch N loss X" lines of `output` into (epoch, loss) pairs.
std::vector<std::pair<int, double>> EpochLosses(const std::string& output);

}  // namespace trainyard::examples
