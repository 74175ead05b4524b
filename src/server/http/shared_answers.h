// SharedAnswers: the list answers every reader gets the same of (nodes, live
// jobs, queues, the overview) made at most once per `max_age` (1 s) per
// list and query, not once per request: twenty dashboard tabs on a busy
// cluster cost one rendering a second, not twenty (a 1,000-node
// /api/v1/nodes is about 1.3 MB of JSON and 30 ms to make and compress).
// A request within `max_age` of the last answer made gets that one; when
// the views have changed since it was begun (ViewStore::Versions) it is
// marked "X-Trainyard-Stale: true", so that the client asks again (the
// dashboard does, at its own pace) and gets one made after the change. One
// is made at a time per list: requests that come meanwhile wait for it (up
// to kMaxWait) and take it, however long it took. A request with
// "Cache-Control: no-cache" gets one made after it came. Answers unasked
// for ten times max_age are dropped. A client
// that accepts gzip gets the answer compressed once, when made.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "server/view_store.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace trainyard::server::http {

class SharedAnswers {
 public:
  explicit SharedAnswers(const ViewStore* views, absl::Duration max_age = absl::Seconds(1))
      : views_(views), max_age_(max_age) {}

  // Answers `req` on `res` (200, JSON) with the kept answer for `key` (the
  // route and its query) when it may be served again, else with render()'s,
  // which is kept for the next.
  void Serve(const std::string& key, const httplib::Request& req, httplib::Response& res,
             const std::function<nlohmann::json()>& render) ABSL_LOCKS_EXCLUDED(mu_);

  // Answers made (not served from the kept ones) so far.
  int64_t made() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Answer {
    ViewStore::Versions versions;  // of the views when it was begun
    absl::Time made;
    std::shared_ptr<const std::string> json;
    std::shared_ptr<const std::string> gzip;  // "" when it could not be compressed
  };

  struct Slot {
    Answer answer;        // the last one made (json null: none yet)
    bool making = false;  // one is being made; others wait for it
  };

  // Ends this request's making of `key`'s answer; wakes those waiting.
  void DoneMaking(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The longest a request waits for an answer another is making before it
  // makes its own.
  static constexpr absl::Duration kMaxWait = absl::Seconds(5);

  const ViewStore* const views_;
  const absl::Duration max_age_;
  mutable absl::Mutex mu_;
  absl::CondVar making_done_;  // a slot's `making` went false
  std::map<std::string, Slot> answers_ ABSL_GUARDED_BY(mu_);
  int64_t made_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace trainyard::server::http
