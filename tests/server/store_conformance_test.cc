// The store conformance suite (server/store.h): the same tests, unchanged, against the embedded SQLite
// store and the PostgreSQL store (a throwaway server started by the test, pg_server.h; skipped with a
// message where PostgreSQL is not installed). What only PostgreSQL has is in pg_store_test.cc.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include "pg_server.h"
#include "server/store.h"
#include "store_rows.h"

namespace tessera::server {
namespace {

namespace fs = std::filesystem;
using tessera::testing::PgServer;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

using testing::event;
using testing::job;
using testing::token;

// Where the stores of one test live: a SQLite directory, or databases on one PostgreSQL server.
class StoreSite {
 public:
  virtual ~StoreSite() = default;
  virtual std::string name() const = 0;
  // The location of store `n` (0, 1, ...): each a separate, initially empty store.
  virtual std::string location(int n) = 0;
};

class SqliteSite final : public StoreSite {
 public:
  explicit SqliteSite(std::string root) : root_(std::move(root)) {}
  std::string name() const override { return "sqlite"; }
  std::string location(int n) override { return "sqlite:" + root_ + "/store" + std::to_string(n); }

 private:
  std::string root_;
};

class PgSite final : public StoreSite {
 public:
  explicit PgSite(std::unique_ptr<PgServer> s) : server(std::move(s)) {}
  std::string name() const override { return "postgres"; }
  std::string location(int n) override {
    while (int(dbs_.size()) <= n) {
      std::string why;
      dbs_.push_back(server->create_database(&why));
      EXPECT_FALSE(dbs_.back().empty()) << why;
    }
    return server->uri(dbs_[size_t(n)]);
  }
  std::unique_ptr<PgServer> server;

 private:
  std::vector<std::string> dbs_;
};

class StoreConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tessera_conformance_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    if (GetParam() == "sqlite") {
      site_ = std::make_unique<SqliteSite>(root_);
    } else {
      std::string why;
      auto server = PgServer::start(&why);
      if (!server && contains(why, "not installed")) GTEST_SKIP() << "PostgreSQL " << why;
      ASSERT_TRUE(server) << why;
      site_ = std::make_unique<PgSite>(std::move(server));
    }
  }
  void TearDown() override {
    site_.reset();
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  std::unique_ptr<Store> open(int n = 0) {
    auto where = parse_store_location(site_->location(n));
    EXPECT_TRUE(where.ok());
    if (!where.ok()) return nullptr;
    auto s = open_store(*where);
    EXPECT_TRUE(s.ok()) << s.error().message;
    return s.ok() ? std::move(*s) : nullptr;
  }

  std::string root_;
  std::unique_ptr<StoreSite> site_;
};

INSTANTIATE_TEST_SUITE_P(Stores, StoreConformance, ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

void expect_same(const JobRow& a, const JobRow& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.queue, b.queue);
  EXPECT_EQ(a.user, b.user);
  EXPECT_EQ(a.submitted, b.submitted);
  EXPECT_EQ(a.record, b.record);
}

TEST_P(StoreConformance, AnEmptyStoreLoadsEmpty) {
  auto s = open();
  ASSERT_TRUE(s);
  auto st = s->load();
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_TRUE(st->jobs.empty());
  EXPECT_TRUE(st->tokens.empty());
  EXPECT_TRUE(st->meta.empty());
  EXPECT_EQ(st->last_event_seq, 0);
  auto ev = s->events_after(0, 10);
  ASSERT_TRUE(ev.ok());
  EXPECT_TRUE(ev->empty());
}

// Every kind of row survives closing and reopening, byte for byte (records and details with NUL and
// bytes that are not UTF-8 included), in the documented orders.
TEST_P(StoreConformance, EveryRowRoundTripsAcrossAReopen) {
  const std::string odd("a\0b\xff\xfe{}", 7);
  {
    auto s = open();
    ASSERT_TRUE(s);
    WriteBatch b;
    b.jobs = {job(3, "running"), job(1)};
    b.jobs[1].record = odd;
    b.events = {event(1, "submitted", 1700000000123), event(3, "started"), event(0, "node_down")};
    b.events[1].detail = odd;
    b.tokens = {token("ff00"), token("aa11", "agent")};
    b.tokens[1].node = "gpu-*";
    b.tokens[1].revoked = true;
    b.meta = {{"next_job_id", "4"}, {"a/b", "x"}};
    ASSERT_TRUE(s->write_sync(b).ok());
  }
  auto s = open();
  ASSERT_TRUE(s);
  auto st = s->load();
  ASSERT_TRUE(st.ok()) << st.error().message;
  ASSERT_EQ(st->jobs.size(), 2u);
  EXPECT_EQ(st->jobs[0].id, 1);
  EXPECT_EQ(st->jobs[0].record, odd);
  expect_same(st->jobs[1], job(3, "running"));
  ASSERT_EQ(st->tokens.size(), 2u);
  EXPECT_EQ(st->tokens[0].hash, "aa11");
  EXPECT_EQ(st->tokens[0].role, "agent");
  EXPECT_EQ(st->tokens[0].node, "gpu-*");
  EXPECT_TRUE(st->tokens[0].revoked);
  EXPECT_EQ(st->tokens[1].created, 1700000100);
  EXPECT_FALSE(st->tokens[1].revoked);
  ASSERT_EQ(st->meta.size(), 2u);  // by key, and the store's own commit count is not among them
  EXPECT_EQ(st->meta[0], (std::pair<std::string, std::string>{"a/b", "x"}));
  EXPECT_EQ(st->meta[1], (std::pair<std::string, std::string>{"next_job_id", "4"}));
  EXPECT_EQ(st->last_event_seq, 3);
  auto ev = s->events_after(0, 100);
  ASSERT_TRUE(ev.ok());
  ASSERT_EQ(ev->size(), 3u);
  EXPECT_EQ((*ev)[0].seq, 1);
  EXPECT_EQ((*ev)[0].time_ms, 1700000000123);
  EXPECT_EQ((*ev)[1].time_ms, 1700000000000);  // -1 on write: the second's millisecond
  EXPECT_EQ((*ev)[1].detail, odd);
  EXPECT_EQ((*ev)[2].kind, "node_down");
  auto one = s->events_for_job(3);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].seq, 2);
  auto none = s->events_for_job(0);
  ASSERT_TRUE(none.ok());
  ASSERT_EQ(none->size(), 1u);
  EXPECT_EQ((*none)[0].kind, "node_down");
}

