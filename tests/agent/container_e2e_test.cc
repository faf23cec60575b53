// End to end, jobs in containers (docs/containers.md): a real `tessera server`, real `tessera agent`s
// with fake GPUs, and podman with runc running the tasks. The images are built here offline: a
// busybox one, and one whose /usr is the host's, bound read-only, for Debian's python3-torch (the
// torch test). Podman's store and config are private to the test (CONTAINERS_CONF,
// CONTAINERS_STORAGE_CONF, inherited by the agents). Skipped, saying why, when not root or when
// podman cannot run a container on this machine.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "agent_process.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;

const std::string kBusybox = "localhost/tessera-test-busybox:1";
const std::string kHostUsr = "localhost/tessera-test-hostusr:1";

int sh(const std::string& cmd, std::string* out = nullptr) {
  const std::string file = make_temp_dir("tessera-sh") + "/out";
  const int rc = std::system((cmd + " > " + file + " 2>&1").c_str());
  if (out) *out = read_file(file);
  fs::remove_all(fs::path(file).parent_path());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// Podman's private store and config for this process, and the two test images (built once).
struct PodmanEnv {
  std::string dir, why_not;
  PodmanEnv() {
    if (::geteuid() != 0) {
      why_not = "needs root: podman runs containers for a root agent here";
      return;
    }
    dir = make_temp_dir("tessera-podman");
    ::chmod(dir.c_str(), 0711);
    std::ofstream(dir + "/containers.conf") << "[engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\n"
                                               "events_logger = \"file\"\n[containers]\n"
                                               "default_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]\n"
                                               "netns = \"host\"\n";
    std::ofstream(dir + "/storage.conf") << "[storage]\ndriver = \"vfs\"\ngraphroot = \"" << dir << "/root\"\nrunroot = \"" << dir
                                         << "/run\"\n";
    ::setenv("CONTAINERS_CONF", (dir + "/containers.conf").c_str(), 1);
    ::setenv("CONTAINERS_STORAGE_CONF", (dir + "/storage.conf").c_str(), 1);
    std::string out;
    if (sh("podman version", &out) != 0) {
      why_not = "podman does not run here (install podman and runc: scripts/setup.sh): " + out.substr(0, 300);
      return;
    }
    // busybox: /bin/busybox and its applets.
    const std::string bb = dir + "/bb";
    std::string applets;
    for (const char* a : {"sh", "id", "ls", "cat", "echo", "tr", "head", "sleep", "setsid", "cut", "test", "[", "touch", "mkdir",
                          "env", "true", "false", "grep", "wc", "stat"})
      applets += std::string(" ") + a;
    if (sh("set -e; mkdir -p " + bb + "/bin " + bb + "/etc " + bb + "/proc " + bb + "/sys " + bb + "/dev " + bb + "/tmp; chmod 1777 " +
               bb + "/tmp; cp $(command -v busybox) " + bb + "/bin/busybox; cd " + bb + "/bin; for a in" + applets +
               "; do ln -s busybox $a; done; printf 'root:x:0:0::/:/bin/sh\\nnobody:x:65534:65534::/:/bin/sh\\n' > " + bb +
               "/etc/passwd; tar -C " + bb + " -cf " + dir + "/bb.tar . && podman import " + dir + "/bb.tar " + kBusybox,
           &out) != 0) {
      why_not = "cannot build the busybox image (busybox-static installed?): " + out.substr(0, 500);
      return;
    }
    // The host's /usr (bound read-only by the job): merged-/usr links, the loader cache, alternatives.
    const std::string hu = dir + "/hostusr";
    if (sh("set -e; mkdir -p " + hu + "/usr " + hu + "/etc " + hu + "/proc " + hu + "/sys " + hu + "/dev " + hu + "/tmp; chmod 1777 " +
               hu + "/tmp; for d in bin lib lib64 sbin; do ln -s usr/$d " + hu + "/$d; done; cp /etc/ld.so.cache " + hu +
               "/etc/; cp -a /etc/alternatives " + hu + "/etc/; cp " + bb + "/etc/passwd " + hu + "/etc/; tar -C " + hu + " -cf " +
               dir + "/hu.tar . && podman import " + dir + "/hu.tar " + kHostUsr,
           &out) != 0) {
      why_not = "cannot build the host-/usr image: " + out.substr(0, 500);
      return;
    }
  }
  ~PodmanEnv() {
    if (dir.empty()) return;
    std::string ignored;
    sh("podman rm --all --force --time 0", &ignored);
    sh("podman rmi --all --force", &ignored);
    fs::remove_all(dir);
  }
};

PodmanEnv& podman_env() {
  static PodmanEnv env;
  return env;
}

// Containers that carry label KEY=VALUE (running or not).
std::vector<std::string> containers_with(const std::string& label) {
  std::string out;
  sh("podman ps --all --quiet --filter label=" + label, &out);
  std::vector<std::string> ids;
  std::istringstream in(out);
  for (std::string id; in >> id;) ids.push_back(id);
  return ids;
}

// Processes whose command line starts with `prefix` (e.g. "sleep 4242": not the shell that started it).
int processes_with(const std::string& prefix) {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = read_file(e.path().string() + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    n += cmd.rfind(prefix, 0) == 0;
  }
  return n;
}

// The server (with storage declared in its config) and agents with fake GPUs.
class Containers : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!podman_env().why_not.empty()) GTEST_SKIP() << podman_env().why_not;
    base = task_writable_dir("tessera-ctr");
    for (const char* d : {"/data", "/vol", "/shared", "/ckpt", "/out"}) {
      fs::create_directories(base + d);
      ::chmod((base + d).c_str(), 0777);
    }
    std::ofstream(base + "/data/hello.txt") << "hello from the dataset\n";
    const std::string config = base + "/cluster.yaml";
    std::ofstream(config) << "name: containers\nlevels: [leaf]\n"
                             "pools:\n  - {name: far, kind: owned}\n"
                             "nodes:\n"
                             "  - {name: box, count: 3, gpu_model: H100-80GB-SXM, gpus: 4, cpu: 64000, memory: 262144, path: [leaf-0]}\n"
                             "  - {name: faraway, count: 1, gpu_model: H100-80GB-SXM, gpus: 4, cpu: 64000, memory: 262144, path: [leaf-1], pool: far}\n"
                             "queues:\n  - {name: default}\n  - {name: team-a}\n  - {name: team-b}\n"
                             "storage:\n"
                             "  checkpoints: " << base << "/ckpt\n"
                             "  host_paths: [/usr, " TESSERA_SOURCE_DIR "/examples, " << base << "/out]\n"
                             "  datasets:\n"
                             "    - {name: images, path: " << base << "/data}\n"
                             "    - {name: far-only, pools: {far: " << base << "/data}}\n"
                             "  volumes:\n"
                             "    - {name: scratch, path: " << base << "/vol, writable: true, queues: [team-a]}\n"
                             "    - {name: shared, path: " << base << "/shared, writable: true}\n";
    server = std::make_unique<ServerProcess>(config);
    server->with_agents({"--heartbeat-interval-ms", "200", "--missed-heartbeats", "8", "--task-lease-ms", "4000"});
    std::string out;
    ASSERT_TRUE(server->start(&out)) << out;
  }
  void TearDown() override {
    agents.clear();
    server.reset();
    if (!base.empty()) fs::remove_all(base);
  }
  AgentProcess& agent(const std::string& node) {
    agents.push_back(std::make_unique<AgentProcess>(node, "fake:4xH100-80GB-SXM,nvswitch"));
    agents.back()->start(server->port(), server->admin_token(), {"--pull", "never", "--cdi-dir", "/var/run/cdi"});
    return *agents.back();
  }
  bool ready(size_t n) {
    return eventually([&] {
      size_t k = 0;
      for (const Json& nd : server->get("/api/v1/nodes", server->admin_token()).body.value("nodes", Json::array()))
        k += nd.value("agent", "") == "ready";
      return k >= n;
    }, 30);
  }
  HttpReply post_job(const Json& spec) { return server->post("/api/v1/jobs", server->admin_token(), spec); }
  int64_t submit(const Json& spec) {
    auto r = post_job(spec);
    EXPECT_EQ(r.status, 201) << r.raw;
    return r.body.value("id", int64_t(0));
  }
  Json job(int64_t id) { return server->get("/api/v1/jobs/" + std::to_string(id), server->admin_token()).body; }
  std::string state(int64_t id) { return job(id).value("state", ""); }
  bool wait_state(int64_t id, const std::string& s, double seconds) {
    return eventually([&] { return state(id) == s; }, seconds);
  }
  std::string logs(int64_t id, int task = 0) {
    return server->get("/api/v1/jobs/" + std::to_string(id) + "/logs?task=" + std::to_string(task), server->admin_token()).raw;
  }
  std::string agent_output() {
    std::string all;
    for (auto& a : agents) all += "--- agent " + a->node() + " ---\n" + a->output();
    return all;
  }
  static Json shell_job(const std::string& name, const std::string& script, Json extra = Json::object()) {
    Json j{{"name", name},
           {"queue", "default"},
           {"resources", {{"gpus", 1}, {"cpu", 1}, {"memory", "256Mi"}}},
           {"container", {{"image", kBusybox}}},
           {"command", {"/bin/sh", "-c", script}}};
    j.update(extra);
    return j;
  }

  std::string base;
  std::unique_ptr<ServerProcess> server;
  std::vector<std::unique_ptr<AgentProcess>> agents;
};

