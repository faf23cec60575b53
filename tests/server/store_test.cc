// Tests of the SQLite store (server/store.h): round trips, group commit, commit order, durability
// across a SIGKILL, schema version and file checks, online backup and restore.
// Each test works in its own mkdtemp directory under /tmp, removed at the end.
#include "server/store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include "sqlite_query.h"

namespace tessera::server {
namespace {

namespace fs = std::filesystem;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tessera_store_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  std::string dir(const std::string& name = "store") const { return (fs::path(root_) / name).string(); }
  std::string db_file(const std::string& name = "store") const { return dir(name) + "/tessera.db"; }

  std::unique_ptr<Store> open(const std::string& name = "store") const {
    auto store = open_sqlite_store(dir(name));
    EXPECT_TRUE(store.ok()) << store.error().message;
    return store.ok() ? std::move(*store) : nullptr;
  }

  std::string root_;
};

JobRow job(int64_t id, std::string state = "pending") {
  return {id, std::move(state), "team-a", "alice", 1700000000 + id, R"({"id":)" + std::to_string(id) + "}", {}};
}

EventRow event(int64_t job_id, std::string kind, std::string detail = "{}") {
  return {0, job_id, 1700000000, std::move(kind), "scheduler", std::move(detail)};
}

WriteBatch job_batch(int64_t id) {
  WriteBatch b;
  b.jobs.push_back(job(id));
  return b;
}

using tessera::testing::sqlite_query;

void expect_jobs_equal(const JobRow& a, const JobRow& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.queue, b.queue);
  EXPECT_EQ(a.user, b.user);
  EXPECT_EQ(a.submitted, b.submitted);
  EXPECT_EQ(a.record, b.record);
}

// A row may carry its record as an encoder (the controller's rows do): the writer thread calls it,
// and the stored text is what it returned; a batch whose encoder throws fails alone, saying which job.
TEST_F(StoreTest, RowsEncodedByTheWriterThread) {
  auto store = open();
  ASSERT_TRUE(store);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> on_caller{false};
  std::atomic<int> calls{0};
  JobRow lazy = job(5);
  lazy.record.clear();
  lazy.encode = [&] {
    ++calls;
    if (std::this_thread::get_id() == caller) on_caller = true;
    return std::string(R"({"id":5,"lazy":true})");
  };
  WriteBatch b;
  b.jobs = {lazy, job(6)};
  ASSERT_TRUE(store->write_sync(b).ok());
  EXPECT_GE(calls.load(), 1);
  EXPECT_FALSE(on_caller.load());

  JobRow bad = job(7);
  bad.record.clear();
  bad.encode = []() -> std::string { throw std::runtime_error("no memory"); };
  WriteBatch fails;
  fails.jobs = {bad};
  const Status st = store->write_sync(fails);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(contains(st.message(), "job 7")) << st.message();

  auto state = store->load();
  ASSERT_TRUE(state.ok()) << state.error().message;
  ASSERT_EQ(state->jobs.size(), 2u);
  EXPECT_EQ(state->jobs[0].record, R"({"id":5,"lazy":true})");
  expect_jobs_equal(state->jobs[1], job(6));
}

