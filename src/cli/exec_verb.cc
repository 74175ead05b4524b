// `trainyard exec JOB ROLE[/INDEX] [-i] [-t] -- COMMAND...`: runs a command
// in a running task (one Exec stream: the server relays it to the task's
// node) and exits with the command's exit code (128 + N for signal N).
// `trainyard attach JOB ROLE[/INDEX]`: the task's output from now on, live,
// across its restarts (a Logs stream that follows, from the end).
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "api/log_printer.h"
#include "cli/client.h"
#include "cli/verb_common.h"
#include "cli/verbs.h"

namespace trainyard::cli {
namespace {

struct ExecFlags {
  std::string server;
  std::string job;
  std::string task;
  bool stdin = false;
  bool tty = false;
  std::vector<std::string> command;
};

// The terminal of stdin in raw mode while it lives (the remote terminal
// does the echoing and line editing), as it was after.
class RawTerminal {
 public:
  RawTerminal() {
    if (tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    cfmakeraw(&raw);
    active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() { Restore(); }
  void Restore() {
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
    active_ = false;
  }

 private:
  termios saved_{};
  bool active_ = false;
};

bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

int Exec(ExecFlags& f) {
  v1::ExecRequest first;
  v1::ExecStart* start = first.mutable_start();
  start->set_job(f.job);
  int index = 0;
  if (!ParseTask("exec", f.task, start->mutable_role(), &index)) return kExitUsage;
  start->set_index(index);
  for (const std::string& arg : f.command) start->add_command(arg);
  bool tty = f.tty;
  if (tty && !isatty(STDIN_FILENO)) {
    std::cerr << "trainyard exec: -t: standard input is not a terminal; running the command without one\n";
    tty = false;
  }
  start->set_tty(tty);
  start->set_stdin(f.stdin || tty);
  winsize size{};
  if (tty && ioctl(STDIN_FILENO, TIOCGWINSZ, &size) == 0) {
    start->set_rows(size.ws_row);
    start->set_cols(size.ws_col);
  }
  if (const char* term = std::getenv("TERM"); tty && term != nullptr) start->set_term(term);

  // SIGWINCH is taken by a thread of its own (sigwait): blocked here,
  // before any thread starts, so none of gRPC's takes it.
  sigset_t winch;
  sigemptyset(&winch);
  sigaddset(&winch, SIGWINCH);
  if (tty) pthread_sigmask(SIG_BLOCK, &winch, nullptr);

  std::string address = ServerAddress(f.server);
  auto stub = MakeStub(address);
  grpc::ClientContext ctx;
  Authorize(&ctx);
  auto stream = stub->Exec(&ctx);
  std::mutex write_mu;  // one Write at a time: input and resizes
  std::atomic<bool> done{false};
  {
    std::lock_guard<std::mutex> lock(write_mu);
    stream->Write(first);
  }
  std::unique_ptr<RawTerminal> raw;
  if (tty) raw = std::make_unique<RawTerminal>();
  std::atomic<bool> input_running{false};
  if (start->stdin()) {
    input_running = true;
    std::thread([&] {
      std::string buf(32 << 10, '\0');
      for (;;) {
        ssize_t n = read(STDIN_FILENO, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (done) break;
        v1::ExecRequest in;
        if (n > 0) {
          in.set_stdin(buf.data(), static_cast<size_t>(n));
        } else {
          in.set_stdin_eof(true);
        }
        std::lock_guard<std::mutex> lock(write_mu);
        if (done || !stream->Write(in) || n <= 0) break;
      }
      input_running = false;
    }).detach();
  }
  if (tty) {
    std::thread([&] {
      int sig;
      while (sigwait(&winch, &sig) == 0) {
        winsize now{};
        if (done || ioctl(STDIN_FILENO, TIOCGWINSZ, &now) != 0) continue;
        v1::ExecRequest resize;
        resize.set_rows(now.ws_row);
        resize.set_cols(now.ws_col);
        std::lock_guard<std::mutex> lock(write_mu);
        if (done || !stream->Write(resize)) break;
      }
    }).detach();
  }

  int code = kExitFailure;
  bool exited = false;
  std::string message;
  bool cannot_write = false;
  v1::ExecResponse resp;
  while (stream->Read(&resp)) {
    cannot_write = (!resp.stdout().empty() && !WriteAll(STDOUT_FILENO, resp.stdout())) ||
                   (!resp.stderr().empty() && !WriteAll(STDERR_FILENO, resp.stderr()));
    if (cannot_write) break;
    if (resp.exited()) {
      exited = true;
      code = resp.signal() > 0 ? 128 + resp.signal() : resp.exit_code();
      message = resp.message();
    }
  }
  {
    std::lock_guard<std::mutex> lock(write_mu);
    done = true;
  }
  if (raw) raw->Restore();
  if (cannot_write) ctx.TryCancel();  // output that cannot be written: the command is hung up on
  grpc::Status st = stream->Finish();
  if (!message.empty()) std::cerr << "trainyard exec: " << message << "\n";
  if (!st.ok() && !exited) code = ReportError("exec", address, st);
  std::cout.flush();
  // The input and resize threads may still wait on stdin or a signal, with
  // the stream: end here, before it is freed under them.
  std::fflush(nullptr);
  std::_Exit(code);
}

struct AttachFlags {
  std::string server;
  std::string job;
  std::string task;
  int tail = 0;
  bool timestamps = false;
};

int Attach(AttachFlags& f) {
  v1::LogsRequest req;
  req.set_job(f.job);
  int index = 0;
  if (!ParseTask("attach", f.task, req.mutable_role(), &index)) return kExitUsage;
  req.set_index(index);
  req.set_attempt(-1);
  req.set_follow(true);
  req.set_tail_lines(f.tail);
  return PrintLogs("attach", f.server, req,
                   {.follow = true, .timestamps = f.timestamps, .prefix = false, .headers = false, .tail_lines = f.tail});
}

}  // namespace

// "ROLE" or "ROLE/INDEX" (index 0 when left out); false when INDEX is not
// a number.
bool ParseTask(const std::string& verb, const std::string& text, std::string* role, int* index) {
  std::vector<std::string> parts = absl::StrSplit(text, absl::MaxSplits('/', 1));
  *role = parts[0];
  *index = 0;
  if (parts.size() == 2 && (!absl::SimpleAtoi(parts[1], index) || *index < 0)) {
    std::cerr << "trainyard " << verb << ": '" << text << "': the index after '/' must be a number\n";
    return false;
  }
  if (role->empty()) {
    std::cerr << "trainyard " << verb << ": '" << text << "': give the task as ROLE or ROLE/INDEX\n";
    return false;
  }
  return true;
}

void RegisterExecVerbs(CLI::App& app, int* exit_code) {
  static ExecFlags exec;
  auto* c = app.add_subcommand(
      "exec",
      "Run a command in a running task, as the task runs (its account, cgroups, working dir, environment); exits "
      "with the command's exit code");
  c->add_option("job", exec.job, "job name")->required();
  c->add_option("task", exec.task, "ROLE or ROLE/INDEX (index 0 when left out)")->required();
  c->add_option("command", exec.command, "the command and its arguments, after --")->required();
  c->add_flag("-i,--stdin", exec.stdin, "pass standard input to the command (without: it reads /dev/null)");
  c->add_flag("-t,--tty", exec.tty,
              "run the command on a terminal (its output all comes as stdout; implies -i; needs a terminal here)");
  c->add_option("--server", exec.server, "server address host:port (default $TRAINYARD_SERVER or 127.0.0.1:7450)");
  AddCaOption(c);
  c->callback([exit_code] { *exit_code = Exec(exec); });

  static AttachFlags attach;
  c = app.add_subcommand("attach",
                         "Show a running task's output as it writes it, across its restarts, until the job ends "
                         "(Ctrl-C detaches; the task goes on)");
  c->add_option("job", attach.job, "job name")->required();
  c->add_option("task", attach.task, "ROLE or ROLE/INDEX (index 0 when left out)")->required();
  c->add_option("--tail", attach.tail, "first the last N lines it wrote (default 0)")->check(CLI::NonNegativeNumber);
  c->add_flag("--timestamps", attach.timestamps, "begin each line with the time it was written (RFC 3339, UTC)");
  c->add_option("--server", attach.server, "server address host:port (default $TRAINYARD_SERVER or 127.0.0.1:7450)");
  AddCaOption(c);
  c->callback([exit_code] { *exit_code = Attach(attach); });
}

}  // namespace trainyard::cli
