// End to end: a real `tessera server` and several real `tessera agent` processes (fake GPUs) on
// loopback, running real task processes. The PyTorch tests run examples/ddp_train.py with Debian's
// python3-torch (CPU, gloo): a 2-node × 2-task gang, preempted with a checkpoint and resumed, and
// surviving the SIGKILL of one agent.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "agent_process.h"

namespace tessera::testing {
namespace {

const std::string kCluster = TESSERA_SOURCE_DIR "/tests/agent/data/agents_cluster.yaml";
const std::string kDdp = TESSERA_SOURCE_DIR "/examples/ddp_train.py";
const std::string kPython = "/usr/bin/python3";

// A server that waits for agents (short heartbeat timeout) and three agents with 4 fake H100 each.
class Cluster {
 public:
  explicit Cluster(int agents = 3) : server(kCluster) {
    // NotReady after 1.6 s; a job lost with its node restarts 6 s after the node's last heartbeat.
    server.with_agents({"--heartbeat-interval-ms", "200", "--missed-heartbeats", "8", "--task-lease-ms", "6000"});
    std::string out;
    if (!server.start(&out)) ADD_FAILURE() << "server did not start: " << out;
    for (int i = 0; i < agents; ++i) add_agent("gpu-" + std::to_string(i), "fake:4xH100-80GB-SXM,nvswitch");
  }
  AgentProcess& add_agent(const std::string& node, const std::string& gpus) {
    agents.push_back(std::make_unique<AgentProcess>(node, gpus));
    agents.back()->start(server.port(), server.admin_token());
    return *agents.back();
  }
  bool all_ready(size_t n) {
    return eventually(
        [&] {
          auto r = server.get("/api/v1/nodes", server.admin_token());
          size_t ready = 0;
          for (const Json& nd : r.body.value("nodes", Json::array())) ready += nd.value("agent", "") == "ready";
          return ready >= n;
        },
        20);
  }
  int64_t submit(const Json& spec) {
    auto r = server.post("/api/v1/jobs", server.admin_token(), spec);
    EXPECT_EQ(r.status, 201) << r.raw;
    return r.body.value("id", int64_t(0));
  }
  Json job(int64_t id) { return server.get("/api/v1/jobs/" + std::to_string(id), server.admin_token()).body; }
  bool wait_state(int64_t id, const std::string& state, double seconds) {
    return eventually([&] { return job(id).value("state", "") == state; }, seconds);
  }
  std::string agent_output() {
    std::string all;
    for (auto& a : agents) all += "--- agent " + a->node() + " ---\n" + a->output();
    return all;
  }
  std::string logs(int64_t id, int task) {
    return server.get("/api/v1/jobs/" + std::to_string(id) + "/logs?task=" + std::to_string(task), server.admin_token()).raw;
  }
  AgentProcess* agent_of(const std::string& node) {
    for (auto& a : agents)
      if (a->node() == node) return a.get();
    return nullptr;
  }

