// Lists made once and served to every reader (see shared_answers.h).
#include "server/http/shared_answers.h"

#include <zlib.h>

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "httplib.h"
#include "server/http/http_server.h"

namespace trainyard::server::http {
namespace {

// `text` as a gzip stream; "" when zlib fails.
std::string Gzip(const std::string& text) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return "";
  std::string out(deflateBound(&z, text.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return rc == Z_STREAM_END ? out : "";
}

// True when the request's Accept-Encoding takes gzip (with a q above 0).
bool AcceptsGzip(const httplib::Request& req) {
  for (absl::string_view part : absl::StrSplit(req.get_header_value("Accept-Encoding"), ',')) {
    std::vector<absl::string_view> params = absl::StrSplit(part, ';');
    if (!absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(params[0]), "gzip")) continue;
    for (size_t i = 1; i < params.size(); ++i) {
      absl::string_view p = absl::StripAsciiWhitespace(params[i]);
      double q = 1;
      if (absl::ConsumePrefix(&p, "q=") && absl::SimpleAtod(p, &q) && q <= 0) return false;
    }
    return true;
  }
  return false;
}

}  // namespace

void SharedAnswers::Serve(const std::string& key, const httplib::Request& req, httplib::Response& res,
                          const std::function<nlohmann::json()>& render) {
  // A client that wants one made now says so (Cache-Control: no-cache).
  const bool fresh_asked = absl::StrContains(req.get_header_value("Cache-Control"), "no-cache");
  const absl::Time arrived = absl::Now();
  Answer answer;
  bool stale = false;
  bool maker = false;  // this request holds the key's `making`
  {
    absl::MutexLock lock(&mu_);
    // Answers no request may take any more go (a client can ask for many
    // lists, e.g. one per user filter: each is kept only a short while).
    for (auto it = answers_.begin(); it != answers_.end();) {
      bool old = !it->second.making && arrived - it->second.answer.made > 10 * max_age_;
      it = old ? answers_.erase(it) : std::next(it);
    }
    // One answer is made at a time per key: a request that finds one being
    // made waits for it (bounded: past the deadline it makes its own), and
    // takes it whatever its age, since it was begun after the request came.
    const absl::Time deadline = arrived + kMaxWait;
    while (answers_[key].making && !making_done_.WaitWithDeadline(&mu_, deadline)) {
    }
    Slot& slot = answers_[key];
    absl::Time now = absl::Now();
    bool begun_after_arrival = slot.answer.json && slot.answer.made >= arrived;
    if (slot.answer.json && (begun_after_arrival || (!fresh_asked && now - slot.answer.made < max_age_))) {
      answer = slot.answer;
      stale = !begun_after_arrival && !(answer.versions == views_->CurrentVersions());
    } else if (!slot.making) {
      slot.making = maker = true;
    }
  }
  if (!answer.json) {
    // Made from the views as they are from here on: begun with `versions`.
    Answer fresh;
    fresh.versions = views_->CurrentVersions();
    fresh.made = absl::Now();
    try {
      auto json = std::make_shared<std::string>(render().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      fresh.gzip = std::make_shared<const std::string>(Gzip(*json));
      fresh.json = std::move(json);
    } catch (...) {  // out of memory: the waiting requests try themselves
      absl::MutexLock lock(&mu_);
      if (maker) DoneMaking(key);
      throw;
    }
    absl::MutexLock lock(&mu_);
    ++made_;
    Slot& slot = answers_[key];
    if (!slot.answer.json || slot.answer.made <= fresh.made) slot.answer = fresh;
    if (maker) DoneMaking(key);
    answer = std::move(fresh);
  }
  res.status = 200;
  res.set_header("Vary", "Accept-Encoding");
  if (stale) res.set_header("X-Trainyard-Stale", "true");
  // Compressed here, once, when made: never again by the library (which
  // would also take "gzip;q=0" for a yes).
  bool gzip = !answer.gzip->empty() && AcceptsGzip(req);
  HttpServer::NoCompression(req);
  if (gzip) {
    res.set_header("Content-Encoding", "gzip");
    res.set_content(*answer.gzip, "application/json");
  } else {
    res.set_content(*answer.json, "application/json");
  }
}

void SharedAnswers::DoneMaking(const std::string& key) {
  answers_[key].making = false;
  making_done_.SignalAll();
}

int64_t SharedAnswers::made() const {
  absl::MutexLock lock(&mu_);
  return made_;
}

}  // namespace trainyard::server::http
