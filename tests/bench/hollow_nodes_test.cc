// Hollow nodes against the real server binary (a child process on loopback), at small scale: a storm
// of short jobs that must all succeed with nothing lost or restarted, and churn: a node that goes
// silent past the agent timeout turns NotReady, its job is requeued and finishes elsewhere, and the
// node takes work again once it is back. Plus the pure pieces (task outcomes, histogram quantiles,
// option checks).
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "bench/bench_cluster.h"
#include "bench/bench_internal.h"
#include "bench/hollow_nodes.h"
#include "bench/server_child.h"

namespace tessera::bench {
namespace {

using Json = nlohmann::json;

std::string temp_dir() {
  char tmpl[] = "/tmp/tessera-bench-test-XXXXXX";
  return ::mkdtemp(tmpl) ? tmpl : "";
}

template <class F>
bool eventually(F pred, double seconds) {
  const auto until = Clock::now() + std::chrono::milliseconds(int64_t(seconds * 1000));
  while (Clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

TEST(HollowOutcome, FromTheCommand) {
  EXPECT_DOUBLE_EQ(hollow_outcome({"sleep", "2.5"}, 60).seconds, 2.5);
  EXPECT_EQ(hollow_outcome({"/bin/sleep", "3"}, 60).exit_code, 0);
  EXPECT_DOUBLE_EQ(hollow_outcome({"/bin/sleep", "3"}, 60).seconds, 3);
  EXPECT_DOUBLE_EQ(hollow_outcome({"true"}, 60).seconds, 0);
  EXPECT_EQ(hollow_outcome({"false"}, 60).exit_code, 1);
  EXPECT_DOUBLE_EQ(hollow_outcome({"python3", "train.py"}, 42).seconds, 42);
  EXPECT_DOUBLE_EQ(hollow_outcome({"sleep", "soon"}, 7).seconds, 7);
  EXPECT_DOUBLE_EQ(hollow_outcome({}, 7).seconds, 7);
}

TEST(BenchClusterReport, HistogramQuantileInterpolatesInsideBuckets) {
  const std::string text =
      "# TYPE tessera_scheduling_cycle_seconds histogram\n"
      "tessera_scheduling_cycle_seconds_bucket{le=\"0.001\"} 50\n"
      "tessera_scheduling_cycle_seconds_bucket{le=\"0.01\"} 90\n"
      "tessera_scheduling_cycle_seconds_bucket{le=\"0.1\"} 100\n"
      "tessera_scheduling_cycle_seconds_bucket{le=\"+Inf\"} 100\n"
      "tessera_scheduling_cycle_seconds_sum 1.5\n";
  const auto h = parse_histogram(text, "tessera_scheduling_cycle_seconds");
  ASSERT_EQ(h.size(), 4u);
  EXPECT_NEAR(histogram_quantile(h, 0.5), 0.001, 1e-9);          // the 50th of 100 is the first bucket's top
  EXPECT_NEAR(histogram_quantile(h, 0.7), 0.001 + 0.009 * 0.5, 1e-9);  // halfway through (0.001, 0.01]
  EXPECT_NEAR(histogram_quantile(h, 0.99), 0.01 + 0.09 * 0.9, 1e-9);
  EXPECT_EQ(histogram_quantile({}, 0.5), 0);
}

TEST(BenchClusterReport, HistogramOfOneLabelledSeries) {
  const std::string text =
      "tessera_api_request_duration_seconds_bucket{route=\"/api/v1/jobs\",le=\"0.01\"} 7\n"
      "tessera_api_request_duration_seconds_bucket{route=\"/api/v1/jobs\",le=\"+Inf\"} 9\n"
      "tessera_api_request_duration_seconds_bucket{route=\"/api/v1/agent/heartbeat\",le=\"0.01\"} 3\n"
      "tessera_api_request_duration_seconds_bucket{route=\"/api/v1/agent/heartbeat\",le=\"+Inf\"} 4\n";
  const auto h = parse_histogram(text, "tessera_api_request_duration_seconds", "route=\"/api/v1/agent/heartbeat\"");
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].second, 3);
  EXPECT_EQ(h[1].second, 4);
  EXPECT_TRUE(parse_histogram(text, "tessera_api_request_duration_seconds").empty());  // no series without labels
}

TEST(BenchClusterOptions, RefusedWithTheFlagNamed) {
  BenchClusterOptions o;
  o.nodes = 0;
  EXPECT_NE(validate_bench_cluster(o).message().find("--nodes"), std::string::npos);
  o = BenchClusterOptions{};
  o.workload = "flood";
  EXPECT_NE(validate_bench_cluster(o).message().find("--workload"), std::string::npos);
  o = BenchClusterOptions{};
  o.job_gpus = 9;
  EXPECT_NE(validate_bench_cluster(o).message().find("--job-gpus"), std::string::npos);
  o = BenchClusterOptions{};
  o.workload = "trace";
  EXPECT_NE(validate_bench_cluster(o).message().find("--duration"), std::string::npos);
  o = BenchClusterOptions{};
  o.gpu_model = "Z9000";
  EXPECT_NE(validate_bench_cluster(o).message().find("--gpu-model"), std::string::npos);
  o = BenchClusterOptions{};
  o.priority = 20;
  EXPECT_NE(validate_bench_cluster(o).message().find("--priority"), std::string::npos);
  EXPECT_TRUE(validate_bench_cluster(BenchClusterOptions{}).ok());
}

// Against a controller without the watch (a stand-in that answers register and heartbeat, and 404 to
// watch): the fleet turns watching off and goes on with plain heartbeats, none failing.
TEST(HollowFleet, WatchFallsBackToHeartbeatsOn404) {
  httplib::Server fake;
  std::atomic<int> beats{0}, watches{0};
  fake.Post("/api/v1/agent/register", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"heartbeat_interval_ms": 100, "task_lease_ms": 0})", "application/json");
  });
  fake.Post("/api/v1/agent/heartbeat", [&](const httplib::Request& req, httplib::Response& res) {
    const Json body = Json::parse(req.body, nullptr, false);
    if (body.is_object() && body.value("node", "") != "") ++beats;
    res.set_content(R"({"run": [], "stop": [], "heartbeat_interval_ms": 100})", "application/json");
  });
  fake.Post("/api/v1/agent/watch", [&](const httplib::Request&, httplib::Response& res) {
    ++watches;
    res.status = 404;
    res.set_content(R"({"error": {"code": "not_found", "message": "no route"}})", "application/json");
  });
  const int port = fake.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serving([&] { fake.listen_after_bind(); });
  {
    HollowFleetOptions fo;
    fo.server = "127.0.0.1:" + std::to_string(port);
    fo.token = "t";
    fo.watch = true;
    fo.register_spread_ms = 50;
    std::vector<HollowNodeSpec> specs;
    for (int i = 0; i < 3; ++i) specs.push_back(HollowNodeSpec{"n" + std::to_string(i), 2, "A100-80GB"});
    auto fleet = HollowFleet::start(specs, fo);
    ASSERT_TRUE(fleet.ok()) << fleet.error().message;
    EXPECT_TRUE(eventually([&] { return (*fleet)->stats().watch_off; }, 5));
    const int watched = watches.load();
    EXPECT_TRUE(eventually([&] { return (*fleet)->stats().heartbeats >= 30; }, 5));
    EXPECT_EQ((*fleet)->stats().heartbeat_failures, 0) << (*fleet)->stats().last_error;
    EXPECT_LE(watches.load(), watched + 3);  // no more watching once a 404 came back
    EXPECT_GE(beats.load(), 30);
  }
  fake.stop();
  serving.join();
}

