// Faults of the disk and the data directory (issue 19, part 3): a damaged page or a lost or
// truncated -wal is refused at open with the recovery named, backup refuses a damaged store, the
// data directory's lock cannot be removed from under a server and keeps `admin restore` out, and
// the directory and its files are private whatever the umask. The last tests run the real binary.
// Each test works in its own mkdtemp directory under /tmp, removed at the end.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "server/data_dir.h"
#include "server/store.h"
#include "server_process.h"
#include "sqlite_query.h"

namespace tessera::server {
namespace {

namespace fs = std::filesystem;
using tessera::testing::CliResult;
using tessera::testing::run_cli;
using tessera::testing::ServerProcess;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

using tessera::testing::sqlite_query;

mode_t mode_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

// A batch of one job (a 1 KiB record, so that a few hundred fill some hundred pages) and its event.
WriteBatch job_batch(int64_t id) {
  WriteBatch b;
  b.jobs.push_back({id, "pending", "team-a", "alice", 1700000000 + id,
                    R"({"id":)" + std::to_string(id) + R"(,"pad":")" + std::string(1024, 'x') + "\"}"});
  b.events.push_back({0, id, 1700000000, "submitted", "alice", "{}"});
  return b;
}

class StoreFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tessera_store_faults_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  std::string dir(const std::string& name = "store") const { return root_ + "/" + name; }
  std::string db(const std::string& name = "store") const { return dir(name) + "/tessera.db"; }

  // Writes jobs 1..n (each its own acknowledged transaction) and closes the store cleanly.
  void write_jobs(int64_t n, const std::string& name = "store") const {
    auto store = open_sqlite_store(dir(name));
    ASSERT_TRUE(store.ok()) << store.error().message;
    for (int64_t id = 1; id <= n; ++id) ASSERT_TRUE((*store)->write_sync(job_batch(id)).ok());
  }

  // As write_jobs, in a child that then dies without closing the store (as kill -9 would leave it).
  void write_jobs_and_die(int64_t n, const std::string& name = "store") const {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto store = open_sqlite_store(dir(name));
      if (!store.ok()) ::_exit(2);
      for (int64_t id = 1; id <= n; ++id) {
        if (!(*store)->write_sync(job_batch(id)).ok()) ::_exit(3);
      }
      ::_exit(0);  // no destructor: the -wal stays, the commit record says "open"
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
    ASSERT_TRUE(fs::exists(db(name) + "-wal"));
  }

  // Overwrites page `page` (1-based) of the database file with random bytes.
  void randomise_page(const std::string& path, int64_t page) const {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good());
    unsigned char header[100];
    f.read(reinterpret_cast<char*>(header), sizeof header);
    int64_t page_size = (header[16] << 8) | header[17];
    if (page_size == 1) page_size = 65536;
    ASSERT_GT(static_cast<int64_t>(fs::file_size(path)), page * page_size) << "the file has that page";
    std::mt19937 rng(19);
    std::string junk(static_cast<size_t>(page_size), '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    f.seekp((page - 1) * page_size);
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
    ASSERT_TRUE(f.good());
  }

  int64_t page_count(const std::string& path) const { return std::stoll(sqlite_query(path, "PRAGMA page_count")); }

  std::string root_;
};

// ---- integrity at open ----

TEST_F(StoreFaults, DamagedPageIsRefusedWithTheRecovery) {
  write_jobs(300);
  ASSERT_FALSE(fs::exists(db() + "-wal")) << "a clean close checkpoints the log into tessera.db";
  randomise_page(db(), page_count(db()) / 2);
  ASSERT_NE(sqlite_query(db(), "PRAGMA quick_check"), "ok") << "the damage is real";

  for (StoreCheck check : {StoreCheck::kQuick, StoreCheck::kFull}) {
    SqliteOpenOptions options;
    options.check = check;
    auto store = open_sqlite_store(dir(), options);
    ASSERT_FALSE(store.ok()) << "a damaged store must not start silently";
    const std::string& msg = store.error().message;
    EXPECT_TRUE(contains(msg, db() + " is damaged")) << msg;
    EXPECT_TRUE(contains(msg, check == StoreCheck::kFull ? "integrity check" : "quick check")) << msg;
    EXPECT_TRUE(contains(msg, "tessera admin restore BACKUP --data " + dir() + " --force")) << msg;
  }
}

