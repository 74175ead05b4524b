// The agent's stream to the server: its heartbeats (the node's state, what
// changed since the last beat, the task list) and the tasks' resource
// samples between them.
#include <sys/statvfs.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "agent/heartbeat_delta.h"
#include "agent/server_link.h"
#include "common/logging.h"

namespace trainyard::agent {

namespace {

// What one stream's heartbeats told the server already: the images and the
// GPU faults go again only when they change.
struct Told {
  std::vector<std::string> images;
  bool images_given = false;
  std::string faults;  // serialized one after another, length-prefixed: no two lists alike
};

// Fills `hb` with the node's state in `snap`: its GPUs in use, free disk,
// ports in use (those of `serving` only, when it names any), and its
// images and GPU faults when they differ from what was told. Returns the
// images when they changed: told once the beat is sent.
std::optional<std::vector<std::string>> FillNodeState(const HeartbeatSnapshot& snap, AgentCore& core,
                                                       const core::PortRanges& serving, Told* told,
                                                       v1::Heartbeat* hb) {
  hb->set_busy_gpu_mask(snap.excluded_gpus.bits());
  struct statvfs fs;
  if (statvfs(core.data_dir().c_str(), &fs) == 0) {
    hb->set_data_free_mb(static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize) / (1 << 20));
  }
  const core::PortRanges in_use = serving.Empty() ? snap.ports_in_use : snap.ports_in_use.Intersect(serving);
  for (const auto& r : in_use.ranges()) {
    auto* p = hb->add_ports_in_use();
    p->set_begin(r.begin);
    p->set_end(r.end);
  }
  std::vector<std::string> images;
  for (const CachedImage& image : core.images().List()) images.insert(images.end(), image.refs.begin(), image.refs.end());
  std::sort(images.begin(), images.end());
  std::optional<std::vector<std::string>> changed;
  if (!told->images_given || images != told->images) {
    hb->mutable_images()->Assign(images.begin(), images.end());
    hb->set_images_given(true);
    changed = std::move(images);
  }
  // GPU faults when they changed (a new one, or a GPU's worse): the first
  // beat on a stream gives them too, as registration did.
  std::string faults;
  for (const v1::GpuFault& f : snap.gpu_faults) {
    std::string one = f.SerializeAsString();
    faults.append(std::to_string(one.size())).append(":").append(one);
  }
  if (faults != told->faults) {
    hb->mutable_gpu_faults()->Assign(snap.gpu_faults.begin(), snap.gpu_faults.end());
    hb->set_gpu_faults_given(true);
    told->faults = std::move(faults);
  }
  return changed;
}

}  // namespace

void ServerLink::Heartbeats(const v1::Registered& registered, int64_t session) {
  const int interval_ms = std::max(50, registered.heartbeat_interval_ms());
  const int quiet_ms = registered.quiet_heartbeat_interval_ms();
  const int sample_interval_ms = registered.sample_interval_ms();
  // A quiet interval not above the beat's own changes nothing.
  HeartbeatDelta delta(registered.full_heartbeat_every(),
                       quiet_ms > interval_ms ? absl::Milliseconds(quiet_ms) : absl::ZeroDuration());
  // The ports worth telling: sockets elsewhere are no news to the server.
  core::PortRanges serving;
  for (const v1::PortRange& r : registered.serving_ports()) {
    if (r.begin() <= r.end()) serving.Add({r.begin(), r.end()});
  }
  Told told;  // on this stream
  // Real time, as the heartbeats pace themselves; samples keep their own
  // cadence beside them (the first one interval after registration: the
  // CPU of a sample is averaged since the one before).
  const absl::Duration beat_every = absl::Milliseconds(interval_ms);
  const absl::Duration sample_every = absl::Milliseconds(std::max(200, sample_interval_ms));
  absl::Time beat_at = absl::Now() + beat_every;
  absl::Time sample_at = sample_interval_ms > 0 ? absl::Now() + sample_every : absl::InfiniteFuture();
  for (;;) {
    if (!AwaitBeat(session, std::min(beat_at, sample_at), &beat_at)) return;
    absl::Time now = absl::Now();
    if (now >= sample_at) {
      sample_at += sample_every;
      if (sample_at <= now) sample_at = now + sample_every;  // fell behind: no burst to catch up
      if (!SendResources(session)) return;
    }
    if (now < beat_at) continue;
    beat_at = now + beat_every;
    absl::StatusOr<HeartbeatSnapshot> snap = core_->Heartbeat();
    if (!snap.ok()) {
      Log(LogLevel::kWarning, "agent", "heartbeat: %s", std::string(snap.status().message()));
      continue;
    }
    v1::AgentMessage msg;
    v1::Heartbeat* hb = msg.mutable_heartbeat();
    std::optional<std::vector<std::string>> images = FillNodeState(*snap, *core_, serving, &told, hb);
    absl::MutexLock wl(&write_mu_);
    AddTasks(hb, session, options_.clock->Now());
    if (delta.Quiet(*hb, now)) {  // nothing new: the next beat may say so
      beat_at = std::min(beat_at, delta.QuietUntil());
      continue;
    }
    delta.Apply(hb, now);  // GPU and port use and free disk only: the task list is always whole
    if (images) {
      told.images = std::move(*images);
      told.images_given = true;
    }
    if (!WriteLocked(msg, -1)) return;
  }
}

bool ServerLink::AwaitBeat(int64_t session, absl::Time wake, absl::Time* beat_at) {
  absl::MutexLock lock(&mu_);
  while (!stopping_ && session_ == session && !beat_soon_ && !cv_.WaitWithDeadline(&mu_, wake)) {
  }
  if (stopping_ || session_ != session) return false;
  if (beat_soon_) {
    beat_soon_ = false;
    *beat_at = absl::Now();
  }
  return true;
}

bool ServerLink::SendResources(int64_t session) {
  std::vector<ResourceSample> samples = core_->SampleResources(*options_.clock);
  if (samples.empty()) return true;
  v1::AgentMessage msg;
  v1::TaskResourceReport* report = msg.mutable_resources();
  for (const ResourceSample& s : samples) {
    v1::TaskResources* t = report->add_tasks();
    t->set_job(s.key.job);
    t->set_role(s.key.role);
    t->set_index(s.key.index);
    t->set_attempt(s.attempt);
    t->set_job_id(s.job_id);
    v1::TaskResourceSample* p = t->mutable_sample();
    p->set_time_unix_ms(absl::ToUnixMillis(s.time));
    p->set_cpu_milli(s.cpu_milli);
    p->set_memory_bytes(s.memory_bytes);
    p->set_gpu_busy_milli(s.gpu_busy_milli);
    p->set_gpu_memory_bytes(s.gpu_memory_bytes);
    t->set_memory_limit_bytes(s.memory_limit_bytes);
    t->set_source(s.source);
  }
  return Write(msg, session);
}

}  // namespace trainyard::agent
