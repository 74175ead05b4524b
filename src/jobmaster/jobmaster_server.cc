// The job master's epoll event loop: accepting, reading and decoding frames,
// batching replies, closing connections that send garbage.
#include "jobmaster/jobmaster_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "jobmaster/barrier_record.h"
#include "jobmaster/frame.h"
#include "jobmaster/request_decoder.h"

namespace trainyard::jobmaster {
namespace {

constexpr int kMaxEvents = 1024;
constexpr size_t kReadChunk = 256 * 1024;
// Buffers above this are released once drained, so idle workers cost little.
constexpr size_t kKeepBufferBytes = 16 * 1024;
constexpr int kListenBacklog = 65535;  // the kernel caps it at somaxconn

// Tags for the non-connection descriptors in epoll data.
char kListenTag;
char kWakeTag;

absl::Status Errno(std::string_view what) {
  return absl::UnavailableError(absl::StrFormat("%s: %s", what, std::strerror(errno)));
}

// The IPv4 address of `host`: a literal, or a name (the node's address may
// be its host name) resolved to its first IPv4 address.
absl::Status ResolveBindAddress(const std::string& host, in_addr* out) {
  if (inet_pton(AF_INET, host.c_str(), out) == 1) return absl::OkStatus();
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bind address '%s' is neither an IPv4 address nor a host name with one (--bind): %s",
        host, rc != 0 ? gai_strerror(rc) : "no address"));
  }
  *out = reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr;
  freeaddrinfo(found);
  return absl::OkStatus();
}

JobMasterConfig WithVersionBase(JobMasterConfig config, const Clock* clock) {
  if (config.first_membership_version == 0) {
    config.first_membership_version = absl::ToUnixMicros(clock->Now());
  }
  return config;
}

void RaiseTo(std::atomic<size_t>* peak, size_t value) {
  if (value > peak->load(std::memory_order_relaxed)) peak->store(value, std::memory_order_relaxed);
}

}  // namespace

struct JobMasterServer::Connection {
  int fd = -1;
  ConnId id = 0;
  std::string peer_ip;
  std::string in;       // a partial frame carried to the next read
  size_t in_bytes = 0;  // what `in` counts in buffered_input_
  std::string out;      // encoded replies not yet written
  size_t out_offset = 0;
  // A body shared with other connections (a worker list or table), written
  // after out[out_offset, shared_at) and before the rest of `out`.
  SharedBody shared;
  size_t shared_at = 0;
  size_t shared_offset = 0;  // bytes of `shared` written

  size_t Queued() const {
    return out.size() - out_offset + (shared ? shared->size() - shared_offset : 0);
  }
  bool Drained() const { return out_offset == out.size() && !shared; }
  // Forgets what was written: `n` bytes in queue order.
  void Consume(size_t n) {
    size_t head = (shared ? shared_at : out.size()) - out_offset;
    size_t take = std::min(n, head);
    out_offset += take;
    n -= take;
    if (!shared) return;
    take = std::min(n, shared->size() - shared_offset);
    shared_offset += take;
    n -= take;
    if (shared_offset < shared->size()) return;
    shared.reset();
    out_offset += n;
  }
  void DropOutput() {
    std::string().swap(out);
    out_offset = 0;
    shared.reset();
  }
  bool dirty = false;   // listed in dirty_
  bool want_write = false;  // EPOLLOUT registered
  bool closing = false;     // close once `out` is written
  bool closed = false;
  size_t overflowed = 0;    // answers queued past the cap: closed at the next flush
  absl::Time opened;
  absl::Time last_input;
  absl::Time partial_since;  // when the frame in `in` began
  absl::Time closing_since;
};

uint64_t RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) getrlimit(RLIMIT_NOFILE, &limit);
  }
  return limit.rlim_cur;
}

JobMasterServer::JobMasterServer(const JobMasterConfig& config, JobTerminator* terminator,
                                 const Clock* clock)
    : config_(config), clock_(clock), state_(WithVersionBase(config, clock), terminator, this) {
  read_buffer_.resize(kReadChunk);
}

