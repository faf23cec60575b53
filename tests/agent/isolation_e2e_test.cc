// End to end, what a task can reach: a real `tessera server` and real `tessera agent`s (fake GPUs).
// Run as root (CI), the agent starts tasks as `nobody` (or the user a --task-user-map picks), with
// their own scratch directory as working directory, HOME and TMPDIR; they cannot read the agent's
// state directory, a root-only token file or the controller's admin.token. An agent refuses to start
// with a mapping to root. Skipped when not root (the agent then cannot switch users).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "agent_process.h"

namespace tessera::testing {
namespace {

const std::string kCluster = TESSERA_SOURCE_DIR "/tests/agent/data/agents_cluster.yaml";

class Isolation : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: a non-root agent runs tasks as itself";
    server_ = std::make_unique<ServerProcess>(kCluster);
    server_->with_agents({"--heartbeat-interval-ms", "200", "--missed-heartbeats", "8", "--task-lease-ms", "6000"});
    std::string out;
    ASSERT_TRUE(server_->start(&out)) << out;
  }
  bool ready(AgentProcess& a) {
    return eventually([&] {
      for (const Json& n : server_->get("/api/v1/nodes", server_->admin_token()).body.value("nodes", Json::array()))
        if (n.value("name", "") == a.node()) return n.value("agent", "") == "ready";
      return false;
    }, 20);
  }
  // Submits a one-task shell job and returns its log once it ended.
  std::string run(const std::string& script, std::string* state = nullptr) {
    auto r = server_->post("/api/v1/jobs", server_->admin_token(),
                           Json{{"name", "probe"}, {"queue", "default"}, {"resources", {{"gpus", 1}}},
                                {"command", {"/bin/sh", "-c", script}}});
    EXPECT_EQ(r.status, 201) << r.raw;
    const std::string path = "/api/v1/jobs/" + std::to_string(r.body.value("id", int64_t(0)));
    std::string s;
    EXPECT_TRUE(eventually([&] {
      s = server_->get(path, server_->admin_token()).body.value("state", "");
      return s == "succeeded" || s == "failed";
    }, 30)) << s;
    if (state) *state = s;
    return server_->get(path + "/logs", server_->admin_token()).raw;
  }
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(Isolation, TasksRunAsNobodyAndCannotReadTheAgentsFiles) {
  AgentProcess a("gpu-0", "fake:4xH100-80GB-SXM,nvswitch");
  const std::string token = a.dir() + "/agent.token";  // DIR is 0711: only the file's mode protects it
  { std::ofstream(token) << server_->admin_token() << "\n"; }
  ::chmod(token.c_str(), 0600);
  a.start(server_->port(), server_->admin_token(), {"--token-file", token});
  ASSERT_TRUE(ready(a)) << a.output();
  const std::string state = a.dir() + "/state";
  std::string end;
  const std::string log = run(
      "id -u; echo HOME=$HOME; echo TMPDIR=$TMPDIR; echo PWD=$(pwd); "
      "touch \"$HOME/h\" && touch \"$TMPDIR/t\" && touch ./w && echo scratch-writable; "
      "ls " + state + " >/dev/null 2>&1 || echo state-denied; "
      "cat " + state + "/logs/job-1/attempt-1/task-0.log >/dev/null 2>&1 || echo logs-denied; "
      "cat " + token + " >/dev/null 2>&1 || echo token-denied; "
      "cat " + server_->dir() + "/admin.token >/dev/null 2>&1 || echo admin-token-denied; "
      "kill -0 1 2>/dev/null || echo init-unsignalable",
      &end);
  EXPECT_EQ(end, "succeeded") << log << a.output();
  EXPECT_EQ(log.substr(0, log.find('\n')), "65534") << log;
  const std::string scratch = a.dir() + "/state-tasks/work/job-1-a1-t0";
  EXPECT_NE(log.find("HOME=" + scratch + "\n"), std::string::npos) << log;
  EXPECT_NE(log.find("TMPDIR=" + scratch + "/tmp\n"), std::string::npos) << log;
  EXPECT_NE(log.find("PWD=" + scratch + "\n"), std::string::npos) << log;
  for (const char* word : {"scratch-writable", "state-denied", "logs-denied", "token-denied", "admin-token-denied",
                           "init-unsignalable"})
    EXPECT_NE(log.find(word), std::string::npos) << word << "\n" << log;
  EXPECT_NE(a.output().find("user=nobody"), std::string::npos) << a.output();
  // The scratch directory goes once the task is forgotten.
  EXPECT_TRUE(eventually([&] { return !std::filesystem::exists(scratch); }, 10));
  // The log server answers nothing without the secret, whatever the parameters (a task on the node
  // can reach its port): 403, not the log, not a 500.
  std::smatch m;
  const std::string text = a.output();
  ASSERT_TRUE(std::regex_search(text, m, std::regex("logs on port ([0-9]+)"))) << text;
  const int log_port = std::stoi(m[1]);
  for (const char* q : {"job=1&attempt=1&task=0", "job=1&attempt=1&task=0&limit=-5", "job=x"}) {
    EXPECT_EQ(http_call(log_port, "GET", std::string("/logs?") + q, "").status, 403) << q;
    EXPECT_EQ(http_call(log_port, "GET", std::string("/logs?") + q, "", "", "", {{"X-Tessera-Log-Secret", "guess"}}).status, 403) << q;
  }
  // Permissions the agent keeps: state private, task root searchable only.
  struct stat st{};
  ASSERT_EQ(::stat(state.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat((a.dir() + "/state-tasks").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0711u);
}

TEST_F(Isolation, TaskUserMapPicksByUserAndRootIsRefused) {
  AgentProcess a("gpu-0", "fake:4xH100-80GB-SXM,nvswitch");
  const std::string map = a.dir() + "/users.yaml";
  { std::ofstream(map) << "users: {admin: '4242:4343'}\n"; }  // the admin token's user
  a.start(server_->port(), server_->admin_token(), {"--task-user-map", map});
  ASSERT_TRUE(ready(a)) << a.output();
  const std::string log = run("id -u; id -g");
  EXPECT_EQ(log, "4242\n4343\n") << a.output();
  // A mapping to root, by flag or by file, stops the agent at start with the reason.
  const std::string out = a.dir() + "/refused.txt";
  for (const std::string& flags : {std::string("--task-user root"), std::string("--task-user 0:0"),
                                   "--task-user-map " + a.dir() + "/root.yaml"}) {
    { std::ofstream(a.dir() + "/root.yaml") << "queues: {default: root}\n"; }
    const std::string cmd = std::string(TESSERA_BINARY) + " agent --token x --node gpu-1 --gpus fake:4xH100-80GB-SXM --state-dir " +
                            a.dir() + "/refused " + flags + " > " + out + " 2>&1";
    EXPECT_NE(std::system(cmd.c_str()), 0) << flags;
    EXPECT_NE(read_file(out).find("never run"), std::string::npos) << flags << ": " << read_file(out);
  }
}

TEST_F(Isolation, ATaskDirTheTaskUserCannotReachOrInsideTheStateDirIsRefusedAtStart) {
  const std::string dir = make_temp_dir("tessera-private");  // 0700: nobody cannot enter it
  const std::string out = dir + "/out.txt";
  const std::string cmd = std::string(TESSERA_BINARY) + " agent --token x --node gpu-1 --gpus fake:4xH100-80GB-SXM --state-dir " +
                          dir + "/state > " + out + " 2>&1";
  EXPECT_NE(std::system(cmd.c_str()), 0);
  EXPECT_NE(read_file(out).find("cannot reach it"), std::string::npos) << read_file(out);
  // Nor may the task directory hold the state directory, or the other way round.
  EXPECT_NE(std::system((std::string(TESSERA_BINARY) + " agent --token x --node gpu-1 --gpus fake:4xH100-80GB-SXM --state-dir " +
                         dir + "/state --task-dir " + dir + "/state/tasks > " + out + " 2>&1").c_str()), 0);
  EXPECT_NE(read_file(out).find("must not contain one another"), std::string::npos) << read_file(out);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera::testing
