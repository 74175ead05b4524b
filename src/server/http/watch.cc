// The watch stream (see watch.h): one worker thread per watcher, waiting on
// the view store's versions, bounded by the server's watcher slots.
#include "server/http/watch.h"

#include <algorithm>
#include <array>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "httplib.h"
#include "server/http/rest_api.h"

namespace trainyard::server::http {
namespace {

constexpr std::array<const char*, 3> kTopics = {"jobs", "nodes", "queues"};
// How often a watcher with nothing to send looks whether its client has
// gone, or the server stops.
constexpr absl::Duration kPoll = absl::Seconds(1);

int64_t VersionOf(const ViewStore::Versions& v, int topic) {
  return topic == 0 ? v.jobs : topic == 1 ? v.nodes : v.queues;
}

class Watcher {
 public:
  Watcher(const ViewStore* views, WatchOptions options, std::array<bool, 3> topics, std::shared_ptr<void> slot,
          std::shared_ptr<security::CredentialCheck> credential)
      : views_(views), options_(options), topics_(topics), slot_(std::move(slot)), credential_(std::move(credential)) {}

  // One step of the stream: what is due now, or a wait of at most kPoll
  // for the next change. False ends the answer (the client went away).
  bool Step(httplib::DataSink& sink) {
    if (HttpServer::ClientGone()) return false;
    absl::Time now = absl::Now();
    if (!credential_->Valid(now)) {
      // Its token was revoked: the stream ends; the client's next request
      // is answered 401.
      sink.done();
      return true;
    }
    ViewStore::Versions v = views_->CurrentVersions();
    std::string out;
    absl::Time next_due = absl::InfiniteFuture();
    for (int t = 0; t < 3; ++t) {
      if (!topics_[t] || VersionOf(v, t) == sent_[t]) continue;
      absl::Time due = sent_at_[t] + options_.coalesce;
      if (now < due) {
        next_due = std::min(next_due, due);
        continue;
      }
      out += WatchEventText(kTopics[t], VersionOf(v, t));
      sent_[t] = VersionOf(v, t);
      sent_at_[t] = now;
    }
    if (out.empty() && now - written_at_ >= options_.keep_alive) out = ": keep-alive\n\n";
    if (!out.empty()) {
      written_at_ = now;
      return sink.write(out.data(), out.size());
    }
    absl::Time deadline = std::min({next_due, now + kPoll, written_at_ + options_.keep_alive});
    if (next_due == absl::InfiniteFuture()) {
      ViewStore::Versions seen = v;
      views_->AwaitChange(seen, deadline);
    } else {
      absl::SleepFor(deadline - now);  // a change is due once its period is over
    }
    return true;
  }

 private:
  const ViewStore* const views_;
  const WatchOptions options_;
  const std::array<bool, 3> topics_;
  const std::shared_ptr<void> slot_;
  const std::shared_ptr<security::CredentialCheck> credential_;
  std::array<int64_t, 3> sent_ = {-1, -1, -1};
  std::array<absl::Time, 3> sent_at_ = {absl::InfinitePast(), absl::InfinitePast(), absl::InfinitePast()};
  absl::Time written_at_ = absl::Now();
};

absl::StatusOr<std::array<bool, 3>> ParseTopics(const httplib::Request& req) {
  std::array<bool, 3> topics = {true, true, true};
  for (const auto& [key, value] : req.params) {
    if (key != "topics") return absl::InvalidArgumentError(absl::StrCat(key, ": not a parameter of /api/v1/watch (topics)"));
    topics = {false, false, false};
    for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipEmpty())) {
      auto it = std::find(kTopics.begin(), kTopics.end(), part);
      if (it == kTopics.end()) {
        return absl::InvalidArgumentError(absl::StrCat("topics: '", part, "' is not one of jobs, nodes, queues"));
      }
      topics[it - kTopics.begin()] = true;
    }
    if (topics == std::array<bool, 3>{false, false, false}) {
      return absl::InvalidArgumentError("topics: name at least one of jobs, nodes, queues");
    }
  }
  return topics;
}

}  // namespace

std::string WatchEventText(const std::string& topic, int64_t version) {
  return absl::StrCat("event: ", topic, "\ndata: {\"version\": ", version, "}\n\n");
}

void AddWatchRoute(HttpServer& s, const ViewStore* views, WatchOptions options) {
  HttpServer* server = &s;
  s.Handle("GET", "/api/v1/watch", "/api/v1/watch",
           [server, views, options](const httplib::Request& req, httplib::Response& res, const Principal&) {
             absl::StatusOr<std::array<bool, 3>> topics = ParseTopics(req);
             if (!topics.ok()) return SetStatusError(res, topics.status());
             std::shared_ptr<void> slot = server->TryStream(HttpServer::StreamKind::kWatch);
             if (!slot) {
               return SetStatusError(res, absl::UnavailableError(
                                              "the server has as many watchers as it serves; try again"));
             }
             auto w = std::make_shared<Watcher>(views, options, *topics, std::move(slot),
                                                server->CredentialCheckFor(req));
             res.set_header("Cache-Control", "no-cache");
             res.set_chunked_content_provider("text/event-stream",
                                              [w](size_t, httplib::DataSink& sink) { return w->Step(sink); });
           });
}

}  // namespace trainyard::server::http