TEST_F(StoreFaults, FullCheckFindsAnIndexThatQuickCheckSkips) {
  write_jobs(50);
  // The index jobs_state now claims to index `queue` while its entries index `state`.
  sqlite_query(db(), "PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql = "
                     "'CREATE INDEX jobs_state ON jobs(queue)' WHERE name = 'jobs_state'");
  ASSERT_EQ(sqlite_query(db(), "PRAGMA quick_check"), "ok");
  ASSERT_NE(sqlite_query(db(), "PRAGMA integrity_check"), "ok");

  SqliteOpenOptions full;
  full.check = StoreCheck::kFull;
  auto refused = open_sqlite_store(dir(), full);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(contains(refused.error().message, "integrity check")) << refused.error().message;
  EXPECT_TRUE(contains(refused.error().message, "jobs_state")) << refused.error().message;
  auto quick = open_sqlite_store(dir());
  EXPECT_TRUE(quick.ok()) << "the quick check reads pages, not index contents";
}

TEST_F(StoreFaults, DeletedWalAfterACrashIsRefused) {
  write_jobs_and_die(400);  // more than the auto-checkpoint: some commits are in tessera.db, the rest in the log
  fs::remove(db() + "-wal");
  fs::remove(db() + "-shm");
  auto store = open_sqlite_store(dir());
  ASSERT_FALSE(store.ok()) << "acknowledged jobs lost without a word";
  const std::string& msg = store.error().message;
  EXPECT_TRUE(contains(msg, "missing acknowledged commits")) << msg;
  EXPECT_TRUE(contains(msg, "400 were acknowledged")) << msg;
  EXPECT_TRUE(contains(msg, db() + "-wal (the write-ahead log) is missing")) << msg;
  EXPECT_TRUE(contains(msg, "tessera admin restore BACKUP --data " + dir())) << msg;
  EXPECT_TRUE(contains(msg, "remove " + dir() + "/tessera.db-state")) << msg;

  // The operator may accept the loss: then the store opens with what is left.
  fs::remove(dir() + "/tessera.db-state");
  auto accepted = open_sqlite_store(dir());
  ASSERT_TRUE(accepted.ok()) << accepted.error().message;
  auto state = (*accepted)->load();
  ASSERT_TRUE(state.ok());
  EXPECT_LT(state->jobs.size(), 400u);
}

TEST_F(StoreFaults, TruncatedWalIsRefused) {
  write_jobs_and_die(60);
  const std::string wal = db() + "-wal";
  fs::resize_file(wal, fs::file_size(wal) / 2);
  auto store = open_sqlite_store(dir());
  ASSERT_FALSE(store.ok()) << "a half log replays half the commits";
  const std::string& msg = store.error().message;
  EXPECT_TRUE(contains(msg, "60 were acknowledged")) << msg;
  EXPECT_TRUE(contains(msg, "was truncated or damaged")) << msg;
  EXPECT_TRUE(contains(msg, "tessera admin restore")) << msg;
}

TEST_F(StoreFaults, MissingWalWithNothingLostIsAWarning) {
  write_jobs_and_die(30);
  // Another program opened and closed the database: it checkpointed the log and removed it.
  sqlite_query(db(), "PRAGMA wal_checkpoint(TRUNCATE)");
  ASSERT_FALSE(fs::exists(db() + "-wal"));
  std::vector<std::string> warnings;
  SqliteOpenOptions options;
  options.warn = [&](const std::string& w) { warnings.push_back(w); };
  auto store = open_sqlite_store(dir(), options);
  ASSERT_TRUE(store.ok()) << store.error().message;
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_TRUE(contains(warnings[0], db() + "-wal is missing after a run that did not stop cleanly")) << warnings[0];
  EXPECT_TRUE(contains(warnings[0], "none is lost")) << warnings[0];
  EXPECT_EQ((*store)->load()->jobs.size(), 30u);
}

TEST_F(StoreFaults, CrashWithTheWalAndCleanRestartsAreSilent) {
  write_jobs_and_die(20);
  std::vector<std::string> warnings;
  SqliteOpenOptions options;
  options.warn = [&](const std::string& w) { warnings.push_back(w); };
  {
    auto store = open_sqlite_store(dir(), options);
    ASSERT_TRUE(store.ok()) << store.error().message;
    EXPECT_EQ((*store)->load()->jobs.size(), 20u);
    ASSERT_TRUE((*store)->write_sync(job_batch(21)).ok());
  }
  EXPECT_FALSE(fs::exists(db() + "-wal"));
  auto again = open_sqlite_store(dir(), options);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ((*again)->load()->jobs.size(), 21u);
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  EXPECT_TRUE((*again)->load()->meta.empty()) << "the commit count is the store's, not the controller's";
}

