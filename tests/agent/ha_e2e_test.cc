// High availability on PostgreSQL (docs/ha.md), end to end: real controllers sharing one throwaway
// PostgreSQL server (pg_server.h; skipped with a message where PostgreSQL is not installed), real
// agents with fake GPUs given every controller's URL, and clients that follow the leader.
//  - Failover: the leader is killed (-9) in the middle of a burst of submits and cancels from 8
//    clients; a standby leads within 10 s, every acknowledged submit and cancel is there, the
//    running jobs keep running (same attempt, same processes), and the burst completes.
//  - Fencing: the leader is frozen (SIGSTOP) past its lease; another leads; the old one, resumed,
//    writes nothing (a request to it is not acknowledged, it exits 75) and no job starts twice.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "../server/pg_server.h"
#include "agent_process.h"

namespace tessera::testing {
namespace {

const std::string kCluster = TESSERA_SOURCE_DIR "/tests/agent/data/agents_cluster.yaml";

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

int leader_of(const std::vector<std::unique_ptr<ServerProcess>>& cs) {
  for (size_t i = 0; i < cs.size(); ++i)
    if (cs[i]->pid() > 0 && http_call(cs[i]->port(), "GET", "/readyz", "").status == 200) return int(i);
  return -1;
}

// A client of several controllers: the last one that answered first; a refused connection moves to
// the next; a standby's 307 to the port it names. Status 0: nobody answered (not acknowledged).
class HaClient {
 public:
  explicit HaClient(std::vector<int> ports) : ports_(std::move(ports)) {}
  HttpReply call(const std::string& method, const std::string& path, const std::string& token, const std::string& body = "") {
    HttpReply r;
    for (size_t hop = 0; hop < 2 * ports_.size() + 2; ++hop) {
      r = http_call(ports_[current_], method, path, token, body);
      if (r.status == 307) {
        const std::string loc = r.raw.empty() ? "" : r.body.value("leader", "");
        const auto colon = loc.rfind(':');
        const int port = colon == std::string::npos ? 0 : std::atoi(loc.c_str() + colon + 1);
        for (size_t i = 0; i < ports_.size(); ++i)
          if (ports_[i] == port) current_ = i;
        continue;
      }
      if (r.status == 0 || r.status == 503) {
        current_ = (current_ + 1) % ports_.size();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      return r;
    }
    return r;
  }

 private:
  std::vector<int> ports_;
  size_t current_ = 0;
};

class HighAvailability : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    pg_ = PgServer::start(&why);
    if (!pg_ && contains(why, "not installed")) GTEST_SKIP() << "PostgreSQL " << why;
    ASSERT_TRUE(pg_) << why;
    db_ = pg_->create_database(&why);
    ASSERT_FALSE(db_.empty()) << why;
  }
  // n controllers on the store; the first leads (started first, waited for), the others stand by.
  void start_controllers(int n, std::vector<std::string> flags) {
    for (int i = 0; i < n; ++i) {
      controllers_.push_back(std::make_unique<ServerProcess>(kCluster));
      ServerProcess& c = *controllers_.back();
      c.use_store(pg_->uri(db_), /*wait_to_lead=*/i == 0);
      c.with_agents(flags);
      std::string out;
      ASSERT_TRUE(c.start(&out)) << out;
      if (i == 0) {
        ASSERT_EQ(http_call(c.port(), "GET", "/readyz", "").status, 200);
        admin_ = c.admin_token();
        ASSERT_FALSE(admin_.empty());
      } else {
        c.set_admin_token(admin_);
        auto ready = http_call(c.port(), "GET", "/readyz", "");
        EXPECT_EQ(ready.status, 503) << ready.raw;
        EXPECT_EQ(ready.body.value("role", ""), "standby") << ready.raw;
      }
    }
  }
  std::vector<int> ports() const {
    std::vector<int> p;
    for (const auto& c : controllers_) p.push_back(c->port());
    return p;
  }
  std::string urls() const {
    std::string s;
    for (int p : ports()) s += (s.empty() ? "" : ",") + std::string("http://127.0.0.1:") + std::to_string(p);
    return s;
  }