TEST_F(StoreTest, RoundTripAcrossReopen) {
  {
    auto store = open();
    ASSERT_TRUE(store);
    WriteBatch b1;
    b1.jobs = {job(3, "running"), job(1)};
    b1.events = {event(3, "submitted"), event(1, "submitted", R"({"gpus":8})")};
    b1.tokens = {{"ffee", "bob", "member", "team-b", 5, false, ""}, {"aa01", "root", "admin", "", 6, true, ""}};
    b1.meta = {{"next_job_id", "4"}, {"cluster", "c1"}};
    ASSERT_TRUE(store->write_sync(b1).ok());
    WriteBatch b2;
    b2.jobs = {job(2)};
    b2.events = {event(2, "submitted"), event(3, "started"), event(0, "denied", R"({"user":"eve"})")};
    ASSERT_TRUE(store->write_sync(b2).ok());
  }
  auto store = open();
  ASSERT_TRUE(store);
  auto state = store->load();
  ASSERT_TRUE(state.ok()) << state.error().message;
  ASSERT_EQ(state->jobs.size(), 3u);
  expect_jobs_equal(state->jobs[0], job(1));
  expect_jobs_equal(state->jobs[1], job(2));
  expect_jobs_equal(state->jobs[2], job(3, "running"));
  ASSERT_EQ(state->tokens.size(), 2u);
  EXPECT_EQ(state->tokens[0].hash, "aa01");
  EXPECT_EQ(state->tokens[0].user, "root");
  EXPECT_EQ(state->tokens[0].role, "admin");
  EXPECT_EQ(state->tokens[0].queue, "");
  EXPECT_EQ(state->tokens[0].created, 6);
  EXPECT_TRUE(state->tokens[0].revoked);
  EXPECT_EQ(state->tokens[1].hash, "ffee");
  EXPECT_EQ(state->tokens[1].queue, "team-b");
  EXPECT_FALSE(state->tokens[1].revoked);
  using Meta = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(state->meta, (Meta{{"cluster", "c1"}, {"next_job_id", "4"}}));
  EXPECT_EQ(state->last_event_seq, 5);

  auto job3 = store->events_for_job(3);
  ASSERT_TRUE(job3.ok());
  ASSERT_EQ(job3->size(), 2u);
  EXPECT_EQ((*job3)[0].seq, 1);
  EXPECT_EQ((*job3)[0].kind, "submitted");
  EXPECT_EQ((*job3)[1].seq, 4);
  EXPECT_EQ((*job3)[1].kind, "started");
  EXPECT_EQ((*job3)[1].actor, "scheduler");
  EXPECT_EQ((*job3)[1].time, 1700000000);

  auto no_job = store->events_for_job(0);
  ASSERT_TRUE(no_job.ok());
  ASSERT_EQ(no_job->size(), 1u);
  EXPECT_EQ((*no_job)[0].kind, "denied");
  EXPECT_EQ((*no_job)[0].detail, R"({"user":"eve"})");

  auto after = store->events_after(1, 3);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 3u);
  EXPECT_EQ((*after)[0].seq, 2);
  EXPECT_EQ((*after)[0].detail, R"({"gpus":8})");
  EXPECT_EQ((*after)[1].seq, 3);
  EXPECT_EQ((*after)[2].seq, 4);
  auto tail = store->events_after(5, 10);
  ASSERT_TRUE(tail.ok());
  EXPECT_TRUE(tail->empty());
  EXPECT_FALSE(store->events_after(0, 0).ok()) << "a limit must be positive";
}

TEST_F(StoreTest, EmptyStoreLoadsEmpty) {
  auto store = open();
  ASSERT_TRUE(store);
  auto state = store->load();
  ASSERT_TRUE(state.ok());
  EXPECT_TRUE(state->jobs.empty());
  EXPECT_TRUE(state->tokens.empty());
  EXPECT_TRUE(state->meta.empty());
  EXPECT_EQ(state->last_event_seq, 0);
  EXPECT_EQ(sqlite_query(db_file(), "PRAGMA user_version"), std::to_string(sqlite_schema_version()));
  EXPECT_EQ(sqlite_query(db_file(), "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(fs::status(dir()).permissions() & fs::perms::all, fs::perms::owner_all) << "DIR is created 0700";
}

TEST_F(StoreTest, ReplaceUpdatesRowsById) {
  auto store = open();
  ASSERT_TRUE(store);
  WriteBatch first;
  first.jobs = {job(7)};
  first.tokens = {{"h1", "bob", "member", "q", 1, false, ""}};
  first.meta = {{"k", "v1"}};
  ASSERT_TRUE(store->write_sync(first).ok());
  WriteBatch second;
  JobRow updated = job(7, "completed");
  updated.record = R"({"id":7,"exit":0})";
  second.jobs = {updated};
  second.tokens = {{"h1", "bob", "member", "q", 1, true, ""}};
  second.meta = {{"k", "v2"}};
  ASSERT_TRUE(store->write_sync(second).ok());
  auto state = store->load();
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(state->jobs.size(), 1u);
  expect_jobs_equal(state->jobs[0], updated);
  ASSERT_EQ(state->tokens.size(), 1u);
  EXPECT_TRUE(state->tokens[0].revoked);
  ASSERT_EQ(state->meta.size(), 1u);
  EXPECT_EQ(state->meta[0].second, "v2");
}

TEST_F(StoreTest, ConcurrentWritersAreGroupCommitted) {
  auto store = open();
  ASSERT_TRUE(store);
  constexpr int kThreads = 16;
  constexpr int kPerThread = 500;
  std::atomic<int> ok_calls{0}, failed_calls{0};
  std::vector<std::atomic<int>> calls(kThreads * kPerThread);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        int64_t id = 1 + t * kPerThread + i;
        store->write(job_batch(id), [&, id](Status s) {
          calls[id - 1].fetch_add(1);
          (s.ok() ? ok_calls : failed_calls).fetch_add(1);
        });
      }
    });
  }
  for (auto& th : threads) th.join();
  store->flush();
  EXPECT_EQ(ok_calls.load(), kThreads * kPerThread);
  EXPECT_EQ(failed_calls.load(), 0);
  for (size_t i = 0; i < calls.size(); ++i) ASSERT_EQ(calls[i].load(), 1) << "done of job " << i + 1;
  auto state = store->load();
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(state->jobs.size(), static_cast<size_t>(kThreads * kPerThread));
  for (size_t i = 0; i < state->jobs.size(); ++i) ASSERT_EQ(state->jobs[i].id, static_cast<int64_t>(i + 1));
  StoreStats stats = store->stats();
  EXPECT_EQ(stats.batches, kThreads * kPerThread);
  EXPECT_LT(stats.transactions, stats.batches) << "batches queued together share a transaction";
  EXPECT_GE(stats.transactions, 1);
}

