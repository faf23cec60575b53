// Slurm-style workflows through the controller (in-process, agentless, real SQLite store): job
// arrays with a running limit, each dependency type (including one never satisfied, with and
// without kill_on_invalid_dep), holds (a user's and an admin's), begin times, and requeue of a
// checkpointing job (no restart or preemption counted). Task ends are reported as an agent would.
#include <gtest/gtest.h>

#include "agentless_controller.h"

namespace tessera {
namespace {

using server::JobFilter;
using server::Json;
using server::Principal;
using server::Role;
using server::JobVerb;

class Workflow : public testing::AgentlessController {
 protected:
  void SetUp() override { start(TESSERA_SOURCE_DIR "/tests/server/data/defrag_cluster.yaml"); }  // 2 nodes x 4 GPUs

  static std::string spec(const std::string& name, const std::string& extra = "", int gpus = 1) {
    return R"({"name": ")" + name + R"(", "queue": "team-a", "resources": {"gpus": )" + std::to_string(gpus) +
           R"(}, "command": ["x"])" + (extra.empty() ? "" : ", " + extra) + "}";
  }
  Json submit_answer(const std::string& json, const Principal& who) {
    auto s = config::parse_job_spec_json(json);
    EXPECT_TRUE(s.ok()) << s.error().message;
    auto r = ctl->submit(who, *s, "", nullptr);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : Json();
  }
  // Reports the job's task 0 ended as its agent would (state succeeded / failed).
  void end_task(int64_t id, const std::string& state, int exit_code = 0) {
    const Json j = job(id);
    ASSERT_EQ(j["state"], "running") << j.dump();
    heartbeat(j["placement"][0]["node"], Json::array({Json{{"job", id}, {"attempt", j["attempt"]}, {"task", 0}, {"state", state},
                                                           {"exit_code", exit_code}}}));
    ASSERT_TRUE(testing::eventually([&] { return job(id)["state"] == state; }, 5)) << job(id).dump();
  }
  bool settles_as(int64_t id, const std::string& state, const std::string& wait = "") {
    return testing::eventually(
        [&] {
          ctl->wait_for_cycle();
          const Json j = job(id);
          return j["state"] == state && (wait.empty() || j["wait"] == wait);
        },
        5);
  }
  Result<Json> verb(const Principal& who, const std::string& ref, JobVerb v, bool hold = false) {
    auto r = config::parse_job_ref(ref);
    EXPECT_TRUE(r.ok());
    return ctl->job_verb(who, *r, v, hold);
  }
  const Principal alice{"alice", Role::kMember, "team-a", ""};
};

TEST_F(Workflow, AnArrayRunsAtMostItsLimitAndEachElementKnowsItsIndex) {
  const Json a = submit_answer(spec("sweep", R"("array": "0-6:2%2")"), admin);  // 0, 2, 4, 6; two at a time
  const int64_t first = a["id"];
  EXPECT_EQ(a["array_job_id"], first);
  EXPECT_EQ(a["array_size"], 4);
  EXPECT_EQ(a["ref"], std::to_string(first) + "_0");
  ASSERT_TRUE(settles_as(first, "running"));
  ASSERT_TRUE(settles_as(first + 1, "running"));
  ASSERT_TRUE(settles_as(first + 2, "pending", "array_task_limit")) << job(first + 2).dump();
  EXPECT_NE(job(first + 2)["reason"].get<std::string>().find("JobArrayTaskLimit"), std::string::npos);
  EXPECT_EQ(job(first + 3)["wait"], "array_task_limit");
  // Element 2 is "first_2", and its agent is given the index as Slurm's and Tessera's variables.
  auto id2 = ctl->job_id(config::JobRef{first, 2});
  ASSERT_TRUE(id2.ok());
  EXPECT_EQ(*id2, first + 1);
  const std::string node = job(first + 1)["placement"][0]["node"];
  const Json desired = heartbeat(node, Json::array());
  bool seen = false;
  for (const Json& run : desired["run"])
    if (run["job"] == first + 1) {
      seen = true;
      EXPECT_EQ(run["env"]["TESSERA_ARRAY_TASK_ID"], "2");
      EXPECT_EQ(run["env"]["SLURM_ARRAY_TASK_ID"], "2");
      EXPECT_EQ(run["env"]["SLURM_ARRAY_JOB_ID"], std::to_string(first));
      EXPECT_EQ(run["env"]["SLURM_ARRAY_TASK_COUNT"], "4");
    }
  EXPECT_TRUE(seen) << desired.dump();
  // One ends: the next element starts, still two at a time.
  end_task(first, "succeeded");
  ASSERT_TRUE(settles_as(first + 2, "running"));
  EXPECT_EQ(job(first + 3)["state"], "pending");
  // The list filter by array, and the whole array cancelled by its id.
  JobFilter f;
  f.array = first;
  EXPECT_EQ((*ctl->list_jobs(admin, f))["total"], 4);
  auto c = verb(admin, std::to_string(first), JobVerb::kCancel);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ((*c)["jobs"].size(), 3u);    // the three still active
  EXPECT_EQ((*c)["skipped"].size(), 1u);  // element 0 had ended
  for (int64_t id = first + 1; id < first + 4; ++id) EXPECT_EQ(job(id)["state"], "cancelled");
  // An element alone.
  EXPECT_FALSE(verb(admin, std::to_string(first) + "_9", JobVerb::kCancel).ok());
}

TEST_F(Workflow, AfterOkWaitsForSuccessAndAfterNotOkIsNeverSatisfiedByIt) {
  const int64_t a = submit_json(spec("a"));
  ASSERT_TRUE(settles_as(a, "running"));
  const int64_t ok = submit_json(spec("ok", R"("dependency": "afterok:)" + std::to_string(a) + R"(")"));
  const int64_t notok = submit_json(spec("notok", R"("dependency": "afternotok:)" + std::to_string(a) + R"(")"));
  const int64_t killed = submit_json(
      spec("killed", R"("dependency": "afternotok:)" + std::to_string(a) + R"(", "kill_on_invalid_dep": true)"));
  const int64_t any = submit_json(spec("any", R"("dependency": "afterany:)" + std::to_string(a) + R"(")"));
  const int64_t after = submit_json(spec("after", R"("dependency": "after:)" + std::to_string(a) + R"(")"));
  ASSERT_TRUE(settles_as(ok, "pending", "dependency")) << job(ok).dump();
  EXPECT_NE(job(ok)["reason"].get<std::string>().find("afterok:" + std::to_string(a)), std::string::npos) << job(ok)["reason"];
  EXPECT_EQ(job(any)["wait"], "dependency");
  ASSERT_TRUE(settles_as(after, "running")) << "after: its dependency has started";
  end_task(a, "succeeded");
  ASSERT_TRUE(settles_as(ok, "running"));
  ASSERT_TRUE(settles_as(any, "running"));
  ASSERT_TRUE(settles_as(notok, "pending", "dependency_never_satisfied")) << job(notok).dump();
  EXPECT_NE(job(notok)["reason"].get<std::string>().find("DependencyNeverSatisfied"), std::string::npos);
  ASSERT_TRUE(settles_as(killed, "cancelled")) << job(killed).dump();
  EXPECT_NE(job(killed)["reason"].get<std::string>().find("never satisfied"), std::string::npos);
  // A dependency on a job that does not exist is refused at submission.
  auto s = config::parse_job_spec_json(spec("x", R"("dependency": "afterok:999")"));
  auto r = ctl->submit(admin, *s, "", nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("dependency: job 999 does not exist"), std::string::npos);
}

TEST_F(Workflow, AfterNotOkRunsAfterAFailureAndSingletonRunsOneAtATime) {
  const int64_t a = submit_json(spec("a"));
  ASSERT_TRUE(settles_as(a, "running"));
  const int64_t notok = submit_json(spec("notok", R"("dependency": "afternotok:)" + std::to_string(a) + R"(")"));
  end_task(a, "failed", 3);
  ASSERT_TRUE(settles_as(notok, "running"));
  // Two singletons of one name and user: the second waits for the first to end.
  const int64_t s1 = submit_json(spec("single", R"("dependency": "singleton")"));
  const int64_t s2 = submit_json(spec("single", R"("dependency": "singleton")"));
  ASSERT_TRUE(settles_as(s1, "running"));
  ASSERT_TRUE(settles_as(s2, "pending", "dependency")) << job(s2).dump();
  end_task(s1, "succeeded");
  ASSERT_TRUE(settles_as(s2, "running"));
}

TEST_F(Workflow, HeldJobsWaitUntilReleasedAndAnAdminHoldIsTheAdminsToRelease) {
  const int64_t h = submit_answer(spec("held", R"("hold": true)"), alice)["id"];
  ASSERT_TRUE(settles_as(h, "pending", "held"));
  EXPECT_EQ(job(h)["held_by"], "alice");
  ctl->wait_for_cycle();
  EXPECT_EQ(job(h)["state"], "pending");
  ASSERT_TRUE(verb(alice, std::to_string(h), JobVerb::kRelease).ok());
  ASSERT_TRUE(settles_as(h, "running"));
  EXPECT_FALSE(verb(alice, std::to_string(h), JobVerb::kHold).ok()) << "a running job is not held (requeue --hold is)";
  // An admin holds alice's pending job: she cannot release it.
  const int64_t big = submit_answer(spec("big", "", 4), alice)["id"];
  const int64_t p = submit_answer(spec("p", "", 4), alice)["id"];
  ASSERT_TRUE(verb(admin, std::to_string(p), JobVerb::kHold).ok());
  auto r = verb(alice, std::to_string(p), JobVerb::kRelease);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kPermissionDenied);
  ASSERT_TRUE(verb(admin, std::to_string(p), JobVerb::kRelease).ok());
  (void)big;
  // Holds survive a controller restart.
  const int64_t h2 = submit_answer(spec("h2", R"("hold": true)"), alice)["id"];
  ASSERT_TRUE(settles_as(h2, "pending", "held"));
  restart(TESSERA_SOURCE_DIR "/tests/server/data/defrag_cluster.yaml");
  ASSERT_TRUE(settles_as(h2, "pending", "held"));
}

TEST_F(Workflow, ABeginTimeKeepsAJobPendingUntilThen) {
  const int64_t b = submit_json(spec("later", R"("begin": )" + std::to_string(now.load() + 3600)));
  ASSERT_TRUE(settles_as(b, "pending", "begin_time"));
  EXPECT_NE(job(b)["reason"].get<std::string>().find("(in 1h)"), std::string::npos) << job(b)["reason"];
  now += 3600;
  ASSERT_TRUE(settles_as(b, "running"));
}

TEST_F(Workflow, RequeueCheckpointsFirstAndCountsNoRestartOrPreemption) {
  const int64_t id = submit_json(spec("ck", R"("checkpoint": {"interval": 600, "grace": 60})"));
  ASSERT_TRUE(settles_as(id, "running"));
  EXPECT_FALSE(verb(admin, std::to_string(id + 1), JobVerb::kRequeue).ok());
  auto r = verb(admin, std::to_string(id), JobVerb::kRequeue);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)["state"], "checkpointing");
  EXPECT_NE((*r)["reason"].get<std::string>().find("requeued"), std::string::npos) << (*r)["reason"];
  const std::string node = job(id)["placement"][0]["node"];
  heartbeat(node, Json::array({Json{{"job", id}, {"attempt", 1}, {"task", 0}, {"state", "checkpointed"}, {"checkpoint", "/ck/9"},
                                    {"checkpoint_requested", true}}}));
  wait_running(id, 1);
  const Json j = job(id);
  EXPECT_EQ(j["preemptions"], 0);
  EXPECT_EQ(j["restarts"], 0);
  EXPECT_EQ(j["resume_from"], "/ck/9");
  ASSERT_TRUE(testing::eventually([&] { return has_event(job(id), "interrupted"); }, 5)) << job(id).dump(2);
  EXPECT_FALSE(has_event(job(id), "preempted"));
  // requeue --hold on an ended job: back to pending, held.
  end_task(id, "succeeded");
  ASSERT_TRUE(verb(admin, std::to_string(id), JobVerb::kRequeue, true).ok());
  ASSERT_TRUE(settles_as(id, "pending", "held"));
}

TEST_F(Workflow, AnArrayAfterAWholeArrayWaitsForEveryElementAndAnElementForOne) {
  const int64_t a = submit_answer(spec("a", R"("array": "0-2")"), admin)["array_job_id"];
  const int64_t b = submit_answer(spec("b", R"("array": "0-2", "dependency": "afterok:)" + std::to_string(a) + R"(")"), admin)["array_job_id"];
  const int64_t one = submit_json(spec("one", R"("dependency": "afterok:)" + std::to_string(a) + R"(_1")"));
  for (int64_t e = a; e < a + 3; ++e) ASSERT_TRUE(settles_as(e, "running"));
  end_task(a + 1, "succeeded");  // element 1: "one" may go, the array b still waits
  ASSERT_TRUE(settles_as(one, "running"));
  for (int64_t e = b; e < b + 3; ++e) EXPECT_EQ(job(e)["wait"], "dependency") << job(e).dump();
  end_task(a, "succeeded");
  end_task(a + 2, "succeeded");
  for (int64_t e = b; e < b + 3; ++e) ASSERT_TRUE(settles_as(e, "running")) << job(e).dump();
}

}  // namespace
}  // namespace tessera