absl::StatusOr<std::unique_ptr<JobMasterServer>> JobMasterServer::Create(
    const JobMasterConfig& config, JobTerminator* terminator, const Clock* clock) {
  if (absl::Status s = ValidateConfig(config); !s.ok()) return s;
  RaiseOpenFileLimit();
  std::unique_ptr<JobMasterServer> server(new JobMasterServer(config, terminator, clock));
  if (absl::Status s = server->Listen(); !s.ok()) return s;
  return server;
}

absl::Status JobMasterServer::Listen() {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(config_.port));
  if (absl::Status s = ResolveBindAddress(config_.bind_address, &addr.sin_addr); !s.ok()) {
    return s;
  }
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return Errno("socket");
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Errno(absl::StrFormat("bind %s:%d", config_.bind_address, config_.port));
  }
  if (listen(listen_fd_, kListenBacklog) != 0) return Errno("listen");
  socklen_t len = sizeof(addr);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) return Errno("epoll/eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &kListenTag;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.ptr = &kWakeTag;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  jump_listener_ = clock_->AddJumpListener([this] { Wake(); });
  return absl::OkStatus();
}

JobMasterServer::~JobMasterServer() {
  clock_->RemoveJumpListener(jump_listener_);
  for (auto& [id, c] : conns_) close(c->fd);
  for (int fd : {listen_fd_, epoll_fd_, wake_fd_, reserve_fd_}) {
    if (fd >= 0) close(fd);
  }
}

absl::Status JobMasterServer::Run(absl::Duration linger_after_end) {
  absl::Duration tick = EffectiveTick(config_);
  absl::Duration sweep = std::clamp(
      std::min({config_.partial_frame_timeout, config_.register_timeout, config_.idle_timeout}) / 4,
      tick, std::max(tick, absl::Seconds(1)));
  absl::Time next_tick = clock_->Now();
  absl::Time ended_at = absl::InfiniteFuture();
  std::vector<epoll_event> events(kMaxEvents);
  while (!stop_.load(std::memory_order_relaxed)) {
    int timeout_ms = static_cast<int>(
        std::max<int64_t>(0, absl::ToInt64Milliseconds(next_tick - clock_->Now()) + 1));
    int n = epoll_wait(epoll_fd_, events.data(), kMaxEvents, timeout_ms);
    if (n < 0 && errno != EINTR) return Errno("epoll_wait");
    absl::Time now = clock_->Now();
    for (int i = 0; i < n; ++i) {
      void* tag = events[i].data.ptr;
      if (tag == &kListenTag) {
        AcceptAll(now);
      } else if (tag == &kWakeTag) {
        RunPosted();
      } else {
        auto* c = static_cast<Connection*>(tag);
        if (c->closed) continue;
        if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) ReadFrom(c, now);
        if (!c->closed && (events[i].events & EPOLLOUT) && !c->dirty) {
          c->dirty = true;
          dirty_.push_back(c);
        }
      }
    }
    if (now >= next_tick) {
      state_.OnTick(now);
      next_tick = now + tick;
    }
    if (now >= next_sweep_) {
      SweepConnections(now);
      next_sweep_ = now + sweep;
    }
    FlushDirty();
    closed_.clear();
    if (state_.job_end() && ended_at == absl::InfiniteFuture()) ended_at = now;
    if (now - ended_at >= linger_after_end) break;
  }
  {
    absl::MutexLock lock(&posted_mu_);
    loop_done_ = true;  // Inspect posts nothing more
  }
  RunPosted();
  return absl::OkStatus();
}

void JobMasterServer::Stop() {
  stop_ = true;
  Wake();
}

void JobMasterServer::Wake() {
  uint64_t one = 1;
  ssize_t ignored = write(wake_fd_, &one, sizeof(one));
  (void)ignored;  // fails only when the eventfd's count is full: the loop is awake already
}

