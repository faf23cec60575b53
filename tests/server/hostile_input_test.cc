// Each request the hostile-user review of issue 19 found to crash the controller or answer 500, sent
// to a real server with agents (so heartbeats reach a running job). Every one must answer a 4xx
// naming the field, and the server must keep serving. Also: idempotency keys are each user's own,
// and denied calls cannot flood the event log.
#include <gtest/gtest.h>

#include "hostile_client.h"
#include "server_process.h"

namespace tessera::testing {
namespace {

class HostileInput : public ::testing::Test {
 protected:
  void SetUp() override {
    server.with_agents({"--agent-timeout-ms", "600000"});
    ASSERT_TRUE(server.start());
    admin = server.admin_token();
    agent = server.token("agent-1", "agent");
    viewer = server.token("vera", "viewer");
    member = server.token("mona", "member", "team-a");
    lead = server.token("lee", "team-lead", "org");
    ASSERT_FALSE(agent.empty());
    for (const char* n : {"a100-0", "a100-1"})
      ASSERT_EQ(server.post("/api/v1/agent/register", agent, registration(n)).status, 200) << n;
  }

  static Json registration(const std::string& node) {
    Json gpus = Json::array();
    for (int i = 0; i < 8; ++i) gpus.push_back(Json{{"model", "A100-80GB"}, {"mig_enabled", false}});
    return Json{{"node", node}, {"address", "127.0.0.1"}, {"log_port", 0}, {"log_secret", "s"}, {"version", "test"},
                {"inventory", {{"gpus", gpus}, {"source", "fake"}}}};
  }

  // A running job on a registered node: {id, attempt, node}.
  Json running_job() {
    auto r = server.post("/api/v1/jobs", admin, job("j", "team-b"));
    EXPECT_EQ(r.status, 201);
    const int64_t id = r.body["id"];
    Json j;
    EXPECT_TRUE(eventually([&] {
      j = server.get("/api/v1/jobs/" + std::to_string(id), admin).body;
      return j.value("state", "") == "running";
    }));
    const std::string node = j["placement"][0]["node"];
    Json t{{"job", id}, {"attempt", j["attempt"]}, {"task", 0}, {"state", "running"}};
    EXPECT_EQ(server.post("/api/v1/agent/heartbeat", agent, Json{{"node", node}, {"tasks", {t}}}).status, 200);
    return Json{{"id", id}, {"attempt", j["attempt"]}, {"node", node}, {"task", t}};
  }

  void expect_alive() {
    ASSERT_TRUE(process_alive(server.pid())) << "the server died";
    EXPECT_EQ(server.get("/healthz", "").status, 200);
  }

  ServerProcess server;
  std::string admin, agent, viewer, member, lead;
};

TEST_F(HostileInput, InvalidUtf8InPathsAndHeadersIsA400NotACrash) {
  const int port = server.port();
  struct Case {
    std::string method, target, token, headers;
  };
  const std::vector<Case> cases = {
      {"POST", "/api/v1/nodes/%FF/cordon", viewer, ""},
      {"GET", "/api/v1/jobs/%FF", agent, ""},
      {"POST", "/api/v1/nodes/%FF/interruption", lead, ""},
      {"POST", "/api/v1/nodes/%C3%28/drain", member, ""},
      {"POST", "/api/v1/nodes/a%0Ab/cordon", admin, ""},  // a newline in a node name
      {"GET", "/api/v1/jobs?queue=%FF", admin, ""},
      {"GET", "/api/v1/reports/chargeback?by=%FF", admin, ""},
      {"POST", "/api/v1/jobs", member, "Idempotency-Key: \xFF\xFE\r\n"},
  };
  for (const Case& c : cases) {
    const std::string body = c.method == "POST" && c.target == "/api/v1/jobs" ? job("x", "team-a").dump() : "";
    RawReply r = raw_http(port, raw_request(c.method, c.target, c.token, body, c.headers));
    EXPECT_EQ(r.status, 400) << c.method << " " << c.target << ": " << r.body;
    Json e = Json::parse(r.body, nullptr, false);
    ASSERT_TRUE(e.is_object()) << r.body;
    EXPECT_FALSE(e["error"].value("field", "").empty()) << "the error names the field: " << r.body;
    expect_alive();
  }
}

TEST_F(HostileInput, InvalidUtf8BodiesAreA400) {
  const int port = server.port();
  const std::string bad_json = R"({"name": "x", "queue": "team-a", "resources": {"gpus": 1}, "command": ["sleep", "1"], "env": {"A": ")"
                               "\xFF\xFE" R"("}})";
  EXPECT_EQ(raw_http(port, raw_request("POST", "/api/v1/jobs", admin, bad_json)).status, 400);
  const std::string bad_yaml = "name: \xC3\x28\nqueue: team-a\nresources: {gpus: 1}\ncommand: [sleep, '1']\n";
  RawReply y = raw_http(port, raw_request("POST", "/api/v1/jobs", admin, bad_yaml, "", "application/yaml"));
  EXPECT_EQ(y.status, 400) << y.body;
  EXPECT_NE(y.body.find("UTF-8"), std::string::npos) << y.body;
  EXPECT_EQ(raw_http(port, raw_request("POST", "/api/v1/nodes/a100-0/cordon", admin, "{\"reason\": \"\xFF\"}")).status, 400);
  expect_alive();
}