  ServerProcess server;
  std::vector<std::unique_ptr<AgentProcess>> agents;
};

std::map<std::string, std::string> read_env_file(const std::string& path) {
  std::map<std::string, std::string> env;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

bool has_event(const Json& job, const std::string& kind) {
  for (const Json& e : job.value("events", Json::array()))
    if (e.value("kind", "") == kind) return true;
  return false;
}

TEST(Agents, RegisterChecksTheInventoryAgainstTheConfig) {
  Cluster c(0);
  const std::string t = c.server.admin_token();
  Json reg{{"node", "gpu-0"}, {"address", "127.0.0.1"}, {"log_port", 0},
           {"inventory", {{"source", "fake"}, {"gpus", Json::array()}}}};
  for (int i = 0; i < 4; ++i) reg["inventory"]["gpus"].push_back(Json{{"index", i}, {"model", "A100-80GB"}, {"mig_enabled", false}});
  auto r = c.server.post("/api/v1/agent/register", t, reg);
  EXPECT_EQ(r.status, 409) << r.raw;
  EXPECT_NE(r.raw.find("inventory.gpus[0]"), std::string::npos) << r.raw;
  EXPECT_NE(r.raw.find("H100-80GB-SXM"), std::string::npos) << r.raw;
  reg["inventory"]["gpus"].erase(3);
  r = c.server.post("/api/v1/agent/register", t, reg);
  EXPECT_EQ(r.status, 409);
  EXPECT_NE(r.raw.find("found 3 GPUs"), std::string::npos) << r.raw;
  reg["node"] = "nope";
  EXPECT_EQ(c.server.post("/api/v1/agent/register", t, reg).status, 404);
  reg.erase("address");
  r = c.server.post("/api/v1/agent/register", t, reg);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.raw.find("address"), std::string::npos);
  // A heartbeat before registering is told to register.
  r = c.server.post("/api/v1/agent/heartbeat", t, Json{{"node", "gpu-0"}, {"tasks", Json::array()}});
  EXPECT_EQ(r.status, 409);
  EXPECT_NE(r.raw.find("not_registered"), std::string::npos);
  // Until an agent registers, no node takes work: a job waits.
  const int64_t id = c.submit(Json{{"name", "w"}, {"queue", "default"}, {"resources", {{"gpus", 1}}}, {"command", {"/bin/true"}}});
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  EXPECT_EQ(c.job(id).value("state", ""), "pending");
  // A wrong agent is refused and says why in its log.
  AgentProcess& wrong = c.add_agent("gpu-1", "fake:8xA100-80GB");
  EXPECT_TRUE(eventually([&] { return wrong.output().find("register_refused") != std::string::npos; }, 10)) << wrong.output();
  EXPECT_EQ(c.job(id).value("state", ""), "pending");
}

// One task, one GPU: the whole torchrun contract too (issue 22: examples/ddp with tasks: 1 had no
// MASTER_PORT).
TEST(Agents, SingleTaskJobGetsTheWholeTorchrunContract) {
  Cluster c(1);
  ASSERT_TRUE(c.all_ready(1)) << c.agent_output();
  const std::string out = task_writable_dir("tessera-env1");
  const int64_t id = c.submit(Json{{"name", "one"}, {"queue", "default"}, {"resources", {{"gpus", 1}}},
                                   {"command", {"/bin/sh", "-c", "env | sort > " + out + "/env"}}});
  ASSERT_TRUE(c.wait_state(id, "succeeded", 30)) << c.job(id).dump(2) << c.agent_output();
  auto env = read_env_file(out + "/env");
  for (const char* k : {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK"})
    EXPECT_TRUE(env.count(k)) << k;
  EXPECT_GT(std::atoi(env["MASTER_PORT"].c_str()), 0);
  EXPECT_EQ(env["WORLD_SIZE"], "1");
  EXPECT_EQ(env["RANK"], "0");
  std::filesystem::remove_all(out);
}

// Slurm habits on real agents (issue 22): --output files written on the node as the task's user
// with %x/%j/%A/%a/%t expanded, the API's logs kept; an array element knows its index; a signal sent
// to a running job reaches its task once.
TEST(Agents, OutputFilesArrayIndicesAndSignalsReachTheTasks) {
  Cluster c(1);
  ASSERT_TRUE(c.all_ready(1)) << c.agent_output();
  const std::string out = task_writable_dir("tessera-out");
  auto sub = c.server.post("/api/v1/jobs", c.server.admin_token(),
                           Json{{"name", "sweep"}, {"queue", "default"}, {"resources", {{"gpus", 1}}}, {"array", "3,5"},
                                {"output", out + "/%x-%A_%a.out"},
                                {"command", {"/bin/sh", "-c", "echo index $SLURM_ARRAY_TASK_ID of $TESSERA_ARRAY_JOB_ID; echo oops >&2"}}});
  ASSERT_EQ(sub.status, 201) << sub.raw;
  const int64_t first = sub.body["array_job_id"];
  ASSERT_TRUE(c.wait_state(first, "succeeded", 30)) << c.job(first).dump(2) << c.agent_output();
  ASSERT_TRUE(c.wait_state(first + 1, "succeeded", 30)) << c.job(first + 1).dump(2);
  const std::string a = std::to_string(first);
  EXPECT_EQ(read_file(out + "/sweep-" + a + "_3.out"), "index 3 of " + a + "\noops\n");
  EXPECT_EQ(read_file(out + "/sweep-" + a + "_5.out"), "index 5 of " + a + "\noops\n");
  EXPECT_NE(c.logs(first, 0).find("index 3"), std::string::npos) << "the API keeps the log too";
  struct stat st {};
  ASSERT_EQ(::stat((out + "/sweep-" + a + "_3.out").c_str(), &st), 0);
  if (::geteuid() == 0) {
    EXPECT_NE(st.st_uid, 0u) << "written as the task's user, not root";
  }
  // A path the task's user cannot write is not written by the root agent either; the job still runs.
  if (::geteuid() == 0) {
    const int64_t id = c.submit(Json{{"name", "sneaky"}, {"queue", "default"}, {"resources", {{"gpus", 1}}},
                                     {"output", "/root/tessera-sneaky-%j.out"}, {"command", {"/bin/true"}}});
    ASSERT_TRUE(c.wait_state(id, "succeeded", 30)) << c.job(id).dump(2);
    EXPECT_FALSE(std::filesystem::exists("/root/tessera-sneaky-" + std::to_string(id) + ".out"));
  }
  // USR1 to a running job: its trap runs once.
  const int64_t sig = c.submit(Json{{"name", "sig"}, {"queue", "default"}, {"resources", {{"gpus", 1}}},
                                    {"command", {"/bin/sh", "-c", "trap 'echo got-usr1' USR1; echo ready; while true; do sleep 0.1; done"}}});
  ASSERT_TRUE(eventually([&] { return c.logs(sig, 0).rfind("ready\n", 0) == 0; }, 30)) << c.job(sig).dump(2);
  auto r = c.server.post("/api/v1/jobs/" + std::to_string(sig) + "/signal", c.server.admin_token(), Json{{"signal", "USR1"}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_TRUE(eventually([&] { return c.logs(sig, 0).find("got-usr1") != std::string::npos; }, 10)) << c.logs(sig, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // several heartbeats: still once
  const std::string log = c.logs(sig, 0);
  EXPECT_EQ(log.find("got-usr1"), log.rfind("got-usr1")) << log;
  EXPECT_EQ(c.job(sig).value("state", ""), "running");
  EXPECT_EQ(c.server.post("/api/v1/jobs/" + std::to_string(sig) + "/signal", c.server.admin_token(), Json{{"signal", "NOPE"}}).status, 400);
  c.server.post("/api/v1/jobs/" + std::to_string(sig) + "/cancel", c.server.admin_token(), Json::object());
  std::filesystem::remove_all(out);
}

// A node whose agent never registered takes no work: `tessera nodes` does not call it ready.
TEST(Agents, NodesWithoutAnAgentAreNotShownReady) {
  Cluster c(1);
  ASSERT_TRUE(c.all_ready(1)) << c.agent_output();
  const std::string out = task_writable_dir("tessera-nodes");
  const std::string cmd = std::string(TESSERA_BINARY) + " nodes --server http://127.0.0.1:" + std::to_string(c.server.port()) +
                          " --token " + c.server.admin_token() + " > " + out + "/nodes.txt 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_file(out + "/nodes.txt");
  const std::string text = read_file(out + "/nodes.txt");
  std::string line0, line1;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (l.rfind("gpu-0 ", 0) == 0) line0 = l;
    if (l.rfind("gpu-1 ", 0) == 0) line1 = l;
  }
  EXPECT_NE(line0.find(" ready "), std::string::npos) << text;
  EXPECT_NE(line1.find("no-agent"), std::string::npos) << text;
  EXPECT_NE(line1.find("waits for its agent"), std::string::npos) << text;
  std::filesystem::remove_all(out);
}

TEST(Agents, GangGetsTheTorchrunEnvironmentAndLogs) {
  Cluster c(3);
  ASSERT_TRUE(c.all_ready(3)) << c.agent_output();
  const std::string out = task_writable_dir("tessera-env");
  const int64_t id = c.submit(Json{{"name", "env"},
                                   {"queue", "default"},
                                   {"tasks", 2},
                                   {"resources", {{"gpus", 4}, {"cpu", 1}, {"memory", "1Gi"}}},
                                   {"env", {{"FOO", "bar baz"}}},
                                   {"command", {"/bin/sh", "-c", "env | sort > " + out + "/env-$RANK; echo hello from rank $RANK; echo oops >&2"}}});
  ASSERT_TRUE(c.wait_state(id, "succeeded", 30)) << c.job(id).dump(2) << c.agent_output();
  std::set<std::string> nodes, ports;
  for (int rank = 0; rank < 2; ++rank) {
    auto env = read_env_file(out + "/env-" + std::to_string(rank));
    EXPECT_EQ(env["WORLD_SIZE"], "2");
    EXPECT_EQ(env["RANK"], std::to_string(rank));
    EXPECT_EQ(env["LOCAL_RANK"], "0");          // one task per node (4 GPUs each)
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "1");
    EXPECT_EQ(env["NODE_RANK"], std::to_string(rank));
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "0,1,2,3");  // fake GPUs: indices
    EXPECT_EQ(env["NVIDIA_VISIBLE_DEVICES"], "0,1,2,3");
    EXPECT_EQ(env["TESSERA_JOB_ID"], std::to_string(id));
    EXPECT_EQ(env["TESSERA_ATTEMPT"], "1");
    EXPECT_EQ(env["FOO"], "bar baz");
    EXPECT_FALSE(env["TESSERA_CHECKPOINT_DIR"].empty());
    EXPECT_TRUE(std::filesystem::is_directory(env["TESSERA_CHECKPOINT_DIR"]));
    EXPECT_EQ(env.count("TESSERA_RESUME_FROM"), 0u);
    EXPECT_EQ(env.count("TESSERA_TOKEN"), 0u);  // the agent's own environment stays out
    ports.insert(env["MASTER_PORT"]);
    nodes.insert(env["TESSERA_NODE"]);
    EXPECT_GT(std::atoi(env["MASTER_PORT"].c_str()), 0);
  }
  EXPECT_EQ(ports.size(), 1u) << "every rank must get task 0's port";
  EXPECT_EQ(nodes.size(), 2u);
  // Logs: stdout and stderr of each task, fetched through the controller from the node's agent.
  EXPECT_NE(c.logs(id, 1).find("hello from rank 1"), std::string::npos) << c.logs(id, 1);
  EXPECT_NE(c.logs(id, 0).find("oops"), std::string::npos);
  auto r = c.server.get("/api/v1/jobs/" + std::to_string(id) + "/logs?task=7", c.server.admin_token());
  EXPECT_EQ(r.status, 400) << r.raw;
  // The CLI verb.
  const std::string cmd = std::string(TESSERA_BINARY) + " logs " + std::to_string(id) + " --task 1 --server http://127.0.0.1:" +
                          std::to_string(c.server.port()) + " --token " + c.server.admin_token() + " > " + out + "/cli.txt 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << read_file(out + "/cli.txt");
  EXPECT_NE(read_file(out + "/cli.txt").find("hello from rank 1"), std::string::npos);
  // Following: `tessera logs -f` started before the job runs prints every line and returns at its end.
  const int64_t slow = c.submit(Json{{"name", "slow"}, {"queue", "default"}, {"resources", {{"gpus", 1}}},
                                     {"command", {"/bin/sh", "-c", "for i in 1 2 3; do echo line $i; sleep 0.3; done"}}});
  const std::string follow = std::string(TESSERA_BINARY) + " logs " + std::to_string(slow) + " -f --server http://127.0.0.1:" +
                             std::to_string(c.server.port()) + " --token " + c.server.admin_token() + " > " + out + "/follow.txt 2>&1";
  EXPECT_EQ(std::system(follow.c_str()), 0) << read_file(out + "/follow.txt");
  EXPECT_EQ(read_file(out + "/follow.txt"), "line 1\nline 2\nline 3\n");
  EXPECT_EQ(c.job(slow).value("state", ""), "succeeded");
  // Its end event carries the measured utilisation of its GPU (fake GPUs: busy while it runs).
  double util = -1;
  const Json slow_job = c.job(slow);
  for (const Json& e : slow_job["events"])
    if (e["kind"] == "succeeded") util = e["detail"].value("gpu_util_pct", -1.0);
  // Allocated from placement on; busy once the process runs (the start takes up to one heartbeat).
  EXPECT_GT(util, 50.0) << c.job(slow).dump(2) << c.agent_output();
  EXPECT_LE(util, 100.0);
  // Utilisation reaches the nodes view.
  auto nodes_view = c.server.get("/api/v1/nodes", c.server.admin_token()).body;
  EXPECT_TRUE(nodes_view["nodes"][0]["gpus"][0].contains("utilization_pct"));
  std::filesystem::remove_all(out);
}

TEST(Agents, FailedTaskFailsTheJobAndCancelKillsTheProcessTree) {
  Cluster c(1);
  ASSERT_TRUE(c.all_ready(1)) << c.agent_output();
  const int64_t bad = c.submit(Json{{"name", "bad"}, {"queue", "default"}, {"resources", {{"gpus", 1}}},
                                    {"command", {"/bin/sh", "-c", "exit 3"}}});
  ASSERT_TRUE(c.wait_state(bad, "failed", 20)) << c.job(bad).dump(2);
  EXPECT_EQ(c.job(bad).value("exit_code", 0), 3);
  const int64_t missing = c.submit(Json{{"name", "missing"}, {"queue", "default"}, {"resources", {{"gpus", 1}}},
                                        {"command", {"no-such-program-xyz"}}});
  ASSERT_TRUE(c.wait_state(missing, "failed", 20));
  EXPECT_NE(c.logs(missing, 0).find("no-such-program-xyz"), std::string::npos) << c.logs(missing, 0);

  const std::string out = task_writable_dir("tessera-cancel");
  const int64_t id = c.submit(Json{{"name", "tree"}, {"queue", "default"}, {"resources", {{"gpus", 1}}},
                                   {"command", {"/bin/sh", "-c", "sleep 1000 & echo $! > " + out + "/child; trap '' TERM; sleep 1000"}}});
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(out + "/child"); }, 20)) << c.agent_output();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const pid_t child = std::atoi(read_file(out + "/child").c_str());
  ASSERT_GT(child, 1);
  ASSERT_EQ(::kill(child, 0), 0);
  ASSERT_EQ(c.server.post("/api/v1/jobs/" + std::to_string(id) + "/cancel", c.server.admin_token(), Json::object()).status, 200);
  // TERM is ignored by the shell: after the agent's 3 s grace, KILL takes the whole group.
  EXPECT_TRUE(eventually([&] { return c.agents[0]->task_pids().empty(); }, 15)) << c.agent_output();
  EXPECT_TRUE(eventually([&] {
    std::ifstream st("/proc/" + std::to_string(child) + "/stat");
    std::string s((std::istreambuf_iterator<char>(st)), std::istreambuf_iterator<char>());
    return s.empty() || s.find(") Z") != std::string::npos;  // gone, or a zombie nobody reaps here
  }, 10));
  std::filesystem::remove_all(out);
}

TEST(Agents, GpusOfACancelledJobStayHeldUntilItsProcessesAreGone) {
  Cluster c(1);
  ASSERT_TRUE(c.all_ready(1)) << c.agent_output();
  // Ignores TERM: only the KILL after the agent's 3 s stop grace ends it. It says when its trap is
  // set: a TERM that came before would end it at once (a loaded machine showed that race).
  const std::string out = task_writable_dir("tessera-stubborn");
  const int64_t stubborn =
      c.submit(Json{{"name", "stubborn"}, {"queue", "default"}, {"resources", {{"gpus", 4}}},
                    {"command", {"/bin/sh", "-c", "trap '' TERM; touch " + out + "/trapped; sleep 1000 & wait; sleep 1000"}}});
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(out + "/trapped"); }, 20)) << c.agent_output();
  ASSERT_FALSE(c.agents[0]->task_pids().empty()) << c.agent_output();
  ASSERT_EQ(c.server.post("/api/v1/jobs/" + std::to_string(stubborn) + "/cancel", c.server.admin_token(), Json::object()).status, 200);
  const int64_t next = c.submit(Json{{"name", "next"}, {"queue", "default"}, {"resources", {{"gpus", 4}}},
                                     {"command", {"/bin/sh", "-c", "echo started"}}});
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_FALSE(c.agents[0]->task_pids().empty()) << "still in its stop grace";
  EXPECT_EQ(c.job(next).value("state", ""), "pending") << "its GPUs are still held by the stopping process";
  ASSERT_TRUE(c.wait_state(next, "succeeded", 20)) << c.job(next).dump(2) << c.agent_output();
  EXPECT_TRUE(c.agents[0]->task_pids().empty());
  std::filesystem::remove_all(out);
}

