// LogPrinter: stamps stripped or shown, task prefixes, and the merge of
// stdout and stderr by time (see log_printer.h).
#include "api/log_printer.h"

#include "absl/strings/str_cat.h"

namespace trainyard::api {

LogPrinter::LogPrinter(LogPrintOptions options, std::ostream& out, std::ostream& err)
    : options_(options), out_(out), err_(err) {}

void LogPrinter::Header(const std::string& name, int attempt) {
  if (shown_ == std::make_pair(name, attempt)) return;
  shown_ = {name, attempt};
  Task& t = tasks_[name];
  bool restarted = t.first_attempt >= 0 && t.first_attempt != attempt;
  if (t.first_attempt < 0) t.first_attempt = attempt;
  if (options_.headers || restarted) out_ << "==> " << name << " (attempt " << attempt << ") <==\n" << std::flush;
}

void LogPrinter::Add(const v1::LogChunk& c) {
  Task& t = tasks_[c.task()];
  if (c.attempt() != t.attempt && t.attempt >= 0 && !options_.follow) {
    // Without -f one attempt per task is read; nothing to merge across.
    t.out = Output();
    t.err = Output();
  }
  t.attempt = c.attempt();
  if (!c.error().empty()) {
    Merge(t, c.task());
    err_ << options_.error_prefix << c.error() << "\n" << std::flush;  // it names the task
    t.out.ended = t.err.ended = true;
    Merge(t, c.task());
    return;
  }
  if (c.attempt_start()) {
    if (!options_.prefix) Header(c.task(), c.attempt());
    return;
  }
  if (!c.data().empty()) Take(t, c.task(), c.stderr(), c.data());
  if (c.output_end()) {
    Output& o = c.stderr() ? t.err : t.out;
    o.splitter.Finish([&](const LogPiece& p) { o.lines.push_back({p.unix_nanos, std::string(p.text), c.stderr()}); });
    o.ended = true;
  }
  if (!options_.follow) Merge(t, c.task());
}

void LogPrinter::Take(Task& t, const std::string& name, bool err, const std::string& data) {
  Output& o = err ? t.err : t.out;
  if (!options_.follow) {
    o.splitter.Add(data, [&](const LogPiece& p) {
      if (p.line_start || o.lines.empty()) o.lines.push_back({p.unix_nanos, "", err});
      o.lines.back().text.append(p.text.data(), p.text.size());
    });
    // The last line may be unfinished: it waits in `lines` until it ends
    // (Merge only prints lines that end in '\n', or any at the output's end).
    return;
  }
  // Following: print each piece as it comes, the line's decoration first.
  if (!options_.prefix) Header(name, t.attempt);
  std::ostream& os = err ? err_ : out_;
  o.splitter.Add(data, [&](const LogPiece& p) {
    if (p.line_start) {
      if (options_.prefix) os << "[" << name << "] ";
      if (options_.timestamps) os << (p.unix_nanos > 0 ? FormatLogTime(p.unix_nanos) : "-") << " ";
    }
    os << p.text;
  });
  os << std::flush;
}

void LogPrinter::Merge(Task& t, const std::string& name) {
  auto ready = [](const Output& o) { return !o.lines.empty() && (o.ended || o.lines.front().text.ends_with('\n') ||
                                                                 o.lines.size() > 1); };
  for (;;) {
    bool out_ok = ready(t.out), err_ok = ready(t.err);
    Output* pick = nullptr;
    if (out_ok && err_ok) {
      pick = t.err.lines.front().nanos < t.out.lines.front().nanos ? &t.err : &t.out;
    } else if (out_ok && (t.err.ended && t.err.lines.empty())) {
      pick = &t.out;
    } else if (err_ok && (t.out.ended && t.out.lines.empty())) {
      pick = &t.err;
    }
    if (!pick) break;
    Line line = std::move(pick->lines.front());
    pick->lines.pop_front();
    if (options_.tail_lines < 0) {
      Emit(name, t.attempt, line);
      continue;
    }
    t.tail.push_back(std::move(line));
    while (static_cast<int>(t.tail.size()) > options_.tail_lines) t.tail.pop_front();
  }
  if (t.out.ended && t.err.ended && t.out.lines.empty() && t.err.lines.empty()) FlushTail(t, name);
}

void LogPrinter::FlushTail(Task& t, const std::string& name) {
  while (!t.tail.empty()) {
    Emit(name, t.attempt, t.tail.front());
    t.tail.pop_front();
  }
}

void LogPrinter::Emit(const std::string& name, int attempt, const Line& line) {
  if (!options_.prefix) Header(name, attempt);
  std::ostream& os = line.err ? err_ : out_;
  std::ostream& other = line.err ? out_ : err_;
  other << std::flush;  // the two may be one terminal: keep the order
  if (options_.prefix) os << "[" << name << "] ";
  if (options_.timestamps) os << (line.nanos > 0 ? FormatLogTime(line.nanos) : "-") << " ";
  os << line.text;
}

void LogPrinter::Finish() {
  for (auto& [name, t] : tasks_) {
    for (Output* o : {&t.out, &t.err}) {
      bool err = o == &t.err;
      o->splitter.Finish([&](const LogPiece& p) { o->lines.push_back({p.unix_nanos, std::string(p.text), err}); });
      o->ended = true;
    }
    if (!options_.follow) Merge(t, name);
  }
  out_ << std::flush;
  err_ << std::flush;
}

}  // namespace trainyard::api
