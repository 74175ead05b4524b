// Accounting at scale (docs/accounting.md): what keeping 200,000 finished
// jobs' accounts costs the server (heap bytes per account, measured with
// mallinfo2 around the fill), what `trainyard history` and `usage` cost
// against them (a page of 500 oldest and newest first, a filter that
// matches 1 % of them, usage per user and per queue over everything), and
// what building one account costs (api::AccountOf of a job of 1, 64 and
// 1,000 tasks: done at each publication of a finished job). Medians of
// --samples runs. A plain main() that prints a table.
//   build/<dir>/bench/accounting_bench [--jobs=N] [--samples=N]
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "median.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "api/accounting.h"
#include "server/account_book.h"

namespace trainyard::server {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

v1::JobRecord Record(uint64_t id, int tasks) {
  v1::JobRecord rec;
  rec.set_id(id);
  rec.set_name(absl::StrCat("train-", id));
  rec.mutable_spec()->set_user(absl::StrCat("user-", id % 100));
  rec.mutable_spec()->set_queue(absl::StrCat("queue-", id % 8));
  rec.set_state(id % 10 == 0 ? v1::JOB_FAILED : v1::JOB_SUCCEEDED);
  rec.set_message("all workers completed");
  int64_t end = absl::ToUnixMillis(kNow) - static_cast<int64_t>(id) * 1000;
  rec.set_submit_time_ms(end - 3'600'000);
  rec.set_start_time_ms(end - 3'000'000);
  rec.set_end_time_ms(end);
  v1::ReplicaSpec* rs = rec.mutable_spec()->add_replicas();
  rs->set_role("worker");
  rs->set_count(tasks);
  rs->mutable_resources()->set_gpus(8);
  rec.mutable_usage()->set_gpu_milli_ms(int64_t{8000} * tasks * 3'000'000);
  for (int i = 0; i < tasks; ++i) {
    v1::TaskRecord* t = rec.add_tasks();
    t->set_role("worker");
    t->set_index(i);
    t->set_state(v1::TASK_SUCCEEDED);
    v1::AttemptEnd* a = t->add_attempts();
    a->set_attempt_class(v1::ATTEMPT_SUCCEEDED);
  }
  return rec;
}

using bench::MedianMs;

int Run(int jobs, int samples) {
  // The accounts, built first so the fill measures the book alone.
  std::vector<v1::JobAccount> accounts;
  accounts.reserve(jobs);
  for (int id = 1; id <= jobs; ++id) accounts.push_back(api::AccountOf(Record(id, 2)));
  AccountBook book;
  size_t before = mallinfo2().uordblks;
  auto fill_start = std::chrono::steady_clock::now();
  book.PutMany(std::move(accounts));
  double fill_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - fill_start).count();
  size_t after = mallinfo2().uordblks;
  std::printf("accounts kept                         %d\n", static_cast<int>(book.size()));
  std::printf("heap per account                      %.0f bytes (%.1f MB in all)\n",
              static_cast<double>(after - before) / jobs, static_cast<double>(after - before) / 1e6);
  std::printf("fill (PutMany)                        %.1f ms\n", fill_ms);

  v1::HistoryRequest oldest;
  v1::HistoryRequest newest;
  newest.set_newest_first(true);
  v1::HistoryRequest one_user;
  one_user.set_user("user-7");
  one_user.set_page_size(5000);
  v1::UsageRequest by_user;
  v1::UsageRequest by_queue;
  by_queue.set_group_by("queue");
  int rows = 0;
  std::printf("history, a page of 500 oldest         %.2f ms (median of %d)\n",
              MedianMs(samples, [&] { rows = book.History(oldest, kNow)->jobs_size(); }), samples);
  std::printf("history, a page of 500 newest first   %.2f ms\n",
              MedianMs(samples, [&] { rows = book.History(newest, kNow)->jobs_size(); }));
  double user_ms = MedianMs(samples, [&] { rows = book.History(one_user, kNow)->jobs_size(); });
  std::printf("history, one user's jobs (1 %%)        %.2f ms (%d jobs)\n", user_ms, rows);
  std::printf("usage per user (100 rows)             %.2f ms\n",
              MedianMs(samples, [&] { rows = book.Usage(by_user, kNow)->rows_size(); }));
  std::printf("usage per queue (8 rows)              %.2f ms\n",
              MedianMs(samples, [&] { rows = book.Usage(by_queue, kNow)->rows_size(); }));
  for (int tasks : {1, 64, 1000}) {
    v1::JobRecord rec = Record(1, tasks);
    const int n = tasks >= 1000 ? 200 : 5000;
    double ms = MedianMs(samples, [&] {
      for (int i = 0; i < n; ++i) rows += api::AccountOf(rec).tasks();
    });
    std::printf("AccountOf, a job of %4d tasks         %.2f us\n", tasks, ms * 1000 / n);
  }
  return rows > 0 ? 0 : 1;
}

}  // namespace
}  // namespace trainyard::server

int main(int argc, char** argv) {
  int jobs = 200000, samples = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--jobs=", 0) == 0 && absl::SimpleAtoi(a.substr(7), &jobs) && jobs > 0) continue;
    if (a.rfind("--samples=", 0) == 0 && absl::SimpleAtoi(a.substr(10), &samples) && samples > 0) continue;
    if (a.rfind("--benchmark", 0) == 0) continue;  // make bench passes Google Benchmark flags
    std::fprintf(stderr, "usage: accounting_bench [--jobs=N] [--samples=N]\n");
    return 2;
  }
  return trainyard::server::Run(jobs, samples);
}