TEST_P(StoreConformance, ReplacingUpdatesRowsByKey) {
  auto s = open();
  ASSERT_TRUE(s);
  WriteBatch a;
  a.jobs = {job(1), job(2)};
  a.tokens = {token("aa")};
  a.meta = {{"k", "1"}};
  ASSERT_TRUE(s->write_sync(a).ok());
  WriteBatch b;
  b.jobs = {job(2, "succeeded")};
  b.tokens = {token("aa")};
  b.tokens[0].revoked = true;
  b.meta = {{"k", "2"}};
  ASSERT_TRUE(s->write_sync(b).ok());
  auto st = s->load();
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->jobs.size(), 2u);
  EXPECT_EQ(st->jobs[1].state, "succeeded");
  ASSERT_EQ(st->tokens.size(), 1u);
  EXPECT_TRUE(st->tokens[0].revoked);
  ASSERT_EQ(st->meta.size(), 1u);
  EXPECT_EQ(st->meta[0].second, "2");
}

// A record made by the writer thread (the controller's rows are); a batch whose encoder throws, or
// that breaks a rule of the schema, fails alone, and the batches queued with it commit.
TEST_P(StoreConformance, ABadBatchFailsAloneAndSaysWhichRow) {
  auto s = open();
  ASSERT_TRUE(s);
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> on_caller{false};
  JobRow lazy = job(5);
  lazy.record.clear();
  lazy.encode = [&] {
    if (std::this_thread::get_id() == caller) on_caller = true;
    return std::string(R"({"lazy":true})");
  };
  JobRow throws = job(7);
  throws.record.clear();
  throws.encode = []() -> std::string { throw std::runtime_error("no memory"); };
  std::atomic<int> ok{0};
  std::vector<Status> results(4);
  std::vector<WriteBatch> batches(4);
  batches[0].jobs = {lazy};
  batches[1].jobs = {throws};
  batches[2].jobs = {job(0)};  // id must be positive
  batches[3].jobs = {job(6)};
  std::atomic<int> done{0};
  for (size_t i = 0; i < batches.size(); ++i)
    s->write(batches[i], [&, i](Status st) {
      results[i] = st;
      ok += st.ok();
      ++done;
    });
  s->flush();
  ASSERT_EQ(done.load(), 4);
  EXPECT_TRUE(results[0].ok());
  ASSERT_FALSE(results[1].ok());
  EXPECT_TRUE(contains(results[1].message(), "job 7")) << results[1].message();
  ASSERT_FALSE(results[2].ok());
  EXPECT_TRUE(contains(results[2].message(), "job 0")) << results[2].message();
  EXPECT_TRUE(results[3].ok());
  EXPECT_FALSE(on_caller.load());
  auto st = s->load();
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->jobs.size(), 2u);
  EXPECT_EQ(st->jobs[0].record, R"({"lazy":true})");
  EXPECT_EQ(st->jobs[1].id, 6);
}