TEST_F(HostileInput, RegistrationsWithFieldsOfTheWrongTypeAreA400NamingTheField) {
  const std::vector<std::pair<std::string, Json>> cases = {
      {"log_secret", 123}, {"log_secret", nullptr}, {"version", 5}, {"address", 5}, {"log_port", "x"}, {"log_port", 1e300},
      {"inventory.source", 5}, {"topology", "leaf-0"}, {"node", Json::array()},
  };
  for (const auto& [field, value] : cases) {
    Json reg = registration("a100-0");
    if (field == "inventory.source")
      reg["inventory"]["source"] = value;
    else
      reg[field] = value;
    auto r = server.post("/api/v1/agent/register", agent, reg);
    if (field == "log_secret" && value.is_null()) {
      EXPECT_EQ(r.status, 200) << "null is an absent optional field: " << r.raw;  // no secret: logs then refuse
      continue;
    }
    EXPECT_EQ(r.status, 400) << field << " = " << value.dump() << ": " << r.raw;
    EXPECT_EQ(r.body["error"].value("field", ""), field) << r.raw;
    expect_alive();
  }
}

TEST_F(HostileInput, HeartbeatsWithFieldsOfTheWrongTypeAreA400AndChangeNothing) {
  Json run = running_job();
  const std::string node = run["node"];
  const std::vector<Json> bad_utilisation = {"50", nullptr, Json::array({1}), 1e300, 101};
  for (const Json& u : bad_utilisation) {
    Json gpus = Json::array();
    for (int i = 0; i < 8; ++i) gpus.push_back(Json{{"index", i}, {"utilization_pct", u}});
    auto r = server.post("/api/v1/agent/heartbeat", agent, Json{{"node", node}, {"tasks", {run["task"]}}, {"gpus", gpus}});
    if (u.is_null()) {
      EXPECT_EQ(r.status, 200) << "null is unknown utilisation: " << r.raw;
      continue;
    }
    EXPECT_EQ(r.status, 400) << u.dump() << ": " << r.raw;
    EXPECT_EQ(r.body["error"].value("field", ""), "gpus[0].utilization_pct") << r.raw;
    expect_alive();
  }
  const std::vector<std::pair<std::string, Json>> task_cases = {
      {"exit_code", "x"}, {"checkpoint", 5}, {"master_port", "x"}, {"attempt", 1e300}, {"attempt", -1}, {"task", "0"},
      {"state", 3}, {"job", Json::object()}, {"checkpoint_requested", "yes"},
  };
  for (const auto& [field, value] : task_cases) {
    Json t = run["task"];
    t[field] = value;
    t["state"] = field == "state" ? value : Json("failed");  // a failure, if it were taken, would end the job
    auto r = server.post("/api/v1/agent/heartbeat", agent, Json{{"node", node}, {"tasks", {t}}});
    EXPECT_EQ(r.status, 400) << field << " = " << value.dump() << ": " << r.raw;
    EXPECT_EQ(r.body["error"].value("field", ""), "tasks[0]." + field) << r.raw;
  }
  // None of the refused reports changed the job.
  EXPECT_EQ(server.get("/api/v1/jobs/" + std::to_string(run["id"].get<int64_t>()), admin).body["state"], "running");
  expect_alive();
}

TEST_F(HostileInput, IdempotencyKeysAreEachUsersOwn) {
  const std::string other = server.token("otto", "member", "team-a");
  const httplib::Headers key{{"Idempotency-Key", "same-key"}};
  auto a = server.call("POST", "/api/v1/jobs", member, job("mine", "team-a").dump(), "application/json", key);
  auto b = server.call("POST", "/api/v1/jobs", other, job("theirs", "team-a").dump(), "application/json", key);
  ASSERT_EQ(a.status, 201) << a.raw;
  EXPECT_EQ(b.status, 201) << "a second user's key is a new job, not the first user's: " << b.raw;
  EXPECT_NE(a.body["id"], b.body["id"]);
  EXPECT_EQ(b.body["name"], "theirs");
  auto again = server.call("POST", "/api/v1/jobs", member, job("mine", "team-a").dump(), "application/json", key);
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(again.body["id"], a.body["id"]);
}