// A `done` that blocks holds the writer thread, so what is queued meanwhile forms one group.
struct WriterGate {
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, open = false;
  std::function<void(Status)> hold() {
    return [this](Status) {
      std::unique_lock lock(mu);
      entered = true;
      cv.notify_all();
      cv.wait(lock, [&] { return open; });
    };
  }
  void wait_entered() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return entered; });
  }
  void release() {
    std::lock_guard lock(mu);
    open = true;
    cv.notify_all();
  }
};

TEST_F(StoreTest, QueuedBatchesShareOneTransaction) {
  auto store = open();
  ASSERT_TRUE(store);
  WriterGate gate;
  store->write(job_batch(1), gate.hold());
  gate.wait_entered();
  for (int id = 2; id <= 101; ++id) store->write(job_batch(id), nullptr);
  gate.release();
  store->flush();
  StoreStats stats = store->stats();
  EXPECT_EQ(stats.batches, 101);
  EXPECT_EQ(stats.transactions, 2);
}

TEST_F(StoreTest, BadBatchFailsAloneInAGroup) {
  auto store = open();
  ASSERT_TRUE(store);
  WriterGate gate;
  store->write(job_batch(1), gate.hold());
  gate.wait_entered();
  std::vector<Status> results(3);
  WriteBatch bad;
  bad.events = {event(9, "submitted")};
  bad.jobs = {job(0)};  // ids are positive: the CHECK constraint fails the whole batch
  store->write(job_batch(2), [&](Status s) { results[0] = s; });
  store->write(bad, [&](Status s) { results[1] = s; });
  store->write(job_batch(3), [&](Status s) { results[2] = s; });
  gate.release();
  store->flush();
  EXPECT_TRUE(results[0].ok());
  ASSERT_FALSE(results[1].ok());
  EXPECT_TRUE(contains(results[1].message(), db_file())) << results[1].message();
  EXPECT_TRUE(contains(results[1].message(), "CHECK constraint failed")) << results[1].message();
  EXPECT_TRUE(results[2].ok());
  auto state = store->load();
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(state->jobs.size(), 3u);
  EXPECT_EQ(state->jobs[2].id, 3);
  EXPECT_EQ(state->last_event_seq, 0) << "the bad batch's event was rolled back with it";
  StoreStats stats = store->stats();
  EXPECT_EQ(stats.batches, 3);
  EXPECT_EQ(stats.transactions, 3) << "the failed group was retried batch by batch";
}

