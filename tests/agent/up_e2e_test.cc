// `tessera up` end to end: the real binary starts the controller and a local agent, prints how to
// use it, runs a submitted job as a real process, stops cleanly on Ctrl-C and resumes its state.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "agent_process.h"

namespace tessera::testing {
namespace {

class UpProcess {
 public:
  explicit UpProcess(std::string data) : data_(std::move(data)) {}
  ~UpProcess() { stop(SIGKILL); }

  // Starts `tessera up` and waits for its banner; returns the API port (0 on failure).
  int start() {
    out_ = data_ + ".out";
    std::error_code ec;
    std::filesystem::remove(out_, ec);
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = ::open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      execl(TESSERA_BINARY, TESSERA_BINARY, "up", "--data", data_.c_str(), "--listen", "127.0.0.1:0", "--node", "local", "--log-level", "info",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    int port = 0;
    eventually([&] {
      std::smatch m;
      const std::string text = output();
      static const std::regex up("Tessera is up: http://127\\.0\\.0\\.1:([0-9]+)");
      if (std::regex_search(text, m, up)) port = std::stoi(m[1]);
      return port > 0;
    }, 20);
    return port;
  }
  int stop(int sig) { return signal_and_wait(pid_, sig); }
  std::string output() const { return read_file(out_); }

 private:
  std::string data_, out_;
  pid_t pid_ = -1;
};

HttpReply call(int port, const std::string& method, const std::string& path, const std::string& token, const Json& body = {}) {
  return http_call(port, method, path, token, body.dump());
}

TEST(Up, StartsAWorkingClusterStopsCleanlyAndResumes) {
  const std::string root = make_temp_dir("tessera-up");
  const std::string data = root + "/tessera-data";
  UpProcess up(data);
  int port = up.start();
  ASSERT_GT(port, 0) << up.output();
  const std::string text = up.output();
  // Without NVML it says that it declares a fake node.
  if (text.find("No NVIDIA GPU found") != std::string::npos) {
    EXPECT_NE(text.find("FAKE"), std::string::npos) << text;
  }
  std::string token = read_file(data + "/admin.token");
  while (!token.empty() && token.back() == '\n') token.pop_back();
  ASSERT_FALSE(token.empty());
  EXPECT_NE(text.find("Admin token: " + token), std::string::npos) << text;
  EXPECT_NE(text.find("tessera submit"), std::string::npos);
  EXPECT_NE(text.find("tessera logs"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(data + "/cluster.yaml"));

  auto sub = call(port, "POST", "/api/v1/jobs", token,
                  Json{{"name", "hello"}, {"queue", "default"}, {"resources", {{"gpus", 1}}},
                       {"command", {"/bin/sh", "-c", "echo hello from $CUDA_VISIBLE_DEVICES as $(id -u); cat " + data +
                                                         "/admin.token || echo admin-token-denied"}}});
  ASSERT_EQ(sub.status, 201) << sub.raw;
  const std::string path = "/api/v1/jobs/" + std::to_string(sub.body["id"].get<int64_t>());
  ASSERT_TRUE(eventually([&] { return call(port, "GET", path, token).body.value("state", "") == "succeeded"; }, 30))
      << call(port, "GET", path, token).raw << up.output();
  const std::string hello = call(port, "GET", path + "/logs", token).raw;
  EXPECT_NE(hello.find("hello from 0"), std::string::npos) << hello;
  if (::geteuid() == 0) {  // a root cluster runs its tasks as nobody: the co-located admin token is out of reach
    EXPECT_NE(hello.find("hello from 0 as 65534\n"), std::string::npos) << hello;
    EXPECT_NE(hello.find("admin-token-denied"), std::string::npos) << hello;
    EXPECT_EQ(hello.find(token), std::string::npos) << hello;
  }
  // A long job is running when Ctrl-C comes.
  auto longer = call(port, "POST", "/api/v1/jobs", token,
                     Json{{"name", "long"}, {"queue", "default"}, {"resources", {{"gpus", 1}}}, {"command", {"sleep", "300"}}});
  ASSERT_EQ(longer.status, 201);
  const std::string long_path = "/api/v1/jobs/" + std::to_string(longer.body["id"].get<int64_t>());
  ASSERT_TRUE(eventually([&] { return call(port, "GET", long_path, token).body.value("state", "") == "running"; }, 20));

  const int status = up.stop(SIGINT);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << up.output();
  EXPECT_NE(up.output().find("Stopping"), std::string::npos);

  // Again: the same state (the finished job is there; the stopped one is requeued and runs again).
  port = up.start();
  ASSERT_GT(port, 0) << up.output();
  EXPECT_EQ(call(port, "GET", path, token).body.value("state", ""), "succeeded");
  EXPECT_TRUE(eventually([&] {
    const Json j = call(port, "GET", long_path, token).body;
    return j.value("state", "") == "running" && j.value("attempt", 0) >= 2;
  }, 40)) << call(port, "GET", long_path, token).raw << up.output();
  up.stop(SIGINT);
  std::filesystem::remove_all(root);
  std::error_code ec;
  std::filesystem::remove_all(up_task_dir(data), ec);
}


// Ctrl-C is a planned stop (issue 22): a job that checkpoints saves and is requeued, a pending job
// stays pending (nothing starts during the stop), and on the next `up` both complete with no restart,
// failure or preemption counted.
TEST(Up, CtrlCIsAPlannedStopAndTheNextUpFinishesTheJobs) {
  const std::string root = make_temp_dir("tessera-up-plan");
  const std::string data = root + "/tessera-data";
  UpProcess up(data);
  int port = up.start();
  ASSERT_GT(port, 0) << up.output();
  std::string token = read_file(data + "/admin.token");
  while (!token.empty() && token.back() == '\n') token.pop_back();
  // Saves on SIGUSR1 (.ack names the checkpoint) and exits; resumed, it finishes at once.
  const std::string script =
      "if [ -n \"$TESSERA_RESUME_FROM\" ]; then echo resumed from $(cat $TESSERA_RESUME_FROM); exit 0; fi; "
      "trap 'echo step-7 > $TESSERA_CHECKPOINT_DIR/state; echo $TESSERA_CHECKPOINT_DIR/state > $TESSERA_CHECKPOINT_DIR/.ack.tmp; "
      "mv $TESSERA_CHECKPOINT_DIR/.ack.tmp $TESSERA_CHECKPOINT_DIR/.ack; exit 0' USR1; "
      "echo started; while true; do sleep 0.2; done";
  auto ck = call(port, "POST", "/api/v1/jobs", token,
                 Json{{"name", "ckpt"}, {"queue", "default"}, {"resources", {{"gpus", 1}}},
                      {"checkpoint", {{"interval", 600}, {"grace", 20}}}, {"restart", {{"max_restarts", 0}}},
                      {"command", {"/bin/sh", "-c", script}}});
  ASSERT_EQ(ck.status, 201) << ck.raw;
  const std::string ck_path = "/api/v1/jobs/" + std::to_string(ck.body["id"].get<int64_t>());
  ASSERT_TRUE(eventually([&] { return call(port, "GET", ck_path, token).body.value("state", "") == "running"; }, 20));
  // Its output, not the API's "has not started yet" (the trap is set before it prints).
  ASSERT_TRUE(eventually([&] { return call(port, "GET", ck_path + "/logs", token).raw.rfind("started\n", 0) == 0; }, 20));
  // Pending behind it: it asks all the node's GPUs.
  const int64_t gpus = call(port, "GET", "/api/v1/nodes", token).body["nodes"][0]["gpus"].size();
  auto wide = call(port, "POST", "/api/v1/jobs", token,
                   Json{{"name", "wide"}, {"queue", "default"}, {"resources", {{"gpus", gpus}}},
                        {"restart", {{"max_restarts", 0}}}, {"command", {"true"}}});
  ASSERT_EQ(wide.status, 201) << wide.raw;
  const std::string wide_path = "/api/v1/jobs/" + std::to_string(wide.body["id"].get<int64_t>());
  EXPECT_EQ(call(port, "GET", wide_path, token).body.value("state", ""), "pending");

  const int status = up.stop(SIGINT);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << up.output();
  EXPECT_NE(up.output().find("planned stop"), std::string::npos) << up.output();
  const std::string first_run = up.output();

  port = up.start();
  ASSERT_GT(port, 0) << up.output();
  for (const std::string& path : {ck_path, wide_path})
    EXPECT_TRUE(eventually([&] { return call(port, "GET", path, token).body.value("state", "") == "succeeded"; }, 40))
        << call(port, "GET", path, token).raw << first_run;
  EXPECT_NE(call(port, "GET", ck_path + "/logs", token).raw.find("resumed from step-7"), std::string::npos)
      << call(port, "GET", ck_path + "/logs", token).raw;
  const Json j = call(port, "GET", ck_path, token).body;
  EXPECT_EQ(j.value("restarts", -1), 0) << j.dump(2);
  EXPECT_EQ(j.value("preemptions", -1), 0) << j.dump(2);
  std::set<std::string> kinds;
  for (const Json& e : j["events"]) kinds.insert(e.value("kind", ""));
  EXPECT_TRUE(kinds.count("interrupted")) << j["events"].dump(2);
  for (const char* bad : {"preempted", "lost", "failed"}) EXPECT_FALSE(kinds.count(bad)) << bad << j["events"].dump(2);
  const Json w = call(port, "GET", wide_path, token).body;
  EXPECT_EQ(w.value("attempt", 0), 1) << "the pending job did not start during the stop: " << w.dump(2);
  up.stop(SIGINT);
  std::filesystem::remove_all(root);
  std::error_code ec;
  std::filesystem::remove_all(up_task_dir(data), ec);
}

}  // namespace
}  // namespace tessera::testing