TEST_F(HostileInput, DeniedCallsCannotFloodTheEventLog) {
  const std::string long_name(4000, 'n');
  for (int i = 0; i < 200; ++i)
    ASSERT_EQ(server.post("/api/v1/nodes/" + long_name + std::to_string(i) + "/cordon", viewer, Json::object()).status, 403);
  auto ev = server.get("/api/v1/events?limit=1000", admin);
  ASSERT_EQ(ev.status, 200);
  int denied = 0;
  size_t longest = 0;
  for (const Json& e : ev.body["events"])
    if (e["kind"] == "denied") ++denied, longest = std::max(longest, e["detail"].dump().size());
  EXPECT_GE(denied, 1);
  EXPECT_LE(denied, 25) << "at most the per-minute budget is written";
  EXPECT_LT(longest, 1200u) << "names are cut";
}

TEST_F(HostileInput, UnauthenticatedBodiesAreRefusedUnreadAndChunkedBodiesAreRefused) {
  const int port = server.port();
  // A chunked body: 411, whoever sends it.
  const std::string chunked = "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer " + admin +
                              "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n0\r\n\r\n";
  EXPECT_EQ(raw_http(port, chunked).status, 411);
  // No token: 401 at once, although the announced body (within the limit) never comes.
  const std::string unread = "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
                             "Content-Length: 500000\r\n\r\n{";
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(raw_http(port, unread, 5).status, 401);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3)) << "answered without waiting for the body";
  // With a token, a body over the limit is 413 at once, unread.
  const std::string big = "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer " + admin +
                          "\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n{";
  const auto t1 = std::chrono::steady_clock::now();
  EXPECT_EQ(raw_http(port, big, 5).status, 413);
  EXPECT_LT(std::chrono::steady_clock::now() - t1, std::chrono::seconds(3));
  expect_alive();
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

TEST(TokenRevocation, ARevokedTokenIsRefusedAtOnceAndAfterARestart) {
  ServerProcess server;
  ASSERT_TRUE(server.start());
  const std::string admin = server.admin_token();
  const std::string mona = server.token("mona", "member", "team-a");
  ASSERT_EQ(server.get("/api/v1/whoami", mona).status, 200);
  auto list = server.get("/api/v1/tokens", admin);
  std::string id;
  for (const Json& t : list.body["tokens"])
    if (t["user"] == "mona") id = t["id"];
  ASSERT_FALSE(id.empty());
  // Only admins revoke; the last admin token cannot be revoked.
  EXPECT_EQ(server.post("/api/v1/tokens/" + id + "/revoke", mona, Json::object()).status, 403);
  std::string admin_id;
  for (const Json& t : list.body["tokens"])
    if (t["role"] == "admin") admin_id = t["id"];
  EXPECT_EQ(server.post("/api/v1/tokens/" + admin_id + "/revoke", admin, Json::object()).status, 409);
  EXPECT_EQ(server.post("/api/v1/tokens/zz/revoke", admin, Json::object()).status, 400);
  // The CLI verb.
  CliResult r = run_cli({"token", "revoke", id}, {{"TESSERA_SERVER", "http://127.0.0.1:" + std::to_string(server.port())},
                                                  {"TESSERA_TOKEN", admin}});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("revoked"), std::string::npos) << r.out;
  EXPECT_EQ(server.get("/api/v1/whoami", mona).status, 401) << "in force for the next request";
  ASSERT_EQ(server.kill(SIGKILL), SIGKILL);
  ASSERT_TRUE(server.restart());
  EXPECT_EQ(server.get("/api/v1/whoami", mona).status, 401) << "and after a restart";
  EXPECT_EQ(server.get("/api/v1/whoami", admin).status, 200);
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