bool JobMasterServer::Inspect(const std::function<void(const MasterState&)>& fn) {
  std::promise<bool> done;
  {
    absl::MutexLock lock(&posted_mu_);
    if (loop_done_) return false;
    posted_.push_back([&] {
      fn(state_);
      done.set_value(true);
    });
  }
  Wake();
  return done.get_future().get();
}

bool JobMasterServer::Post(std::function<void(MasterState&, absl::Time)> fn) {
  {
    absl::MutexLock lock(&posted_mu_);
    if (loop_done_) return false;
    posted_.push_back([this, fn = std::move(fn)] { fn(state_, clock_->Now()); });
  }
  Wake();
  return true;
}

void JobMasterServer::RunPosted() {
  uint64_t count;
  ssize_t ignored = read(wake_fd_, &count, sizeof(count));
  (void)ignored;  // drains the wakes; EAGAIN only says none was pending
  std::vector<std::function<void()>> tasks;
  {
    absl::MutexLock lock(&posted_mu_);
    tasks.swap(posted_);
  }
  for (auto& task : tasks) task();
}

void JobMasterServer::AcceptAll(absl::Time now) {
  while (true) {
    sockaddr_in addr{};
    socklen_t len = sizeof(addr);
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if ((errno == EMFILE || errno == ENFILE) && reserve_fd_ >= 0) {
        // Out of descriptors: accept and close one so the backlog drains
        // instead of waking the loop forever.
        Log(LogLevel::kError, "jobmaster", "out of file descriptors; refusing a connection");
        close(reserve_fd_);
        int dropped = accept(listen_fd_, nullptr, nullptr);
        if (dropped >= 0) close(dropped);
        reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
        continue;
      }
      return;  // EAGAIN: drained
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->id = next_conn_id_++;
    char ip[INET_ADDRSTRLEN] = {0};
    inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof(ip));
    c->peer_ip = ip;
    c->opened = c->last_input = now;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = c.get();
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    conns_.emplace(c->id, std::move(c));
    connection_count_.store(static_cast<int>(conns_.size()), std::memory_order_relaxed);
  }
}

void JobMasterServer::ReadFrom(Connection* c, absl::Time now) {
  while (!c->closed && !c->closing) {
    ssize_t got = recv(c->fd, read_buffer_.data(), read_buffer_.size(), 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) Close(c, std::strerror(errno));
      return;
    }
    if (got == 0) return Close(c, "peer closed the connection");
    c->last_input = now;
    std::string_view data(read_buffer_.data(), static_cast<size_t>(got));
    if (c->in.empty()) {
      size_t used = HandleFrames(c, data, now);
      if (!c->closing && !c->closed && used < data.size()) KeepPartial(c, data.substr(used), now);
    } else {
      c->in.append(data);
      size_t used = HandleFrames(c, c->in, now);
      if (!c->closing && !c->closed) AfterPartialConsumed(c, used, now);
    }
    if (static_cast<size_t>(got) < read_buffer_.size()) return;
  }
}

void JobMasterServer::KeepPartial(Connection* c, std::string_view rest, absl::Time now) {
  c->in.assign(rest);
  c->partial_since = now;
  SetInputBytes(c);
}

void JobMasterServer::AfterPartialConsumed(Connection* c, size_t used, absl::Time now) {
  c->in.erase(0, used);
  if (used > 0) c->partial_since = now;  // what is left is a frame that began now
  if (c->in.capacity() > kSmallPartialFrameBytes && c->in.capacity() > 2 * c->in.size()) {
    std::string(c->in).swap(c->in);  // a drained big frame must not stay allocated
  }
  SetInputBytes(c);
}

void JobMasterServer::SetInputBytes(Connection* c) {
  size_t bytes = c->in.empty() ? 0 : c->in.capacity();
  size_t total = buffered_input_.load(std::memory_order_relaxed) - c->in_bytes + bytes;
  c->in_bytes = bytes;
  buffered_input_.store(total, std::memory_order_relaxed);
  if (c->in.size() > kSmallPartialFrameBytes && total > config_.max_buffered_input_bytes) {
    return CutOff(c, absl::StrFormat(
        "its partial frame of %d bytes takes the master's buffered input to %d bytes, over the "
        "cap of %d (max_buffered_input_bytes)", c->in.size(), total,
        config_.max_buffered_input_bytes));
  }
  RaiseTo(&peak_buffered_input_, total);
}

