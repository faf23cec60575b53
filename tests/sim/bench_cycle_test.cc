#include "sim/bench_cycle.h"

#include <gtest/gtest.h>

namespace tessera::sim {
namespace {

TEST(BenchCycle, SmallRunStartsPreemptsAndExplains) {
  BenchCycleOptions o;
  o.nodes = 200;
  o.pending = 2000;
  o.queues = 40;
  o.cycles = 2;
  auto r = run_bench_cycle(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GT(r->running_before, 0);
  EXPECT_GT(r->starts, 0);
  EXPECT_GT(r->pending, 0);
  EXPECT_LE(r->preemptions, 16) << "the per-cycle bound holds";
  EXPECT_LE(r->reserved, 1) << "EASY: one reservation";
  EXPECT_EQ(r->starts + r->pending, 2000) << "every pending job is started or told why it waits";
  EXPECT_LE(r->cycle_ms_p50, r->cycle_ms_p99);
  EXPECT_GT(r->decisions_per_s, 0);
  // After small changes (100 ends, 100 arrivals each): timed, and the freed GPUs are used again.
  EXPECT_GT(r->small_ms_p50, 0);
  EXPECT_LE(r->small_ms_p50, r->small_ms_p99);
  EXPECT_GT(r->small_starts, 0);
  EXPECT_GT(r->small_pending, 0);
}

TEST(BenchCycle, BadOptionsNameTheFlag) {
  BenchCycleOptions o;
  o.queues = 0;
  auto r = run_bench_cycle(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("--queues"), std::string::npos);
}

}  // namespace
}  // namespace tessera::sim