TEST(AgentTokens, AreBoundToTheirNode) {
  ServerProcess server;
  server.with_agents({"--agent-timeout-ms", "600000"});
  ASSERT_TRUE(server.start());
  const std::string admin = server.admin_token();
  auto unbound = server.post("/api/v1/tokens", admin, Json{{"user", "a"}, {"role", "agent"}});
  EXPECT_EQ(unbound.status, 400) << "agent tokens need a node: " << unbound.raw;
  EXPECT_EQ(unbound.body["error"].value("field", ""), "node");
  auto t = server.post("/api/v1/tokens", admin, Json{{"user", "agent-a100-0"}, {"role", "agent"}, {"node", "a100-0"}});
  ASSERT_EQ(t.status, 201) << t.raw;
  const std::string token = t.body["token"];
  Json gpus = Json::array();
  for (int i = 0; i < 8; ++i) gpus.push_back(Json{{"model", "A100-80GB"}, {"mig_enabled", false}});
  auto reg = [&](const std::string& node, const std::string& address) {
    return server.post("/api/v1/agent/register", token,
                       Json{{"node", node}, {"address", address}, {"log_port", 0}, {"inventory", {{"gpus", gpus}}}});
  };
  EXPECT_EQ(reg("a100-0", "127.0.0.1").status, 200);
  auto other = reg("a100-1", "10.6.6.6");
  EXPECT_EQ(other.status, 403) << other.raw;
  EXPECT_EQ(server.post("/api/v1/agent/heartbeat", token, Json{{"node", "a100-1"}}).status, 403);
  EXPECT_EQ(server.post("/api/v1/agent/heartbeat", token, Json{{"node", "a100-0"}}).status, 200);
  // The other node was not registered with the forged address.
  for (const Json& n : server.get("/api/v1/nodes", admin).body["nodes"]) {
    if (n["name"] == "a100-1") {
      EXPECT_NE(n.value("agent", ""), "ready");
    }
  }
  // A fleet pattern.
  auto fleet = server.post("/api/v1/tokens", admin, Json{{"user", "fleet"}, {"role", "agent"}, {"node", "a100-*"}});
  ASSERT_EQ(fleet.status, 201);
  EXPECT_EQ(server.post("/api/v1/agent/register", fleet.body["token"].get<std::string>(),
                        Json{{"node", "a100-1"}, {"address", "127.0.0.1"}, {"log_port", 0}, {"inventory", {{"gpus", gpus}}}})
                .status,
            200);
  EXPECT_EQ(server.post("/api/v1/agent/heartbeat", fleet.body["token"].get<std::string>(), Json{{"node", "mig-0"}}).status, 403);
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

TEST_F(HostileInput, JobDetailIsTheTeamsAndSecretValuesAreNeverShownBack) {
  Json spec = job("secretive", "team-a");
  spec["env"] = Json{{"PLAIN", "visible"}};
  spec["secret_env"] = Json{{"API_KEY", "s3cret-value"}};
  auto sub = server.post("/api/v1/jobs", member, spec);
  ASSERT_EQ(sub.status, 201) << sub.raw;
  EXPECT_EQ(sub.raw.find("s3cret-value"), std::string::npos) << "not even to its submitter";
  const std::string id = std::to_string(sub.body["id"].get<int64_t>());
  // Admin and the team's lead see the job whole, secrets as "(secret)".
  for (const std::string& who : {admin, lead}) {
    auto r = server.get("/api/v1/jobs/" + id, who);
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.body["spec"]["env"]["PLAIN"], "visible");
    EXPECT_EQ(r.body["spec"]["env"]["API_KEY"], "(secret)");
    EXPECT_FALSE(r.body.contains("detail_hidden"));
  }
  // Another team's member and a viewer see state and resources, not the command, env or logs.
  const std::string outsider = server.token("bert", "member", "team-b");
  for (const std::string& who : {outsider, viewer}) {
    auto r = server.get("/api/v1/jobs/" + id, who);
    ASSERT_EQ(r.status, 200);
    EXPECT_FALSE(r.body["spec"].contains("env")) << r.raw;
    EXPECT_FALSE(r.body["spec"].contains("command")) << r.raw;
    EXPECT_TRUE(r.body.contains("detail_hidden"));
    EXPECT_EQ(r.body["queue"], "team-a");  // what everyone sees
    EXPECT_EQ(r.body["user"], "mona");
    EXPECT_TRUE(r.body["spec"].contains("resources"));
    EXPECT_EQ(server.get("/api/v1/jobs/" + id + "/logs", who).status, 403);
  }
  // The task gets the value: the agent's desired state carries it.
  Json j;
  ASSERT_TRUE(eventually([&] {
    j = server.get("/api/v1/jobs/" + id, admin).body;
    return j.value("state", "") == "running";
  }));
  auto beat = server.post("/api/v1/agent/heartbeat", agent, Json{{"node", j["placement"][0]["node"]}});
  ASSERT_EQ(beat.status, 200);
  bool delivered = false;
  for (const Json& a : beat.body["run"])
    if (a["job"] == sub.body["id"]) delivered = a["env"].value("API_KEY", "") == "s3cret-value";
  EXPECT_TRUE(delivered) << beat.raw;
  // Nowhere else for people: lists and the event log.
  EXPECT_EQ(server.get("/api/v1/jobs", admin).raw.find("s3cret-value"), std::string::npos);
  EXPECT_EQ(server.get("/api/v1/events?limit=1000", admin).raw.find("s3cret-value"), std::string::npos);
}

}  // namespace
}  // namespace tessera::testing