TEST_F(Containers, RunsAsAnUnprivilegedUserWithItsCdiDevicesEnvironmentAndMounts) {
  AgentProcess& a = agent("box-0");
  ASSERT_TRUE(ready(1)) << agent_output();
  const std::string state_dir = a.dir() + "/state";
  const std::string script =
      "echo uid=$(id -u) gid=$(id -g); "
      "for d in $(echo $CUDA_VISIBLE_DEVICES | tr , ' '); do test -c /dev/nvidia$d && echo dev$d=present; done; "
      "test -c /dev/nvidiactl && echo ctl=present; "
      "echo cvd=$CUDA_VISIBLE_DEVICES nvd=$NVIDIA_VISIBLE_DEVICES rank=$RANK world=$WORLD_SIZE ckpt=$TESSERA_CHECKPOINT_DIR "
      "home=$HOME fake=$TESSERA_FAKE_GPUS; "
      "cat /data/hello.txt; "
      "(echo x > /data/new.txt) 2>/dev/null && echo data=writable || echo data=read-only; "
      "echo from-job > /scratch/out-$TESSERA_JOB_ID && echo scratch=written; "
      "echo c > $TESSERA_CHECKPOINT_DIR/probe && echo ckpt=written; "
      "test -e " + state_dir + " && echo state=visible || echo state=hidden; "
      "echo agentpath=$(ls /proc/1/root" + state_dir + " 2>&1 | head -c 80)";
  const int64_t id = submit(shell_job("probe", script,
                                      Json{{"queue", "team-a"},
                                           {"resources", {{"gpus", 2}, {"cpu", 1}, {"memory", "256Mi"}}},
                                           {"checkpoint", {{"dir", "/ckpt"}, {"interval", 600}}},
                                           {"mounts", {{{"dataset", "images"}, {"path", "/data"}},
                                                       {{"volume", "scratch"}, {"path", "/scratch"}, {"read_only", false}}}}}));
  ASSERT_TRUE(wait_state(id, "succeeded", 60)) << job(id).dump(2) << logs(id) << agent_output();
  const std::string log = logs(id);
  EXPECT_NE(log.find("uid=65534 gid=65534"), std::string::npos) << log;  // the agent's default task user, never root
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex("cvd=([0-9]+),([0-9]+) nvd=([0-9,]+) rank=0 world=1 ckpt=/ckpt home=/tessera/scratch fake=1")))
      << log;
  EXPECT_EQ(m[3].str(), m[1].str() + "," + m[2].str());
  EXPECT_NE(log.find("dev" + m[1].str() + "=present"), std::string::npos) << log;
  EXPECT_NE(log.find("dev" + m[2].str() + "=present"), std::string::npos) << log;
  EXPECT_NE(log.find("ctl=present"), std::string::npos) << log;
  EXPECT_NE(log.find("hello from the dataset"), std::string::npos) << log;
  EXPECT_NE(log.find("data=read-only"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(base + "/data/new.txt"));
  EXPECT_NE(log.find("scratch=written"), std::string::npos) << log;
  struct stat st{};
  ASSERT_EQ(::stat((base + "/vol/out-" + std::to_string(id)).c_str(), &st), 0) << log;
  EXPECT_EQ(st.st_uid, 65534u);  // written as the task's user on the host too
  EXPECT_NE(log.find("ckpt=written"), std::string::npos) << log;
  EXPECT_TRUE(fs::exists(base + "/ckpt/job-" + std::to_string(id) + "/probe"));  // the cluster's checkpoint store
  EXPECT_NE(log.find("state=hidden"), std::string::npos) << log;
  EXPECT_EQ(log.find("agent.token"), std::string::npos) << log;
  // The job's detail shows the image and mounts; the container is gone once it ended.
  const Json spec = job(id)["spec"];
  EXPECT_EQ(spec["container"]["image"], kBusybox) << spec.dump(2);
  EXPECT_EQ(spec["mounts"].size(), 2u) << spec.dump(2);
  EXPECT_TRUE(containers_with("tessera.job=" + std::to_string(id)).empty());

  // A user the job names (never root) is who runs inside.
  const int64_t as = submit(shell_job("as-user", "id -u; id -g", Json{{"container", {{"image", kBusybox}, {"user", "1234:2345"}}}}));
  ASSERT_TRUE(wait_state(as, "succeeded", 60)) << job(as).dump(2) << logs(as);
  EXPECT_NE(logs(as).find("1234\n2345"), std::string::npos) << logs(as);
}

