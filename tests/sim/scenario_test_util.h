// Helpers for tests that run scheduling scenarios from YAML text (sim/schedule_sim.h).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sim/schedule_sim.h"

namespace tessera::sim::testing {

// Parses and runs `text`; a parse or run error fails the calling test and yields an empty result.
inline ScheduleRunResult run_text(const std::string& text) {
  auto sc = parse_schedule_scenario(text);
  EXPECT_TRUE(sc.ok()) << sc.error().message;
  if (!sc.ok()) return {};
  auto r = run_schedule_scenario(*sc);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? *r : ScheduleRunResult{};
}

// Some line of `v` contains `what`.
inline bool any_contains(const std::vector<std::string>& v, const std::string& what) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.find(what) != std::string::npos; });
}

}  // namespace tessera::sim::testing
