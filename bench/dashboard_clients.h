// Dashboard tabs as the server sees them, for control_plane_bench's
// --dashboards=N: each client does what an open tab of web/js does: one
// watch stream (/api/v1/watch?topics=jobs,nodes,queues), and on an event a
// refresh of its page, paced as app.js paces it (the next refresh no
// sooner than three times the last one took, at least 500 ms after it):
// even clients show the overview (/api/v1/overview, and the history ring's
// new samples every 10 s), odd ones the nodes page (/api/v1/nodes). Plain HTTP (the benchmark's server listens on
// loopback), with `authorization` ("Bearer TOKEN"; "" = none: a server with
// --no-auth) on every request.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "httplib.h"

namespace trainyard::bench {

class DashboardClients {
 public:
  using Clock = std::chrono::steady_clock;

  DashboardClients(const std::string& address, int clients, Clock::time_point until,
                   const std::string& authorization = "")
      : authorization_(authorization) {
    if (address.empty()) return;
    for (int i = 0; i < clients; ++i) {
      auto state = std::make_unique<Tab>();
      Tab* t = state.get();
      tabs_.push_back(std::move(state));
      threads_.emplace_back([this, t, address, until] { Watch(t, address, until); });
      threads_.emplace_back([this, t, address, until, i] { Refresh(t, address, until, i % 2 == 0); });
    }
  }
  ~DashboardClients() { Join(); }
  void Join() {
    for (auto& th : threads_) {
      if (th.joinable()) th.join();
    }
  }
  int64_t requests() const { return requests_; }
  int64_t failures() const { return failures_; }
  int64_t bytes() const { return bytes_; }
  int64_t events() const { return events_; }

 private:
  struct Tab {
    std::atomic<bool> changed{true};  // the first refresh comes at once
  };

  // Reads the watch stream until `until`; every event marks the tab changed.
  void Watch(Tab* t, const std::string& address, Clock::time_point until) {
    while (Clock::now() < until) {
      httplib::Client client("http://" + address);
      if (!authorization_.empty()) client.set_default_headers({{"Authorization", authorization_}});
      client.set_read_timeout(2, 0);  // the stream sends a comment every few seconds
      client.Get("/api/v1/watch?topics=jobs,nodes,queues", [&](const char* data, size_t n) {
        std::string_view chunk(data, n);
        for (size_t at = chunk.find("event:"); at != std::string_view::npos; at = chunk.find("event:", at + 6)) {
          ++events_;
          t->changed = true;
        }
        return Clock::now() < until;
      });
    }
  }

  bool Get(httplib::Client& client, const std::string& path) {
    auto r = client.Get(path);
    ++requests_;
    if (!r || r->status != 200) {
      ++failures_;
      return false;
    }
    bytes_ += static_cast<int64_t>(r->body.size());
    return true;
  }

  void Refresh(Tab* t, const std::string& address, Clock::time_point until, bool overview) {
    httplib::Client client("http://" + address);
    httplib::Headers headers = {{"Accept-Encoding", "gzip, deflate"}};
    if (!authorization_.empty()) headers.emplace("Authorization", authorization_);
    client.set_default_headers(headers);
    client.set_read_timeout(30, 0);
    client.set_decompress(true);
    auto next = Clock::now();
    auto next_history = Clock::now();
    int64_t history_since = 0;
    while (Clock::now() < until) {
      if (overview && Clock::now() >= next_history) {
        // The samples after the last answer's start (one may come twice).
        int64_t asked = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
        Get(client, "/api/v1/history?since=" + std::to_string(history_since));
        history_since = asked - 1;
        next_history = Clock::now() + std::chrono::seconds(10);
      }
      if (Clock::now() < next || !t->changed.exchange(false)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      auto start = Clock::now();
      if (overview) {
        Get(client, "/api/v1/overview");
      } else {
        Get(client, "/api/v1/nodes");
      }
      auto took = Clock::now() - start;
      next = Clock::now() + std::max<Clock::duration>(std::chrono::milliseconds(500), 3 * took);
    }
  }

  const std::string authorization_;
  std::vector<std::unique_ptr<Tab>> tabs_;
  std::vector<std::thread> threads_;
  std::atomic<int64_t> requests_{0}, failures_{0}, bytes_{0}, events_{0};
};

}  // namespace trainyard::bench