// 20 hollow nodes x 8 GPUs, 300 short jobs from 4 clients: every job succeeds, none lost or restarted,
// no node NotReady, and every figure of the report is there.
TEST(BenchCluster, SmallStormAllSucceed) {
  BenchClusterOptions o;
  o.nodes = 20;
  o.gpus_per_node = 8;
  o.heartbeat_ms = 250;
  o.clients = 4;
  o.jobs = 300;
  o.job_seconds = 0.5;
  o.drain_s = 20;
  o.server_binary = TESSERA_BINARY;
  o.server_args = {"--log-level", "warn"};
  o.priority = ::geteuid() == 0 ? 3 : 0;  // raising a priority needs root
  errno = 0;
  const int nice_before = ::getpriority(PRIO_PROCESS, 0);
  auto r = run_bench_cluster(o, nullptr);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->priority, o.priority);
  EXPECT_EQ(::getpriority(PRIO_PROCESS, 0), nice_before) << "the calling thread's nice value is restored";
  EXPECT_EQ(r->acked, 300);
  EXPECT_EQ(r->submit_errors, 0) << r->first_submit_error;
  EXPECT_EQ(r->succeeded, 300);
  EXPECT_EQ(r->unfinished, 0);
  EXPECT_EQ(r->jobs_lost, 0);
  EXPECT_EQ(r->jobs_restarted, 0);
  EXPECT_EQ(r->nodes_not_ready, 0);
  EXPECT_EQ(r->jobs_in_store, 300);
  EXPECT_EQ(r->started, 300);
  EXPECT_GT(r->start_samples, 100);  // 160 GPUs: the first jobs found room at once
  EXPECT_GT(r->start_ms_p50, 0);
  EXPECT_LE(r->start_ms_p50, r->start_ms_p99);
  EXPECT_GT(r->acked_per_s, 0);
  EXPECT_GT(r->heartbeats, 20);
  EXPECT_GT(r->hb_ms_p50, 0);
  EXPECT_LE(r->hb_ms_p50, r->hb_ms_p99);
  EXPECT_GT(r->hb_server_ms_p50, 0);  // the controller's part, from its own histogram
  EXPECT_LE(r->hb_server_ms_p50, r->hb_server_ms_p99);
  EXPECT_GT(r->hb_http_ms_p50, 0);  // the same beats in the HTTP server, from the route's histogram
  EXPECT_LE(r->hb_http_ms_p50, r->hb_http_ms_p99);
  EXPECT_GT(r->hb_sent_ms_p50, 0);  // and until their answers were sent
  EXPECT_LE(r->hb_sent_ms_p50, r->hb_sent_ms_p99);
  EXPECT_GT(r->cycles, 0);
  EXPECT_GT(r->peak_rss_mb, 1);
  EXPECT_GT(r->store_mb, 0);
  EXPECT_GT(r->controller_cpu_s, 0);
  EXPECT_EQ(r->server_exit, "exit 0");
  const std::string table = bench_cluster_table(*r);
  EXPECT_NE(table.find("submit->start"), std::string::npos);
  EXPECT_NE(table.find("bucket-estimated"), std::string::npos);
  EXPECT_EQ(r->to_json()["succeeded"], 300);
}

