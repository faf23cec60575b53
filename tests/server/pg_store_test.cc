// What only the PostgreSQL store has (the shared behaviour is in store_conformance_test.cc): DSN
// checks, a database that is not a store, a newer schema, the server going away and coming back
// under writes, connections ended by the server, and the lease's fence. A throwaway server is started
// by each test (pg_server.h); skipped with a message where PostgreSQL is not installed.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "pg_server.h"
#include "server/leader_lease.h"
#include "server/store.h"
#include "store_rows.h"

namespace tessera::server {
namespace {

using tessera::testing::PgServer;
using testing::job;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(PostgresStore, RefusesAPasswordOnTheCommandLine) {
  for (const char* dsn : {"postgresql://u:secret@localhost/db", "host=localhost password=secret dbname=db"}) {
    auto s = open_postgres_store(dsn);
    ASSERT_FALSE(s.ok()) << dsn;
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
    EXPECT_TRUE(contains(s.error().message, "PGPASSWORD")) << s.error().message;
    EXPECT_FALSE(contains(s.error().message, "secret")) << s.error().message;
  }
  auto garbage = open_postgres_store("host=x dbname");
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.error().code, ErrorCode::kInvalidArgument);
}

TEST(PostgresStore, AnUnreachableServerIsUnavailable) {
  auto s = open_postgres_store("host=/nonexistent-dir port=5999 dbname=x connect_timeout=2");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kUnavailable);
  EXPECT_TRUE(contains(s.error().message, "cannot connect")) << s.error().message;
}

class PostgresOnly : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    server_ = PgServer::start(&why);
    if (!server_ && contains(why, "not installed")) GTEST_SKIP() << "PostgreSQL " << why;
    ASSERT_TRUE(server_) << why;
    db_ = server_->create_database(&why);
    ASSERT_FALSE(db_.empty()) << why;
  }
  std::unique_ptr<PgServer> server_;
  std::string db_;
};

TEST_F(PostgresOnly, RefusesADatabaseOfAnotherApplicationAndANewerSchema) {
  ASSERT_TRUE(server_->sql(db_, "CREATE TABLE invoices (id int)", nullptr));
  auto s = open_postgres_store(server_->dsn(db_));
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(contains(s.error().message, "not a Tessera database")) << s.error().message;
  EXPECT_TRUE(contains(s.error().message, "invoices")) << s.error().message;

  std::string why;
  const std::string db2 = server_->create_database(&why);
  { ASSERT_TRUE(open_postgres_store(server_->dsn(db2)).ok()); }
  ASSERT_TRUE(server_->sql(db2, "UPDATE tessera_schema SET version = 99", nullptr));
  auto newer = open_postgres_store(server_->dsn(db2));
  ASSERT_FALSE(newer.ok());
  EXPECT_TRUE(contains(newer.error().message, "newer")) << newer.error().message;
}

// PostgreSQL stops under writes: writes and reads fail with kUnavailable (never crash, never hang),
// and once it is back they succeed on the same store object; nothing acknowledged is lost.
TEST_F(PostgresOnly, ServerRestartFailsWritesAsUnavailableThenServesAgain) {
  auto s = open_postgres_store(server_->dsn(db_));
  ASSERT_TRUE(s.ok()) << s.error().message;
  Store& store = **s;
  std::set<int64_t> acked;
  for (int64_t id = 1; id <= 20; ++id) {
    WriteBatch b;
    b.jobs = {job(id)};
    if (store.write_sync(b).ok()) acked.insert(id);
  }
  ASSERT_EQ(acked.size(), 20u);
  server_->stop();
  WriteBatch down;
  down.jobs = {job(21)};
  const Status st = store.write_sync(down);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kUnavailable) << st.message();
  auto l = store.load();
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error().code, ErrorCode::kUnavailable) << l.error().message;
  std::string why;
  ASSERT_TRUE(server_->restart(&why)) << why;
  for (int64_t id = 22; id <= 30; ++id) {
    WriteBatch b;
    b.jobs = {job(id)};
    const Status w = store.write_sync(b);
    EXPECT_TRUE(w.ok()) << w.message();
    if (w.ok()) acked.insert(id);
  }
  auto after = store.load();
  ASSERT_TRUE(after.ok()) << after.error().message;
  std::set<int64_t> stored;
  for (const JobRow& j : after->jobs) stored.insert(j.id);
  for (int64_t id : acked) EXPECT_TRUE(stored.count(id)) << "acknowledged job " << id << " is missing";
  EXPECT_FALSE(stored.count(21));
}