TEST_F(Containers, AMemoryHungryTaskIsKilledAtItsLimitAndTheJobSaysSo) {
  // conmon's "oom" marker goes to the agent's state directory, not the directory it was started in.
  const bool marker_before = std::filesystem::exists("oom");
  agent("box-0");
  ASSERT_TRUE(ready(1)) << agent_output();
  const int64_t id = submit(shell_job("hungry", "x=$(head -c 400000000 /dev/zero | tr '\\0' a); echo survived ${#x}",
                                      Json{{"resources", {{"gpus", 1}, {"cpu", 1}, {"memory", "32Mi"}}}}));
  ASSERT_TRUE(wait_state(id, "failed", 60)) << job(id).dump(2) << logs(id) << agent_output();
  const Json j = job(id);
  EXPECT_EQ(j.value("exit_code", 0), 137) << j.dump(2);
  EXPECT_NE(j.dump().find("memory limit of 32 MiB"), std::string::npos) << j.dump(2);
  EXPECT_EQ(logs(id).find("survived"), std::string::npos);
  // (conmon writes it as the container goes, a moment after the job's state: give it 3 s to appear.)
  if (!marker_before) {
    EXPECT_FALSE(eventually([] { return std::filesystem::exists("oom"); }, 3)) << "an oom marker in " << std::filesystem::current_path();
  }
}

