// `trainyard schedule`: a job spec submitted on a cron schedule, as its
// creator (Slurm's scrontab, Kubernetes' CronJob; docs/schedules.md).
//   schedule create NAME --cron "0 2 * * *" [--time-zone Z] [--concurrency skip|queue|replace] SPEC
//   schedule list | describe NAME | pause NAME | resume NAME | delete NAME | run NAME
#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/client.h"
#include "cli/text.h"
#include "cli/verb_common.h"

namespace trainyard::cli {
namespace {

struct CreateFlags : Common {
  std::string name;
  std::string cron;
  std::string time_zone;
  std::string concurrency = "skip";
  std::string file;
};

struct NameFlags : Common {
  std::string name;
};

std::string PolicyName(v1::ConcurrencyPolicy p) {
  switch (p) {
    case v1::CONCURRENCY_QUEUE: return "queue";
    case v1::CONCURRENCY_REPLACE: return "replace";
    default: return "skip";
  }
}

std::string Zone(const v1::ScheduleRecord& s) { return s.time_zone().empty() ? "UTC" : s.time_zone(); }

std::string NextText(const v1::ScheduleView& v) {
  if (v.schedule().paused()) return "(paused)";
  return v.next_run_unix_ms() > 0 ? TimeText(v.next_run_unix_ms()) : "never";
}

void PrintDescribe(const v1::ScheduleView& v) {
  const v1::ScheduleRecord& s = v.schedule();
  std::cout << "Name:         " << Printable(s.name()) << "\n"
            << "User:         " << Printable(s.user()) << "\n"
            << "Queue:        " << Printable(s.spec().queue()) << "\n"
            << "Cron:         " << Printable(s.cron()) << " (" << Printable(Zone(s)) << ")\n"
            << "Concurrency:  " << PolicyName(s.concurrency()) << "\n"
            << "State:        " << (s.paused() ? "PAUSED" : "ACTIVE") << "\n"
            << "Created:      " << TimeText(s.created_unix_ms()) << "\n"
            << "Next run:     " << NextText(v) << "\n"
            << "Running jobs: " << (v.live_jobs().empty() ? "none" : absl::StrJoin(v.live_jobs(), ", ")) << "\n";
  std::cout << "\nRuns (the last " << s.runs_size() << ", oldest first):\n";
  if (s.runs().empty()) {
    std::cout << "  none yet\n";
    return;
  }
  Table t({"DUE", "OUTCOME", "JOB", "NOTE"});
  for (const v1::ScheduleRun& r : s.runs()) {
    t.Add({TimeText(r.time_unix_ms()), r.outcome() + (r.by_hand() ? " (by hand)" : ""),
           r.job().empty() ? "-" : Printable(r.job()), Printable(r.message())});
  }
  std::cout << t.Render();
}

int Create(const CreateFlags& f) {
  std::string text;
  if (!ReadSpec(f.file, &text)) {
    std::cerr << "trainyard schedule create: cannot read " << (f.file == "-" ? "standard input" : f.file) << "\n";
    return kExitUsage;
  }
  v1::CreateScheduleRequest req;
  req.set_name(f.name);
  req.set_cron(f.cron);
  req.set_time_zone(f.time_zone);
  req.set_concurrency(f.concurrency == "queue"     ? v1::CONCURRENCY_QUEUE
                      : f.concurrency == "replace" ? v1::CONCURRENCY_REPLACE
                                                   : v1::CONCURRENCY_SKIP);
  req.set_spec_yaml(text);
  std::string address = ServerAddress(f.server);
  auto stub = MakeStub(address);
  v1::ScheduleView view;
  auto ctx = Context();
  grpc::Status st = stub->CreateSchedule(ctx.get(), req, &view);
  if (!st.ok()) return ReportError("schedule create", address, st);
  if (f.output == "json") {
    std::cout << ToJson(view) << "\n";
  } else {
    std::cout << "schedule " << Printable(view.schedule().name()) << " created; next run " << NextText(view) << "\n";
  }
  return kExitOk;
}

int List(const Common& f) {
  std::string address = ServerAddress(f.server);
  auto stub = MakeStub(address);
  v1::ListSchedulesResponse resp;
  auto ctx = Context();
  grpc::Status st = stub->ListSchedules(ctx.get(), v1::ListSchedulesRequest(), &resp);
  if (!st.ok()) return ReportError("schedule list", address, st);
  if (f.output == "json") {
    std::cout << ToJson(resp) << "\n";
    return kExitOk;
  }
  Table t({"NAME", "USER", "CRON", "ZONE", "CONCURRENCY", "STATE", "NEXT RUN", "LAST RUN", "RUNNING"});
  for (const v1::ScheduleView& v : resp.schedules()) {
    const v1::ScheduleRecord& s = v.schedule();
    std::string last = "-";
    if (!s.runs().empty()) {
      const v1::ScheduleRun& r = *s.runs().rbegin();
      last = absl::StrCat(TimeText(r.time_unix_ms()), " ", r.outcome());
    }
    t.Add({Printable(s.name()), Printable(s.user()), Printable(s.cron()), Printable(Zone(s)), PolicyName(s.concurrency()),
           s.paused() ? "PAUSED" : "ACTIVE", NextText(v), last, absl::StrCat(v.live_jobs_size())});
  }
  std::cout << t.Render();
  if (resp.schedules().empty()) std::cerr << "no schedules\n";
  return kExitOk;
}

int Describe(const NameFlags& f) {
  std::string address = ServerAddress(f.server);
  auto stub = MakeStub(address);
  v1::ListSchedulesRequest req;
  req.set_name(f.name);
  v1::ListSchedulesResponse resp;
  auto ctx = Context();
  grpc::Status st = stub->ListSchedules(ctx.get(), req, &resp);
  if (!st.ok()) return ReportError("schedule describe", address, st);
  for (const v1::ScheduleView& v : resp.schedules()) {
    if (f.output == "json") {
      std::cout << ToJson(v) << "\n";
    } else {
      PrintDescribe(v);
    }
  }
  return kExitOk;
}

int Update(const NameFlags& f, v1::ScheduleAction action, const char* verb) {
  std::string address = ServerAddress(f.server);
  auto stub = MakeStub(address);
  v1::ScheduleRequest req;
  req.set_name(f.name);
  req.set_action(action);
  v1::ScheduleView view;
  auto ctx = Context();
  grpc::Status st = stub->UpdateSchedule(ctx.get(), req, &view);
  if (!st.ok()) return ReportError(absl::StrCat("schedule ", verb), address, st);
  if (f.output == "json") {
    std::cout << ToJson(view) << "\n";
    return kExitOk;
  }
  const std::string name = Printable(view.schedule().name());
  switch (action) {
    case v1::SCHEDULE_PAUSE: std::cout << "schedule " << name << " paused\n"; break;
    case v1::SCHEDULE_RESUME: std::cout << "schedule " << name << " resumed; next run " << NextText(view) << "\n"; break;
    case v1::SCHEDULE_DELETE: std::cout << "schedule " << name << " deleted (its jobs stay)\n"; break;
    default: {
      const v1::ScheduleRun& r = *view.schedule().runs().rbegin();
      if (r.outcome() != "submitted") {
        std::cerr << "trainyard schedule run: the run was refused: " << Printable(r.message()) << "\n";
        return kExitFailure;
      }
      std::cout << "job " << Printable(r.job()) << " submitted\n";
    }
  }
  return kExitOk;
}

}  // namespace

void RegisterScheduleVerbs(CLI::App& app, int* exit_code) {
  CLI::App* schedule = app.add_subcommand("schedule", "Jobs submitted on a cron schedule: create, list, describe, "
                                                      "pause, resume, delete, run now");
  schedule->require_subcommand(1);

  static CreateFlags create;
  CLI::App* c = schedule->add_subcommand("create", "Submit SPEC as your job on a cron schedule");
  c->add_option("name", create.name, "the schedule's name (its runs are jobs NAME-UNIXSECONDS)")->required();
  c->add_option("spec", create.file, "the job spec (YAML file, - for standard input)")->required();
  c->add_option("--cron", create.cron,
                "when: minute hour day-of-month month day-of-week (\"0 2 * * *\": 02:00 daily), seconds first with "
                "six fields, or @hourly, @daily, @weekly, @monthly, @yearly")
      ->required();
  c->add_option("--time-zone", create.time_zone, "the cron's time zone, an IANA name (Europe/Berlin; default UTC)");
  c->add_option("--concurrency", create.concurrency,
                "when a run comes due and the last has not ended: skip it (default), queue it beside, or replace "
                "the last")
      ->check(CLI::IsMember({"skip", "queue", "replace"}));
  AddCommon(c, &create, /*listing=*/true);
  c->callback([exit_code] { *exit_code = Create(create); });

  static Common list;
  c = schedule->add_subcommand("list", "Every schedule: its cron, state, next and last run");
  AddCommon(c, &list, /*listing=*/true);
  c->callback([exit_code] { *exit_code = List(list); });

  static NameFlags describe;
  c = schedule->add_subcommand("describe", "A schedule and the history of its runs");
  c->add_option("name", describe.name, "the schedule")->required();
  AddCommon(c, &describe, /*listing=*/true);
  c->callback([exit_code] { *exit_code = Describe(describe); });

  static NameFlags pause, resume, del, run;
  struct Action {
    const char* verb;
    const char* help;
    v1::ScheduleAction action;
    NameFlags* flags;
  };
  for (const Action& a : {Action{"pause", "Stop a schedule's runs until resumed (running jobs go on)", v1::SCHEDULE_PAUSE, &pause},
                          Action{"resume", "Run a paused schedule again, from its next time on", v1::SCHEDULE_RESUME, &resume},
                          Action{"delete", "Delete a schedule (its jobs stay)", v1::SCHEDULE_DELETE, &del},
                          Action{"run", "Submit a run of a schedule now, paused or not", v1::SCHEDULE_RUN, &run}}) {
    c = schedule->add_subcommand(a.verb, a.help);
    c->add_option("name", a.flags->name, "the schedule")->required();
    AddCommon(c, a.flags, /*listing=*/true);
    c->callback([exit_code, a] { *exit_code = Update(*a.flags, a.action, a.verb); });
  }
}

}  // namespace trainyard::cli
