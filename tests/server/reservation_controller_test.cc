// The controller passes the cycle's backfill reservation back to the next cycle and keeps it across
// a restart (issue 20, defect 1): a gang reserved for its due time starts then, even when by then a
// job that was not ahead of it when it was made sorts first.
#include <gtest/gtest.h>

#include "agentless_controller.h"
#include "sqlite_query.h"

namespace tessera::server {
namespace {

class ReservationController : public testing::AgentlessController {
 protected:
  static constexpr const char* kCluster = TESSERA_SOURCE_DIR "/tests/server/data/one_node_cluster.yaml";
  void SetUp() override { start(kCluster); }

  int64_t submit_as(const std::string& user, int gpus, int expected_runtime) {
    const Principal p{user, Role::kMember, "research", ""};
    auto spec = config::parse_job_spec_json(Json{{"name", user + "-" + std::to_string(gpus)},
                                                 {"queue", "research"},
                                                 {"resources", {{"gpus", gpus}}},
                                                 {"expected_runtime", expected_runtime},
                                                 {"command", {"x"}}}
                                                .dump());
    EXPECT_TRUE(spec.ok()) << spec.error().message;
    auto r = ctl->submit(p, *spec, "", nullptr);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? (*r)["id"].get<int64_t>() : -1;
  }
  // bob's 8-GPU job fills the node until now + 3600; then bob's 1-GPU job and alice's 8-GPU gang
  // arrive in the same second. The gang sorts first (bob uses 8 GPUs) and reserves the node.
  void reserve() {
    fill = submit_as("bob", 8, 3600);
    wait_running(fill);
    small = submit_as("bob", 1, 7200);
    gang = submit_as("alice", 8, 7200);
    for (int i = 0; i < 50 && !job(gang)["pending"].is_object(); ++i) ctl->wait_for_cycle();
    const Json p = job(gang)["pending"];
    ASSERT_TRUE(p.is_object()) << job(gang).dump();
    ASSERT_TRUE(p["reserved"].get<bool>()) << p.dump();
    ASSERT_EQ(p["estimated_start"], now.load() + 3600) << p.dump();
  }
  // At the due time bob's job ends: both users use nothing, and bob's job (the lower id) would sort first.
  void fill_ends() {
    now += 3600;
    const Json f = job(fill);
    heartbeat(f["placement"][0]["node"], Json::array({Json{{"job", fill}, {"attempt", f["attempt"]}, {"task", 0},
                                                           {"state", "succeeded"}, {"exit_code", 0}}}));
  }
  void expect_gang_starts_first() {
    wait_running(gang);
    ctl->wait_for_cycle();
    EXPECT_EQ(job(small)["state"], "pending") << "nothing that was not ahead of the gang takes its room";
  }

  int64_t fill = -1, small = -1, gang = -1;
};

TEST_F(ReservationController, TheReservedGangStartsAtItsDueTime) {
  ASSERT_NO_FATAL_FAILURE(reserve());
  fill_ends();
  expect_gang_starts_first();
}

TEST_F(ReservationController, TheReservationHoldsAcrossARestart) {
  ASSERT_NO_FATAL_FAILURE(reserve());
  ctl->wait_for_cycle();  // the reservation is stored with the cycle's writes
  const Json stored = Json::parse(testing::sqlite_query(dir + "/tessera.db",
                                                        "SELECT value FROM meta WHERE key = 'scheduler/reservation'"),
                                  nullptr, false);
  ASSERT_TRUE(stored.is_object()) << stored.dump();
  EXPECT_EQ(stored.value("job", int64_t(-1)), gang);
  EXPECT_EQ(stored.value("start", int64_t(-1)), now.load() + 3600);
  EXPECT_EQ(stored.value("promised", int64_t(-1)), now.load() + 3600);
  ASSERT_NO_FATAL_FAILURE(restart(kCluster));
  fill_ends();
  expect_gang_starts_first();
}

}  // namespace
}  // namespace tessera::server