TEST(Agents, ControllerRestartLosesNothingAndStartsNothingTwice) {
  Cluster c(2);
  ASSERT_TRUE(c.all_ready(2)) << c.agent_output();
  const std::string out = task_writable_dir("tessera-restart");
  const int64_t id = c.submit(Json{{"name", "steady"}, {"queue", "default"}, {"tasks", 2}, {"resources", {{"gpus", 4}}},
                                   {"command", {"/bin/sh", "-c", "echo \"$TESSERA_ATTEMPT $RANK\" >> " + out +
                                                                     "/starts; sleep 6; echo done"}}});
  ASSERT_TRUE(eventually([&] { return lines_of(out + "/starts").size() == 2; }, 20)) << c.agent_output();
  // Fake GPUs report utilisation from what runs: the job's GPUs are busy, the third node's idle.
  EXPECT_TRUE(eventually([&] {
    const Json view = c.server.get("/api/v1/nodes", c.server.admin_token()).body;
    int busy = 0;
    for (const Json& n : view["nodes"])
      for (const Json& g : n["gpus"]) busy += g["utilization_pct"] == 100;
    return busy == 8;
  }, 5)) << c.server.get("/api/v1/nodes", c.server.admin_token()).raw;
  ASSERT_EQ(c.server.kill(SIGKILL) >= 0, true);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  ASSERT_TRUE(c.server.restart());
  ASSERT_TRUE(c.wait_state(id, "succeeded", 30)) << c.job(id).dump(2) << c.agent_output();
  const Json j = c.job(id);
  EXPECT_EQ(j.value("attempt", 0), 1);
  EXPECT_EQ(j.value("restarts", -1), 0);
  auto starts = lines_of(out + "/starts");
  std::sort(starts.begin(), starts.end());
  EXPECT_EQ(starts, (std::vector<std::string>{"1 0", "1 1"}));
  std::filesystem::remove_all(out);
}

