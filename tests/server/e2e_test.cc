// End-to-end tests of `tessera server`: the real binary on loopback, a temporary data directory,
// real HTTP. Agents are played by the test through the agent protocol (the real agent is issue 6).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <set>

#include <sys/stat.h>

#include "server_process.h"

namespace tessera::testing {
namespace {

std::string state_of(const ServerProcess& s, int64_t id) {
  auto r = s.get("/api/v1/jobs/" + std::to_string(id), s.admin_token());
  return r.status == 200 ? r.body["state"].get<std::string>() : "?";
}

class ServerE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string out;
    ASSERT_TRUE(server.start(&out)) << out;
    agent = server.token("agent-1", "agent");
    ASSERT_FALSE(agent.empty());
  }
  Json heartbeat(const std::string& node, Json tasks = Json::array()) {
    auto r = server.post("/api/v1/agent/heartbeat", agent, Json{{"node", node}, {"tasks", tasks}});
    EXPECT_EQ(r.status, 200) << r.raw;
    return r.body;
  }
  int64_t submit(const Json& spec, const std::string& token = "") {
    auto r = server.post("/api/v1/jobs", token.empty() ? server.admin_token() : token, spec);
    EXPECT_EQ(r.status, 201) << r.raw;
    return r.status == 201 ? r.body["id"].get<int64_t>() : -1;
  }
  ServerProcess server;
  std::string agent;
};

TEST_F(ServerE2E, HealthzNeedsNoTokenAndApiNeedsOne) {
  auto h = server.get("/healthz", "");
  ASSERT_EQ(h.status, 200);
  EXPECT_EQ(h.body["status"], "ok");
  EXPECT_EQ(h.body["nodes"], 3);
  auto r = server.get("/api/v1/jobs", "");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.body["error"]["code"], "unauthenticated");
  EXPECT_EQ(server.get("/api/v1/jobs", "tsr_0000000000000000000000000000000000000000").status, 401);
  auto who = server.get("/api/v1/whoami", server.admin_token());
  EXPECT_EQ(who.body["role"], "admin");
}

