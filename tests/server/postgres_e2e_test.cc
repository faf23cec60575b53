// The real `tessera server` on PostgreSQL (a throwaway server, pg_server.h; skipped with a message
// where PostgreSQL is not installed): jobs survive kill -9, the first start needs a token file, an
// online backup of it restores as a SQLite store, and `tessera admin migrate` moves a SQLite
// cluster onto PostgreSQL with everything verified.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>

#include "pg_server.h"
#include "server_process.h"

namespace tessera::testing {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string state_of(const ServerProcess& s, int64_t id) {
  auto r = s.get("/api/v1/jobs/" + std::to_string(id), s.admin_token());
  return r.status == 200 ? r.body["state"].get<std::string>() : "?";
}

class PostgresServer : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    pg_ = PgServer::start(&why);
    if (!pg_ && contains(why, "not installed")) GTEST_SKIP() << "PostgreSQL " << why;
    ASSERT_TRUE(pg_) << why;
    db_ = pg_->create_database(&why);
    ASSERT_FALSE(db_.empty()) << why;
  }
  int64_t submit(const ServerProcess& s, const std::string& name) {
    auto r = s.post("/api/v1/jobs", s.admin_token(), job(name, "default"));
    EXPECT_EQ(r.status, 201) << r.raw;
    return r.status == 201 ? r.body["id"].get<int64_t>() : -1;
  }
  std::unique_ptr<PgServer> pg_;
  std::string db_;
};

TEST_F(PostgresServer, JobsSurviveKillAndTheFirstStartNeedsATokenFile) {
  // Without --admin-token-file a new PostgreSQL store has nowhere to put the admin token.
  auto refused = run_cli({"server", "--data", pg_->uri(db_), "--listen", "127.0.0.1:0", "--agentless"});
  EXPECT_EQ(refused.status, 2) << refused.out << refused.err;
  EXPECT_TRUE(contains(refused.err, "--admin-token-file")) << refused.err;

  ServerProcess server;
  server.use_store(pg_->uri(db_));
  std::string out;
  ASSERT_TRUE(server.start(&out)) << out;
  ASSERT_FALSE(server.admin_token().empty());
  std::vector<int64_t> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(submit(server, "pg-" + std::to_string(i)));
  ASSERT_EQ(server.call("POST", "/api/v1/jobs/" + std::to_string(ids[4]) + "/cancel", server.admin_token()).status, 200);
  // Settled before the kill (the cluster has room for all four), so no state moves after it is read.
  ASSERT_TRUE(eventually([&] {
    for (size_t i = 0; i < 4; ++i)
      if (state_of(server, ids[i]) != "running") return false;
    return true;
  }));
  std::map<int64_t, std::string> before;
  for (int64_t id : ids) before[id] = state_of(server, id);
  EXPECT_EQ(before[ids[4]], "cancelled");

  server.kill(SIGKILL);
  ASSERT_TRUE(server.restart());
  for (int64_t id : ids) EXPECT_EQ(state_of(server, id), before[id]) << "job " << id;
  EXPECT_GT(submit(server, "after-restart"), ids.back());  // ids go on from the store

  // An online backup through the API is a SQLite store file: restored, a SQLite server serves it.
  const std::string file = server.dir() + "/pg-backup.db";
  auto b = run_cli({"admin", "backup", file}, {{"TESSERA_SERVER", "http://127.0.0.1:" + std::to_string(server.port())},
                                               {"TESSERA_TOKEN", server.admin_token()}});
  ASSERT_EQ(b.status, 0) << b.out << b.err;
  const std::string token = server.admin_token();
  server.kill(SIGTERM);
  const std::string dir = make_temp_dir("tessera-pg-restored");
  auto r = run_cli({"admin", "restore", file, "--data", dir + "/data"});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  ServerProcess sqlite_server(TESSERA_SOURCE_DIR "/tests/server/data/e2e_cluster.yaml", dir + "/data");
  ASSERT_TRUE(sqlite_server.start(&out)) << out;
  auto got = sqlite_server.get("/api/v1/jobs/" + std::to_string(ids[4]), token);
  ASSERT_EQ(got.status, 200) << got.raw;  // the admin token came along
  EXPECT_EQ(got.body["state"], "cancelled");
}

