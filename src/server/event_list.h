// EventList: a job's event log as an immutable, shared list. Appending makes
// a new head that points at the old one, so publishing a job's view shares
// its events with the control state instead of copying them on every change,
// and a reader keeps the list it took however the job goes on.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

#include "proto/service.pb.h"

namespace trainyard::server {

class EventList {
 public:
  EventList() = default;

  // This list with `event` after its last.
  EventList Append(v1::JobEvent event) const {
    EventList out;
    out.head_ = std::make_shared<const Node>(std::move(event), head_, size() + 1);
    return out;
  }
  size_t size() const { return head_ ? head_->count : 0; }
  bool empty() const { return !head_; }

  // Calls f(const v1::JobEvent&) for each event, oldest first.
  template <typename F>
  void ForEach(F&& f) const {
    std::vector<const v1::JobEvent*> order(size());
    size_t i = order.size();
    for (const Node* n = head_.get(); n; n = n->prev.get()) order[--i] = &n->event;
    for (const v1::JobEvent* e : order) f(*e);
  }
  void AppendTo(google::protobuf::RepeatedPtrField<v1::JobEvent>* out) const {
    out->Reserve(out->size() + static_cast<int>(size()));
    ForEach([out](const v1::JobEvent& e) { *out->Add() = e; });
  }

 private:
  struct Node {
    Node(v1::JobEvent e, std::shared_ptr<const Node> p, size_t n) : event(std::move(e)), prev(std::move(p)), count(n) {}
    // Unlinks the nodes only this one holds one by one: a long log would
    // otherwise be freed by recursion as deep as the log.
    ~Node() {
      std::shared_ptr<const Node> p = std::move(prev);
      while (p && p.use_count() == 1) p = std::move(p->prev);
    }
    v1::JobEvent event;
    mutable std::shared_ptr<const Node> prev;
    size_t count;
  };
  std::shared_ptr<const Node> head_;
};

}  // namespace trainyard::server