size_t JobMasterServer::HandleFrames(Connection* c, std::string_view data, absl::Time now) {
  absl::Status bad;
  size_t used = DecodeRequests(
      data, config_.max_request_bytes, &request_,
      [&](const pb::JobMasterRequest& request) {
        state_.OnRequest(c->id, c->peer_ip, request, now);
        return c->overflowed == 0;  // a peer that does not read gets no more answers
      },
      &bad);
  if (!bad.ok()) RejectGarbage(c, bad);
  return used;
}

void JobMasterServer::RejectGarbage(Connection* c, const absl::Status& why) {
  Log(LogLevel::kWarning, "jobmaster", "closing the connection from %s: %s", c->peer_ip,
      why.message());
  state_.SendError(c->id, 0, why);
  c->closing = true;
  c->closing_since = clock_->Now();
  std::string().swap(c->in);
  SetInputBytes(c);
  c->want_write = true;  // stop reading: only the error is still written
  epoll_event ev{};
  ev.events = EPOLLOUT;
  ev.data.ptr = c;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
  state_.OnConnectionClosed(c->id);
}

JobMasterServer::Connection* JobMasterServer::Writable(ConnId conn) {
  auto it = conns_.find(conn);
  if (it == conns_.end() || it->second->closed) return nullptr;
  Connection* c = it->second.get();
  if (!c->dirty) {
    c->dirty = true;
    dirty_.push_back(c);
  }
  return c;
}

void JobMasterServer::Send(ConnId conn, const pb::JobMasterResponse& response) {
  Connection* c = Writable(conn);
  if (c == nullptr || c->overflowed) return;
  size_t before = c->Queued();
  AppendFrame(response, &c->out);
  CheckQueuedOutput(c, before);
}

void JobMasterServer::CheckQueuedOutput(Connection* c, size_t queued_before) {
  size_t queued = c->Queued();
  // One answer of any size may wait (a big job's worker list); a peer that
  // lets a second pile up past the cap does not read, and is dropped rather
  // than grow the master's memory. Closed at the flush: this runs inside
  // MasterState's handlers, which must not see the close yet.
  if (queued_before > 0 && queued > config_.max_queued_output_bytes) {
    c->overflowed = queued;
    c->DropOutput();
    return;
  }
  RaiseTo(&peak_queued_output_, queued);
}

void JobMasterServer::SendShared(ConnId conn, uint64_t request_id, int body_field,
                                 const SharedBody& body) {
  Connection* c = Writable(conn);
  if (c == nullptr || c->overflowed) return;
  size_t before = c->Queued();
  c->out.append(SharedBodyFramePrefix(request_id, body_field, body->size()));
  if (c->shared) {
    c->out.append(*body);  // a second one before the first was read: rare, copied
  } else {
    // Queued by reference: 10,000 askers of a 1 MB list hold one list.
    c->shared = body;
    c->shared_at = c->out.size();
    c->shared_offset = 0;
  }
  CheckQueuedOutput(c, before);
}

void JobMasterServer::BarriersPassed(int64_t passed) {
  if (config_.barrier_record.empty()) return;
  absl::Status s = WriteBarrierRecord(config_.barrier_record, passed);
  if (!s.ok() && !record_failed_) {
    Log(LogLevel::kWarning, "jobmaster",
        "%s; a restart of this master will learn the barrier count from its workers",
        s.message());
  }
  record_failed_ = !s.ok();
}

void JobMasterServer::FlushDirty() {
  // Flush may not add to dirty_, so iterating by index is safe.
  for (size_t i = 0; i < dirty_.size(); ++i) {
    Connection* c = dirty_[i];
    c->dirty = false;
    if (c->closed) continue;
    if (c->overflowed > 0) {
      CutOff(c, absl::StrFormat("it does not read its answers: %d bytes queued, over the cap "
                                "of %d (max_queued_output_bytes)", c->overflowed,
                                config_.max_queued_output_bytes));
    } else {
      Flush(c);
    }
  }
  dirty_.clear();
}

