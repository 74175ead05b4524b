// The log routes (see log_routes.h): query parsing, the range read, the
// followed stream and the archive.
#include "server/http/log_routes.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <optional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "api/log_printer.h"
#include "httplib.h"
#include "server/http/tar_gz.h"

namespace trainyard::server::http {
namespace {

// How long a read waits for the node that keeps the log to send more.
constexpr absl::Duration kLogReadTimeout = absl::Seconds(10);
// How often a followed stream that has nothing to send looks whether its
// client has gone, or the server stops.
constexpr absl::Duration kFollowPoll = absl::Seconds(1);

struct TaskRef {
  std::string name;  // JOB-ROLE-INDEX
  std::string role;
  int index = 0;
  int attempt = 0;  // its current attempt
};

// The task `task` of `job`: its name as the job view gives it, or ROLE-INDEX.
absl::StatusOr<TaskRef> FindTask(const v1::JobView& job, const std::string& task) {
  std::vector<std::string> names;
  for (const auto& t : job.tasks()) {
    if (t.name() == task || absl::StrCat(t.role(), "-", t.index()) == task) {
      return TaskRef{t.name(), t.role(), t.index(), t.attempt()};
    }
    names.push_back(t.name());
  }
  return absl::NotFoundError(absl::StrCat("job '", job.name(), "' has no task '", task,
                                          "' (its tasks: ", absl::StrJoin(names, ", "), ")"));
}

struct LogQuery {
  int attempt = -1;  // -1: the latest
  int64_t offset = 0;
  int64_t limit = kDefaultLogRangeBytes;
  bool follow = false;
};

absl::StatusOr<LogQuery> ParseLogQuery(const httplib::Request& req) {
  LogQuery q;
  for (const auto& [key, value] : req.params) {
    int64_t n = 0;
    bool number = absl::SimpleAtoi(value, &n);
    if (key == "attempt") {
      if (!number || n < 0 || n > INT32_MAX) return absl::InvalidArgumentError(absl::StrCat("attempt: '", value, "' is not an attempt number (0, 1, ...)"));
      q.attempt = static_cast<int>(n);
    } else if (key == "offset") {
      if (!number || n < 0) return absl::InvalidArgumentError(absl::StrCat("offset: '", value, "' is not a byte offset (0 or more)"));
      q.offset = n;
    } else if (key == "limit") {
      if (!number || n < 1 || n > kMaxLogRangeBytes) {
        return absl::InvalidArgumentError(absl::StrCat("limit: '", value, "' is not a byte count from 1 to ", kMaxLogRangeBytes));
      }
      q.limit = n;
    } else if (key == "follow") {
      if (value != "1" && value != "0" && value != "true" && value != "false") {
        return absl::InvalidArgumentError(absl::StrCat("follow: '", value, "' is not 1 or 0"));
      }
      q.follow = value == "1" || value == "true";
    } else {
      return absl::InvalidArgumentError(absl::StrCat(key, ": not a parameter of the task log (attempt, offset, limit, follow)"));
    }
  }
  return q;
}

// The text of one attempt as `trainyard logs` prints it: stamps stripped;
// read whole, stdout and stderr interleaved in the order their lines were
// written; followed, each piece as it comes.
class AttemptText {
 public:
  explicit AttemptText(bool follow) : printer_({.follow = follow}, text_, text_) {}
  std::string Add(const v1::LogChunk& chunk) {
    printer_.Add(chunk);
    return Take();
  }
  std::string Finish() {
    printer_.Finish();
    return Take();
  }

