// How a task's log is printed from what the Logs stream brings — by
// `trainyard logs` and by the REST API's log routes alike: stamps stripped
// (or shown with --timestamps), the task's name before each line with
// --prefix, and, without -f, each task's stdout and stderr interleaved in
// the order their lines were written (by their stamps), with --tail N
// keeping the last N lines of the two together.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <ostream>
#include <string>
#include <utility>

#include "api/log_lines.h"
#include "proto/service.pb.h"

namespace trainyard::api {

struct LogPrintOptions {
  bool follow = false;
  bool timestamps = false;
  bool prefix = false;
  bool headers = false;  // "==> task (attempt N) <==" where the task changes
  int tail_lines = -1;   // -1: every line
  std::string error_prefix = "trainyard logs: ";  // before the errors chunks carry
};

class LogPrinter {
 public:
  // REQUIRES: out and err outlive the printer.
  LogPrinter(LogPrintOptions options, std::ostream& out, std::ostream& err);
  // One chunk of the stream. Errors the chunks carry go to err.
  void Add(const v1::LogChunk& chunk);
  // The stream ended: prints what waits.
  void Finish();

 private:
  struct Line {
    int64_t nanos = 0;
    std::string text;
    bool err = false;
  };
  struct Output {
    LogSplitter splitter;
    std::deque<Line> lines;  // complete, not printed yet
    bool ended = false;
  };
  struct Task {
    int attempt = -1;
    int first_attempt = -1;
    Output out, err;
    std::deque<Line> tail;  // with tail_lines: the merged lines kept
  };

  void Take(Task& t, const std::string& name, bool err, const std::string& data);
  // Prints the lines that are due: by time, where both outputs have one or
  // the other has ended.
  void Merge(Task& t, const std::string& name);
  void Emit(const std::string& name, int attempt, const Line& line);
  void Header(const std::string& name, int attempt);
  void FlushTail(Task& t, const std::string& name);

  const LogPrintOptions options_;
  std::ostream& out_;
  std::ostream& err_;
  std::map<std::string, Task> tasks_;
  std::pair<std::string, int> shown_{"", -1};
};

}  // namespace trainyard::api