// Batches commit in the order they were written (event seqs follow it), several per transaction
// when they queue up, each acknowledged once; the destructor commits what is still queued.
TEST_P(StoreConformance, BatchesCommitInWriteOrderAndAreGroupCommitted) {
  constexpr int kThreads = 8, kPerThread = 150;
  {
    auto s = open();
    ASSERT_TRUE(s);
    std::atomic<int> acked{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          WriteBatch b;
          const int64_t id = 1 + t * kPerThread + i;
          b.jobs = {job(id)};
          b.events = {event(id, "submitted")};
          s->write(std::move(b), [&](Status st) { acked += st.ok(); });
        }
      });
    for (auto& th : threads) th.join();
    s->flush();
    EXPECT_EQ(acked.load(), kThreads * kPerThread);
    EXPECT_EQ(s->stats().batches, kThreads * kPerThread);
    EXPECT_LT(s->stats().transactions, s->stats().batches) << "no two batches shared a transaction";
    // One writer's batches keep their order: its jobs' events have increasing seqs.
    for (int i = 0; i < 50; ++i) {
      WriteBatch b;
      b.events = {event(100000 + i, "ordered")};
      s->write(std::move(b), nullptr);
    }
  }  // destroyed with writes queued
  auto s = open();
  ASSERT_TRUE(s);
  auto st = s->load();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->jobs.size(), size_t(kThreads * kPerThread));
  EXPECT_EQ(st->last_event_seq, kThreads * kPerThread + 50);
  auto ev = s->events_after(kThreads * kPerThread, 1000);
  ASSERT_TRUE(ev.ok());
  ASSERT_EQ(ev->size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ((*ev)[size_t(i)].job_id, 100000 + i);
}

// A large batch is one transaction however it is sent (PostgreSQL: in chunks of one pipeline): all of
// it, or nothing of it when one row is bad, even far into it.
TEST_P(StoreConformance, ALargeBatchIsAllOrNothing) {
  auto s = open();
  ASSERT_TRUE(s);
  WriteBatch big;
  for (int i = 1; i <= 1500; ++i) {
    big.jobs.push_back(job(i));
    big.events.push_back(event(i, "submitted"));
  }
  WriteBatch bad = big;
  bad.jobs[1200].id = 0;  // breaks id > 0 after 1,200 good rows
  const Status refused = s->write_sync(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(contains(refused.message(), "job 0")) << refused.message();
  auto none = s->load();
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->jobs.empty());
  EXPECT_EQ(none->last_event_seq, 0);
  ASSERT_TRUE(s->write_sync(big).ok());
  auto all = s->load();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->jobs.size(), 1500u);
  EXPECT_EQ(all->last_event_seq, 1500);
}