 private:
  std::string Take() {
    std::string s = text_.str();
    text_.str("");
    return s;
  }
  std::ostringstream text_;
  api::LogPrinter printer_;
};

// Drops the first `*skip` bytes of what `text` adds.
std::string Skip(std::string text, int64_t* skip) {
  int64_t n = std::min<int64_t>(*skip, static_cast<int64_t>(text.size()));
  *skip -= n;
  return text.substr(static_cast<size_t>(n));
}

v1::LogsRequest RequestFor(const std::string& job, const TaskRef& t, int attempt, bool follow) {
  v1::LogsRequest r;
  r.set_job(job);
  r.set_role(t.role);
  r.set_index(t.index);
  r.set_attempt(attempt);
  r.set_follow(follow);
  return r;
}

absl::Status Unreadable(const v1::LogChunk& c) {
  return absl::UnavailableError(c.error());
}

// The answer to a range read: up to limit bytes from offset.
void ReadRange(RestBackend* b, const Principal& who, const std::string& job, const TaskRef& t, const LogQuery& q,
               httplib::Response& res) {
  absl::StatusOr<LogReaderPtr> reader = b->OpenLogs(who, RequestFor(job, t, q.attempt, false));
  if (!reader.ok()) return SetStatusError(res, reader.status());
  AttemptText text(false);
  std::string body;
  int64_t skip = q.offset;
  int attempt = q.attempt;
  bool ended = false;
  while (!ended && static_cast<int64_t>(body.size()) <= q.limit) {
    LogRead r = (*reader)->Next(absl::Now() + kLogReadTimeout);
    if (r.kind == LogRead::Kind::kWaiting) {
      return SetStatusError(res, absl::DeadlineExceededError(absl::StrCat(
                                     "the node that keeps the log of ", t.name, " sent nothing for ",
                                     absl::FormatDuration(kLogReadTimeout))));
    }
    if (r.kind == LogRead::Kind::kEnd) {
      if (!r.end.ok()) return SetStatusError(res, r.end);
      body += Skip(text.Finish(), &skip);
      ended = true;
      continue;
    }
    if (!r.chunk.error().empty()) return SetStatusError(res, Unreadable(r.chunk));
    attempt = r.chunk.attempt();
    body += Skip(text.Add(r.chunk), &skip);
  }
  bool more = static_cast<int64_t>(body.size()) > q.limit;
  if (more) body.resize(static_cast<size_t>(q.limit));
  res.set_header("X-Trainyard-Attempt", absl::StrCat(attempt >= 0 ? attempt : t.attempt));
  res.set_header("X-Trainyard-Next-Offset", absl::StrCat(q.offset + static_cast<int64_t>(body.size())));
  res.set_header("X-Trainyard-More", more ? "true" : "false");
  res.set_content(body, "text/plain; charset=utf-8");
}

// A followed attempt as a chunked answer: what it has, then each piece as
// the task writes it, until the attempt ends, the client goes or the
// server stops.
struct Follow {
  std::shared_ptr<void> slot;
  std::shared_ptr<security::CredentialCheck> credential;
  LogReaderPtr reader;
  AttemptText text{true};
  int64_t skip = 0;

