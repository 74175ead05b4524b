// `trainyard history` and `trainyard usage`: finished jobs as accounting
// keeps them (Slurm's sacct) and usage per user or queue over a period
// (sreport). Both read the server's AccountBook through the History and
// Usage calls; -o json prints the answers, -o csv a row per job or per
// user/queue for a spreadsheet.
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "api/job_spec.h"
#include "api/log_lines.h"
#include "api/states.h"
#include "cli/client.h"
#include "cli/text.h"
#include "cli/verb_common.h"

namespace trainyard::cli {
namespace {

struct HistoryFlags : Common {
  std::string user;
  std::string queue;
  std::string name;
  std::vector<std::string> states;
  std::string since;  // "": a day before --until
  std::string until;
  int limit = 0;
};

struct UsageFlags : Common {
  std::string since;  // "": 30 days before --until
  std::string until;
  std::string by = "user";
  std::string user;
  std::string queue;
};

// A time as --since/--until take it, as Unix ms: a duration back from now
// ("30d", "12h", "1h30m", "90s"), a date ("2026-12-01", midnight UTC) or an
// RFC 3339 time ("2026-12-01T10:00:00Z"); nullopt when it is none of them.
std::optional<int64_t> ParseWhen(const std::string& text, absl::Time now) {
  std::string t(absl::StripAsciiWhitespace(text));
  int64_t days = 0;
  if (t.size() > 1 && t.back() == 'd' && absl::SimpleAtoi(t.substr(0, t.size() - 1), &days)) {
    if (days < 0 || days > 100000) return std::nullopt;
    return absl::ToUnixMillis(now - absl::Hours(24) * days);
  }
  absl::Time day;
  std::string err;
  if (absl::ParseTime("%Y-%m-%d", t, absl::UTCTimeZone(), &day, &err)) return absl::ToUnixMillis(day);
  std::optional<int64_t> nanos = api::ParseLogSince(t, now);
  if (!nanos) return std::nullopt;
  return *nanos / 1000000;
}

// Reads --since and --until into the request's period; false (after saying
// why) when either is not a time. Without --since the period is the
// `back` before --until (or before now).
template <typename Request>
bool SetPeriod(const char* verb, const std::string& since, const std::string& until, absl::Duration back,
               Request* req) {
  absl::Time now = absl::Now();
  const char* hint = "': give a duration back from now (30d, 12h, 90m), a date (2026-12-01) or a time "
                     "(2026-12-01T10:00:00Z)\n";
  absl::Time end = now;
  if (!until.empty()) {
    std::optional<int64_t> ms = ParseWhen(until, now);
    if (!ms || *ms <= 0) {
      std::cerr << "trainyard " << verb << ": --until '" << until << hint;
      return false;
    }
    req->set_until_unix_ms(*ms);
    end = absl::FromUnixMillis(*ms);
  }
  int64_t from = absl::ToUnixMillis(end - back);
  if (!since.empty()) {
    std::optional<int64_t> ms = ParseWhen(since, now);
    if (!ms) {
      std::cerr << "trainyard " << verb << ": --since '" << since << hint;
      return false;
    }
    from = *ms;
  }
  req->set_since_unix_ms(std::max<int64_t>(0, from));
  return true;
}

// "1-02:03:04" (days-hours:minutes:seconds) or "02:03:04", as sacct prints.
std::string Clock(int64_t ms) {
  int64_t s = std::max<int64_t>(0, ms) / 1000;
  std::string hms = absl::StrFormat("%02d:%02d:%02d", s / 3600 % 24, s / 60 % 60, s % 60);
  return s >= 86400 ? absl::StrCat(s / 86400, "-", hms) : hms;
}

std::string LocalTime(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixMillis(unix_ms), absl::LocalTimeZone());
}

std::string UtcTime(int64_t unix_ms) {
  if (unix_ms <= 0) return "";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(unix_ms), absl::UTCTimeZone());
}

std::string Hours(double h) { return absl::StrFormat("%.2f", h); }

std::string ExitText(const v1::JobAccount& a) {
  if (a.exit_code() == 0 && a.exit_signal() == 0) return "0";
  std::string how = a.exit_signal() != 0 ? absl::StrCat("signal ", a.exit_signal()) : absl::StrCat(a.exit_code());
  return absl::StrCat(how, " (", a.exit_task(), ")");
}