TEST_P(StoreConformance, EventsArePagedBySeq) {
  auto s = open();
  ASSERT_TRUE(s);
  WriteBatch b;
  for (int i = 0; i < 25; ++i) b.events.push_back(event(i % 3, "e" + std::to_string(i)));
  ASSERT_TRUE(s->write_sync(b).ok());
  int64_t after = 0;
  std::vector<std::string> kinds;
  for (;;) {
    auto page = s->events_after(after, 10);
    ASSERT_TRUE(page.ok());
    if (page->empty()) break;
    EXPECT_LE(page->size(), 10u);
    for (const EventRow& e : *page) kinds.push_back(e.kind);
    after = page->back().seq;
  }
  ASSERT_EQ(kinds.size(), 25u);
  EXPECT_EQ(kinds.front(), "e0");
  EXPECT_EQ(kinds.back(), "e24");
  auto bad = s->events_after(0, 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  auto j1 = s->events_for_job(1);
  ASSERT_TRUE(j1.ok());
  EXPECT_EQ(j1->size(), 8u);  // 1, 4, ..., 22
}

// copy_store into a store of the other kind and back: everything arrives, seqs kept, verified by
// counts and checksum; a copy into a store that is not empty is refused.
TEST_P(StoreConformance, CopiesToTheOtherKindAndBackVerified) {
  auto s = open();
  ASSERT_TRUE(s);
  WriteBatch b;
  for (int i = 1; i <= 30; ++i) b.jobs.push_back(job(i, i % 2 ? "running" : "pending"));
  for (int i = 0; i < 70; ++i) b.events.push_back(event(1 + i % 30, "k" + std::to_string(i), 1700000000000 + i));
  b.tokens = {token("t1"), token("t2", "admin")};
  b.meta = {{"next_job_id", "31"}};
  ASSERT_TRUE(s->write_sync(b).ok());

  // The other kind: SQLite for a PostgreSQL test, and the other way round (when PostgreSQL runs).
  std::unique_ptr<StoreSite> other_site;
  std::unique_ptr<Store> other;
  if (GetParam() == "postgres") {
    auto o = open_sqlite_store(root_ + "/other");
    ASSERT_TRUE(o.ok()) << o.error().message;
    other = std::move(*o);
  } else {
    std::string why;
    auto server = PgServer::start(&why);
    if (!server && contains(why, "not installed")) GTEST_SKIP() << "the PostgreSQL half: PostgreSQL " << why;
    ASSERT_TRUE(server) << why;
    other_site = std::make_unique<PgSite>(std::move(server));
    auto o = open_postgres_store(other_site->location(0));
    ASSERT_TRUE(o.ok()) << o.error().message;
    other = std::move(*o);
  }
  std::vector<std::string> lines;
  auto report = copy_store(*s, *other, [&](const std::string& l) { lines.push_back(l); });
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_EQ(report->jobs, 30);
  EXPECT_EQ(report->events, 70);
  EXPECT_EQ(report->tokens, 2);
  EXPECT_EQ(report->meta, 1);
  EXPECT_EQ(report->checksum.size(), 64u);
  ASSERT_FALSE(lines.empty());
  EXPECT_TRUE(contains(lines.back(), "verified")) << lines.back();
  auto ev = other->events_after(40, 5);
  ASSERT_TRUE(ev.ok());
  ASSERT_EQ(ev->size(), 5u);
  EXPECT_EQ((*ev)[0].seq, 41);
  EXPECT_EQ((*ev)[0].kind, "k40");
  // New events continue after the copied ones.
  WriteBatch more;
  more.events = {event(1, "after_copy")};
  ASSERT_TRUE(other->write_sync(more).ok());
  auto last = other->events_after(70, 5);
  ASSERT_TRUE(last.ok());
  ASSERT_EQ(last->size(), 1u);
  EXPECT_EQ((*last)[0].seq, 71);

  auto again = copy_store(*s, *other);
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(contains(again.error().message, "not empty")) << again.error().message;

  // And back, into a new store of this test's kind: the same checksum.
  auto back = open(1);
  ASSERT_TRUE(back);
  auto fresh_source = open_sqlite_store(root_ + "/roundtrip");
  ASSERT_TRUE(fresh_source.ok());
  auto r1 = copy_store(*s, **fresh_source);
  ASSERT_TRUE(r1.ok()) << r1.error().message;
  auto r2 = copy_store(**fresh_source, *back);
  ASSERT_TRUE(r2.ok()) << r2.error().message;
  EXPECT_EQ(r2->checksum, report->checksum);
}

// backup() writes a SQLite store file, whichever the store: `admin restore` installs it.
TEST_P(StoreConformance, BackupIsASqliteFileThatRestores) {
  auto s = open();
  ASSERT_TRUE(s);
  WriteBatch b;
  b.jobs = {job(1), job(2, "failed")};
  b.events = {event(1, "submitted"), event(2, "failed")};
  b.tokens = {token("ab")};
  b.meta = {{"next_job_id", "3"}};
  ASSERT_TRUE(s->write_sync(b).ok());
  const std::string file = root_ + "/backup.db";
  ASSERT_TRUE(s->backup(file).ok());
  EXPECT_EQ(fs::status(file).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  const Status again = s->backup(file);
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(contains(again.message(), "already exists")) << again.message();
  ASSERT_TRUE(restore_sqlite_store(file, root_ + "/restored", false).ok());
  auto restored = open_sqlite_store(root_ + "/restored");
  ASSERT_TRUE(restored.ok()) << restored.error().message;
  auto st = (*restored)->load();
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->jobs.size(), 2u);
  EXPECT_EQ(st->jobs[1].state, "failed");
  ASSERT_EQ(st->tokens.size(), 1u);
  EXPECT_EQ(st->meta.size(), 1u);
  EXPECT_EQ(st->last_event_seq, 2);
  // No working files are left beside the backup.
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(root_)) names.insert(e.path().filename().string());
  for (const std::string& n : names) EXPECT_EQ(n.find(".tessera-backup"), std::string::npos) << n;
}

TEST(StoreLocation, ParsesEveryForm) {
  auto a = parse_store_location("/var/lib/tessera");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->kind, StoreLocation::Kind::kSqlite);
  EXPECT_EQ(a->dir, "/var/lib/tessera");
  auto b = parse_store_location("sqlite:rel/dir");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->dir, "rel/dir");
  auto c = parse_store_location("postgresql://db.example/tessera");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kind, StoreLocation::Kind::kPostgres);
  EXPECT_EQ(c->dsn, "postgresql://db.example/tessera");
  auto d = parse_store_location("postgres:host=/run/pg dbname=t");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->dsn, "host=/run/pg dbname=t");
  for (const char* bad : {"", "sqlite:", "postgres:"}) EXPECT_FALSE(parse_store_location(bad).ok()) << bad;
}

}  // namespace
}  // namespace tessera::server