TEST(Agents, SilentAgentMakesItsNodeNotReadyAndTheJobRestartsElsewhere) {
  Cluster c(2);
  ASSERT_TRUE(c.all_ready(2)) << c.agent_output();
  // The first attempt would run long; the restarted one finishes at once.
  const int64_t id = c.submit(Json{{"name", "mover"}, {"queue", "default"}, {"resources", {{"gpus", 4}}},
                                   {"restart", {{"max_restarts", 2}, {"backoff", 0}}},
                                   {"command", {"/bin/sh", "-c", "if [ $TESSERA_ATTEMPT = 1 ]; then sleep 60; fi; echo finished on $TESSERA_NODE"}}});
  ASSERT_TRUE(c.wait_state(id, "running", 20));
  const std::string first = c.job(id)["nodes"][0];
  ASSERT_TRUE(eventually([&] { return !c.agent_of(first)->task_pids().empty(); }, 10));  // the task runs
  c.agent_of(first)->kill(SIGKILL);
  EXPECT_TRUE(eventually([&] {
    const Json view = c.server.get("/api/v1/nodes", c.server.admin_token()).body;
    for (const Json& n : view["nodes"])
      if (n["name"] == first) return n["agent"] == "not-ready";
    return false;
  }, 10)) << c.server.get("/api/v1/nodes", c.server.admin_token()).raw << c.job(id).dump(2);
  ASSERT_TRUE(c.wait_state(id, "succeeded", 30)) << c.job(id).dump(2) << c.agent_output();
  const Json j = c.job(id);
  EXPECT_EQ(j.value("restarts", 0), 1);
  EXPECT_NE(std::string(j["last_nodes"][0]), first);
  EXPECT_TRUE(has_event(j, "lost"));
  EXPECT_NE(c.logs(id, 0).find("finished on"), std::string::npos);
  // The killed agent's watchdog killed its task at once (the restart waited for the task lease, so
  // the two attempts never ran together). A new agent on that node finds nothing left and is ready.
  AgentProcess* dead = c.agent_of(first);
  EXPECT_NE(dead->output().find("event=watchdog_cleanup"), std::string::npos) << dead->output();
  EXPECT_NE(dead->output().find("leftover_task_killed"), std::string::npos) << dead->output();
  dead->start(c.server.port(), c.server.admin_token());
  EXPECT_TRUE(eventually([&] { return dead->task_pids().empty(); }, 10)) << dead->output();
  EXPECT_TRUE(c.all_ready(2));
}