// A CSV field (RFC 4180): quoted when it holds a comma, a quote or a line
// break, its quotes doubled.
std::string Csv(const std::string& field) {
  if (field.find_first_of(",\"\r\n") == std::string::npos) return field;
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

void PrintCsvRow(const std::vector<std::string>& fields) {
  std::vector<std::string> quoted;
  for (const std::string& f : fields) quoted.push_back(Csv(f));
  std::cout << absl::StrJoin(quoted, ",") << "\r\n";
}

// --state's finished states into the request; false (after saying why) for
// any other word.
bool AddStates(const std::vector<std::string>& given, v1::HistoryRequest* req) {
  for (const std::string& list : given) {
    for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipEmpty())) {
      std::optional<v1::JobState> state = api::ParseJobState(part);
      if (!state || !api::IsTerminal(*state)) {
        std::vector<std::string> names;
        for (v1::JobState s : api::FinishedJobStates()) names.push_back(api::JobStateName(s));
        std::cerr << "trainyard history: --state: '" << part << "' is not one of " << absl::StrJoin(names, ", ")
                  << " (history lists finished jobs)\n";
        return false;
      }
      req->add_states(*state);
    }
  }
  return true;
}

void PrintHistoryCsv(const v1::HistoryResponse& all) {
  PrintCsvRow({"id", "name", "user", "queue", "priority", "state", "submit_time", "start_time", "end_time", "wait_s",
               "elapsed_s", "tasks", "gpus", "gpu_hours", "cpu_hours", "memory_gb_hours", "attempts", "restarts",
               "exit_code", "exit_signal", "exit_task", "array_job", "array_index", "deleted", "message"});
  for (const v1::JobAccount& a : all.jobs()) {
    PrintCsvRow({absl::StrCat(a.id()), a.name(), a.user(), a.queue(), api::PriorityName(a.priority()),
                 api::JobStateName(a.state()), UtcTime(a.submit_time_unix_ms()), UtcTime(a.start_time_unix_ms()),
                 UtcTime(a.end_time_unix_ms()), absl::StrFormat("%.3f", a.wait_ms() / 1000.0),
                 absl::StrFormat("%.3f", a.elapsed_ms() / 1000.0), absl::StrCat(a.tasks()), absl::StrCat(a.gpus()),
                 absl::StrFormat("%.6f", a.gpu_hours()), absl::StrFormat("%.6f", a.cpu_hours()),
                 absl::StrFormat("%.6f", a.memory_gb_hours()), absl::StrCat(a.attempts()), absl::StrCat(a.restarts()),
                 absl::StrCat(a.exit_code()), absl::StrCat(a.exit_signal()), a.exit_task(), a.array_job(),
                 a.array_job().empty() ? "" : absl::StrCat(a.array_index()), a.deleted() ? "true" : "false",
                 a.message()});
  }
}

void PrintHistoryTable(const v1::HistoryResponse& all) {
  Table t({"ID", "NAME", "USER", "QUEUE", "STATE", "ENDED", "WAIT", "ELAPSED", "TASKS", "GPUS", "GPU-HOURS",
           "ATTEMPTS", "EXIT"});
  for (const v1::JobAccount& a : all.jobs()) {
    t.Add({absl::StrCat(a.id()), Printable(a.name()) + (a.deleted() ? " (deleted)" : ""), Printable(a.user()),
           a.queue(), api::JobStateName(a.state()), LocalTime(a.end_time_unix_ms()), Clock(a.wait_ms()),
           Clock(a.elapsed_ms()), absl::StrCat(a.tasks()), absl::StrCat(a.gpus()), Hours(a.gpu_hours()),
           absl::StrCat(a.attempts()), Printable(ExitText(a))});
  }
  std::cout << t.Render();
  if (all.jobs_size() == 0) {
    std::cerr << "no finished jobs in the period"
              << (all.oldest_kept_unix_ms() > 0 ? " (the oldest kept ended " + LocalTime(all.oldest_kept_unix_ms()) + ")"
                                                : "")
              << "\n";
  }
}

int History(HistoryFlags& f) {
  v1::HistoryRequest req;
  req.set_user(f.user);
  req.set_queue(f.queue);
  req.set_name(f.name);
  if (!AddStates(f.states, &req)) return kExitUsage;
  if (f.limit < 0) {
    std::cerr << "trainyard history: --limit: " << f.limit << " is negative\n";
    return kExitUsage;
  }
  if (!SetPeriod("history", f.since, f.until, absl::Hours(24), &req)) return kExitUsage;
  std::string address = ServerAddress(f.server);
  auto stub = MakeStub(address);
  v1::HistoryResponse all;
  req.set_page_size(5000);
  do {
    v1::HistoryResponse page;
    auto ctx = Context();
    grpc::Status st = stub->History(ctx.get(), req, &page);
    if (!st.ok()) return ReportError("history", address, st);
    for (auto& a : *page.mutable_jobs()) {
      if (f.limit > 0 && all.jobs_size() == f.limit) break;
      *all.add_jobs() = std::move(a);
    }
    all.set_oldest_kept_unix_ms(page.oldest_kept_unix_ms());
    req.set_page_token(f.limit > 0 && all.jobs_size() == f.limit ? "" : page.next_page_token());
  } while (!req.page_token().empty());
  if (f.output == "json") {
    std::cout << ToJson(all) << "\n";
  } else if (f.output == "csv") {
    PrintHistoryCsv(all);
  } else {
    PrintHistoryTable(all);
  }
  return kExitOk;
}

