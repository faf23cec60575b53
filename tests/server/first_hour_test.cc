// Issue 22, "what went wrong in the first hour", on the controller (agentless, in-process): an agent
// started with a node name the config does not have is told the names it has (a single node keeps its
// name, no -0); a list cut by `limit` says how many jobs remain; who may use which priority class is
// the cluster config's policy (a member cannot raise a job to a production class by default); and a
// job placed by an agentless controller says that nothing will run it.
#include <fstream>

#include "agentless_controller.h"
#include "config/job_spec.h"

namespace tessera::testing {
namespace {

const std::string kE2eCluster = TESSERA_SOURCE_DIR "/tests/server/data/e2e_cluster.yaml";  // a100-0, a100-1, mig

class FirstHour : public AgentlessController {
 protected:
  Result<Json> submit_as(const Principal& who, const std::string& queue, const std::string& cls) {
    auto spec = config::parse_job_spec_json(R"({"name": "j", "queue": ")" + queue + R"(", "priority_class": ")" + cls +
                                            R"(", "resources": {"gpus": 1}, "command": ["true"]})");
    EXPECT_TRUE(spec.ok()) << spec.error().message;
    return ctl->submit(who, *spec, "", nullptr);
  }
  std::string write_cluster(const std::string& yaml) {
    const std::string path = make_temp_dir("tessera-cfg") + "/cluster.yaml";
    std::ofstream(path) << yaml;
    return path;
  }
};