TEST(Agents, MigLayoutIsAppliedOnTheNodeBeforeTheTaskStarts) {
  Cluster c(0);
  AgentProcess& mig = c.add_agent("mig", "fake:1xA100-80GB,mig=on");
  ASSERT_TRUE(c.all_ready(1)) << c.agent_output();
  const std::string out = task_writable_dir("tessera-mig");
  const int64_t id = c.submit(Json{{"name", "mig"}, {"queue", "default"}, {"resources", {{"mig", "3g.40gb"}}},
                                   {"command", {"/bin/sh", "-c", "env | sort > " + out + "/env"}}});
  ASSERT_TRUE(c.wait_state(id, "succeeded", 30)) << c.job(id).dump(2) << c.agent_output();
  EXPECT_NE(mig.output().find("event=mig_applied node=mig gpu=0"), std::string::npos) << mig.output();
  auto env = read_env_file(out + "/env");
  EXPECT_EQ(env["TESSERA_MIG_PROFILE"], "3g.40gb");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "0");
  std::filesystem::remove_all(out);
}

TEST(Agents, DiscoverPrintsTheInventoryWithoutAController) {
  const std::string dir = make_temp_dir("tessera-discover");
  const std::string cmd = std::string(TESSERA_BINARY) + " agent --discover --node n1 --gpus fake:4xA100-80GB,pcie-pairs,mig=3g.40gb@0+3g.40gb@4 > " +
                          dir + "/out.txt 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_file(dir + "/out.txt");
  const std::string text = read_file(dir + "/out.txt");
  EXPECT_NE(text.find("source fake"), std::string::npos) << text;
  EXPECT_NE(text.find("GPU-fake-"), std::string::npos);
  EXPECT_NE(text.find("3g.40gb"), std::string::npos);
  EXPECT_NE(text.find("PIX"), std::string::npos);  // GPUs 0 and 1 share a PCIe switch
  const std::string jcmd = std::string(TESSERA_BINARY) + " agent --discover --json --node n1 --gpus fake:4xA100-80GB,pcie-pairs,mig=3g.40gb@0+3g.40gb@4 > " +
                           dir + "/out.json 2>&1";
  ASSERT_EQ(std::system(jcmd.c_str()), 0);
  const Json j = Json::parse(read_file(dir + "/out.json"), nullptr, false);
  ASSERT_TRUE(j.is_object()) << read_file(dir + "/out.json");
  EXPECT_EQ(j["gpus"].size(), 4u);
  EXPECT_EQ(j["gpus"][0]["instances"].size(), 2u);
  EXPECT_EQ(j["gpus"][0]["instances"][1]["start"], 4);
  // A bad spec names the bad part and the fix.
  const std::string bad = std::string(TESSERA_BINARY) + " agent --discover --gpus fake:4xA100-80GB,mig=3g.40gb@2 > " + dir + "/bad.txt 2>&1";
  EXPECT_NE(std::system(bad.c_str()), 0);
  EXPECT_NE(read_file(dir + "/bad.txt").find("3g.40gb@2"), std::string::npos) << read_file(dir + "/bad.txt");
  std::filesystem::remove_all(dir);
}

