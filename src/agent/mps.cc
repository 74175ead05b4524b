// MpsDaemons: one MPS control daemon per shared GPU, run through the control
// program with the GPU's own pipe and log directories in its environment.
#include "agent/mps.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"

extern char** environ;

namespace trainyard::agent {
namespace {

constexpr char kMpsLog[] = "mps";
constexpr char kDefaultControl[] = "nvidia-cuda-mps-control";
// Written by the control daemon into its pipe directory.
constexpr char kPidFile[] = "nvidia-cuda-mps-control.pid";

bool Executable(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// `name` as found in PATH, or "" when it is not there.
std::string FindInPath(const std::string& name) {
  if (name.find('/') != std::string::npos) return Executable(name) ? name : "";
  const char* path = getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "", ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (Executable(candidate)) return candidate;
  }
  return "";
}

// The agent's environment with the GPU and MPS variables replaced by `set`.
std::vector<std::string> ControlEnvironment(const std::map<std::string, std::string>& set) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    absl::string_view entry(*e);
    absl::string_view key = entry.substr(0, entry.find('='));
    if (set.count(std::string(key)) == 0) env.emplace_back(entry);
  }
  for (const auto& [k, v] : set) env.push_back(absl::StrCat(k, "=", v));
  return env;
}

// Waits for `pid` up to `timeout`; kills it when the time is up. Returns its
// wait status, or an error when it had to be killed.
absl::StatusOr<int> WaitWithTimeout(pid_t pid, absl::Duration timeout) {
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    int ms = static_cast<int>(absl::ToInt64Milliseconds(timeout));
    int ready;
    do {
      ready = poll(&p, 1, ms);
    } while (ready < 0 && errno == EINTR);
    close(pidfd);
    if (ready == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      return absl::DeadlineExceededError(absl::StrCat("did not finish within ", absl::FormatDuration(timeout)));
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

}  // namespace

MpsDaemons::MpsDaemons(MpsOptions options) : options_(std::move(options)) {}

MpsGpu MpsDaemons::DirsOf(int gpu) const {
  std::string base = absl::StrCat(options_.dir, "/gpu-", gpu);
  return {.pipe_dir = base + "/pipe", .log_dir = base + "/log"};
}

absl::Status MpsDaemons::RunControl(int gpu, const std::vector<std::string>& args, const std::string& input) const {
  MpsGpu dirs = DirsOf(gpu);
  std::string out_path = dirs.log_dir + "/control.out";
  int in_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0) return absl::InternalError(strerror(errno));
  int out_fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out_fd < 0) {
    close(in_pipe[0]);
    close(in_pipe[1]);
    return absl::PermissionDeniedError(absl::StrCat("cannot write ", out_path, ": ", strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 2);
  std::vector<std::string> argv = {options_.control};
  argv.insert(argv.end(), args.begin(), args.end());
  // The daemon sees only its GPU: its clients see that GPU as device 0.
  std::vector<std::string> env = ControlEnvironment({{"CUDA_VISIBLE_DEVICES", absl::StrCat(gpu)},
                                                     {"CUDA_MPS_PIPE_DIRECTORY", dirs.pipe_dir},
                                                     {"CUDA_MPS_LOG_DIRECTORY", dirs.log_dir}});
  std::vector<char*> cargv, cenv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (std::string& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, cargv[0], &actions, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  close(in_pipe[0]);
  close(out_fd);
  std::string what = absl::StrCat(absl::StrJoin(argv, " "), " (GPU ", gpu, ")");
  if (rc != 0) {
    close(in_pipe[1]);
    return absl::FailedPreconditionError(absl::StrCat(what, ": ", strerror(rc)));
  }
  // Short input: the pipe holds it, so this never waits on the child.
  if (!input.empty()) (void)!write(in_pipe[1], input.data(), input.size());
  close(in_pipe[1]);
  absl::StatusOr<int> status = WaitWithTimeout(pid, options_.command_timeout);
  if (!status.ok()) return absl::DeadlineExceededError(absl::StrCat(what, ": ", status.status().message()));
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(what, " failed (", WIFEXITED(*status) ? "exit code " : "signal ",
                                                      WIFEXITED(*status) ? WEXITSTATUS(*status) : WTERMSIG(*status),
                                                      "); its output is in ", out_path));
  }
  return absl::OkStatus();
}