// Churn at small scale, step by step: 4 nodes each running one whole-node job; node 0 goes silent
// past the agent timeout, turns NotReady, and its job is requeued and finishes on another node; back,
// node 0 registers again and takes new work.
TEST(BenchCluster, SilentNodeTurnsNotReadyAndItsJobFinishesElsewhere) {
  const std::string dir = temp_dir();
  ASSERT_FALSE(dir.empty());
  BenchClusterOptions shape;
  shape.nodes = 4;
  shape.gpus_per_node = 8;
  { std::ofstream(dir + "/cluster.yaml") << bench_cluster_yaml(shape, {"team-0"}); }
  ServerChildOptions so;
  so.binary = TESSERA_BINARY;
  so.dir = dir;
  so.config_path = dir + "/cluster.yaml";
  so.args = {"--heartbeat-interval-ms", "200", "--agent-timeout-ms", "1000", "--task-lease-ms", "1200", "--log-level", "warn"};
  auto srv = ServerChild::start(so);
  ASSERT_TRUE(srv.ok()) << srv.error().message;
  RestClient admin((*srv)->port(), (*srv)->admin_token());
  auto tok = admin.post("/api/v1/tokens", Json{{"user", "fleet"}, {"role", "agent"}, {"node", "*"}}.dump());
  ASSERT_EQ(tok.status, 201) << tok.raw;
  std::vector<HollowNodeSpec> specs;
  for (int i = 0; i < 4; ++i) specs.push_back(HollowNodeSpec{"hollow-0000" + std::to_string(i), 8, "H100-80GB-SXM"});
  HollowFleetOptions fo;
  fo.server = "127.0.0.1:" + std::to_string((*srv)->agent_port());
  fo.token = tok.body["token"].get<std::string>();
  fo.register_spread_ms = 100;
  auto fleet = HollowFleet::start(specs, fo);
  ASSERT_TRUE(fleet.ok()) << fleet.error().message;
  HollowFleet& f = **fleet;
  ASSERT_TRUE(eventually([&] { return f.stats().registered == 4; }, 10)) << f.stats().last_error;
  auto submit = [&](const std::string& name, double seconds) {
    Json spec{{"name", name}, {"queue", "team-0"}, {"resources", {{"gpus", 8}}}, {"command", {"sleep", std::to_string(seconds)}},
              {"restart", {{"backoff", 1}}}};
    auto r = admin.post("/api/v1/jobs", spec.dump());
    EXPECT_EQ(r.status, 201) << r.raw;
    return r.body.value("id", int64_t(0));
  };
  for (int i = 0; i < 4; ++i) submit("whole-" + std::to_string(i), 4);
  ASSERT_TRUE(eventually([&] { return f.stats().tasks_running == 4; }, 10));
  int64_t victim = 0;
  for (const TaskArrival& a : f.arrivals())
    if (a.node == 0) victim = a.job;
  ASSERT_GT(victim, 0);
  f.go_silent(0);
  auto agent_state = [&](const std::string& node) {
    auto n = admin.get("/api/v1/nodes");
    for (const Json& x : n.body["nodes"])
      if (x["name"] == node) return x.value("agent", "");
    return std::string("?");
  };
  ASSERT_TRUE(eventually([&] { return agent_state("hollow-00000") == "not-ready"; }, 5));
  // The victim's job starts again on a node other than 0 (once one is free) and succeeds.
  ASSERT_TRUE(eventually([&] {
    for (const TaskArrival& a : f.arrivals())
      if (a.job == victim && a.attempt > 1 && a.node != 0) return true;
    return false;
  }, 15));
  f.come_back(0);
  ASSERT_TRUE(eventually([&] { return agent_state("hollow-00000") == "ready"; }, 5));
  // Three whole-node jobs while the victim's second attempt holds one node: node 0 must take one.
  std::set<int64_t> after;
  for (int i = 0; i < 3; ++i) after.insert(submit("after-" + std::to_string(i), 0.5));
  ASSERT_TRUE(eventually([&] {
    for (const TaskArrival& a : f.arrivals())
      if (a.node == 0 && after.count(a.job)) return true;
    return false;
  }, 10));
  ASSERT_TRUE(eventually([&] { return active_jobs(admin) == 0; }, 15));
  const ServerScan scan = scan_server(admin);
  EXPECT_EQ(scan.error, "");
  EXPECT_EQ(scan.succeeded, 7);
  EXPECT_EQ(scan.failed, 0);
  EXPECT_EQ(scan.restarted, 1);  // the victim, once
  EXPECT_EQ(scan.jobs_lost, 1);
  EXPECT_EQ(scan.nodes_not_ready_ever, 1);
  EXPECT_EQ(scan.not_ready_now, 0);
  fleet->reset();
  EXPECT_EQ((*srv)->stop(), "exit 0");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera::bench