TEST_F(PostgresServer, AdminMigrateMovesASqliteClusterOntoPostgres) {
  ServerProcess sqlite_server;
  std::string out;
  ASSERT_TRUE(sqlite_server.start(&out)) << out;
  std::vector<int64_t> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(submit(sqlite_server, "m-" + std::to_string(i)));
  // All 8 fit (1 GPU each on 24): wait for every one to start, or a job still pending here would
  // be started by the server on PostgreSQL before the comparison reads it there.
  ASSERT_TRUE(eventually([&] {
    for (int64_t id : ids)
      if (state_of(sqlite_server, id) != "running") return false;
    return true;
  }));
  const std::string member = sqlite_server.token("carol", "member", "default");
  ASSERT_FALSE(member.empty());
  ASSERT_EQ(sqlite_server.call("POST", "/api/v1/jobs/" + std::to_string(ids[7]) + "/cancel", sqlite_server.admin_token()).status,
            200);
  std::map<int64_t, std::string> before;
  for (int64_t id : ids) before[id] = state_of(sqlite_server, id);
  // A finished job's whole record, its history of events included, is the same after the move.
  const auto finished_before = sqlite_server.get("/api/v1/jobs/" + std::to_string(ids[7]), sqlite_server.admin_token());

  // Refused while the server holds the directory.
  auto busy = run_cli({"admin", "migrate", "--from", sqlite_server.dir(), "--to", pg_->uri(db_)});
  EXPECT_NE(busy.status, 0);
  EXPECT_TRUE(contains(busy.err, "in use")) << busy.err;

  const std::string token = sqlite_server.admin_token();
  sqlite_server.kill(SIGTERM);
  auto m = run_cli({"admin", "migrate", "--from", sqlite_server.dir(), "--to", pg_->uri(db_)});
  ASSERT_EQ(m.status, 0) << m.out << m.err;
  EXPECT_TRUE(contains(m.out, "verified")) << m.out;
  EXPECT_TRUE(contains(m.out, "8 jobs")) << m.out;
  // Into a store that is no longer empty: refused.
  auto twice = run_cli({"admin", "migrate", "--from", sqlite_server.dir(), "--to", pg_->uri(db_)});
  EXPECT_NE(twice.status, 0);
  EXPECT_TRUE(contains(twice.err, "not empty")) << twice.err;

  ServerProcess pg_server;
  pg_server.use_store(pg_->uri(db_));
  ASSERT_TRUE(pg_server.start(&out)) << out;
  for (int64_t id : ids) {
    auto r = pg_server.get("/api/v1/jobs/" + std::to_string(id), token);
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_EQ(r.body["state"], before[id]) << "job " << id;
  }
  EXPECT_EQ(pg_server.get("/api/v1/jobs/" + std::to_string(ids[0]), member).status, 200);  // tokens came along
  const auto finished_after = pg_server.get("/api/v1/jobs/" + std::to_string(ids[7]), token);
  EXPECT_EQ(finished_after.raw, finished_before.raw);
}

// PostgreSQL restarted under a stream of submits from 4 clients: while it is away the leader answers
// 503 (never a false acknowledgement, never a crash), afterwards it serves again, and every
// acknowledged job is there.
TEST_F(PostgresServer, TheLeaderRidesOutADatabaseRestart) {
  ServerProcess server;
  server.use_store(pg_->uri(db_));
  std::string out;
  ASSERT_TRUE(server.start(&out)) << out;
  std::atomic<bool> stop{false};
  std::atomic<int> unavailable{0}, other{0};
  std::mutex mu;
  std::vector<int64_t> acked;
  std::string first_other;  // the first answer neither 201 nor 503, for the failure message
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t)
    clients.emplace_back([&] {
      while (!stop.load()) {
        auto r = server.post("/api/v1/jobs", server.admin_token(), job("load", "default"));
        if (r.status == 201) {
          std::lock_guard lock(mu);
          acked.push_back(r.body["id"].get<int64_t>());
        } else if (r.status == 503) {
          ++unavailable;
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        } else {
          std::lock_guard lock(mu);
          if (other++ == 0) first_other = std::to_string(r.status) + " " + r.raw;
        }
      }
    });
  auto acked_now = [&] {
    std::lock_guard lock(mu);
    return acked.size();
  };
  ASSERT_TRUE(eventually([&] { return acked_now() >= 50; }, 20));
  pg_->stop();
  const size_t before_outage = acked_now();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_LE(acked_now(), before_outage + 8) << "submits acknowledged while the database was down";
  std::string why;
  ASSERT_TRUE(pg_->restart(&why)) << why;
  const size_t after_restart = acked_now();
  EXPECT_TRUE(eventually([&] { return acked_now() >= after_restart + 50; }, 30)) << "the leader did not serve again";
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_GT(unavailable.load(), 0);
  EXPECT_EQ(other.load(), 0) << "the first: " << first_other;
  EXPECT_GT(server.pid(), 0);
  EXPECT_EQ(::kill(server.pid(), 0), 0) << "the controller died";
  EXPECT_EQ(http_call(server.port(), "GET", "/readyz", "").status, 200);
  // Everything acknowledged is there, also after a restart from the store alone.
  server.kill(SIGKILL);
  ASSERT_TRUE(server.restart());
  for (int64_t id : acked) ASSERT_EQ(server.get("/api/v1/jobs/" + std::to_string(id), server.admin_token()).status, 200) << id;
}

}  // namespace
}  // namespace tessera::testing
