// The job master's fuzz entry point: arbitrary bytes become a script of
// events on four connections to one MasterState (bytes arriving, a
// connection closing, time passing), decoded by the same DecodeRequests the
// event loop uses. Every answer is framed as the master frames it and read
// back as a worker would; the state's counters must stay in range.
#include <array>
#include <memory>
#include <string>

#include "common/check.h"
#include "fuzz/entry_points.h"
#include "jobmaster/frame.h"
#include "jobmaster/master_state.h"
#include "jobmaster/request_decoder.h"

namespace trainyard::fuzz {
namespace {

namespace jm = ::trainyard::jobmaster;
namespace pb = ::trainyard::v1;

constexpr int kConnections = 4;
constexpr uint32_t kMaxRequestBytes = 4096;

// Frames every answer and parses it back, as a worker's library would.
class CheckingOutbox : public jm::Outbox {
 public:
  void Send(jm::ConnId, const pb::JobMasterResponse& response) override {
    std::string frame;
    jm::AppendFrame(response, &frame);
    ReadBack(frame);
  }
  void SendShared(jm::ConnId, uint64_t request_id, int body_field,
                  const jm::SharedBody& body) override {
    std::string frame = jm::SharedBodyFramePrefix(request_id, body_field, body->size()) + *body;
    pb::JobMasterResponse parsed = ReadBack(frame);
    bool right_body = body_field == pb::JobMasterResponse::kTableFieldNumber ? parsed.has_table()
                                                                            : parsed.has_workers();
    TY_CHECK(right_body && parsed.request_id() == request_id,
             "a shared-body frame does not read back as its body");
  }

 private:
  static pb::JobMasterResponse ReadBack(std::string_view frame) {
    jm::FrameView view;
    absl::Status s = jm::PeekFrame(frame, jm::kMaxResponseBytes, &view);
    TY_CHECK(s.ok() && view.complete && view.consumed == frame.size(), "answer framing");
    pb::JobMasterResponse parsed;
    TY_CHECK(parsed.ParseFromArray(view.payload.data(), static_cast<int>(view.payload.size())),
             "an answer does not parse");
    return parsed;
  }
};

struct Connection {
  jm::ConnId id = 0;
  std::string in;
};

// The script: each event is one byte (low 2 bits: the connection, the next
// 2: what happens) and, for bytes arriving, a length byte and that many
// bytes. Kinds: 0 and 1 bytes arrive, 2 the connection closes (a new one
// opens in its place), 3 time passes (the next byte, in 100 ms steps) and
// the master ticks.
class Script {
 public:
  explicit Script(std::string_view data, bool learn) : data_(data) {
    config_.job_name = "fuzz";
    config_.num_workers = 3;
    config_.ping_interval = absl::Seconds(1);
    config_.ping_misses = 2;
    config_.max_restarts = 1;
    config_.max_request_bytes = kMaxRequestBytes;
    config_.learn_barriers = learn;
    config_.order_key = kJobMasterOrderKey;  // the seeds' ServerOrder carries a MAC under it
    state_ = std::make_unique<jm::MasterState>(config_, &terminator_, &outbox_);
    for (int i = 0; i < kConnections; ++i) conns_[i].id = next_id_++;
  }

  void Run() {
    while (at_ < data_.size()) {
      uint8_t op = Byte();
      Connection& c = conns_[op & 3];
      int64_t generation = state_->barrier_generation();
      switch ((op >> 2) & 3) {
        case 0:
        case 1: Arrive(c, Take(Byte())); break;
        case 2: Reopen(c); break;
        default:
          now_ += absl::Milliseconds(100) * Byte();
          state_->OnTick(now_);
      }
      CheckCounters(generation);
    }
  }

 private:
  uint8_t Byte() { return at_ < data_.size() ? static_cast<uint8_t>(data_[at_++]) : 0; }
  std::string_view Take(size_t n) {
    std::string_view out = data_.substr(at_, n);
    at_ += out.size();
    return out;
  }

  void Arrive(Connection& c, std::string_view bytes) {
    c.in.append(bytes);
    absl::Status bad;
    size_t used = jm::DecodeRequests(
        c.in, kMaxRequestBytes, &request_,
        [&](const pb::JobMasterRequest& r) {
          state_->OnRequest(c.id, "10.0.0.1", r, now_);
          return true;
        },
        &bad);
    c.in.erase(0, used);
    if (!bad.ok()) {  // as the loop does with garbage: one error, then closed
      state_->SendError(c.id, 0, bad);
      Reopen(c);
    }
  }

  void Reopen(Connection& c) {
    state_->OnConnectionClosed(c.id);
    c = Connection{next_id_++, ""};
  }

  void CheckCounters(int64_t generation_before) {
    int n = config_.num_workers;
    TY_CHECK(state_->joined_count() >= 0 && state_->joined_count() <= n, "joined %d",
             state_->joined_count());
    TY_CHECK(state_->barrier_waiting() >= 0 && state_->barrier_waiting() <= n, "waiting %d",
             state_->barrier_waiting());
    int64_t g = state_->barrier_generation();
    TY_CHECK(g >= generation_before, "barrier generation went back from %lld to %lld",
             static_cast<long long>(generation_before), static_cast<long long>(g));
    // Only a learning master may jump; any other passes one barrier at a time.
    TY_CHECK(config_.learn_barriers || g <= generation_before + 1,
             "barrier generation jumped from %lld to %lld", static_cast<long long>(generation_before),
             static_cast<long long>(g));
  }

  std::string_view data_;
  size_t at_ = 0;
  jm::JobMasterConfig config_;
  jm::FakeJobTerminator terminator_;
  CheckingOutbox outbox_;
  std::unique_ptr<jm::MasterState> state_;
  std::array<Connection, kConnections> conns_;
  jm::ConnId next_id_ = 1;
  pb::JobMasterRequest request_;
  absl::Time now_ = absl::FromUnixSeconds(1'700'000'000);
};

}  // namespace

void JobMaster(std::string_view data) {
  if (data.empty()) return;
  // The first byte picks a master that restarted (learning the barrier
  // count) or one that knows it.
  Script script(data.substr(1), (data[0] & 1) != 0);
  script.Run();
}

}  // namespace trainyard::fuzz