TEST_F(Containers, DaemonsAreGoneAfterCancelInAContainerAndAsABareProcess) {
  agent("box-0");
  ASSERT_TRUE(ready(1)) << agent_output();
  const int64_t boxed = submit(shell_job("boxed", "setsid sleep 4242 & sleep 4243"));
  const int64_t bare = submit(Json{{"name", "bare"}, {"queue", "default"}, {"resources", {{"gpus", 1}}},
                                   {"command", {"/bin/sh", "-c", "setsid sleep 4244 & sleep 4245"}}});
  ASSERT_TRUE(eventually([&] { return processes_with("sleep 4242") == 1 && processes_with("sleep 4244") == 1; }, 60))
      << job(boxed).dump(2) << job(bare).dump(2) << agent_output();
  for (int64_t id : {boxed, bare}) EXPECT_EQ(server->post("/api/v1/jobs/" + std::to_string(id) + "/cancel", server->admin_token(), Json::object()).status, 200);
  EXPECT_TRUE(eventually([&] {
    return processes_with("sleep 4242") + processes_with("sleep 4243") + processes_with("sleep 4244") + processes_with("sleep 4245") == 0;
  }, 30)) << agent_output();
  EXPECT_TRUE(eventually([&] { return containers_with("tessera.job=" + std::to_string(boxed)).empty(); }, 10));
  EXPECT_TRUE(wait_state(boxed, "cancelled", 10)) << job(boxed).dump(2);
}

