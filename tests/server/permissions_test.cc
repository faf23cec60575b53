// The permission rules (server/permissions.h) on a hand-built queue tree: org{team-a, team-b}, default.
#include <gtest/gtest.h>

#include "server/permissions.h"

namespace tessera::server {
namespace {

QueueSpec q(const std::string& name, const std::string& parent = "") {
  QueueSpec s;
  s.name = name;
  s.parent = parent;
  return s;
}

class Permissions : public ::testing::Test {
 protected:
  QueueTree tree = *QueueTree::build({q("org"), q("team-a", "org"), q("team-b", "org"), q("default")});
  Principal admin{"root", Role::kAdmin, "", ""};
  Principal lead{"lee", Role::kTeamLead, "org", ""};
  Principal alice{"alice", Role::kMember, "team-a", ""};
  Principal viewer{"vera", Role::kViewer, "", ""};
  Principal agent{"ag", Role::kAgent, "", "gpu-*"};
};

TEST_F(Permissions, AgentsCallOnlyTheAgentProtocol) {
  EXPECT_TRUE(perm::may_call(agent, "/api/v1/agent/heartbeat").ok());
  EXPECT_FALSE(perm::may_call(agent, "/api/v1/jobs").ok());
  EXPECT_FALSE(perm::may_call(agent, "/api/v1/agent").ok());  // not a prefix trick
  EXPECT_TRUE(perm::may_call(viewer, "/api/v1/jobs").ok());
  EXPECT_FALSE(perm::may_read(agent).ok());
  EXPECT_TRUE(perm::may_read(viewer).ok());
}

TEST_F(Permissions, SubmittingFollowsTheQueueSubtree) {
  EXPECT_TRUE(perm::may_submit(admin, tree, "default").ok());
  EXPECT_TRUE(perm::may_submit(lead, tree, "team-b").ok());
  EXPECT_FALSE(perm::may_submit(lead, tree, "default").ok());
  EXPECT_TRUE(perm::may_submit(alice, tree, "team-a").ok());
  EXPECT_FALSE(perm::may_submit(alice, tree, "team-b").ok());
  for (const Principal& p : {viewer, agent}) {
    const Status st = perm::may_submit(p, tree, "team-a");
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, ErrorCode::kPermissionDenied);
    EXPECT_NE(st.message().find("may not submit"), std::string::npos) << st.message();
  }
}

TEST_F(Permissions, ModifyingIsTheOwnersOrTheLeads) {
  EXPECT_TRUE(perm::may_modify(alice, tree, "team-a", "alice", 7).ok());
  EXPECT_FALSE(perm::may_modify(alice, tree, "team-a", "bob", 8).ok());
  EXPECT_TRUE(perm::may_modify(lead, tree, "team-a", "bob", 8).ok());
  EXPECT_FALSE(perm::may_modify(lead, tree, "default", "bob", 9).ok());
  EXPECT_FALSE(perm::may_modify(viewer, tree, "team-a", "alice", 7).ok());
  EXPECT_FALSE(perm::may_modify(agent, tree, "team-a", "alice", 7).ok());
  EXPECT_TRUE(perm::may_modify(admin, tree, "default", "bob", 9).ok());
}

TEST_F(Permissions, JobDetailIsTheTeamsAndViewersOnlyWhenAllowed) {
  EXPECT_TRUE(perm::may_see_detail(alice, tree, "team-a", 1, false).ok());
  EXPECT_FALSE(perm::may_see_detail(alice, tree, "team-b", 2, false).ok());  // another team's
  EXPECT_TRUE(perm::may_see_detail(lead, tree, "team-b", 2, false).ok());
  EXPECT_FALSE(perm::may_see_detail(lead, tree, "default", 3, false).ok());
  EXPECT_FALSE(perm::may_see_detail(viewer, tree, "team-a", 1, false).ok());
  EXPECT_TRUE(perm::may_see_detail(viewer, tree, "team-a", 1, true).ok());
  EXPECT_FALSE(perm::may_see_detail(agent, tree, "team-a", 1, true).ok());
  EXPECT_TRUE(perm::may_see_detail(admin, tree, "default", 3, false).ok());
}

TEST_F(Permissions, AgentTokensSpeakForTheirNodesOnly) {
  EXPECT_TRUE(perm::may_speak_for(agent, "gpu-7").ok());
  EXPECT_FALSE(perm::may_speak_for(agent, "cpu-1").ok());
  const Principal bound{"n1", Role::kAgent, "", "node-1"};
  EXPECT_TRUE(perm::may_speak_for(bound, "node-1").ok());
  EXPECT_FALSE(perm::may_speak_for(bound, "node-10").ok());
  const Principal legacy{"old", Role::kAgent, "", ""};  // made before tokens were bound
  EXPECT_TRUE(perm::may_speak_for(legacy, "anything").ok());
  EXPECT_TRUE(perm::may_speak_for(admin, "node-1").ok());
  EXPECT_FALSE(perm::may_speak_for(viewer, "node-1").ok());
}

TEST_F(Permissions, AdminOnlyAndEvents) {
  EXPECT_TRUE(perm::admin_only(admin, "reload").ok());
  EXPECT_EQ(perm::admin_only(lead, "reload the config").message(), "only admins may reload the config");
  EXPECT_TRUE(perm::may_read_events(viewer).ok());
  EXPECT_FALSE(perm::may_read_events(alice).ok());
}

}  // namespace
}  // namespace tessera::server