TEST_F(ServerE2E, AdminTokenFileIsPrivate) {
  struct stat st {};
  ASSERT_EQ(stat((server.dir() + "/admin.token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  EXPECT_EQ(server.admin_token().rfind("tsr_", 0), 0u);
  // The store keeps only the hash.
  EXPECT_EQ(read_file(server.dir() + "/tessera.db").find(server.admin_token()), std::string::npos);
}

TEST_F(ServerE2E, SubmitListShowCancel) {
  const int64_t a = submit(job("alpha", "team-a", Json{{"gpus", 2}}));
  const int64_t b = submit(job("beta", "team-b"));
  ASSERT_GT(a, 0);
  ASSERT_GT(b, a);
  auto list = server.get("/api/v1/jobs", server.admin_token());
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(list.body["total"], 2);
  EXPECT_EQ(list.body["jobs"][0]["name"], "alpha");
  EXPECT_EQ(list.body["jobs"][0]["gpus"], 2);
  // Filters and paging.
  EXPECT_EQ(server.get("/api/v1/jobs?queue=team-b", server.admin_token()).body["total"], 1);
  EXPECT_EQ(server.get("/api/v1/jobs?queue=org", server.admin_token()).body["total"], 2);
  EXPECT_EQ(server.get("/api/v1/jobs?user=nobody", server.admin_token()).body["total"], 0);
  auto page = server.get("/api/v1/jobs?limit=1", server.admin_token());
  ASSERT_EQ(page.body["jobs"].size(), 1u);
  EXPECT_EQ(page.body["next_after"], a);
  auto page2 = server.get("/api/v1/jobs?limit=1&after=" + std::to_string(a), server.admin_token());
  EXPECT_EQ(page2.body["jobs"][0]["id"], b);
  EXPECT_TRUE(page2.body["next_after"].is_null());
  // The scheduler starts both (the cluster is empty).
  ASSERT_TRUE(eventually([&] { return state_of(server, a) == "running" && state_of(server, b) == "running"; }));
  auto show = server.get("/api/v1/jobs/" + std::to_string(a), server.admin_token());
  ASSERT_EQ(show.status, 200);
  EXPECT_EQ(show.body["placement"].size(), 1u);
  EXPECT_EQ(show.body["placement"][0]["gpus"].size(), 2u);
  ASSERT_GE(show.body["events"].size(), 2u);
  EXPECT_EQ(show.body["events"][0]["kind"], "submitted");
  EXPECT_EQ(show.body["events"][1]["kind"], "started");
  // Cancel: running job ends, its GPUs come back; a second cancel is a conflict.
  auto c = server.post("/api/v1/jobs/" + std::to_string(a) + "/cancel", server.admin_token(), Json::object());
  ASSERT_EQ(c.status, 200) << c.raw;
  EXPECT_EQ(c.body["state"], "cancelled");
  EXPECT_EQ(server.post("/api/v1/jobs/" + std::to_string(a) + "/cancel", server.admin_token(), Json::object()).status, 409);
  EXPECT_EQ(server.call("DELETE", "/api/v1/jobs/" + std::to_string(b), server.admin_token()).status, 200);
  EXPECT_EQ(server.get("/api/v1/jobs?active=true", server.admin_token()).body["total"], 0);
  EXPECT_EQ(server.get("/api/v1/jobs/999", server.admin_token()).status, 404);
  EXPECT_EQ(server.get("/api/v1/jobs/abc", server.admin_token()).status, 400);
}

TEST_F(ServerE2E, AgentReportsDriveJobsToTheirEnd) {
  const int64_t id = submit(job("work", "default", Json{{"gpus", 8}}));
  ASSERT_TRUE(eventually([&] { return state_of(server, id) == "running"; }));
  const std::string node = server.get("/api/v1/jobs/" + std::to_string(id), server.admin_token()).body["placement"][0]["node"];
  Json desired = heartbeat(node);
  ASSERT_EQ(desired["run"].size(), 1u);
  EXPECT_EQ(desired["run"][0]["job"], id);
  EXPECT_EQ(desired["run"][0]["command"], Json({"sleep", "60"}));
  EXPECT_EQ(desired["run"][0]["gpus"].size(), 8u);
  const int64_t attempt = desired["run"][0]["attempt"];
  heartbeat(node, Json::array({Json{{"job", id}, {"attempt", attempt}, {"task", 0}, {"state", "running"}}}));
  EXPECT_EQ(state_of(server, id), "running");
  heartbeat(node, Json::array({Json{{"job", id}, {"attempt", attempt}, {"task", 0}, {"state", "succeeded"}, {"exit_code", 0}}}));
  EXPECT_EQ(state_of(server, id), "succeeded");
  // An unknown task reported running is told to stop (never runs twice).
  Json d = heartbeat(node, Json::array({Json{{"job", 4242}, {"attempt", 1}, {"task", 0}, {"state", "running"}}}));
  ASSERT_EQ(d["stop"].size(), 1u);
  EXPECT_EQ(d["stop"][0]["job"], 4242);
  // A failing task fails the job with its exit code.
  const int64_t f = submit(job("fails", "default", Json{{"gpus", 8}}));
  ASSERT_TRUE(eventually([&] { return state_of(server, f) == "running"; }));
  const auto fj = server.get("/api/v1/jobs/" + std::to_string(f), server.admin_token()).body;
  heartbeat(fj["placement"][0]["node"], Json::array({Json{{"job", f}, {"attempt", fj["attempt"]}, {"task", 0}, {"state", "failed"}, {"exit_code", 3}}}));
  auto done = server.get("/api/v1/jobs/" + std::to_string(f), server.admin_token()).body;
  EXPECT_EQ(done["state"], "failed");
  EXPECT_EQ(done["exit_code"], 3);
  // Agent tokens speak only the agent protocol; other tokens may not pose as agents... admins may.
  EXPECT_EQ(server.get("/api/v1/jobs", agent).status, 403);
  EXPECT_EQ(server.post("/api/v1/agent/heartbeat", server.token("v", "viewer"), Json{{"node", node}}).status, 403);
}

TEST_F(ServerE2E, BadSpecsAreRefusedWithTheField) {
  struct Case {
    std::string body, content_type, field;
    int status;
  };
  const std::string big(2 << 20, 'x');
  const std::vector<Case> cases = {
      {job("neg", "team-a", Json{{"gpus", -1}}).dump(), "application/json", "resources.gpus", 400},
      {job("mig", "team-a", Json{{"mig", "9g.99gb"}}).dump(), "application/json", "resources.mig", 400},
      {job("q", "no-such-queue").dump(), "application/json", "queue", 400},
      {job("q", "org").dump(), "application/json", "queue", 400},  // not a leaf
      {R"({"name": "x", "queue": "team-a", "resources": {"gpus": "two"}, "command": ["a"]})", "application/json", "resources.gpus", 400},
      {R"({"name": "x", "queue": "team-a", "command": ["a"], "colour": "blue"})", "application/json", "colour", 400},
      {R"({"name": "x", "queue": )", "application/json", "", 400},
      {"name: x\nqueue: [unclosed\n", "application/yaml", "", 400},
      {R"({"name": "x", "queue": "team-a"})", "application/json", "command", 400},
      {job("huge", "team-a", Json{{"gpus", 16}}).dump(), "application/json", "resources", 400},  // no node has 16 GPUs
      {job("cls", "team-a").dump().replace(0, 1, R"({"priority_class": "gold",)"), "application/json", "priority_class", 400},
      {"<xml/>", "text/xml", "", 415},
      {"{\"name\": \"" + big + "\"}", "application/json", "", 413},
  };
  for (const Case& c : cases) {
    auto r = server.call("POST", "/api/v1/jobs", server.admin_token(), c.body, c.content_type);
    EXPECT_EQ(r.status, c.status) << c.body.substr(0, 200) << " -> " << r.raw;
    ASSERT_TRUE(r.body.is_object()) << r.raw.substr(0, 200);
    EXPECT_FALSE(r.body["error"]["message"].get<std::string>().empty());
    if (!c.field.empty()) {
      EXPECT_EQ(r.body["error"].value("field", ""), c.field) << r.raw;
    }
  }
  // YAML bodies are accepted too.
  auto y = server.call("POST", "/api/v1/jobs", server.admin_token(),
                       "name: from-yaml\nqueue: team-b\nresources: {gpus: 1}\ncommand: [sleep, '1']\n", "application/yaml");
  EXPECT_EQ(y.status, 201) << y.raw;
  // Nothing bad was stored.
  EXPECT_EQ(server.get("/api/v1/jobs", server.admin_token()).body["total"], 1);
}

TEST_F(ServerE2E, RoleMatrix) {
  const std::string lead_a = server.token("lead-a", "team-lead", "team-a");
  const std::string alice = server.token("alice", "member", "team-a");
  const std::string carol = server.token("carol", "member", "team-a");
  const std::string bob = server.token("bob", "member", "team-b");
  const std::string viewer = server.token("vic", "viewer");
  ASSERT_FALSE(lead_a.empty() || alice.empty() || bob.empty() || viewer.empty() || carol.empty());
  // Scoped tokens need a queue; unknown roles are refused.
  EXPECT_EQ(server.post("/api/v1/tokens", server.admin_token(), Json{{"user", "x"}, {"role", "member"}}).status, 400);
  EXPECT_EQ(server.post("/api/v1/tokens", server.admin_token(), Json{{"user", "x"}, {"role", "god"}}).status, 400);

  const std::map<std::string, std::string> tokens = {{"admin", server.admin_token()}, {"lead-a", lead_a}, {"alice", alice},
                                                     {"bob", bob}, {"viewer", viewer}, {"agent", agent}};
  // Submissions: to team-a and to team-b.
  const std::map<std::string, std::pair<int, int>> submit_expect = {
      {"admin", {201, 201}}, {"lead-a", {201, 403}}, {"alice", {201, 403}}, {"bob", {403, 201}}, {"viewer", {403, 403}}, {"agent", {403, 403}}};
  for (const auto& [who, tok] : tokens) {
    auto ra = server.post("/api/v1/jobs", tok, job("by-" + who, "team-a"));
    auto rb = server.post("/api/v1/jobs", tok, job("by-" + who, "team-b"));
    EXPECT_EQ(ra.status, submit_expect.at(who).first) << who << " team-a: " << ra.raw;
    EXPECT_EQ(rb.status, submit_expect.at(who).second) << who << " team-b: " << rb.raw;
  }
  // Reads: everyone but agents.
  for (const auto& [who, tok] : tokens)
    for (const char* path : {"/api/v1/jobs", "/api/v1/queues", "/api/v1/nodes"})
      EXPECT_EQ(server.get(path, tok).status, who == "agent" ? 403 : 200) << who << " " << path;
  // Admin-only calls.
  for (const auto& [who, tok] : tokens) {
    const int want = who == "admin" ? 200 : 403;
    EXPECT_EQ(server.get("/api/v1/tokens", tok).status, want) << who;
    EXPECT_EQ(server.post("/api/v1/tokens", tok, Json{{"user", "z"}, {"role", "viewer"}}).status, who == "admin" ? 201 : 403) << who;
    EXPECT_EQ(server.post("/api/v1/nodes/a100-0/cordon", tok, Json{{"reason", "test"}}).status, want) << who;
    EXPECT_EQ(server.post("/api/v1/nodes/a100-0/resume", tok, Json::object()).status, want) << who;
    EXPECT_EQ(server.get("/api/v1/admin/backup", tok).status, want) << who;
    EXPECT_EQ(server.get("/api/v1/events", tok).status, who == "admin" || who == "viewer" ? 200 : 403) << who;
  }
  // Cancel and priority: a fresh job per (actor, target owner).
  struct Target {
    std::string owner_token, queue;
  };
  const std::map<std::string, Target> targets = {{"alice-job", {alice, "team-a"}}, {"carol-job", {carol, "team-a"}}, {"bob-job", {bob, "team-b"}}};
  // Expected status for cancel by actor on target.
  const std::map<std::string, std::map<std::string, int>> cancel_expect = {
      {"admin", {{"alice-job", 200}, {"carol-job", 200}, {"bob-job", 200}}},
      {"lead-a", {{"alice-job", 200}, {"carol-job", 200}, {"bob-job", 403}}},
      {"alice", {{"alice-job", 200}, {"carol-job", 403}, {"bob-job", 403}}},
      {"bob", {{"alice-job", 403}, {"carol-job", 403}, {"bob-job", 200}}},
      {"viewer", {{"alice-job", 403}, {"carol-job", 403}, {"bob-job", 403}}},
      {"agent", {{"alice-job", 403}, {"carol-job", 403}, {"bob-job", 403}}}};
  for (const auto& [who, tok] : tokens) {
    for (const auto& [target, t] : targets) {
      const int64_t id = submit(job(target, t.queue), t.owner_token);
      ASSERT_GT(id, 0);
      const std::string p = "/api/v1/jobs/" + std::to_string(id);
      // research is allowed in both queues; production-training is not allowed in team-a (except for admins).
      auto pr = server.post(p + "/priority", tok, Json{{"priority_class", "preemptible"}});
      EXPECT_EQ(pr.status, cancel_expect.at(who).at(target)) << who << " priority " << target << ": " << pr.raw;
      auto cr = server.post(p + "/cancel", tok, Json::object());
      EXPECT_EQ(cr.status, cancel_expect.at(who).at(target)) << who << " cancel " << target << ": " << cr.raw;
      if (cr.status == 403) {
        EXPECT_EQ(cr.body["error"]["code"], "permission_denied");
      }
    }
  }
  // Priority classes a queue does not allow: refused for the lead, allowed for the admin.
  const int64_t id = submit(job("cls", "team-a"), alice);
  const std::string p = "/api/v1/jobs/" + std::to_string(id) + "/priority";
  auto denied = server.post(p, lead_a, Json{{"priority_class", "production-training"}});
  EXPECT_EQ(denied.status, 403);
  EXPECT_NE(denied.body["error"]["message"].get<std::string>().find("allows only"), std::string::npos);
  EXPECT_EQ(server.post(p, server.admin_token(), Json{{"priority_class", "production-training"}}).status, 200);
  Json high = job("x", "team-a");
  high["priority_class"] = "production-inference";
  auto pc = server.post("/api/v1/jobs", alice, high);
  EXPECT_EQ(pc.status, 403);
  // Denials are audited in the event log, and priority changes say who.
  auto ev = server.get("/api/v1/events?limit=10000", server.admin_token());
  int denied_events = 0;
  bool priority_by_admin = false;
  for (const Json& e : ev.body["events"]) {
    denied_events += e["kind"] == "denied";
    priority_by_admin = priority_by_admin || (e["kind"] == "priority_changed" && e["actor"] == "admin");
  }
  EXPECT_GE(denied_events, 30);
  EXPECT_TRUE(priority_by_admin);
}

TEST_F(ServerE2E, QueuesAndNodesShowUseAndMig) {
  const int64_t id = submit(job("two", "team-a", Json{{"gpus", 2}}));
  const int64_t m = submit(job("slice", "team-b", Json{{"mig", "3g.40gb"}}));
  ASSERT_TRUE(eventually([&] { return state_of(server, id) == "running" && state_of(server, m) == "running"; }));
  auto q = server.get("/api/v1/queues", server.admin_token());
  ASSERT_EQ(q.status, 200);
  std::map<std::string, Json> by;
  for (const Json& x : q.body["queues"]) by[x["name"]] = x;
  EXPECT_EQ(by["team-a"]["used"]["A100-80GB"], 2000);
  EXPECT_EQ(by["team-a"]["guaranteed"]["A100-80GB"], 8000);
  EXPECT_EQ(by["team-a"]["running"], 1);
  EXPECT_EQ(by["org"]["running"], 2);
  EXPECT_EQ(by["team-a"]["priority_classes"], Json({"research", "preemptible"}));
  auto n = server.get("/api/v1/nodes", server.admin_token());
  ASSERT_EQ(n.body["nodes"].size(), 3u);
  bool mig_instance_held = false;
  for (const Json& node : n.body["nodes"])
    for (const Json& g : node["gpus"])
      for (const Json& inst : g["instances"]) mig_instance_held = mig_instance_held || inst["job"] == m;
  EXPECT_TRUE(mig_instance_held);
  auto show = server.get("/api/v1/jobs/" + std::to_string(m), server.admin_token());
  EXPECT_EQ(show.body["placement"][0]["mig"]["profile"], "3g.40gb");
}

TEST_F(ServerE2E, CordonDrainResume) {
  // A checkpointing job fills a100-0 (placement policy permitting; find where it went).
  Json spec = job("ckpt", "default", Json{{"gpus", 8}});
  spec["checkpoint"] = Json{{"interval", 600}, {"grace", 120}, {"signal", "SIGUSR1"}};
  const int64_t id = submit(spec);
  ASSERT_TRUE(eventually([&] { return state_of(server, id) == "running"; }));
  auto j = server.get("/api/v1/jobs/" + std::to_string(id), server.admin_token()).body;
  const std::string node = j["placement"][0]["node"];
  const int64_t attempt = j["attempt"];
  heartbeat(node, Json::array({Json{{"job", id}, {"attempt", attempt}, {"task", 0}, {"state", "running"}}}));
  EXPECT_EQ(server.post("/api/v1/nodes/" + node + "/drain", server.admin_token(), Json::object()).status, 400);  // reason required
  auto d = server.post("/api/v1/nodes/" + node + "/drain", server.admin_token(), Json{{"reason", "DIMM swap"}});
  ASSERT_EQ(d.status, 200) << d.raw;
  EXPECT_EQ(d.body["state"], "draining");
  EXPECT_EQ(state_of(server, id), "checkpointing");
  Json desired = heartbeat(node, Json::array({Json{{"job", id}, {"attempt", attempt}, {"task", 0}, {"state", "running"}}}));
  ASSERT_EQ(desired["stop"].size(), 1u);
  EXPECT_EQ(desired["stop"][0]["checkpoint"], true);
  EXPECT_EQ(desired["stop"][0]["signal"], "SIGUSR1");
  heartbeat(node, Json::array({Json{{"job", id}, {"attempt", attempt}, {"task", 0}, {"state", "checkpointed"}}}));
  // Requeued, then started elsewhere (not on the drained node).
  ASSERT_TRUE(eventually([&] { return state_of(server, id) == "running"; }));
  auto again = server.get("/api/v1/jobs/" + std::to_string(id), server.admin_token()).body;
  EXPECT_NE(again["placement"][0]["node"], node);
  EXPECT_EQ(again["preemptions"], 1);
  auto nodes = server.get("/api/v1/nodes", server.admin_token()).body["nodes"];
  for (const Json& n : nodes)
    if (n["name"] == node) {
      EXPECT_EQ(n["state"], "drained");
      EXPECT_EQ(n["reason"], "DIMM swap");
    }
  EXPECT_EQ(server.post("/api/v1/nodes/" + node + "/resume", server.admin_token(), Json::object()).body["state"], "ready");
  EXPECT_EQ(server.post("/api/v1/nodes/nope/cordon", server.admin_token(), Json{{"reason", "x"}}).status, 404);
}

TEST_F(ServerE2E, RestartKeepsJobsAndReconcilesAgents) {
  const int64_t kept = submit(job("kept", "default", Json{{"gpus", 8}}));
  const int64_t lost = submit(job("lost", "default", Json{{"gpus", 8}}));
  ASSERT_TRUE(eventually([&] { return state_of(server, kept) == "running" && state_of(server, lost) == "running"; }));
  const int64_t waiting = submit(job("waiting", "default", Json{{"gpus", 8}}));  // same queue: no reclaim
  auto k = server.get("/api/v1/jobs/" + std::to_string(kept), server.admin_token()).body;
  auto l = server.get("/api/v1/jobs/" + std::to_string(lost), server.admin_token()).body;
  ASSERT_EQ(server.kill(SIGKILL) != -1, true);
  std::string out;
  ASSERT_TRUE(server.start(&out)) << out;
  // Every job is there in its last state.
  EXPECT_EQ(state_of(server, kept), "running") << server.get("/api/v1/jobs/" + std::to_string(kept), server.admin_token()).raw;
  EXPECT_EQ(state_of(server, lost), "running");
  EXPECT_NE(state_of(server, waiting), "?");
  // The agent of `kept` reports it: it stays. The agent of `lost` does not: it is requeued.
  const std::string kn = k["placement"][0]["node"], ln = l["placement"][0]["node"];
  ASSERT_NE(kn, ln);
  Json dk = heartbeat(kn, Json::array({Json{{"job", kept}, {"attempt", k["attempt"]}, {"task", 0}, {"state", "running"}}}));
  EXPECT_EQ(state_of(server, kept), "running");
  EXPECT_EQ(dk["stop"].size(), 0u);
  heartbeat(ln);
  auto after = server.get("/api/v1/jobs/" + std::to_string(lost), server.admin_token()).body;
  // Requeued: pending now, or already started again as a new attempt.
  EXPECT_TRUE(after["state"] == "pending" || after["attempt"].get<int64_t>() > l["attempt"].get<int64_t>()) << after.dump();
  bool lost_event = false;
  for (const Json& e : after["events"]) lost_event = lost_event || e["kind"] == "lost";
  EXPECT_TRUE(lost_event);
}

TEST_F(ServerE2E, BackupRestoreAndReload) {
  for (int i = 0; i < 5; ++i) submit(job("b" + std::to_string(i), "team-b"));
  auto b = server.get("/api/v1/admin/backup", server.admin_token());
  ASSERT_EQ(b.status, 200);
  EXPECT_EQ(b.raw.substr(0, 15), "SQLite format 3");
  // SIGHUP with the same config: reloaded; the server keeps serving.
  server.kill(SIGHUP);
  EXPECT_EQ(server.post("/api/v1/admin/reload", server.admin_token(), Json::object()).status, 200);
  EXPECT_EQ(server.get("/api/v1/jobs", server.admin_token()).body["total"], 5);
}

// A client submits 1,000 jobs from 16 threads while the server is killed with SIGKILL at a random
// moment and restarted. Each job has its own idempotency key; the client retries until it gets an
// answer. Afterwards every acknowledged job exists, and no job exists twice.
TEST(ServerCrash, AcknowledgedSubmissionsSurviveKill9) {
  ServerProcess server;
  std::string out;
  ASSERT_TRUE(server.start(&out)) << out;
  const std::string token = server.admin_token();
  constexpr int kJobs = 1000, kThreads = 16;
  std::atomic<int> next{0};
  std::vector<int64_t> acked_id(kJobs, -1);
  std::atomic<bool> restarted{false};
  std::atomic<int> acked{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < kThreads; ++t) {
    clients.emplace_back([&] {
      for (int i = next++; i < kJobs; i = next++) {
        for (int attempt = 0; attempt < 2000; ++attempt) {
          httplib::Client cli("127.0.0.1", server.port());
          cli.set_connection_timeout(1, 0);
          cli.set_read_timeout(10, 0);
          auto r = cli.Post("/api/v1/jobs", {{"Authorization", "Bearer " + token}, {"Idempotency-Key", "crash-" + std::to_string(i)}},
                            job("crash-" + std::to_string(i), "team-b").dump(), "application/json");
          if (r && (r->status == 201 || r->status == 200)) {
            acked_id[size_t(i)] = Json::parse(r->body)["id"];
            ++acked;
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      }
    });
  }
  std::mt19937 rng(std::random_device{}());
  const int kill_after = 50 + int(rng() % 400);
  while (acked < kill_after) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  server.kill(SIGKILL);
  const int acked_at_kill = acked;
  ASSERT_TRUE(server.restart());
  restarted = true;
  for (auto& c : clients) c.join();
  ASSERT_EQ(acked, kJobs);
  // Every acknowledged job exists once, with the id the client was given.
  std::map<std::string, int> by_name;
  std::set<int64_t> ids;
  int64_t after = 0;
  for (;;) {
    auto page = server.get("/api/v1/jobs?limit=1000&after=" + std::to_string(after), token);
    ASSERT_EQ(page.status, 200);
    for (const Json& j : page.body["jobs"]) {
      ++by_name[j["name"]];
      ids.insert(j["id"].get<int64_t>());
    }
    if (page.body["next_after"].is_null()) break;
    after = page.body["next_after"];
  }
  for (int i = 0; i < kJobs; ++i) {
    const std::string name = "crash-" + std::to_string(i);
    EXPECT_EQ(by_name[name], 1) << name;
    EXPECT_TRUE(ids.count(acked_id[size_t(i)])) << name << " id " << acked_id[size_t(i)];
  }
  EXPECT_EQ(by_name.size(), size_t(kJobs));
  RecordProperty("acked_at_kill", acked_at_kill);
}

}  // namespace
}  // namespace tessera::testing