void JobMasterServer::Flush(Connection* c) {
  while (!c->Drained()) {
    iovec iov[3];
    int k = 0;
    size_t head_end = c->shared ? c->shared_at : c->out.size();
    if (c->out_offset < head_end) iov[k++] = {c->out.data() + c->out_offset, head_end - c->out_offset};
    if (c->shared) {
      iov[k++] = {const_cast<char*>(c->shared->data()) + c->shared_offset,
                  c->shared->size() - c->shared_offset};
      if (c->shared_at < c->out.size()) {
        iov[k++] = {c->out.data() + c->shared_at, c->out.size() - c->shared_at};
      }
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(k);
    ssize_t n = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0) return Close(c, std::strerror(errno));
    c->Consume(static_cast<size_t>(n));
  }
  bool drained = c->Drained();
  if (drained) {
    c->out.clear();
    c->out_offset = 0;
    if (c->out.capacity() > kKeepBufferBytes) std::string().swap(c->out);
    if (c->closing) return Close(c, "rejected garbage");
  }
  if (drained == c->want_write) {  // register or drop interest in EPOLLOUT
    c->want_write = !drained;
    epoll_event ev{};
    ev.events = c->want_write ? (EPOLLIN | EPOLLOUT) : EPOLLIN;
    ev.data.ptr = c;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
  }
}

void JobMasterServer::Close(Connection* c, std::string_view why) {
  if (c->closed) return;
  Log(LogLevel::kDebug, "jobmaster", "connection %d from %s closed: %s", c->id, c->peer_ip, why);
  c->closed = true;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
  close(c->fd);
  std::string().swap(c->in);
  SetInputBytes(c);
  c->DropOutput();
  if (!c->closing) state_.OnConnectionClosed(c->id);
  auto it = conns_.find(c->id);
  closed_.push_back(std::move(it->second));  // freed after this loop turn
  conns_.erase(it);
  connection_count_.store(static_cast<int>(conns_.size()), std::memory_order_relaxed);
}

void JobMasterServer::CutOff(Connection* c, std::string_view why) {
  Log(LogLevel::kWarning, "jobmaster", "closing the connection from %s: %s", c->peer_ip, why);
  cut_off_count_.fetch_add(1, std::memory_order_relaxed);
  Close(c, why);
}

std::string JobMasterServer::ExpiredReason(const Connection& c, absl::Time now) const {
  if (c.closing) {
    // The peer does not read the error it was sent.
    return now - c.closing_since >= config_.partial_frame_timeout ? "it did not read its error"
                                                                  : "";
  }
  if (!c.in.empty() && now - c.partial_since >= config_.partial_frame_timeout) {
    return absl::StrFormat("a frame it began (%d bytes so far) was not completed within %s",
                           c.in.size(), absl::FormatDuration(config_.partial_frame_timeout));
  }
  bool bound = state_.IsBound(c.id);
  if (!bound && now - c.opened >= config_.register_timeout) {
    return absl::StrFormat("it did not register (STARTING or ATTACH) within %s",
                           absl::FormatDuration(config_.register_timeout));
  }
  if (bound && now - c.last_input >= config_.idle_timeout && !state_.Waits(c.id)) {
    return absl::StrFormat("it sent nothing for %s and waits for no answer",
                           absl::FormatDuration(config_.idle_timeout));
  }
  return "";
}

void JobMasterServer::SweepConnections(absl::Time now) {
  std::vector<std::pair<Connection*, std::string>> expired;
  for (auto& [id, c] : conns_) {
    if (std::string why = ExpiredReason(*c, now); !why.empty()) expired.emplace_back(c.get(), why);
  }
  for (auto& [c, why] : expired) CutOff(c, why);
}

}  // namespace trainyard::jobmaster