TEST_F(Containers, AKilledAgentLeavesNoContainerAndTheTwoAttemptsNeverOverlap) {
  agent("box-0");
  agent("box-1");
  ASSERT_TRUE(ready(2)) << agent_output();
  // Both attempts append "ATTEMPT UPTIME" to one file every 0.1 s; uptime is the host's clock.
  const int64_t id = submit(shell_job(
      "marker", "while true; do echo \"$TESSERA_ATTEMPT $(cut -d' ' -f1 /proc/uptime)\" >> /shared/marker; sleep 0.1; done",
      Json{{"restart", {{"max_restarts", 2}, {"backoff", 0}}}, {"mounts", {{{"volume", "shared"}, {"path", "/shared"}}}}}));
  ASSERT_TRUE(eventually([&] { return read_file(base + "/shared/marker").size() > 40; }, 60)) << job(id).dump(2) << agent_output();
  const std::string first = job(id)["nodes"][0];
  AgentProcess* victim = nullptr;
  for (auto& a : agents) victim = a->node() == first ? a.get() : victim;
  ASSERT_NE(victim, nullptr);
  victim->kill(SIGKILL);
  // Its watchdog removes its containers at once.
  EXPECT_TRUE(eventually([&] { return containers_with("tessera.attempt=1").empty(); }, 15)) << victim->output();
  // The job restarts on the other node (after the task lease) and writes again.
  ASSERT_TRUE(eventually([&] { return read_file(base + "/shared/marker").find("\n2 ") != std::string::npos; }, 40))
      << job(id).dump(2) << agent_output();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  double last_first = 0, first_second = 1e18;
  for (const std::string& l : [&] {
         std::vector<std::string> v;
         std::istringstream in(read_file(base + "/shared/marker"));
         for (std::string x; std::getline(in, x);) v.push_back(x);
         return v;
       }()) {
    std::istringstream in(l);
    int attempt = 0;
    double t = 0;
    if (!(in >> attempt >> t)) continue;
    if (attempt == 1) last_first = std::max(last_first, t);
    if (attempt == 2) first_second = std::min(first_second, t);
  }
  EXPECT_GT(last_first, 0);
  EXPECT_LT(last_first, first_second) << "the attempts overlapped:\n" << read_file(base + "/shared/marker");
  // Restarted, the agent removes anything its predecessor left and is ready again.
  victim->start(server->port(), server->admin_token(), {"--pull", "never"});
  EXPECT_TRUE(ready(2)) << victim->output();
  EXPECT_TRUE(containers_with("tessera.attempt=1").empty());
  server->post("/api/v1/jobs/" + std::to_string(id) + "/cancel", server->admin_token(), Json::object());
}

TEST_F(Containers, AnAgentThatCannotReachTheControllerFencesItsTasks) {
  agent("box-0");
  ASSERT_TRUE(ready(1)) << agent_output();
  const int64_t id = submit(shell_job(
      "fenced", "while true; do echo \"$TESSERA_ATTEMPT $(cut -d' ' -f1 /proc/uptime)\" >> /shared/marker; sleep 0.1; done",
      Json{{"mounts", {{{"volume", "shared"}, {"path", "/shared"}}}}}));
  ASSERT_TRUE(eventually([&] { return read_file(base + "/shared/marker").size() > 40; }, 60)) << job(id).dump(2) << agent_output();
  // The controller stops answering (SIGSTOP): within the lease (4 s) the agent kills its task.
  ASSERT_EQ(::kill(server->pid(), SIGSTOP), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(5000));
  const size_t size = read_file(base + "/shared/marker").size();
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const size_t later = read_file(base + "/shared/marker").size();
  ::kill(server->pid(), SIGCONT);
  EXPECT_EQ(size, later) << "the task still ran after the lease";
  EXPECT_NE(agent_output().find("event=tasks_fenced"), std::string::npos) << agent_output();
  EXPECT_TRUE(eventually([&] { return containers_with("tessera.job=" + std::to_string(id)).empty(); }, 10));
}