  bool Step(httplib::DataSink& sink) {
    if (HttpServer::ClientGone()) return false;
    LogRead r = reader->Next(absl::Now() + kFollowPoll);
    std::string out;
    // Checked while idle too: a revoked token's stream ends and frees its slot.
    if (!credential->Valid(absl::Now())) {
      // Its token was revoked: nothing more of the log.
      out = "[trainyard] the token this stream began with is no longer valid\n";
      if (!sink.write(out.data(), out.size())) return false;
      sink.done();
      return true;
    }
    if (r.kind == LogRead::Kind::kWaiting) return true;  // the library looks at the socket and calls again
    if (r.kind == LogRead::Kind::kChunk && r.chunk.error().empty()) {
      out = Skip(text.Add(r.chunk), &skip);
      return out.empty() || sink.write(out.data(), out.size());
    }
    out = Skip(text.Finish(), &skip);
    // Once the answer has begun an error can only be said in its text.
    absl::Status end = r.kind == LogRead::Kind::kEnd ? r.end : Unreadable(r.chunk);
    if (!end.ok()) absl::StrAppend(&out, "[trainyard] the log cannot be read further: ", end.message(), "\n");
    if (!out.empty() && !sink.write(out.data(), out.size())) return false;
    sink.done();
    return true;
  }
};

void FollowAttempt(HttpServer* s, RestBackend* b, const Principal& who, const std::string& job, const TaskRef& t,
                   const LogQuery& q, const httplib::Request& req, httplib::Response& res) {
  auto state = std::make_shared<Follow>();
  state->slot = s->TryStream(HttpServer::StreamKind::kLog);
  if (!state->slot) {
    return SetStatusError(res, absl::UnavailableError(
                                   "the server has as many log streams open as it serves; try again"));
  }
  state->credential = s->CredentialCheckFor(req);
  // Without ?attempt the current one: the stream ends with it.
  int attempt = q.attempt >= 0 ? q.attempt : t.attempt;
  absl::StatusOr<LogReaderPtr> reader = b->OpenLogs(who, RequestFor(job, t, attempt, true));
  if (!reader.ok()) return SetStatusError(res, reader.status());
  state->reader = std::move(*reader);
  state->skip = q.offset;
  HttpServer::NoCompression(req);
  res.set_header("X-Trainyard-Attempt", absl::StrCat(attempt));
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/plain; charset=utf-8",
                                   [state](size_t, httplib::DataSink& sink) { return state->Step(sink); });
}

void GetTaskLog(HttpServer* s, RestBackend* b, const Principal& who, const httplib::Request& req,
                httplib::Response& res) {
  const std::string job = req.matches[1], task = req.matches[2];
  std::optional<ViewStore::JobEntry> entry = b->Views().Job(job);
  if (!entry) return SetStatusError(res, absl::NotFoundError(absl::StrCat("job '", job, "' does not exist")));
  absl::StatusOr<TaskRef> t = FindTask(*entry->view, task);
  if (!t.ok()) return SetStatusError(res, t.status());
  absl::StatusOr<LogQuery> q = ParseLogQuery(req);
  if (!q.ok()) return SetStatusError(res, q.status());
  if (q->follow) return FollowAttempt(s, b, who, job, *t, *q, req, res);
  ReadRange(b, who, job, *t, *q, res);
}

// ---- the archive ----

// One attempt's text, gathered in an unnamed temporary file (a log may be
// far larger than memory should hold) because a tar entry's size comes
// before its bytes.
struct Spooled {
  std::unique_ptr<FILE, int (*)(FILE*)> file{nullptr, fclose};
  int64_t size = 0;
};

// Reads attempt `attempt` of `t` whole. NotFound / FailedPrecondition: the
// attempt never ran (it is left out); other errors: it cannot be read now.
absl::StatusOr<Spooled> Spool(RestBackend* b, const Principal& who, const std::string& job, const TaskRef& t,
                              int attempt) {
  absl::StatusOr<LogReaderPtr> reader = b->OpenLogs(who, RequestFor(job, t, attempt, false));
  if (!reader.ok()) return reader.status();
  Spooled out;
  out.file.reset(tmpfile());
  if (!out.file) return absl::InternalError("cannot make a temporary file for the archive");
  AttemptText text(false);
  while (true) {
    LogRead r = (*reader)->Next(absl::Now() + kLogReadTimeout);
    if (r.kind == LogRead::Kind::kWaiting) {
      return absl::DeadlineExceededError(absl::StrCat("the node that keeps it sent nothing for ",
                                                      absl::FormatDuration(kLogReadTimeout)));
    }
    if (r.kind == LogRead::Kind::kChunk && !r.chunk.error().empty()) return Unreadable(r.chunk);
    if (r.kind == LogRead::Kind::kEnd && !r.end.ok()) return r.end;
    std::string piece = r.kind == LogRead::Kind::kEnd ? text.Finish() : text.Add(r.chunk);
    if (!piece.empty() && fwrite(piece.data(), 1, piece.size(), out.file.get()) != piece.size()) {
      return absl::InternalError("the archive's temporary file cannot be written (disk full?)");
    }
    out.size += static_cast<int64_t>(piece.size());
    if (r.kind == LogRead::Kind::kEnd) break;
  }
  rewind(out.file.get());
  return out;
}

absl::Status AddSpooled(TarGzWriter& w, const std::string& name, Spooled& s, int64_t mtime) {
  if (absl::Status st = w.BeginFile(name, s.size, mtime); !st.ok()) return st;
  char buf[64 << 10];
  for (int64_t left = s.size; left > 0;) {
    size_t n = fread(buf, 1, static_cast<size_t>(std::min<int64_t>(left, sizeof(buf))), s.file.get());
    if (n == 0) return absl::InternalError("the archive's temporary file cannot be read");
    if (absl::Status st = w.Write(absl::string_view(buf, n)); !st.ok()) return st;
    left -= static_cast<int64_t>(n);
  }
  return absl::OkStatus();
}

struct Archive {
  std::shared_ptr<void> slot;
  RestBackend* backend = nullptr;
  Principal who;  // whose streams the archive's reads are
  std::string job;
  std::vector<TaskRef> tasks;