TEST(Agents, TopologyThatDisagreesWithTheConfigIsReported) {
  Cluster c(0);
  AgentProcess& a = c.agents.emplace_back(std::make_unique<AgentProcess>("gpu-0", "fake:4xH100-80GB-SXM")).operator*();
  a.start(c.server.port(), c.server.admin_token(), {"--topology", "leaf=leaf-9"});
  ASSERT_TRUE(c.all_ready(1)) << a.output();
  EXPECT_TRUE(eventually([&] { return a.output().find("leaf=leaf-9 (config: leaf-0)") != std::string::npos; }, 5)) << a.output();
}

// ---- PyTorch ------------------------------------------------------------------------------------

bool torch_available() { return std::system((kPython + " -c 'import torch.distributed' 2>/dev/null").c_str()) == 0; }

// A TCP port on 127.0.0.1 that nothing listens on now (the kernel's pick for port 0).
int unused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) ::close(fd);
  return port;
}

// The gang's result without any interruption (4 local processes, no Tessera), for comparison; a
// rank that cannot rendezvous is killed after 5 minutes instead of hanging the test.
Json reference_run(int steps, const std::string& dir) {
  const int port = unused_port();
  EXPECT_GT(port, 0);
  std::string cmd = "cd " + dir + " && for r in 0 1 2 3; do MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) +
                    " WORLD_SIZE=4 RANK=$r "
                    "LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 TESSERA_CHECKPOINT_DIR=" + dir + " GLOO_SOCKET_IFNAME=lo timeout 300 " + kPython +
                    " " + kDdp + " --steps " + std::to_string(steps) + " --out " + dir + "/ref.json > ref-$r.log 2>&1 & done; wait";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return Json::parse(read_file(dir + "/ref.json"), nullptr, false);
}