TEST_F(Containers, ErrorsAreClear) {
  agent("box-0");
  ASSERT_TRUE(ready(1)) << agent_output();
  // An image the node does not have: the task fails with podman's word.
  const int64_t id = submit(shell_job("no-image", "true", Json{{"container", {{"image", "localhost/no-such-image:9"}}}}));
  ASSERT_TRUE(wait_state(id, "failed", 60)) << job(id).dump(2) << agent_output();
  EXPECT_NE(job(id).dump().find("image not known"), std::string::npos) << job(id).dump(2);
  // At submit: an unknown dataset, a volume the queue may not use, a host path not allowed, a
  // read-only dataset asked writable.
  auto r = post_job(shell_job("x", "true", Json{{"mounts", {{{"dataset", "nope"}, {"path", "/d"}}}}}));
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_NE(r.raw.find("mounts[0].dataset"), std::string::npos) << r.raw;
  r = post_job(shell_job("x", "true", Json{{"queue", "team-b"}, {"mounts", {{{"volume", "scratch"}, {"path", "/s"}}}}}));
  EXPECT_EQ(r.status, 403) << r.raw;
  EXPECT_NE(r.raw.find("mounts[0].volume"), std::string::npos) << r.raw;
  r = post_job(shell_job("x", "true", Json{{"mounts", {{{"host_path", "/etc"}, {"path", "/e"}}}}}));
  EXPECT_EQ(r.status, 403) << r.raw;
  EXPECT_NE(r.raw.find("mounts[0].host_path"), std::string::npos) << r.raw;
  r = post_job(shell_job("x", "true", Json{{"mounts", {{{"dataset", "images"}, {"path", "/d"}, {"read_only", false}}}}}));
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_NE(r.raw.find("mounts[0].read_only"), std::string::npos) << r.raw;
  r = post_job(shell_job("x", "true", Json{{"container", {{"image", kBusybox}, {"user", "0"}}}}));
  EXPECT_EQ(r.status, 400) << r.raw;
  // A dataset only one pool has: the job waits for that pool's nodes, and says why.
  const int64_t far = submit(shell_job("far", "true", Json{{"mounts", {{{"dataset", "far-only"}, {"path", "/d"}}}}}));
  ASSERT_TRUE(eventually([&] { return job(far)["pending"].is_object(); }, 10)) << job(far).dump(2);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const Json j = job(far);
  EXPECT_EQ(j.value("state", ""), "pending") << j.dump(2);
  EXPECT_NE(j.dump().find("datasets or volumes"), std::string::npos) << j.dump(2);
}

// ---- PyTorch in containers ----------------------------------------------------------------------

const std::string kPython = "/usr/bin/python3";

bool torch_available() { return std::system((kPython + " -c 'import torch.distributed' 2>/dev/null").c_str()) == 0; }