// The server ends the store's connections (as a fast shutdown or an administrator does) again and
// again while a writer commits batches of two pipeline chunks: each write either lands or fails as
// unavailable, never as an internal error, whichever step of the exchange hears of the end; the
// writes after it reconnect and land, every acknowledged row is stored, and no row of a write that
// failed is, unless the store said its outcome could not be learnt.
TEST_F(PostgresOnly, AConnectionEndedByTheServerIsUnavailableThenReconnects) {
  auto s = open_postgres_store(server_->dsn(db_));
  ASSERT_TRUE(s.ok()) << s.error().message;
  Store& store = **s;
  const size_t rows = 256 + 40;  // pg::Conn::kPipelineChunk + 40: the end can come between chunks
  std::atomic<bool> stop{false};
  std::set<int64_t> acked, refused;
  int unavailable = 0, writes = 0;
  std::string other;  // the first failure that is not kUnavailable
  std::thread writer([&] {
    int64_t id = 0;
    while (!stop.load()) {
      WriteBatch b;
      for (size_t k = 0; k < rows; ++k) b.jobs.push_back(job(++id));
      const Status w = store.write_sync(b);
      ++writes;
      // A write whose connection broke after COMMIT went out, when the database could not be asked
      // at once either, may have committed: the store says so, and it is neither acked nor refused.
      const bool unknown = !w.ok() && w.message().find("whether it took effect") != std::string::npos;
      if (w.ok())
        for (const JobRow& j : b.jobs) acked.insert(j.id);
      else if (!unknown)
        for (const JobRow& j : b.jobs) refused.insert(j.id);
      if (w.ok()) continue;
      if (w.error().code == ErrorCode::kUnavailable)
        ++unavailable;
      else if (other.empty())
        other = w.message();
    }
  });
  for (int round = 0; round < 30; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + 7 * (round % 5)));
    std::string why;
    ASSERT_TRUE(server_->sql(db_,
                             "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                             "WHERE datname = current_database() AND pid <> pg_backend_pid()",
                             &why))
        << why;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // writes land again
  stop = true;
  writer.join();
  EXPECT_TRUE(other.empty()) << other;
  EXPECT_GT(unavailable, 0) << "no write met an ended connection in " << writes;
  WriteBatch last;
  last.jobs = {job(1000000)};
  const Status w = store.write_sync(last);
  EXPECT_TRUE(w.ok()) << w.message();
  auto after = store.load();  // the reader's connection was ended too: unavailable once, then served
  if (!after.ok()) {
    EXPECT_EQ(after.error().code, ErrorCode::kUnavailable) << after.error().message;
    after = store.load();
  }
  ASSERT_TRUE(after.ok()) << after.error().message;
  std::set<int64_t> stored;
  for (const JobRow& j : after->jobs) stored.insert(j.id);
  for (int64_t a : acked) ASSERT_TRUE(stored.count(a)) << "acknowledged job " << a << " is missing";
  // A failed write saved nothing, also when the connection broke after its COMMIT went out.
  for (int64_t r : refused) ASSERT_FALSE(stored.count(r)) << "job " << r << " was stored, but its write failed";
}

