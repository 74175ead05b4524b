// SimFleet: one thread, one epoll set, many worker connections.
#include "jobmaster/sim_fleet.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "jobmaster/frame.h"

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24  // linux/in.h
#endif

namespace trainyard::jobmaster {
namespace {

constexpr int kConnectBatch = 1000;
constexpr int kFleetEvents = 1024;

int MillisUntil(absl::Time deadline) {
  return static_cast<int>(
      std::clamp<int64_t>(absl::ToInt64Milliseconds(deadline - absl::Now()) + 1, 0, 1000));
}

}  // namespace

SimFleet::SimFleet(std::string host, int port) : host_(std::move(host)), port_(port) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  read_buffer_.resize(256 * 1024);
}

SimFleet::~SimFleet() {
  for (Worker& w : workers_) {
    if (w.fd >= 0) close(w.fd);
  }
  close(epoll_fd_);
}

absl::Status SimFleet::Connect(int count, absl::Time deadline) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port_));
  inet_pton(AF_INET, host_.c_str(), &addr.sin_addr);
  std::vector<epoll_event> events(kFleetEvents);
  for (int done = 0; done < count;) {
    int batch = std::min(kConnectBatch, count - done);
    size_t first = workers_.size();
    for (int k = 0; k < batch; ++k) {
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) return absl::ResourceExhaustedError(absl::StrFormat(
          "socket for simulated worker %d: %s", workers_.size(), std::strerror(errno)));
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      if (per_source_ > 0) {
        // The port is chosen at connect, per source address (no bind-time search).
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
        sockaddr_in src{};
        src.sin_family = AF_INET;
        src.sin_addr.s_addr = htonl((127u << 24) + 2u +
                                    static_cast<uint32_t>(first_source_ + opened_ / per_source_));
        bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof(src));
      }
      ++opened_;
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
      epoll_event ev{};
      ev.events = EPOLLOUT;
      ev.data.u32 = static_cast<uint32_t>(workers_.size());
      epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
      workers_.push_back(Worker{fd});
    }
    for (int connected = 0; connected < batch;) {
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrFormat(
            "%d of %d simulated workers connected in time", first + connected, count));
      }
      int n = epoll_wait(epoll_fd_, events.data(), kFleetEvents, MillisUntil(deadline));
      for (int i = 0; i < n; ++i) {
        Worker& w = workers_[events[i].data.u32];
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(w.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
          return absl::UnavailableError(absl::StrFormat("connect to %s:%d: %s", host_, port_,
                                                        std::strerror(err)));
        }
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u32 = events[i].data.u32;
        epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, w.fd, &ev);
        ++connected;
      }
    }
    done += batch;
  }
  return absl::OkStatus();
}

void SimFleet::Queue(int i, const pb::JobMasterRequest& request) {
  Worker& w = workers_[i];
  if (w.out.size() == w.out_offset) pending_writes_.push_back(i);
  AppendFrame(request, &w.out);
}

void SimFleet::QueueRaw(int i, std::string_view bytes) {
  Worker& w = workers_[i];
  if (w.out.size() == w.out_offset) pending_writes_.push_back(i);
  w.out.append(bytes);
}

bool SimFleet::WriteSome(Worker& w) {
  while (w.out_offset < w.out.size() && w.fd >= 0) {
    ssize_t n = send(w.fd, w.out.data() + w.out_offset, w.out.size() - w.out_offset,
                     MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    if (n < 0) {
      w.eof = true;
      break;
    }
    w.out_offset += static_cast<size_t>(n);
  }
  w.out.clear();
  w.out_offset = 0;
  return true;
}

void SimFleet::ReadSome(Worker& w) {
  while (true) {
    ssize_t n = recv(w.fd, read_buffer_.data(), read_buffer_.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
        w.eof = true;
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, w.fd, nullptr);
      }
      return;
    }
    std::string_view data(read_buffer_.data(), static_cast<size_t>(n));
    if (keep_responses_) {
      KeepFrames(w, data);
    } else {
      CountFrames(w, data);
    }
    if (static_cast<size_t>(n) < read_buffer_.size()) return;
  }
}