  // The whole archive in one call: the library's loop around it only ends
  // it. False (the answer is cut off) when the client went away.
  bool Write(httplib::DataSink& sink) {
    TarGzWriter w([&sink](const char* d, size_t n) { return sink.write(d, n); });
    int64_t mtime = absl::ToUnixSeconds(absl::Now());
    std::vector<std::string> missing;
    for (const TaskRef& t : tasks) {
      for (int a = 0; a <= t.attempt; ++a) {
        if (HttpServer::ClientGone()) return false;
        absl::StatusOr<Spooled> s = Spool(backend, who, job, t, a);
        if (!s.ok()) {
          bool never_ran = s.status().code() == absl::StatusCode::kNotFound ||
                           s.status().code() == absl::StatusCode::kFailedPrecondition;
          if (!never_ran) missing.push_back(absl::StrCat(t.name, " attempt ", a, ": ", s.status().message()));
          continue;
        }
        absl::Status st = AddSpooled(w, absl::StrCat(t.name, "/attempt-", a, ".log"), *s, mtime);
        if (!st.ok()) return false;
      }
    }
    if (!missing.empty()) {
      std::string text = absl::StrCat("These attempts' logs could not be read:\n", absl::StrJoin(missing, "\n"), "\n");
      if (!w.BeginFile("MISSING.txt", static_cast<int64_t>(text.size()), mtime).ok() || !w.Write(text).ok()) return false;
    }
    if (!w.Finish().ok()) return false;
    sink.done();
    return true;
  }
};

void GetArchive(HttpServer* s, RestBackend* b, const Principal& who, const httplib::Request& req,
                httplib::Response& res) {
  const std::string job = req.matches[1];
  std::optional<ViewStore::JobEntry> entry = b->Views().Job(job);
  if (!entry) return SetStatusError(res, absl::NotFoundError(absl::StrCat("job '", job, "' does not exist")));
  auto archive = std::make_shared<Archive>();
  archive->slot = s->TryStream(HttpServer::StreamKind::kLog);
  if (!archive->slot) {
    return SetStatusError(res, absl::UnavailableError(
                                   "the server has as many log streams open as it serves; try again"));
  }
  archive->backend = b;
  archive->who = who;
  archive->job = job;
  for (const auto& t : entry->view->tasks()) archive->tasks.push_back({t.name(), t.role(), t.index(), t.attempt()});
  res.set_header("Content-Disposition", absl::StrCat("attachment; filename=\"", job, "-logs.tar.gz\""));
  res.set_chunked_content_provider("application/gzip",
                                   [archive](size_t, httplib::DataSink& sink) { return archive->Write(sink); });
}

}  // namespace

void AddLogRoutes(HttpServer& s, RestBackend* b) {
  const std::string name = "([^/]+)";
  HttpServer* server = &s;
  s.Handle("GET", "/api/v1/jobs/" + name + "/tasks/" + name + "/logs", "/api/v1/jobs/{job}/tasks/{task}/logs",
           [server, b](const httplib::Request& req, httplib::Response& res, const Principal& who) {
             if (absl::Status may = b->MayReadLogs(who, req.matches[1]); !may.ok()) return SetStatusError(res, may);
             GetTaskLog(server, b, who, req, res);
           });
  s.Handle("GET", "/api/v1/jobs/" + name + "/logs\\.tar\\.gz", "/api/v1/jobs/{job}/logs.tar.gz",
           [server, b](const httplib::Request& req, httplib::Response& res, const Principal& who) {
             if (absl::Status may = b->MayReadLogs(who, req.matches[1]); !may.ok()) return SetStatusError(res, may);
             GetArchive(server, b, who, req, res);
           });
}

}  // namespace trainyard::server::http