std::vector<std::string> UsageFields(const v1::UsageRow& r, const std::string& key, bool precise = false) {
  auto hours = [precise](double h) { return precise ? absl::StrFormat("%.6f", h) : absl::StrFormat("%.2f", h); };
  return {key,
          absl::StrCat(r.jobs()),
          absl::StrCat(r.succeeded()),
          absl::StrCat(r.failed()),
          absl::StrCat(r.killed()),
          absl::StrCat(r.deadline_exceeded()),
          hours(r.gpu_hours()),
          hours(r.cpu_hours()),
          hours(r.memory_gb_hours()),
          hours(r.elapsed_hours()),
          precise ? absl::StrFormat("%.3f", r.mean_wait_s()) : absl::StrFormat("%.1f", r.mean_wait_s())};
}

int Usage(UsageFlags& f) {
  v1::UsageRequest req;
  req.set_group_by(f.by);
  req.set_user(f.user);
  req.set_queue(f.queue);
  if (!SetPeriod("usage", f.since, f.until, absl::Hours(24 * 30), &req)) return kExitUsage;
  std::string address = ServerAddress(f.server);
  auto stub = MakeStub(address);
  v1::UsageResponse resp;
  auto ctx = Context();
  grpc::Status st = stub->Usage(ctx.get(), req, &resp);
  if (!st.ok()) return ReportError("usage", address, st);
  if (f.output == "json") {
    std::cout << ToJson(resp) << "\n";
    return kExitOk;
  }
  std::vector<std::string> header = {absl::AsciiStrToUpper(f.by), "JOBS",      "SUCCEEDED",    "FAILED",
                                     "KILLED",                    "DEADLINE",  "GPU-HOURS",    "CPU-HOURS",
                                     "MEM-GB-HOURS",              "RUN-HOURS", "MEAN-WAIT-S"};
  if (f.output == "csv") {
    header = {f.by,        "jobs",      "succeeded",       "failed",        "killed",     "deadline_exceeded",
              "gpu_hours", "cpu_hours", "memory_gb_hours", "elapsed_hours", "mean_wait_s"};
    PrintCsvRow(header);
    for (const v1::UsageRow& r : resp.rows()) PrintCsvRow(UsageFields(r, r.key(), /*precise=*/true));
    return kExitOk;
  }
  std::cout << "Jobs that ended from " << LocalTime(resp.since_unix_ms()) << " to " << LocalTime(resp.until_unix_ms())
            << ", by " << f.by << "\n";
  Table t(header);
  for (const v1::UsageRow& r : resp.rows()) t.Add(UsageFields(r, Printable(r.key())));
  t.Add(UsageFields(resp.total(), "TOTAL"));
  std::cout << t.Render();
  return kExitOk;
}

void AddOutput(CLI::App* c, Common* f) {
  c->add_option("--server", f->server,
                "server address host:port (default $TRAINYARD_SERVER, else the client config's, else 127.0.0.1:7450)");
  AddCaOption(c);
  c->add_option("-o,--output", f->output, "table, json or csv")->check(CLI::IsMember({"table", "json", "csv"}));
}

}  // namespace

void RegisterAccountingVerbs(CLI::App& app, int* exit_code) {
  static HistoryFlags history;
  CLI::App* c = app.add_subcommand(
      "history", "Finished jobs as accounting keeps them (deleted ones too): times, GPU-hours, attempts, exit codes");
  c->add_option("--since", history.since,
                "jobs that ended since: a duration back (30d, 12h), a date (2026-12-01) or a time (default: a day "
                "before --until)");
  c->add_option("--until", history.until, "jobs that ended before this (default now)");
  c->add_option("--user", history.user, "only this user's jobs");
  c->add_option("--queue", history.queue, "only the jobs of this queue");
  c->add_option("--name", history.name, "only the job of this name, or an array's elements");
  c->add_option("--state", history.states, "only jobs that ended so (succeeded,failed,killed,deadline_exceeded)")
      ->delimiter(',');
  c->add_option("--limit", history.limit, "at most this many jobs, the first ended first (default all)");
  AddOutput(c, &history);
  c->callback([exit_code] { *exit_code = History(history); });

  static UsageFlags usage;
  c = app.add_subcommand("usage", "GPU-, CPU- and memory-hours and jobs per user or queue over a period");
  c->add_option("--since", usage.since, "jobs that ended since (as history --since; default: 30 days before --until)");
  c->add_option("--until", usage.until, "jobs that ended before this (default now)");
  c->add_option("--by", usage.by, "user or queue (default user)")->check(CLI::IsMember({"user", "queue"}));
  c->add_option("--user", usage.user, "only this user's jobs");
  c->add_option("--queue", usage.queue, "only the jobs of this queue");
  AddOutput(c, &usage);
  c->callback([exit_code] { *exit_code = Usage(usage); });
}

}  // namespace trainyard::cli
