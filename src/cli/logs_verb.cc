// `trainyard logs JOB [ROLE[/INDEX]]`: one Logs stream from the server,
// printed by LogPrinter. --tail and --since are sent along (the node picks
// the lines); --since takes a duration back from now or a time.
#include <iostream>
#include <optional>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cli/client.h"
#include "cli/verb_common.h"
#include "api/log_lines.h"
#include "api/log_printer.h"
#include "api/log_resume.h"
#include "cli/verbs.h"

namespace trainyard::cli {
namespace {

// A followed stream the server ended by going away is opened again when a
// server answers within this (a failover takes a few seconds), at most this
// many times in a row without a chunk between.
constexpr int kFollowReconnectSeconds = 60;
constexpr int kFollowReopenTries = 5;

struct LogsFlags {
  std::string server;
  std::string job;
  std::string task;
  bool follow = false;
  int attempt = -1;
  int tail = -1;
  std::string since;
  bool timestamps = false;
  bool prefix = false;     // default: when the stream has several tasks
  bool no_prefix = false;
};

int Logs(LogsFlags& f) {
  v1::LogsRequest req;
  req.set_job(f.job);
  req.set_index(-1);
  if (!f.task.empty()) {
    std::vector<std::string> parts = absl::StrSplit(f.task, absl::MaxSplits('/', 1));
    req.set_role(parts[0]);
    if (parts.size() == 2) {
      int index;
      if (!absl::SimpleAtoi(parts[1], &index) || index < 0) {
        std::cerr << "trainyard logs: '" << f.task << "': the index after '/' must be a number\n";
        return kExitUsage;
      }
      req.set_index(index);
    }
  }
  req.set_attempt(f.attempt);
  req.set_follow(f.follow);
  if (f.tail >= 0) req.set_tail_lines(f.tail);
  if (!f.since.empty()) {
    std::optional<int64_t> since = api::ParseLogSince(f.since, absl::Now());
    if (!since) {
      std::cerr << "trainyard logs: --since '" << f.since
                << "': give a duration (10m, 1h30m) or a time (2026-12-01T10:00:00Z)\n";
      return kExitUsage;
    }
    req.set_since_unix_nanos(*since);
  }
  bool many = f.task.empty() || req.index() < 0;
  bool prefix = f.prefix || (many && !f.no_prefix);
  return PrintLogs("logs", f.server, req,
                   {.follow = f.follow,
                    .timestamps = f.timestamps,
                    .prefix = prefix,
                    .headers = many && !prefix,
                    .tail_lines = f.tail});
}

}  // namespace

int PrintLogs(const std::string& verb, const std::string& server, const v1::LogsRequest& req,
              const api::LogPrintOptions& options) {
  api::LogPrinter printer(options, std::cout, std::cerr);
  std::string address = ServerAddress(server);
  std::shared_ptr<grpc::Channel> channel = MakeChannel(address);
  auto stub = v1::Trainyard::NewStub(channel);
  // Following, a stream that ends with its server gone (a failover, a
  // restart: UNAVAILABLE that the server did not send) is opened again once
  // a server answers; LogResume takes out what comes again.
  api::LogResume resume(absl::ToUnixNanos(absl::Now()));
  v1::LogsRequest next = req;
  int tries_left = kFollowReopenTries;
  for (int reopened = 0;; ++reopened) {
    grpc::ClientContext ctx;
    Authorize(&ctx);
    auto reader = stub->Logs(&ctx, next);
    v1::LogChunk chunk;
    bool shown = false;
    while (reader->Read(&chunk)) {
      if (!req.follow()) {
        printer.Add(chunk);
      } else if (resume.Take(chunk)) {
        printer.Add(chunk);
        shown = true;
      }
    }
    grpc::Status st = reader->Finish();
    if (shown) tries_left = kFollowReopenTries;
    bool server_gone = req.follow() && st.error_code() == grpc::StatusCode::UNAVAILABLE &&
                       ctx.GetServerTrailingMetadata().count(api::kLogsEndedByServerKey) == 0;
    if (server_gone) {
      // A new channel dials every server of a list at once; an old one may
      // wait out its backoff for the standby that took over.
      channel = MakeChannel(address);
      stub = v1::Trainyard::NewStub(channel);
    }
    if (!server_gone || --tries_left < 0 ||
        !channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(kFollowReconnectSeconds))) {
      printer.Finish();
      if (!st.ok()) return ReportError(verb, address, st);
      return kExitOk;
    }
    std::cerr << "trainyard " << verb << ": the server ended the stream (" << st.error_message()
              << "); following on at the server that answers now\n";
    // A server that answers but ends the stream at once is not asked again
    // and again without a pause.
    if (!shown && reopened > 0) absl::SleepFor(absl::Milliseconds(500));
    next = req;
    resume.Resume(next, absl::ToUnixNanos(absl::Now()));
  }
}

void RegisterLogs(CLI::App& app, int* exit_code) {
  static LogsFlags logs;
  auto* c = app.add_subcommand("logs", "Print a job's task logs (kept after the job ends)");
  c->add_option("job", logs.job, "job name")->required();
  c->add_option("task", logs.task, "ROLE or ROLE/INDEX (default: every task, each line prefixed with its task)");
  c->add_flag("-f,--follow", logs.follow,
              "keep printing as the tasks write, across restarts, until the job ends (waits for a task to start)");
  c->add_option("--attempt", logs.attempt, "attempt number (default: the latest)");
  c->add_option("--tail", logs.tail, "only the last N lines of each task")->check(CLI::NonNegativeNumber);
  c->add_option("--since", logs.since, "only lines written since a duration ago (10m, 1h) or a time (RFC 3339)");
  c->add_flag("--timestamps", logs.timestamps, "begin each line with the time it was written (RFC 3339, UTC)");
  c->add_flag("--prefix", logs.prefix, "begin each line with its task's name (the default for several tasks)");
  c->add_flag("--no-prefix", logs.no_prefix, "no task names; several tasks get a header line each instead");
  c->add_option("--server", logs.server, "server address host:port (default $TRAINYARD_SERVER or 127.0.0.1:7450)");
  AddCaOption(c);
  c->callback([exit_code] { *exit_code = Logs(logs); });
}

}  // namespace trainyard::cli
