// SimFleet: many simulated workers, each on its own TCP connection to a job
// master, driven from the calling thread with one epoll set. Tests use it to
// run 1,000 workers against a real master cheaply, and the benchmark uses it
// so that what is measured is the master, not thousands of client threads.
// Not thread-safe; one thread drives a fleet.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/jobmaster.pb.h"

namespace trainyard::jobmaster {

namespace pb = ::trainyard::v1;

class SimFleet {
 public:
  // REQUIRES: `host` is an IPv4 address.
  SimFleet(std::string host, int port);
  ~SimFleet();
  SimFleet(const SimFleet&) = delete;
  SimFleet& operator=(const SimFleet&) = delete;

  // Spreads the connections over source addresses 127.0.0.2, 127.0.0.3, ...
  // (`per_source` connections each). On loopback every connection otherwise
  // comes from 127.0.0.1, and past ~14,000 of them to one port the kernel's
  // ephemeral-port search (it tries the odd half of ip_local_port_range
  // first) scans the used ports on every connect: 2,000 connects take 5.7 s
  // instead of 0.3 s. Real workers come from many hosts. 0 = off (default).
  // `first_source` skips that many addresses (another fleet uses them).
  void set_spread_sources(int per_source, int first_source = 0) {
    per_source_ = per_source;
    first_source_ = first_source;
  }

  // Opens `count` more connections (non-blocking connects, in batches).
  absl::Status Connect(int count, absl::Time deadline);
  int size() const { return static_cast<int>(workers_.size()); }

  // Queues one request (or raw bytes) on worker connection `i`.
  void Queue(int i, const pb::JobMasterRequest& request);
  void QueueRaw(int i, std::string_view bytes);
  // Writes everything queued and waits until `count` more responses arrived
  // across the fleet. Returns DEADLINE_EXCEEDED naming how many came.
  absl::Status Exchange(int count, absl::Time deadline);

  // Whether responses are kept (default) or only counted and sized, without
  // storing them: benchmarks then measure the master, not the fleet's memory.
  void set_keep_responses(bool keep) { keep_responses_ = keep; }
  // The job's secret RegisterAll's STARTINGs carry ("" = none).
  void set_job_secret(std::string secret) { job_secret_ = std::move(secret); }
  // Payload size of the last response on connection `i` (kept or not).
  size_t last_payload_bytes(int i) const { return workers_[i].last_bytes; }
  // The raw payloads received on connection `i` since the last ClearResponses.
  const std::vector<std::string>& payloads(int i) const { return workers_[i].payloads; }
  // Parses response `k` of connection `i`.
  pb::JobMasterResponse Response(int i, int k) const;
  // The last response of connection `i`. REQUIRES: one arrived.
  pb::JobMasterResponse Last(int i) const;
  // Forgets received responses.
  void ClearResponses();
  // True once the master closed connection `i`.
  bool closed_by_peer(int i) const { return workers_[i].eof; }
  // Reads until the master closes connection `i` or `deadline` passes;
  // returns closed_by_peer(i). Reading is how the fleet notices a close,
  // and no answer is expected meanwhile (each read's short wait times out).
  bool AwaitClosedByPeer(int i, absl::Time deadline);
  // Closes connection `i` from the worker's side.
  void Close(int i);

  // Convenience: STARTING on every connection, worker i asking for id
  // `ids[i]` (-1: the next free one), then waits for all replies.
  absl::Status RegisterAll(const std::vector<int>& ids, absl::Time deadline);
  // BARRIER on connections [0, n) and waits for their n replies.
  absl::Status BarrierAll(int n, absl::Time deadline);
  // Closes every connection (the workers stay registered with the master).
  void CloseAll();

 private:
  struct Worker {
    int fd = -1;
    std::string out;
    size_t out_offset = 0;
    std::string in;
    std::vector<std::string> payloads;
    bool eof = false;
    // Counting without keeping: header bytes seen of the current frame, and
    // payload bytes of it still to skip.
    uint32_t header_seen = 0;
    uint32_t header_value = 0;
    uint32_t skip = 0;
    size_t last_bytes = 0;
  };
  bool WriteSome(Worker& w);
  void ReadSome(Worker& w);
  void KeepFrames(Worker& w, std::string_view data);
  void CountFrames(Worker& w, std::string_view data);

  std::string host_;
  int port_;
  int epoll_fd_ = -1;
  std::vector<Worker> workers_;
  std::vector<int> pending_writes_;
  std::string read_buffer_;
  int received_ = 0;
  bool keep_responses_ = true;
  std::string job_secret_;
  uint64_t next_request_id_ = 1;
  int per_source_ = 0;
  int first_source_ = 0;
  int opened_ = 0;  // connections ever opened (for spreading sources)
};

}  // namespace trainyard::jobmaster