TEST_F(StoreFaults, OlderCopyPutInPlaceIsRefused) {
  write_jobs(10);
  const std::string old_copy = root_ + "/old.db";
  {
    auto store = open_sqlite_store(dir());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->backup(old_copy).ok());
    for (int64_t id = 11; id <= 15; ++id) ASSERT_TRUE((*store)->write_sync(job_batch(id)).ok());
  }
  fs::copy_file(old_copy, db(), fs::copy_options::overwrite_existing);
  auto refused = open_sqlite_store(dir());
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(contains(refused.error().message, "the last 5 are lost")) << refused.error().message;
  // `admin restore` is the way to put an older copy in place.
  ASSERT_TRUE(restore_sqlite_store(old_copy, dir(), true).ok());
  auto restored = open_sqlite_store(dir());
  ASSERT_TRUE(restored.ok()) << restored.error().message;
  EXPECT_EQ((*restored)->load()->jobs.size(), 10u);
}

// ---- backup ----

TEST_F(StoreFaults, BackupRefusesADamagedStore) {
  write_jobs(300);
  auto store = open_sqlite_store(dir());
  ASSERT_TRUE(store.ok()) << store.error().message;
  randomise_page(db(), page_count(db()) / 2);  // damaged under the running store
  const std::string copy = root_ + "/backup.db";
  Status s = (*store)->backup(copy);
  ASSERT_FALSE(s.ok()) << "a damaged store was copied into a backup";
  EXPECT_TRUE(contains(s.message(), "no backup taken")) << s.message();
  EXPECT_TRUE(contains(s.message(), "quick check")) << s.message();
  EXPECT_TRUE(contains(s.message(), "tessera admin restore")) << s.message();
  EXPECT_FALSE(fs::exists(copy)) << "nothing is left at the backup path";
}

// ---- the data directory's lock ----