  std::unique_ptr<PgServer> pg_;
  std::string db_;
  std::string admin_;
  std::vector<std::unique_ptr<ServerProcess>> controllers_;
};

Json sleeper(const std::string& name) {
  return Json{{"name", name}, {"queue", "default"}, {"resources", {{"gpus", 1}}}, {"command", {"sleep", "600"}}};
}

TEST_F(HighAvailability, KillingTheLeaderMidBurstLosesNothingAcknowledged) {
  start_controllers(3, {"--heartbeat-interval-ms", "500"});
  // A standby redirects to the leader, keeping the method.
  auto redirected = http_call(controllers_[1]->port(), "POST", "/api/v1/jobs", admin_, sleeper("x").dump());
  ASSERT_EQ(redirected.status, 307) << redirected.raw;
  // The portal too: a browser sent to a standby lands on the leader.
  EXPECT_EQ(http_call(controllers_[2]->port(), "GET", "/jobs/1", "").status, 307);
  EXPECT_EQ(http_call(controllers_[2]->port(), "GET", "/healthz", "").status, 200);

  std::vector<std::unique_ptr<AgentProcess>> agents;
  for (int i = 0; i < 2; ++i) {
    agents.push_back(std::make_unique<AgentProcess>("gpu-" + std::to_string(i), "fake:4xH100-80GB-SXM,nvswitch"));
    agents.back()->set_heartbeat_ms(500);
    agents.back()->start(urls(), admin_);
  }
  HaClient client(ports());
  auto both_agents_ready = [&] {
    size_t ready = 0;
    for (const Json& n : client.call("GET", "/api/v1/nodes", admin_).body.value("nodes", Json::array()))
      ready += n.value("agent", "") == "ready";
    return ready == 2;
  };
  ASSERT_TRUE(eventually(both_agents_ready, 20));
  // Two long jobs, one per node at least: they must survive the failover untouched.
  std::vector<int64_t> longs;
  for (int i = 0; i < 2; ++i) longs.push_back(client.call("POST", "/api/v1/jobs", admin_, sleeper("long").dump()).body.value("id", int64_t(0)));
  auto job = [&](int64_t id) { return client.call("GET", "/api/v1/jobs/" + std::to_string(id), admin_).body; };
  std::vector<pid_t> pids_before;
  ASSERT_TRUE(eventually(
      [&] {
        pids_before.clear();
        for (auto& a : agents)
          for (pid_t p : a->task_pids()) pids_before.push_back(p);
        return job(longs[0]).value("state", "") == "running" && job(longs[1]).value("state", "") == "running" &&
               pids_before.size() == 2;
      },
      20));
  std::map<int64_t, int64_t> attempts;
  for (int64_t id : longs) attempts[id] = job(id).value("attempt", int64_t(0));

  // The burst: 8 clients, 125 operations each (every third a cancel of one of their own jobs).
  std::mutex mu;
  std::set<int64_t> submitted, cancelled;
  std::atomic<int> acknowledged{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t)
    clients.emplace_back([&, t] {
      HaClient c(ports());
      std::vector<int64_t> mine;
      for (int i = 0; i < 125; ++i) {
        if (i % 3 == 2 && !mine.empty()) {
          const int64_t id = mine.back();
          mine.pop_back();
          auto r = c.call("POST", "/api/v1/jobs/" + std::to_string(id) + "/cancel", admin_, "{}");
          if (r.status == 200) {
            std::lock_guard lock(mu);
            cancelled.insert(id);
          }
        } else {
          auto r = c.call("POST", "/api/v1/jobs", admin_, sleeper("b" + std::to_string(t)).dump());
          if (r.status == 201) {
            std::lock_guard lock(mu);
            submitted.insert(r.body.value("id", int64_t(0)));
            mine.push_back(r.body.value("id", int64_t(0)));
          }
        }
        ++acknowledged;
      }
    });
  ASSERT_TRUE(eventually([&] { return acknowledged.load() >= 300; }, 60));
  const int old_leader = leader_of(controllers_);
  ASSERT_EQ(old_leader, 0);
  controllers_[0]->kill(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  int new_leader = -1;
  ASSERT_TRUE(eventually([&] { return (new_leader = leader_of(controllers_)) > 0; }, 15));
  const double failover_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_LT(failover_s, 10.0);
  std::printf("failover: controller %d leads %.2f s after the leader was killed\n", new_leader, failover_s);
  for (auto& th : clients) th.join();
  EXPECT_EQ(acknowledged.load(), 1000);

  // Every acknowledged submit and cancel is there (read from the new leader).
  for (int64_t id : submitted) {
    auto r = client.call("GET", "/api/v1/jobs/" + std::to_string(id), admin_);
    ASSERT_EQ(r.status, 200) << "acknowledged job " << id << " is missing: " << r.raw;
    if (cancelled.count(id)) {
      EXPECT_EQ(r.body.value("state", ""), "cancelled") << id;
    }
  }
  EXPECT_GT(submitted.size(), 500u);
  EXPECT_GT(cancelled.size(), 200u);
  // The long jobs kept running: same attempt, same processes, once the agents are back.
  ASSERT_TRUE(eventually(both_agents_ready, 20)) << agents[0]->output();
  for (int64_t id : longs) {
    const Json j = job(id);
    EXPECT_EQ(j.value("state", ""), "running") << j.dump();
    EXPECT_EQ(j.value("attempt", int64_t(0)), attempts[id]) << "job " << id << " was restarted";
  }
  std::vector<pid_t> pids_after;
  for (auto& a : agents)
    for (pid_t p : a->task_pids()) pids_after.push_back(p);
  for (pid_t p : pids_before)
    EXPECT_NE(std::find(pids_after.begin(), pids_after.end(), p), pids_after.end()) << "task process " << p << " is gone";
  // The CLI follows the leader too, with the dead controller first in its list.
  auto cli = run_cli({"jobs", "--server", urls(), "--token", admin_});
  EXPECT_EQ(cli.status, 0) << cli.out << cli.err;
  // And the redirect of a standby given alone.
  const int standby = new_leader == 1 ? 2 : 1;
  auto via_standby = run_cli({"show", std::to_string(longs[0]), "--server",
                              "http://127.0.0.1:" + std::to_string(controllers_[size_t(standby)]->port()), "--token", admin_});
  EXPECT_EQ(via_standby.status, 0) << via_standby.out << via_standby.err;
  EXPECT_TRUE(contains(via_standby.out, "running")) << via_standby.out;
}

TEST_F(HighAvailability, AFrozenLeaderIsFencedAndStepsDown) {
  start_controllers(2, {"--lease-ms", "1500"});
  HaClient client(ports());
  auto first = client.call("POST", "/api/v1/jobs", admin_, Json{{"name", "before"}, {"queue", "default"}, {"resources", {{"gpus", 1}}}, {"command", {"true"}}}.dump());
  ASSERT_EQ(first.status, 201) << first.raw;
  const pid_t frozen = controllers_[0]->pid();
  ASSERT_EQ(::kill(frozen, SIGSTOP), 0);
  ASSERT_TRUE(eventually([&] { return http_call(controllers_[1]->port(), "GET", "/readyz", "").status == 200; }, 10));
  auto second = http_call(controllers_[1]->port(), "POST", "/api/v1/jobs", admin_,
                          Json{{"name", "after"}, {"queue", "default"}, {"resources", {{"gpus", 1}}}, {"command", {"true"}}}.dump());
  ASSERT_EQ(second.status, 201) << second.raw;

  // Resumed, the old leader tries to write at once: the database refuses it, and it leaves.
  ASSERT_EQ(::kill(frozen, SIGCONT), 0);
  auto stale = http_call(controllers_[0]->port(), "POST", "/api/v1/jobs", admin_,
                         Json{{"name", "stale"}, {"queue", "default"}, {"resources", {{"gpus", 1}}}, {"command", {"true"}}}.dump());
  EXPECT_NE(stale.status, 201) << "a deposed leader acknowledged a write: " << stale.raw;
  int status = 0;
  pid_t gone = 0;
  ASSERT_TRUE(eventually([&] { return (gone = ::waitpid(frozen, &status, WNOHANG)) == frozen; }, 10));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 75) << "status " << status;

  // Only the two acknowledged jobs exist, and none started twice.
  auto list = http_call(controllers_[1]->port(), "GET", "/api/v1/jobs?limit=100", admin_);
  ASSERT_EQ(list.status, 200) << list.raw;
  std::set<std::string> names;
  for (const Json& j : list.body.value("jobs", Json::array())) {
    names.insert(j.value("name", ""));
    EXPECT_LE(j.value("attempt", int64_t(1)), 1) << j.dump();
  }
  EXPECT_EQ(names, (std::set<std::string>{"before", "after"}));
}

}  // namespace
}  // namespace tessera::testing