// The lease and the fence at the database: whoever takes the lease bumps the epoch; the store of the
// controller that held it before can then write nothing (and hears why), while the new one can; an
// expired lease that nobody took may be renewed by its holder, and writes resume.
TEST_F(PostgresOnly, WritesAreFencedOnTheLeaseEpoch) {
  { ASSERT_TRUE(open_postgres_store(server_->dsn(db_)).ok()); }  // migrates: the leader table exists
  LeaseOptions a_opts{"a", "http://a", "http://a-agents", 300};
  LeaseOptions b_opts{"b", "http://b", "http://b-agents", 300};
  auto a = LeaderLease::open(server_->dsn(db_), a_opts);
  ASSERT_TRUE(a.ok()) << a.error().message;
  auto b = LeaderLease::open(server_->dsn(db_), b_opts);
  ASSERT_TRUE(b.ok()) << b.error().message;
  std::atomic<int> fenced{0};
  auto open_fenced = [&](LeaderLease& l) {
    PostgresOpenOptions o;
    o.epoch = [&l] { return l.epoch(); };
    o.on_fenced = [&](const std::string&) { ++fenced; };
    auto s = open_postgres_store(server_->dsn(db_), o);
    EXPECT_TRUE(s.ok());
    return s.ok() ? std::move(*s) : nullptr;
  };
  auto store_a = open_fenced(**a);
  auto store_b = open_fenced(**b);
  ASSERT_TRUE(store_a && store_b);
  WriteBatch w;
  w.jobs = {job(1)};
  EXPECT_EQ(store_a->write_sync(w).error().code, ErrorCode::kUnavailable);  // nobody leads yet

  auto won = (*a)->try_acquire();
  ASSERT_TRUE(won.ok() && *won);
  EXPECT_EQ((*a)->epoch(), 1);
  auto lost = (*b)->try_acquire();
  ASSERT_TRUE(lost.ok());
  EXPECT_FALSE(*lost);  // a's lease is live
  auto who = (*b)->current();
  ASSERT_TRUE(who.ok());
  EXPECT_TRUE(who->live);
  EXPECT_EQ(who->url, "http://a");
  EXPECT_EQ(who->agent_url, "http://a-agents");
  ASSERT_TRUE(store_a->write_sync(w).ok());

  // a's lease runs out and nobody takes it: a's writes wait for a renewal, which succeeds.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const Status expired = store_a->write_sync(w);
  ASSERT_FALSE(expired.ok());
  EXPECT_TRUE(contains(expired.message(), "expired")) << expired.message();
  auto renewed = (*a)->renew();
  ASSERT_TRUE(renewed.ok() && *renewed);
  ASSERT_TRUE(store_a->write_sync(w).ok());
  EXPECT_EQ(fenced.load(), 0);

  // Now b takes it after it expires: a is fenced for good and cannot renew.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  won = (*b)->try_acquire();
  ASSERT_TRUE(won.ok() && *won);
  EXPECT_EQ((*b)->epoch(), 2);
  WriteBatch stale;
  stale.jobs = {job(2)};
  const Status refused = store_a->write_sync(stale);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(contains(refused.message(), "not the leader")) << refused.message();
  EXPECT_EQ(fenced.load(), 1);
  auto again = (*a)->renew();
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
  WriteBatch fresh;
  fresh.jobs = {job(3)};
  ASSERT_TRUE(store_b->write_sync(fresh).ok());
  auto st = store_b->load();
  ASSERT_TRUE(st.ok());
  std::set<int64_t> ids;
  for (const JobRow& j : st->jobs) ids.insert(j.id);
  EXPECT_EQ(ids, (std::set<int64_t>{1, 3}));
  // A clean stop releases the lease: another may take it at once.
  (*b)->release();
  won = (*a)->try_acquire();
  ASSERT_TRUE(won.ok() && *won);
  EXPECT_EQ((*a)->epoch(), 3);
}

}  // namespace
}  // namespace tessera::server