TEST_F(StoreTest, BatchesCommitInWriteOrder) {
  auto store = open();
  ASSERT_TRUE(store);
  constexpr int kEvents = 2000;
  for (int i = 0; i < kEvents; ++i) {
    WriteBatch b;
    b.events = {event(i % 7, "tick", std::to_string(i))};
    store->write(std::move(b), nullptr);
  }
  store->flush();
  auto events = store->events_after(0, 100000);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), static_cast<size_t>(kEvents));
  for (int i = 0; i < kEvents; ++i) {
    ASSERT_EQ((*events)[i].seq, i + 1) << "seq has no gaps";
    ASSERT_EQ((*events)[i].detail, std::to_string(i)) << "commit order is write() order";
  }
  auto job3 = store->events_for_job(3);
  ASSERT_TRUE(job3.ok());
  for (size_t i = 1; i < job3->size(); ++i) ASSERT_LT((*job3)[i - 1].seq, (*job3)[i].seq);
}

TEST_F(StoreTest, DestructorCommitsEverythingQueued) {
  std::atomic<int> done_calls{0};
  {
    auto store = open();
    ASSERT_TRUE(store);
    for (int id = 1; id <= 300; ++id) store->write(job_batch(id), [&](Status s) {
      EXPECT_TRUE(s.ok());
      done_calls.fetch_add(1);
    });
  }
  EXPECT_EQ(done_calls.load(), 300);
  auto store = open();
  ASSERT_TRUE(store);
  auto state = store->load();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->jobs.size(), 300u);
}

TEST_F(StoreTest, AcknowledgedWritesSurviveSigkill) {
  std::mt19937 rng(std::random_device{}());
  for (int round = 0; round < 3; ++round) {
    std::string name = "crash" + std::to_string(round);
    fs::create_directories(dir(name));
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      auto store = open_sqlite_store(dir(name));
      if (!store.ok()) ::_exit(2);
      for (int64_t id = 1;; ++id) {
        WriteBatch b = job_batch(id);
        b.events = {event(id, "submitted")};
        if (!(*store)->write_sync(std::move(b)).ok()) ::_exit(3);
        if (::write(fds[1], &id, sizeof id) != sizeof id) ::_exit(4);
      }
    }
    ::close(fds[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(100, 400)(rng)));
    ::kill(pid, SIGKILL);
    int64_t acknowledged = 0, id = 0;
    while (::read(fds[0], &id, sizeof id) == sizeof id) acknowledged = id;
    ::close(fds[0]);
    int wstatus = 0;
    ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(wstatus)) << "the child ran until killed (exit " << WEXITSTATUS(wstatus) << ")";
    ASSERT_GT(acknowledged, 0) << "the child committed something before the kill";

    auto store = open(name);
    ASSERT_TRUE(store);
    auto state = store->load();
    ASSERT_TRUE(state.ok()) << state.error().message;
    ASSERT_GE(state->jobs.size(), static_cast<size_t>(acknowledged));
    ASSERT_LE(state->jobs.size(), static_cast<size_t>(acknowledged + 1)) << "at most the one in flight";
    for (size_t i = 0; i < state->jobs.size(); ++i) ASSERT_EQ(state->jobs[i].id, static_cast<int64_t>(i + 1));
    EXPECT_EQ(state->last_event_seq, static_cast<int64_t>(state->jobs.size())) << "job and event commit together";
    store.reset();
    EXPECT_EQ(sqlite_query(db_file(name), "PRAGMA integrity_check"), "ok");
  }
}

TEST_F(StoreTest, RefusesNewerSchema) {
  ASSERT_TRUE(open());
  sqlite_query(db_file(), "PRAGMA user_version = 99");
  auto store = open_sqlite_store(dir());
  ASSERT_FALSE(store.ok());
  const std::string& msg = store.error().message;
  EXPECT_TRUE(contains(msg, db_file())) << msg;
  EXPECT_TRUE(contains(msg, "99")) << msg;
  EXPECT_TRUE(contains(msg, "version " + std::to_string(sqlite_schema_version()))) << msg;
}