bool MpsDaemons::DaemonRuns(int gpu) const {
  std::ifstream in(absl::StrCat(DirsOf(gpu).pipe_dir, "/", kPidFile));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int pid = 0;
  return absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &pid) && pid > 0 && kill(pid, 0) == 0;
}

absl::StatusOr<MpsGpu> MpsDaemons::Join(const std::string& holder, int gpu) {
  absl::MutexLock lock(&mu_);
  MpsGpu dirs = DirsOf(gpu);
  if (auto it = gpu_of_.find(holder); it != gpu_of_.end() && it->second == gpu) return dirs;
  std::set<std::string>& holders = holders_[gpu];
  if (holders.empty()) {
    std::error_code ec;
    for (const std::string& d : {dirs.pipe_dir, dirs.log_dir}) {
      std::filesystem::create_directories(d, ec);
      if (ec) return absl::PermissionDeniedError(absl::StrCat("MPS dir ", d, ": ", ec.message()));
    }
    if (!DaemonRuns(gpu)) {
      if (absl::Status s = RunControl(gpu, {"-d"}, ""); !s.ok()) {
        holders_.erase(gpu);
        return s;
      }
      Log(LogLevel::kInfo, kMpsLog, "GPU %d: MPS control daemon started (pipes in %s)", gpu, dirs.pipe_dir);
    }
  }
  holders.insert(holder);
  gpu_of_[holder] = gpu;
  return dirs;
}

void MpsDaemons::Leave(const std::string& holder) {
  absl::MutexLock lock(&mu_);
  auto it = gpu_of_.find(holder);
  if (it == gpu_of_.end()) return;
  int gpu = it->second;
  gpu_of_.erase(it);
  std::set<std::string>& holders = holders_[gpu];
  holders.erase(holder);
  if (!holders.empty()) return;
  holders_.erase(gpu);
  if (absl::Status s = RunControl(gpu, {}, "quit\n"); !s.ok()) {
    Log(LogLevel::kWarning, kMpsLog, "GPU %d: stopping the MPS control daemon: %s", gpu, s.message());
  } else {
    Log(LogLevel::kInfo, kMpsLog, "GPU %d: MPS control daemon stopped (its last share ended)", gpu);
  }
}

std::vector<int> MpsDaemons::Gpus() const {
  absl::MutexLock lock(&mu_);
  std::vector<int> gpus;
  for (const auto& [gpu, holders] : holders_) gpus.push_back(gpu);
  return gpus;
}

void SetMpsClientEnv(int32_t gpu_milli, int64_t gpu_memory_mb, const MpsGpu& dirs,
                     std::map<std::string, std::string>* env) {
  // (A std::string, not "0": GCC 12 warns falsely on assigning a short literal here.)
  (*env)["CUDA_VISIBLE_DEVICES"] = std::string(1, '0');
  (*env)["CUDA_MPS_PIPE_DIRECTORY"] = dirs.pipe_dir;
  (*env)["CUDA_MPS_LOG_DIRECTORY"] = dirs.log_dir;
  // Rounded up: a 0.001 share still gets 1 %.
  (*env)["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = absl::StrCat((gpu_milli + 9) / 10);
  if (gpu_memory_mb > 0) {
    (*env)["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = absl::StrCat("0=", gpu_memory_mb, "M");
  } else {
    env->erase("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
  }
}

absl::StatusOr<std::string> ChooseMpsControl(const std::string& mode, const std::string& control,
                                             bool simulated_gpus) {
  std::string name = control.empty() ? kDefaultControl : control;
  if (mode == "off") return std::string();
  if (mode != "auto" && mode != "on") {
    return absl::InvalidArgumentError(absl::StrCat("--mps: '", mode, "' is not one of off, auto, on"));
  }
  std::string found = FindInPath(name);
  if (mode == "auto") return simulated_gpus ? std::string() : found;
  if (found.empty()) {
    return absl::NotFoundError(absl::StrCat("--mps on: the MPS control program ", name,
                                            name.find('/') != std::string::npos ? " is not an executable file"
                                                                         : " is not in PATH",
                                            " (give its path with --mps-control)"));
  }
  return found;
}

}  // namespace trainyard::agent
