// Delta heartbeats (see heartbeat_delta.h).
#include "agent/heartbeat_delta.h"

#include <string>

namespace trainyard::agent {

HeartbeatDelta::Ranges HeartbeatDelta::RangesOf(const v1::Heartbeat& hb) {
  Ranges ports;
  ports.reserve(static_cast<size_t>(hb.ports_in_use_size()));
  for (const v1::PortRange& r : hb.ports_in_use()) ports.emplace_back(r.begin(), r.end());
  return ports;
}

std::string HeartbeatDelta::TasksKey(const v1::Heartbeat& hb) {
  std::string key;
  v1::TaskStatus t;
  for (const v1::TaskStatus& task : hb.tasks()) {
    t = task;
    t.clear_time_unix_ms();
    std::string one = t.SerializeAsString();
    // Length-prefixed, so that no two lists make the same key.
    key.append(std::to_string(one.size())).append(":").append(one);
  }
  return key;
}

bool HeartbeatDelta::Quiet(const v1::Heartbeat& hb, absl::Time now) const {
  if (full_every_ <= 0 || quiet_every_ <= absl::ZeroDuration() || !sent_) return false;
  if (now - last_beat_ >= quiet_every_) return false;
  return !hb.images_given() && !hb.gpu_faults_given() && hb.busy_gpu_mask() == busy_ && RangesOf(hb) == ports_ && TasksKey(hb) == tasks_;
}

absl::Time HeartbeatDelta::QuietUntil() const {
  if (full_every_ <= 0 || quiet_every_ <= absl::ZeroDuration() || !sent_) return absl::InfiniteFuture();
  return last_beat_ + quiet_every_;
}

bool HeartbeatDelta::Apply(v1::Heartbeat* hb, absl::Time now) {
  if (full_every_ <= 0) return true;
  last_beat_ = now;
  if (quiet_every_ > absl::ZeroDuration()) tasks_ = TasksKey(*hb);
  Ranges ports = RangesOf(*hb);
  std::optional<int64_t> data_free = hb->has_data_free_mb() ? std::optional<int64_t>(hb->data_free_mb()) : std::nullopt;
  bool same = sent_ && hb->busy_gpu_mask() == busy_ && ports == ports_;
  if (!same || since_full_ + 1 >= full_every_) {
    sent_ = true;
    since_full_ = 0;
    busy_ = hb->busy_gpu_mask();
    ports_ = std::move(ports);
    data_free_mb_ = data_free;
    return true;
  }
  ++since_full_;
  hb->clear_busy_gpu_mask();
  hb->clear_ports_in_use();
  hb->set_use_unchanged(true);
  // Unset in a delta means unchanged: an unreadable data dir is sent as
  // unchanged too (a server keeps the last value it had either way).
  if (!data_free || data_free == data_free_mb_) {
    hb->clear_data_free_mb();
  } else {
    data_free_mb_ = data_free;
  }
  return false;
}

}  // namespace trainyard::agent