TEST_F(Containers, TorchGangTrainsInContainersAndResumesOnAnotherNodeFromTheSharedCheckpoint) {
  ASSERT_TRUE(torch_available()) << "PyTorch is missing: install Debian's python3-torch (scripts/setup.sh does)";
  for (const char* n : {"box-0", "box-1", "box-2"}) agent(n);
  ASSERT_TRUE(ready(3)) << agent_output();
  const std::string out = base + "/out";
  const int steps = 60;
  // The uninterrupted run, on the host: 2 ranks.
  // A rendezvous port the kernel picks (a port derived from the pid could be one in use).
  int port = 0;
  if (int fd = ::socket(AF_INET, SOCK_STREAM, 0); fd >= 0) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
    ::close(fd);
  }
  ASSERT_GT(port, 0);
  const std::string ref_cmd = "cd " + out + " && for r in 0 1; do MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " " +
                              "WORLD_SIZE=2 RANK=$r LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 TESSERA_CHECKPOINT_DIR=" + out +
                              " GLOO_SOCKET_IFNAME=lo OMP_NUM_THREADS=1 timeout 300 " + kPython + " " TESSERA_SOURCE_DIR
                              "/examples/ddp_train.py --steps " + std::to_string(steps) + " --out " + out +
                              "/ref.json > ref-$r.log 2>&1 & done; wait";
  ASSERT_EQ(std::system(ref_cmd.c_str()), 0);
  const Json ref = Json::parse(read_file(out + "/ref.json"), nullptr, false);
  ASSERT_TRUE(ref.is_object()) << read_file(out + "/ref-0.log");

  // A gang of 2 tasks x 4 GPUs: one task per node. Python and torch come from the host's /usr.
  const int64_t id = submit(Json{
      {"name", "ddp"}, {"queue", "default"}, {"tasks", 2},
      {"resources", {{"gpus", 4}, {"cpu", 1}, {"memory", "2Gi"}}},
      {"container", {{"image", kHostUsr}}},
      {"mounts", {{{"host_path", "/usr"}, {"path", "/usr"}},
                  {{"host_path", TESSERA_SOURCE_DIR "/examples"}, {"path", "/app"}},
                  {{"host_path", out}, {"path", "/out"}, {"read_only", false}}}},
      {"checkpoint", {{"interval", 600}, {"grace", 60}, {"dir", "/ckpt"}}},
      {"restart", {{"max_restarts", 3}, {"backoff", 0}}},
      {"env", {{"GLOO_SOCKET_IFNAME", "lo"}, {"OMP_NUM_THREADS", "1"}}},
      {"command", {"python3", "/app/ddp_train.py", "--steps", std::to_string(steps), "--step-seconds", "0.15",
                   "--checkpoint-every", "10", "--out", "/out/out.json", "--starts", "/out/starts"}}});
  ASSERT_TRUE(eventually([&] { return logs(id, 0).find("step 10 ") != std::string::npos; }, 120))
      << job(id).dump(2) << logs(id, 0) << logs(id, 1) << agent_output();
  Json j = job(id);
  ASSERT_EQ(j["nodes"].size(), 2u) << j.dump(2);
  std::set<std::string> before;
  for (const Json& n : j["nodes"]) before.insert(n.get<std::string>());
  // Draining one of its nodes checkpoints the gang and stops it; it resumes on the other nodes.
  const std::string drained = j["nodes"][0];
  auto d = server->post("/api/v1/nodes/" + drained + "/drain", server->admin_token(), Json{{"reason", "maintenance"}});
  ASSERT_EQ(d.status, 200) << d.raw;
  ASSERT_TRUE(wait_state(id, "succeeded", 180)) << job(id).dump(2) << logs(id, 0) << agent_output();
  j = job(id);
  EXPECT_GE(j.value("attempt", 0), 2) << j.dump(2);
  bool moved = false;
  for (const Json& n : j["last_nodes"]) {
    EXPECT_NE(n.get<std::string>(), drained);
    moved = moved || !before.count(n.get<std::string>());
  }
  EXPECT_TRUE(moved) << j.dump(2);
  EXPECT_NE(logs(id, 0).find("resumed from"), std::string::npos) << logs(id, 0);
  const Json result = Json::parse(read_file(out + "/out.json"), nullptr, false);
  ASSERT_TRUE(result.is_object()) << logs(id, 0);
  EXPECT_EQ(result["steps"], steps);
  EXPECT_EQ(result["world_size"], 2);
  EXPECT_EQ(result["resumed_from"].get<std::string>().rfind("/ckpt/", 0), 0u) << result.dump();
  EXPECT_NEAR(result["weight"].get<double>(), ref["weight"].get<double>(), 1e-6);
  EXPECT_NEAR(result["bias"].get<double>(), ref["bias"].get<double>(), 1e-6);
  // The checkpoints are in the cluster's store, where every node finds them.
  EXPECT_FALSE(fs::is_empty(base + "/ckpt/job-" + std::to_string(id)));
}

}  // namespace
}  // namespace tessera::testing
