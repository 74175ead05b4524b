// TestProcess: child processes for the example tests (fork + execve, the
// child only redirects output and execs).
#include "test_process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "absl/time/clock.h"

namespace trainyard::examples {

TestProcess::TestProcess(std::vector<std::string> argv, std::map<std::string, std::string> env,
                         std::string log_path)
    : log_path_(std::move(log_path)) {
  for (const char* keep : {"PATH", "HOME"}) {
    if (const char* v = std::getenv(keep); v != nullptr && !env.count(keep)) env[keep] = v;
  }
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> args, envp;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  pid_ = fork();
  if (pid_ == 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  if (fd >= 0) close(fd);
}

TestProcess::~TestProcess() { Kill(); }

std::string TestProcess::Output() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<std::smatch> TestProcess::WaitForOutput(const std::string& pattern, absl::Duration timeout) {
  std::regex re(pattern);
  absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    last_output_ = Output();
    std::smatch m;
    if (std::regex_search(last_output_, m, re)) return m;
    if (absl::Now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::optional<int> TestProcess::WaitForExit(absl::Duration timeout) {
  if (exit_code_ || pid_ <= 0) return exit_code_;
  absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return exit_code_;
    }
    if (absl::Now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void TestProcess::Kill() {
  if (pid_ <= 0 || exit_code_) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  exit_code_ = 128 + SIGKILL;
}

// A port that binds now, chosen at random in 10000-19999: below the
// kernel's ephemeral range (32768 and up by default), so no outgoing
// connection of the host takes it before the process it is for binds it
// (a port the kernel hands out for port 0 is an ephemeral one, and was
// taken so: "Connection refused" from a ps that could not bind), and below
// the integration tests' port blocks (20000-31999).
int PickFreePort() {
  static std::mt19937 rng(static_cast<unsigned>(getpid()) ^ static_cast<unsigned>(time(nullptr)));
  for (int attempt = 0; attempt < 1000; ++attempt) {
    int port = 10000 + static_cast<int>(rng() % 10000);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    bool free = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    if (free) return port;
  }
  return 0;
}

std::vector<std::pair<int, double>> EpochLosses(const std::string& output) {
  std::vector<std::pair<int, double>> out;
  std::regex re(R"(epoch (\d+) loss ([0-9.]+))");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), re); it != std::sregex_iterator(); ++it) {
    out.emplace_back(std::stoi((*it)[1]), std::stod((*it)[2]));
  }
  return out;
}

}  // namespace trainyard::examples