TEST_F(StoreTest, RefusesOtherSqliteDatabase) {
  fs::create_directories(dir());
  sqlite_query(db_file(), "CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)");
  auto store = open_sqlite_store(dir());
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(contains(store.error().message, db_file() + " is not a Tessera database")) << store.error().message;
  EXPECT_TRUE(contains(store.error().message, "invoices")) << store.error().message;
  EXPECT_EQ(sqlite_query(db_file(), "SELECT count(*) FROM sqlite_master WHERE name = 'jobs'"), "0")
      << "a refused file is left as it was";

  sqlite_query(db_file(), "PRAGMA application_id = 1234");
  sqlite_query(db_file(), "DROP TABLE invoices");
  auto other_app = open_sqlite_store(dir());
  ASSERT_FALSE(other_app.ok());
  EXPECT_TRUE(contains(other_app.error().message, "application_id")) << other_app.error().message;
}

TEST_F(StoreTest, RefusesGarbageFile) {
  fs::create_directories(dir());
  {
    std::ofstream out(db_file(), std::ios::binary);
    std::mt19937 rng(7);
    for (int i = 0; i < 8192; ++i) out.put(static_cast<char>(rng()));
  }
  auto store = open_sqlite_store(dir());
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(contains(store.error().message, db_file() + " is not a Tessera database")) << store.error().message;
  EXPECT_TRUE(contains(store.error().message, "not a SQLite file")) << store.error().message;
}

TEST_F(StoreTest, UnusableDirectoryIsAnError) {
  std::ofstream(root_ + "/plain_file") << "x";
  auto under_file = open_sqlite_store(root_ + "/plain_file/store");
  ASSERT_FALSE(under_file.ok());
  EXPECT_TRUE(contains(under_file.error().message, root_ + "/plain_file")) << under_file.error().message;

  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  fs::create_directories(dir());
  fs::permissions(dir(), fs::perms::owner_read | fs::perms::owner_exec);
  auto store = open_sqlite_store(dir());
  fs::permissions(dir(), fs::perms::owner_all);
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(contains(store.error().message, db_file())) << store.error().message;
}

