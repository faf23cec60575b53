// Slow, idle and many clients cannot stall the controller (issue 19, section 2): with hundreds of
// connections that trickle a header line every second or send nothing, agents' heartbeats and
// /healthz are all answered and no node goes NotReady. Runs the `tessera bench attack` harness at a
// size CI can afford; the latency figures are the benchmark's (docs/performance.md), not asserted here.
#include <gtest/gtest.h>

#include "server/bench_attack.h"

namespace tessera::server {
namespace {

void expect_withstood(const BenchAttackResult& r, const BenchAttackOptions& o) {
  EXPECT_GT(r.heartbeats, 0);
  EXPECT_EQ(r.heartbeats_failed, 0);
  EXPECT_GT(r.probes, 0);
  EXPECT_EQ(r.probes_failed, 0);
  EXPECT_EQ(r.not_ready, 0) << "a node went NotReady: its jobs would have been requeued";
  EXPECT_GE(r.attack_connections_open, (o.slow + o.idle) * 9 / 10) << "the attack held its connections (it was real)";
  // Far from the NotReady timeout (3 heartbeats).
  EXPECT_LT(r.heartbeat_ms_max, 2.0 * o.heartbeat_ms);
}

// 400 trickling and 200 idle connections for 6 s, heartbeats every 500 ms.
BenchAttackOptions attack(bool agent_listener) {
  BenchAttackOptions o;
  o.slow = 400;
  o.idle = 200;
  o.slow_line_ms = 1000;
  o.seconds = 6;
  o.heartbeat_ms = 500;
  o.agent_listener = agent_listener;
  return o;
}

TEST(SlowClients, HeartbeatsAndHealthzAreAnsweredWithAnAgentListener) {
  const BenchAttackOptions o = attack(true);
  auto r = run_bench_attack(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  expect_withstood(*r, o);
}

TEST(SlowClients, HeartbeatsAndHealthzAreAnsweredOnOneSharedListener) {
  const BenchAttackOptions o = attack(false);
  auto r = run_bench_attack(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  expect_withstood(*r, o);
}

}  // namespace
}  // namespace tessera::server
