// The real CommandRunner: posix_spawnp with stdout and stderr on pipes, both
// drained with poll so a chatty stderr cannot block the child. Waits only for
// its own pid, so it never reaps a task of the supervisor.
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/gpu_discovery.h"

extern char** environ;

namespace trainyard::agent {
namespace {

// Reads both pipes to their end; closes them.
void DrainPipes(int out_fd, int err_fd, std::string* out, std::string* err) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {out, err};
  int open_count = 2;
  char buffer[8192];
  while (open_count > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        sinks[i]->append(buffer, n);
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_count;
      }
    }
  }
}

class SubprocessRunner : public CommandRunner {
 public:
  absl::StatusOr<std::string> Run(const std::vector<std::string>& argv) override {
    std::string joined = absl::StrJoin(argv, " ");
    int out_pipe[2], err_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0) return absl::InternalError(strerror(errno));
    if (pipe2(err_pipe, O_CLOEXEC) != 0) {
      close(out_pipe[0]);
      close(out_pipe[1]);
      return absl::InternalError(strerror(errno));
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = 0;
    int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(out_pipe[1]);
    close(err_pipe[1]);
    if (rc != 0) {
      close(out_pipe[0]);
      close(err_pipe[0]);
      return absl::NotFoundError(absl::StrCat("cannot run \"", joined, "\": ", strerror(rc)));
    }
    std::string out, err;
    DrainPipes(out_pipe[0], err_pipe[0], &out, &err);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return out;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
      return absl::NotFoundError(absl::StrCat("cannot run \"", joined, "\": not found"));
    }
    return absl::UnavailableError(absl::StrCat("\"", joined, "\" exited with status ",
                                               WIFEXITED(status) ? WEXITSTATUS(status) : -1, ": ",
                                               err.substr(0, 200)));
  }
};

}  // namespace

CommandRunnerPtr NewSubprocessRunner() { return std::make_unique<SubprocessRunner>(); }

}  // namespace trainyard::agent
