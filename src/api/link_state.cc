// LinkState (see link_state.h).
#include "api/link_state.h"

#include <iterator>
#include <utility>

namespace trainyard::api {

bool LinkState::OnStatus(const v1::AgentMessage& msg, bool final) {
  if (final) {
    recent_ends_.push_back(RecentEnd{msg.status(), -1, absl::InfinitePast()});
    while (recent_ends_.size() > max_buffered_) recent_ends_.pop_front();
  }
  // While the buffer is replayed after a reconnect, new reports queue
  // behind it, so none overtakes an older one.
  if (registered_ && !replaying_) return true;
  Buffer(msg);
  return false;
}

void LinkState::WriteFailed(v1::AgentMessage msg) { Buffer(std::move(msg)); }

void LinkState::Buffer(v1::AgentMessage msg) {
  if (buffered_.size() >= max_buffered_) buffered_.pop_front();
  buffered_.push_back(std::move(msg));
}

void LinkState::Registered() { registered_ = replaying_ = true; }

std::deque<v1::AgentMessage> LinkState::TakeReplay() {
  std::deque<v1::AgentMessage> replay;
  replay.swap(buffered_);
  if (replay.empty()) replaying_ = false;
  return replay;
}

void LinkState::ReplayBroke(std::deque<v1::AgentMessage> rest) {
  buffered_.insert(buffered_.begin(), std::make_move_iterator(rest.begin()), std::make_move_iterator(rest.end()));
  replaying_ = false;
}

void LinkState::Disconnected() { registered_ = replaying_ = false; }

void LinkState::AddRecentEnds(int64_t session, absl::Time now, v1::Heartbeat* hb) {
  for (RecentEnd& e : recent_ends_) {
    if (e.session != session) {
      e.session = session;
      e.since = now;
    }
  }
  while (!recent_ends_.empty() && now - recent_ends_.front().since > kRepeatEndsFor) recent_ends_.pop_front();
  for (const RecentEnd& e : recent_ends_) *hb->add_tasks() = e.status;
}

}  // namespace trainyard::api