Json ddp_job(const std::string& name, int steps, const std::string& dir, const std::string& klass) {
  return Json{{"name", name},
              {"queue", "default"},
              {"priority_class", klass},
              {"tasks", 4},
              {"resources", {{"gpus", 2}, {"cpu", 1}, {"memory", "2Gi"}}},
              {"checkpoint", {{"interval", 600}, {"grace", 60}, {"dir", dir + "/ckpt"}}},
              {"restart", {{"max_restarts", 3}, {"backoff", 0}}},
              {"env", {{"GLOO_SOCKET_IFNAME", "lo"}, {"OMP_NUM_THREADS", "1"}}},
              {"command", {kPython, kDdp, "--steps", std::to_string(steps), "--step-seconds", "0.1", "--checkpoint-every", "10",
                           "--out", dir + "/out.json", "--starts", dir + "/starts"}}};
}

TEST(AgentsTorch, GangTrainsPreemptedWithCheckpointResumesAndSurvivesAnAgentKill) {
  ASSERT_TRUE(torch_available()) << "PyTorch is missing: install Debian's python3-torch (scripts/setup.sh does)";
  Cluster c(3);
  ASSERT_TRUE(c.all_ready(3)) << c.agent_output();
  const std::string dir = task_writable_dir("tessera-ddp");
  const int steps = 60;
  const Json ref = reference_run(steps, dir);
  ASSERT_TRUE(ref.is_object()) << read_file(dir + "/ref-0.log");

  // 1. A 2-node × 2-task gang (4 ranks of 2 GPUs on nodes of 4) trains with gloo and all-reduces.
  const int64_t id = c.submit(ddp_job("ddp", steps, dir, "preemptible"));
  ASSERT_TRUE(eventually([&] { return c.logs(id, 0).find("step 10 ") != std::string::npos; }, 60))
      << c.job(id).dump(2) << c.logs(id, 0) << c.agent_output();
  Json j = c.job(id);
  ASSERT_EQ(j["nodes"].size(), 2u) << j.dump(2);

  // 2. A higher class needs every GPU: the gang checkpoints (ack), stops, requeues.
  const int64_t urgent = c.submit(Json{{"name", "urgent"}, {"queue", "default"}, {"priority_class", "production-training"},
                                       {"tasks", 3}, {"resources", {{"gpus", 4}}}, {"command", {"/bin/sh", "-c", "sleep 1"}}});
  ASSERT_TRUE(c.wait_state(urgent, "succeeded", 90)) << c.job(id).dump(2) << c.job(urgent).dump(2) << c.agent_output();
  j = c.job(id);
  EXPECT_TRUE(has_event(j, "checkpoint_requested")) << j.dump(2);
  EXPECT_TRUE(has_event(j, "checkpoint_acknowledged")) << j.dump(2);
  bool checkpointed_preemption = false;
  for (const Json& e : j["events"])
    if (e["kind"] == "preempted" && e["detail"].value("checkpointed", false)) checkpointed_preemption = true;
  EXPECT_TRUE(checkpointed_preemption) << j.dump(2);

  // 3. It resumes from its checkpoint; once training again, one of its agents is killed.
  ASSERT_TRUE(eventually([&] {
    const Json k = c.job(id);
    return k.value("attempt", 0) == 2 && c.logs(id, 0).find("resumed from") != std::string::npos;
  }, 60)) << c.job(id).dump(2) << c.agent_output();
  j = c.job(id);
  const std::string victim = j["nodes"][0];
  c.agent_of(victim)->kill(SIGKILL);

  // 4. The node goes NotReady; the job restarts on the remaining nodes and finishes.
  ASSERT_TRUE(c.wait_state(id, "succeeded", 120)) << c.job(id).dump(2) << c.agent_output();
  j = c.job(id);
  EXPECT_GE(j.value("restarts", 0), 1) << j.dump(2);
  EXPECT_GE(j.value("attempt", 0), 3);
  for (const Json& n : j["last_nodes"]) EXPECT_NE(n.get<std::string>(), victim);
  const Json result = Json::parse(read_file(dir + "/out.json"), nullptr, false);
  ASSERT_TRUE(result.is_object());
  EXPECT_EQ(result["steps"], steps);
  EXPECT_EQ(result["world_size"], 4);
  EXPECT_FALSE(result["resumed_from"].get<std::string>().empty());
  // Resuming from checkpoints reproduces the uninterrupted run exactly (same data, same order).
  EXPECT_NEAR(result["weight"].get<double>(), ref["weight"].get<double>(), 1e-6);
  EXPECT_NEAR(result["bias"].get<double>(), ref["bias"].get<double>(), 1e-6);
  // Each attempt started each rank exactly once.
  std::map<std::string, int> per_attempt_rank;
  for (const std::string& l : lines_of(dir + "/starts")) {
    std::istringstream in(l);
    std::string job, attempt, rank;
    in >> job >> attempt >> rank;
    ++per_attempt_rank[attempt + "/" + rank];
  }
  for (const auto& [k, n] : per_attempt_rank) EXPECT_EQ(n, 1) << k;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera::testing