TEST_F(FirstHour, AnAgentWithAnUnknownNodeNameIsToldTheConfiguredNames) {
  start(kE2eCluster);
  Json gpus = Json::array();
  for (int i = 0; i < 8; ++i) gpus.push_back(Json{{"model", "A100-80GB"}, {"mig_enabled", i < 4}});
  // `count: 1` keeps the name as written: "mig", not "mig-0". The refusal says so and lists the nodes.
  auto r = ctl->agent_register(admin, Json{{"node", "mig-0"}, {"address", "127.0.0.1"}, {"log_port", 0},
                                           {"inventory", {{"gpus", gpus}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  const std::string& m = r.error().message;
  EXPECT_NE(m.find("did you mean mig?"), std::string::npos) << m;
  EXPECT_NE(m.find("configured nodes: a100-0, a100-1, mig"), std::string::npos) << m;
  // Heartbeats for an unknown node say the same.
  auto hb = ctl->agent_heartbeat(admin, Json{{"node", "gpu-9"}});
  ASSERT_FALSE(hb.ok());
  EXPECT_NE(hb.error().message.find("configured nodes: a100-0, a100-1, mig"), std::string::npos) << hb.error().message;
  // The documented name registers.
  auto ok = ctl->agent_register(admin, Json{{"node", "mig"}, {"address", "127.0.0.1"}, {"log_port", 0},
                                            {"inventory", {{"gpus", gpus}}}});
  EXPECT_TRUE(ok.ok()) << ok.error().message;
}

TEST_F(FirstHour, AListCutByLimitSaysHowManyRemain) {
  start(kE2eCluster);
  for (int i = 0; i < 5; ++i) ASSERT_GT(submit_json(R"({"name": "x", "queue": "default", "command": ["true"]})"), 0);
  server::JobFilter f;
  f.limit = 2;
  Json page = *ctl->list_jobs(admin, f);
  EXPECT_EQ(page["jobs"].size(), 2u);
  EXPECT_EQ(page["total"], 5);
  EXPECT_EQ(page["remaining"], 3) << page.dump();
  EXPECT_FALSE(page["next_after"].is_null());
  f.after = page["next_after"];
  page = *ctl->list_jobs(admin, f);
  EXPECT_EQ(page["remaining"], 1) << page.dump();
  f.after = page["next_after"];
  page = *ctl->list_jobs(admin, f);
  EXPECT_EQ(page["jobs"].size(), 1u);
  EXPECT_EQ(page["remaining"], 0);
  EXPECT_TRUE(page["next_after"].is_null());
}

TEST_F(FirstHour, PriorityClassesFollowTheConfigsPolicy) {
  start(write_cluster(R"(
levels: [leaf]
nodes:
  - {name: n, count: 2, gpu_model: A100-80GB, gpus: 8, cpu: 64000, memory: 524288, path: [leaf-0]}
queues:
  - {name: team-a}
  - {name: team-b, priority_classes: [research, production-training]}
priority_classes:
  - {name: production-inference, value: 1000, preemptible: false, roles: [team-lead]}
  - {name: production-training, value: 500}
  - {name: research, value: 100}
  - {name: preemptible, value: 0}
)"));
  const Principal alice{"alice", Role::kMember, "team-a", ""}, lead{"lead", Role::kTeamLead, "team-a", ""},
      bob{"bob", Role::kMember, "team-b", ""};
  auto denied = [](const Result<Json>& r, const std::string& why) {
    if (r.ok()) return ::testing::AssertionFailure() << "allowed: " << r->dump();
    if (r.error().code != ErrorCode::kPermissionDenied) return ::testing::AssertionFailure() << r.error().message;
    if (r.error().message.find(why) == std::string::npos)
      return ::testing::AssertionFailure() << "\"" << r.error().message << "\" does not say \"" << why << "\"";
    return ::testing::AssertionSuccess();
  };
  // The default: a member uses the default class (research) and below, not above it.
  auto own = submit_as(alice, "team-a", "research");
  ASSERT_TRUE(own.ok()) << own.error().message;
  EXPECT_TRUE(submit_as(alice, "team-a", "preemptible").ok());
  EXPECT_TRUE(denied(submit_as(alice, "team-a", "production-training"),
                     "production-training (value 500) is above the default class research (value 100)"));
  // Raising their own job is the same rule (the issue: a member raised a job to production).
  const int64_t id = (*own)["id"];
  EXPECT_TRUE(denied(ctl->set_priority(alice, id, "production-training"), "above the default class research"));
  // A class with roles: only those roles (admins always).
  EXPECT_TRUE(denied(ctl->set_priority(alice, id, "production-inference"),
                     "production-inference may be used by admins and team-lead, not by a member"));
  EXPECT_TRUE(ctl->set_priority(lead, id, "production-inference").ok());
  EXPECT_TRUE(denied(submit_as(lead, "team-a", "production-training"), "above the default class"));
  EXPECT_TRUE(ctl->set_priority(admin, id, "production-training").ok());
  // A queue that names a class lets its members use it, and allows only what it names.
  EXPECT_TRUE(submit_as(bob, "team-b", "production-training").ok());
  EXPECT_TRUE(denied(submit_as(bob, "team-b", "preemptible"), "queue team-b allows only research, production-training"));
  EXPECT_TRUE(denied(submit_as(bob, "team-b", "production-inference"), "queue team-b allows only"));
  // The queues answer says which classes the caller may use there (the portal's submit form offers those).
  auto usable = [&](const Principal& who, const std::string& queue) {
    std::vector<std::string> out;
    const Result<Json> all = ctl->queues(who);
    for (const Json& q : (*all)["queues"])
      if (q["name"] == queue) out = q["usable_classes"].get<std::vector<std::string>>();
    return out;
  };
  EXPECT_EQ(usable(alice, "team-a"), (std::vector<std::string>{"research", "preemptible"}));
  EXPECT_EQ(usable(lead, "team-a"), (std::vector<std::string>{"production-inference", "research", "preemptible"}));
  EXPECT_EQ(usable(bob, "team-b"), (std::vector<std::string>{"production-training", "research"}));
  EXPECT_EQ(usable(admin, "team-a").size(), 4u);
  // An unknown class is a bad request, not a denial.
  auto unknown = submit_as(alice, "team-a", "urgent");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kInvalidArgument);
}

TEST_F(FirstHour, AJobPlacedWithoutAgentsSaysNothingRunsIt) {
  start(kE2eCluster);
  const int64_t id = submit_json(R"({"name": "x", "queue": "default", "resources": {"gpus": 1}, "command": ["true"]})");
  wait_running(id);
  const std::string why = "no agent runs tasks on this server (--agentless: placement only)";
  EXPECT_NE(job(id).value("reason", "").find(why), std::string::npos) << job(id).dump();
  server::JobFilter f;
  const Json list = *ctl->list_jobs(admin, f);
  ASSERT_EQ(list["jobs"].size(), 1u);
  EXPECT_NE(list["jobs"][0].value("reason", "").find(why), std::string::npos) << list.dump();
}

}  // namespace
}  // namespace tessera::testing
