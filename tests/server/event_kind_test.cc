// Event kinds: every kind's name reads back as the kind, names are distinct, other text is unknown.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "server/event_kind.h"

namespace tessera::server {
namespace {

TEST(EventKinds, NamesRoundTripAndAreDistinct) {
  std::set<std::string> names;
  for (size_t i = 0; i < size_t(EventKind::kUnknown); ++i) {
    const auto k = EventKind(i);
    const std::string name = event_kind_name(k);
    EXPECT_FALSE(name.empty());
    EXPECT_TRUE(names.insert(name).second) << "two kinds named " << name;
    EXPECT_EQ(parse_event_kind(name), k) << name;
  }
  EXPECT_EQ(parse_event_kind("node_not_ready"), EventKind::kNodeNotReady);  // the name the store has kept
  EXPECT_EQ(parse_event_kind(""), EventKind::kUnknown);
  EXPECT_EQ(parse_event_kind("Started"), EventKind::kUnknown);
}

TEST(EventKinds, WhatEndsAnAttempt) {
  for (EventKind k : {EventKind::kSucceeded, EventKind::kFailed, EventKind::kCancelled, EventKind::kTimedOut,
                      EventKind::kPreempted, EventKind::kLost})
    EXPECT_TRUE(ends_attempt(k)) << event_kind_name(k);
  for (EventKind k : {EventKind::kStarted, EventKind::kRequeued, EventKind::kNodeDrained, EventKind::kDenied, EventKind::kUnknown})
    EXPECT_FALSE(ends_attempt(k)) << event_kind_name(k);
}

}  // namespace
}  // namespace tessera::server
