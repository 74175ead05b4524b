#include "server/event_list.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace trainyard::server {
namespace {

v1::JobEvent Ev(const std::string& text) {
  v1::JobEvent e;
  e.set_text(text);
  return e;
}

std::vector<std::string> Texts(const EventList& l) {
  std::vector<std::string> out;
  l.ForEach([&](const v1::JobEvent& e) { out.push_back(e.text()); });
  return out;
}

TEST(EventListTest, KeepsOrderAndAnOlderListStaysAsItWas) {
  EventList a = EventList().Append(Ev("submitted")).Append(Ev("scheduled"));
  EventList b = a.Append(Ev("started"));
  EXPECT_EQ(Texts(a), (std::vector<std::string>{"submitted", "scheduled"}));
  EXPECT_EQ(Texts(b), (std::vector<std::string>{"submitted", "scheduled", "started"}));
  EXPECT_EQ(b.size(), 3u);
  v1::JobView v;
  b.AppendTo(v.mutable_events());
  ASSERT_EQ(v.events_size(), 3);
  EXPECT_EQ(v.events(2).text(), "started");
  EXPECT_TRUE(EventList().empty());
}

TEST(EventListTest, AMillionEventsAreFreedWithoutDeepRecursion) {
  EventList l;
  for (int i = 0; i < 1000000; ++i) l = l.Append(Ev("x"));
  EventList kept = l;  // a reader's copy keeps the whole list alive
  l = EventList();
  EXPECT_EQ(kept.size(), 1000000u);
  kept = EventList();  // would overflow the stack if freed recursively
  EXPECT_TRUE(kept.empty());
}

}  // namespace
}  // namespace trainyard::server