TEST_F(StoreTest, BackupWhileWriting) {
  auto store = open();
  ASSERT_TRUE(store);
  for (int64_t id = 1; id <= 200; ++id) {
    WriteBatch b = job_batch(id);
    b.events = {event(id, "submitted")};
    store->write(std::move(b), nullptr);
  }
  store->flush();
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int64_t id = 201; !stop.load(); ++id) {
      WriteBatch b = job_batch(id);
      b.events = {event(id, "submitted")};
      store->write(std::move(b), nullptr);
      if (id % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto before = store->load();
  ASSERT_TRUE(before.ok());
  std::string backup = root_ + "/backup.db";
  Status s = store->backup(backup);
  auto after = store->load();
  stop = true;
  writer.join();
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(after.ok());

  Status again = store->backup(backup);
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(contains(again.message(), backup)) << again.message();

  EXPECT_EQ(sqlite_query(backup, "PRAGMA integrity_check"), "ok");
  fs::create_directories(dir("copy"));
  fs::copy_file(backup, db_file("copy"));
  auto copy = open("copy");
  ASSERT_TRUE(copy);
  auto state = copy->load();
  ASSERT_TRUE(state.ok()) << state.error().message;
  EXPECT_GE(state->jobs.size(), before->jobs.size());
  EXPECT_LE(state->jobs.size(), after->jobs.size());
  // A prefix of the commits: jobs 1..n, each with its event (written in the same batch).
  for (size_t i = 0; i < state->jobs.size(); ++i) ASSERT_EQ(state->jobs[i].id, static_cast<int64_t>(i + 1));
  EXPECT_EQ(state->last_event_seq, static_cast<int64_t>(state->jobs.size()));
}

TEST_F(StoreTest, RestoreInstallsABackup) {
  std::string backup = root_ + "/backup.db";
  {
    auto store = open("source");
    ASSERT_TRUE(store);
    WriteBatch b;
    b.jobs = {job(1), job(2, "running")};
    b.events = {event(2, "started")};
    b.meta = {{"next_job_id", "3"}};
    ASSERT_TRUE(store->write_sync(b).ok());
    ASSERT_TRUE(store->backup(backup).ok());
  }
  // Into an empty directory.
  ASSERT_TRUE(restore_sqlite_store(backup, dir("fresh"), false).ok());
  {
    auto restored = open("fresh");
    ASSERT_TRUE(restored);
    auto state = restored->load();
    ASSERT_TRUE(state.ok());
    ASSERT_EQ(state->jobs.size(), 2u);
    expect_jobs_equal(state->jobs[1], job(2, "running"));
    EXPECT_EQ(state->last_event_seq, 1);
  }

  // Over an existing store: refused without force, replaced with it.
  {
    auto existing = open("existing");
    ASSERT_TRUE(existing);
    WriteBatch b;
    b.jobs = {job(40), job(41), job(42)};
    ASSERT_TRUE(existing->write_sync(b).ok());
  }
  Status refused = restore_sqlite_store(backup, dir("existing"), false);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(contains(refused.message(), "use --force to replace")) << refused.message();
  EXPECT_TRUE(contains(refused.message(), db_file("existing"))) << refused.message();
  {
    auto untouched = open("existing");
    ASSERT_TRUE(untouched);
    EXPECT_EQ(untouched->load()->jobs.size(), 3u);
  }
  Status forced = restore_sqlite_store(backup, dir("existing"), true);
  ASSERT_TRUE(forced.ok()) << forced.message();
  EXPECT_FALSE(fs::exists(db_file("existing") + "-wal"));
  auto replaced = open("existing");
  ASSERT_TRUE(replaced);
  auto state = replaced->load();
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(state->jobs.size(), 2u);
  EXPECT_EQ(state->jobs[0].id, 1);
  EXPECT_EQ(state->jobs[1].id, 2);
  for (const auto& entry : fs::directory_iterator(dir("existing"))) {
    EXPECT_FALSE(contains(entry.path().filename().string(), "restore")) << "no temporary file left";
  }
}

TEST_F(StoreTest, RestoreRefusesBadFiles) {
  std::string garbage = root_ + "/garbage.db";
  {
    std::ofstream out(garbage, std::ios::binary);
    for (int i = 0; i < 4096; ++i) out.put(static_cast<char>(i * 31));
  }
  Status s = restore_sqlite_store(garbage, dir(), false);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(contains(s.message(), garbage + " is not a Tessera database")) << s.message();
  EXPECT_FALSE(fs::exists(db_file()));

  Status missing = restore_sqlite_store(root_ + "/nope.db", dir(), false);
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(contains(missing.message(), root_ + "/nope.db")) << missing.message();

  std::string other = root_ + "/other.db";
  sqlite_query(other, "CREATE TABLE t (x)");
  Status not_ours = restore_sqlite_store(other, dir(), false);
  ASSERT_FALSE(not_ours.ok());
  EXPECT_TRUE(contains(not_ours.message(), "not a Tessera database")) << not_ours.message();

  std::string newer = root_ + "/newer.db";
  {
    auto store = open("src");
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->backup(newer).ok());
  }
  sqlite_query(newer, "PRAGMA user_version = 42");
  Status too_new = restore_sqlite_store(newer, dir(), false);
  ASSERT_FALSE(too_new.ok());
  EXPECT_TRUE(contains(too_new.message(), "42")) << too_new.message();
  EXPECT_FALSE(fs::exists(db_file()));
}

// Not a timing assertion: prints the commit rate of single-job batches with 64 writer threads.
TEST_F(StoreTest, CommitRateWith64Writers) {
  auto store = open();
  ASSERT_TRUE(store);
  constexpr int kThreads = 64;
  constexpr int kPerThread = 200;
  std::atomic<int> failed{0};
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        if (!store->write_sync(job_batch(1 + t * kPerThread + i)).ok()) failed.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(failed.load(), 0);
  StoreStats stats = store->stats();
  EXPECT_EQ(stats.batches, kThreads * kPerThread);
  std::printf("[ rate ] %d writers (write_sync): %lld batches in %.3f s = %.0f batches/s, %lld transactions = "
              "%.0f transactions/s, %.1f batches/transaction\n",
              kThreads, static_cast<long long>(stats.batches), seconds, stats.batches / seconds,
              static_cast<long long>(stats.transactions), stats.transactions / seconds,
              static_cast<double>(stats.batches) / static_cast<double>(stats.transactions));
}

}  // namespace
}  // namespace tessera::server
