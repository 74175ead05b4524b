// The task keeper: the small process that leads a task's session and
// process group, starts the task (its cgroups, account, working dir, logs),
// captures its output into the logs, records how it ended and then ends the
// same way (process_spawn.h says what the agent sees of it).
//
// The keeper is its own small program, `trainyard-keeper`, found next to
// the agent's binary: the agent starts it with posix_spawn (vfork and exec:
// nothing of the agent's memory is copied) and hands it a KeeperRequest on
// fd 3; fd 4 is the pipe its failures are told on (ChildFail), closed on the
// task's exec. Where no keeper program is found the agent forks itself and
// runs RunKeeper in the copy, as it did before there was one: the same code
// either way, but a fork of a large threaded process costs milliseconds of
// page-table copying per task.
//
// Only the C library and the standard library's strings and vectors: the
// program links against nothing of the agent but log_capture.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trainyard::agent {

// Steps a child may fail at; sent to the agent with errno (ChildFail).
enum ChildStep : int {
  kStepSession, kStepCgroup, kStepChdir, kStepStdout, kStepStderr, kStepExec,
  kStepNoNewPrivs, kStepGroups, kStepGid, kStepUid, kStepRootBack, kStepTerminal, kStepMountNamespace,
  kStepKeeperRequest
};

// Everything the keeper needs, as plain data (SpawnRequest, made concrete).
struct KeeperRequest {
  std::vector<std::string> argv;  // argv[0] looked up in the PATH of `env`
  std::vector<std::string> env;   // "KEY=VALUE"
  std::string working_dir;
  std::string log_dir;  // the logs' directory and their names in it
  std::string stdout_name;
  std::string stderr_name;
  int64_t log_max_bytes = 0;
  std::vector<std::string> procs_files;  // cgroup.procs files to join
  bool switch_account = false;  // else the keeper's own account
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;
  std::string exit_status_path;  // "" = not recorded
  int umask = -1;                // -1: as inherited
};

// The request as bytes and back (length-prefixed fields). Decode is false
// on anything but a whole, well-formed request.
std::string EncodeKeeperRequest(const KeeperRequest& r);
bool DecodeKeeperRequest(std::string_view bytes, KeeperRequest* r);

// Writes {step, errno} to the pipe and exits 127.
[[noreturn]] void ChildFail(int pipe_fd, int step);

// Closes every descriptor from 3 up except `keep`.
void CloseOtherFds(int keep);

// Takes the groups, gid and uid with the raw system calls (they act on the
// calling thread alone, the only one after a fork), then checks that root
// cannot come back; fails through ChildFail.
void DropToAccount(uint32_t uid, uint32_t gid, const gid_t* groups, size_t group_count, int pipe_fd);

// What a child execs with, as pointers into strings that outlive it, made
// before a fork (the child of a threaded process must not allocate): a
// task's (its keeper's request) or a `trainyard exec` command's.
struct ChildArgs {
  ChildArgs(const std::vector<std::string>& args, const std::vector<std::string>& env,
            const std::vector<uint32_t>& account_groups);
  explicit ChildArgs(const KeeperRequest& r) : ChildArgs(r.argv, r.env, r.groups) {}
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::vector<gid_t> groups;
};

// The keeper proper; `pipe_fd` as ChildFail's. Only async-signal-safe calls.
[[noreturn]] void RunKeeper(const KeeperRequest& r, const ChildArgs& args, int pipe_fd);

// The keeper program: reads its request from `request_fd` to its end, then
// RunKeeper (a request it cannot read fails as kStepKeeperRequest).
[[noreturn]] void KeeperMain(int request_fd, int pipe_fd);

}  // namespace trainyard::agent