void SimFleet::KeepFrames(Worker& w, std::string_view data) {
  w.in.append(data);
  size_t used = 0;
  while (true) {
    FrameView frame;
    if (!PeekFrame(std::string_view(w.in).substr(used), kMaxResponseBytes, &frame).ok() ||
        !frame.complete) {
      break;
    }
    w.payloads.emplace_back(frame.payload);
    w.last_bytes = frame.payload.size();
    used += frame.consumed;
    ++received_;
  }
  w.in.erase(0, used);
}

void SimFleet::CountFrames(Worker& w, std::string_view data) {
  for (size_t pos = 0; pos < data.size();) {
    if (w.skip > 0) {
      uint32_t take = static_cast<uint32_t>(std::min<size_t>(w.skip, data.size() - pos));
      w.skip -= take;
      pos += take;
      if (w.skip == 0) ++received_;
      continue;
    }
    w.header_value = (w.header_value << 8) | static_cast<uint8_t>(data[pos++]);  // big-endian
    if (++w.header_seen < kFrameHeaderBytes) continue;
    w.skip = w.header_value;
    w.header_seen = 0;
    w.header_value = 0;
    w.last_bytes = w.skip;
    if (w.skip == 0) ++received_;
  }
}

bool SimFleet::AwaitClosedByPeer(int i, absl::Time deadline) {
  while (!closed_by_peer(i) && absl::Now() < deadline) {
    // DEADLINE_EXCEEDED is the expected answer: nothing comes but the close.
    Exchange(1, std::min(deadline, absl::Now() + absl::Milliseconds(5))).IgnoreError();
  }
  return closed_by_peer(i);
}

absl::Status SimFleet::Exchange(int count, absl::Time deadline) {
  int target = received_ + count;
  for (int i : pending_writes_) {
    Worker& w = workers_[i];
    if (WriteSome(w)) continue;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT;
    ev.data.u32 = static_cast<uint32_t>(i);
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, w.fd, &ev);
  }
  pending_writes_.clear();
  std::vector<epoll_event> events(kFleetEvents);
  while (received_ < target) {
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "%d of %d responses arrived in time", count - (target - received_), count));
    }
    int n = epoll_wait(epoll_fd_, events.data(), kFleetEvents, MillisUntil(deadline));
    for (int k = 0; k < n; ++k) {
      uint32_t i = events[k].data.u32;
      Worker& w = workers_[i];
      if ((events[k].events & EPOLLOUT) && WriteSome(w)) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u32 = i;
        epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, w.fd, &ev);
      }
      if (events[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) ReadSome(w);
    }
  }
  return absl::OkStatus();
}

pb::JobMasterResponse SimFleet::Response(int i, int k) const {
  pb::JobMasterResponse response;
  const std::string& p = workers_[i].payloads[k];
  response.ParseFromArray(p.data(), static_cast<int>(p.size()));
  return response;
}

pb::JobMasterResponse SimFleet::Last(int i) const {
  return Response(i, static_cast<int>(workers_[i].payloads.size()) - 1);
}

void SimFleet::ClearResponses() {
  for (Worker& w : workers_) w.payloads.clear();
}

void SimFleet::Close(int i) {
  Worker& w = workers_[i];
  if (w.fd < 0) return;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, w.fd, nullptr);
  close(w.fd);
  w.fd = -1;
  w.eof = true;
}

void SimFleet::CloseAll() {
  for (int i = 0; i < size(); ++i) Close(i);
}

absl::Status SimFleet::RegisterAll(const std::vector<int>& ids, absl::Time deadline) {
  pb::JobMasterRequest request;
  for (int i = 0; i < static_cast<int>(ids.size()); ++i) {
    request.set_request_id(next_request_id_++);
    pb::Starting* s = request.mutable_starting();
    s->mutable_info()->set_worker_id(ids[i]);
    s->mutable_info()->set_ip("127.0.0.1");
    s->mutable_info()->set_port(20000 + i);
    s->mutable_info()->set_node_ip("127.0.0.1");
    s->set_job_secret(job_secret_);
    Queue(i, request);
  }
  return Exchange(static_cast<int>(ids.size()), deadline);
}

absl::Status SimFleet::BarrierAll(int n, absl::Time deadline) {
  pb::JobMasterRequest request;
  request.mutable_barrier();
  for (int i = 0; i < n; ++i) {
    request.set_request_id(next_request_id_++);
    Queue(i, request);
  }
  return Exchange(n, deadline);
}

}  // namespace trainyard::jobmaster