TEST_F(StoreFaults, DirectoryLockCannotBeRemovedFromUnderItsHolder) {
  auto first = lock_data_dir(dir());
  ASSERT_TRUE(first.ok()) << first.error().message;
  write_jobs(1);
  // Removing every file in the directory (what `rm DIR/tessera.lock` did to the old lock) changes nothing.
  for (const auto& entry : fs::directory_iterator(dir())) fs::remove(entry.path());
  auto second = lock_data_dir(dir());
  ASSERT_FALSE(second.ok()) << "two holders of one data directory";
  EXPECT_EQ(second.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(second.error().message, "a tessera server holds " + dir() + "; stop it first");
  *first = DataDirLock();  // released
  EXPECT_TRUE(lock_data_dir(dir()).ok());
}

TEST_F(StoreFaults, LockHonoursTheLockFileOfAnOlderServer) {
  fs::create_directories(dir());
  const int fd = ::open((dir() + "/tessera.lock").c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  auto refused = lock_data_dir(dir());
  ::close(fd);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(contains(refused.error().message, "a tessera server holds " + dir())) << refused.error().message;
  EXPECT_TRUE(lock_data_dir(dir()).ok());
}

TEST_F(StoreFaults, RestoreIsRefusedWhileTheDirectoryIsHeld) {
  const std::string backup = root_ + "/backup.db";
  {
    write_jobs(3, "source");
    auto src = open_sqlite_store(dir("source"));
    ASSERT_TRUE(src.ok());
    ASSERT_TRUE((*src)->backup(backup).ok());
  }
  write_jobs(7);
  {
    auto held = lock_data_dir(dir());
    ASSERT_TRUE(held.ok());
    Status s = restore_sqlite_store(backup, dir(), /*force=*/true);
    ASSERT_FALSE(s.ok()) << "restore --force replaced the store of a running server";
    EXPECT_EQ(s.message(), "a tessera server holds " + dir() + "; stop it first");
  }
  auto kept = open_sqlite_store(dir());
  ASSERT_TRUE(kept.ok()) << kept.error().message;
  EXPECT_EQ((*kept)->load()->jobs.size(), 7u);
  kept->reset();
  ASSERT_TRUE(restore_sqlite_store(backup, dir(), true).ok());
}

// ---- permissions ----

TEST_F(StoreFaults, DirectoryAndFilesArePrivateWhateverTheUmask) {
  const mode_t old_umask = ::umask(0);
  auto store = open_sqlite_store(dir());
  ::umask(old_umask);
  ASSERT_TRUE(store.ok()) << store.error().message;
  ASSERT_TRUE((*store)->write_sync(job_batch(1)).ok());
  EXPECT_EQ(mode_of(dir()), 0700u);
  for (const char* f : {"tessera.db", "tessera.db-wal", "tessera.db-shm", "tessera.db-state"}) {
    ASSERT_TRUE(fs::exists(dir() + "/" + f)) << f;
    EXPECT_EQ(mode_of(dir() + "/" + f), 0600u) << f;
  }
  const std::string copy = root_ + "/backup.db";
  ASSERT_TRUE((*store)->backup(copy).ok());
  EXPECT_EQ(mode_of(copy), 0600u);
}

TEST_F(StoreFaults, WiderModesAreTightenedAtOpen) {
  write_jobs(2);
  ASSERT_EQ(::chmod(dir().c_str(), 0755), 0);
  ASSERT_EQ(::chmod(db().c_str(), 0644), 0);
  std::vector<std::string> warnings;
  SqliteOpenOptions options;
  options.warn = [&](const std::string& w) { warnings.push_back(w); };
  auto store = open_sqlite_store(dir(), options);
  ASSERT_TRUE(store.ok()) << store.error().message;
  EXPECT_EQ(mode_of(dir()), 0700u);
  EXPECT_EQ(mode_of(db()), 0600u);
  EXPECT_EQ(mode_of(db() + "-wal"), 0600u);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_TRUE(contains(warnings[0], "tightened the data directory " + dir() + " from 0755 to 0700")) << warnings[0];
  EXPECT_TRUE(contains(warnings[1], "tightened " + db() + " from 0644 to 0600")) << warnings[1];
}

// ---- the real binary ----

std::string show(const CliResult& r) {
  return "exit " + std::to_string(r.status) + "\n--- stdout\n" + r.out + "--- stderr\n" + r.err;
}

TEST(StoreFaultsE2E, AdminRestoreIsRefusedWhileTheServerRuns) {
  ServerProcess server;
  std::string out;
  ASSERT_EQ(::chmod(server.dir().c_str(), 0755), 0);  // a directory made by hand, too open
  const mode_t old_umask = ::umask(0);  // the server inherits it: modes must not depend on it
  const bool started = server.start(&out);
  ::umask(old_umask);
  ASSERT_TRUE(started) << out;
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  const std::string backup = tessera::testing::make_temp_dir("tessera-faults") + "/backup.db";
  auto saved = run_cli({"admin", "backup", backup, "--server", url, "--token", server.admin_token()});
  ASSERT_EQ(saved.status, 0) << show(saved);

  EXPECT_EQ(mode_of(server.dir()), 0700u);
  for (const char* f : {"tessera.db", "tessera.db-wal", "tessera.db-shm", "admin.token"}) {
    EXPECT_EQ(mode_of(server.dir() + "/" + f), 0600u) << f;
  }

  fs::remove(server.dir() + "/tessera.lock");  // defeated the old lock; there is none to remove now
  auto second = run_cli({"server", "--data", server.dir(), "--listen", "127.0.0.1:0", "--log-level", "warn"}, {}, 10);
  EXPECT_EQ(second.status, 1) << show(second);
  EXPECT_TRUE(contains(second.err, "in use by another tessera server")) << show(second);

  auto restore = run_cli({"admin", "restore", backup, "--data", server.dir(), "--force"});
  EXPECT_NE(restore.status, 0) << show(restore);
  EXPECT_TRUE(contains(restore.err, "a tessera server holds " + server.dir() + "; stop it first")) << show(restore);
  ASSERT_EQ(server.get("/api/v1/whoami", server.admin_token()).status, 200) << "the server runs on";

  server.kill(SIGTERM);
  auto after = run_cli({"admin", "restore", backup, "--data", server.dir(), "--force"});
  EXPECT_EQ(after.status, 0) << show(after);
  fs::remove_all(fs::path(backup).parent_path());
}

TEST(StoreFaultsE2E, CheckStoreFullRefusesADamagedIndex) {
  ServerProcess server;
  std::string out;
  ASSERT_TRUE(server.start(&out)) << out;
  for (int i = 0; i < 3; ++i) {
    auto r = server.post("/api/v1/jobs", server.admin_token(), tessera::testing::job("j" + std::to_string(i), "team-a"));
    ASSERT_EQ(r.status, 201) << r.raw;
  }
  server.kill(SIGTERM);
  const std::string db = server.dir() + "/tessera.db";
  sqlite_query(db, "PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql = "
                   "'CREATE INDEX jobs_state ON jobs(queue)' WHERE name = 'jobs_state'");
  ASSERT_TRUE(server.start(&out)) << "the quick check does not read index contents: " << out;
  server.kill(SIGTERM);
  auto full = run_cli({"server", "--data", server.dir(), "--listen", "127.0.0.1:0", "--log-level", "warn",
                       "--check-store", "full"},
                      {}, 20);
  EXPECT_EQ(full.status, 1) << show(full);
  EXPECT_TRUE(contains(full.err, "fails SQLite's integrity check")) << show(full);
  EXPECT_TRUE(contains(full.err, "tessera admin restore BACKUP --data " + server.dir())) << show(full);
}

}  // namespace
}  // namespace tessera::server
