// The embedded SQLite store (see store.h): DIR/tessera.db in WAL mode with synchronous=FULL.
// Ownership: SqliteStore owns two connections. The write connection (and its prepared statements)
// belongs to the writer thread once the constructor has started it; the read connection is shared by
// load()/events_*() under read_mu_. backup() opens its own short-lived read connection.
// Thread-safety: every public method may be called from any thread. write() only queues; the writer
// thread commits all queued batches (up to kMaxGroupBatches) in one transaction (group commit) and
// runs their `done` callbacks after COMMIT has returned (i.e. after fsync). A `done` runs on the
// writer thread: it may call write() but must not wait on the store (write_sync, flush), nor throw.
// Invariants: batches commit in write() order; completed_ <= enqueued_, and completed_ counts
// batches whose `done` has already run; PRAGMA user_version is the schema version (1..kSchemaVersion)
// and PRAGMA application_id is kApplicationId in every database this file creates.
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <string_view>
#include <thread>

#include "server/store.h"

namespace tessera::server {
namespace {

// "TSRA": marks a SQLite file as a Tessera store (PRAGMA application_id).
constexpr int32_t kApplicationId = 0x54535241;
constexpr const char* kDbFileName = "tessera.db";
constexpr int kBusyTimeoutMs = 10000;
// Upper bound on the batches one group-commit transaction takes from the queue.
constexpr size_t kMaxGroupBatches = 4096;

// Schema migrations; kMigrations[i] brings a store from user_version i to i + 1. Append only: a
// released step is never edited, a change is a new step.
constexpr const char* kMigrations[] = {
    // 1: the initial schema.
    R"sql(
      CREATE TABLE jobs (
        id INTEGER PRIMARY KEY CHECK (id > 0),
        state TEXT NOT NULL,
        queue TEXT NOT NULL,
        user TEXT NOT NULL,
        submitted INTEGER NOT NULL,
        record TEXT NOT NULL
      );
      CREATE INDEX jobs_state ON jobs(state);
      CREATE INDEX jobs_queue ON jobs(queue);
      CREATE INDEX jobs_user ON jobs(user);
      CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id INTEGER NOT NULL,
        time INTEGER NOT NULL,
        kind TEXT NOT NULL,
        actor TEXT NOT NULL,
        detail TEXT NOT NULL
      );
      CREATE INDEX events_job_id ON events(job_id);
      CREATE TABLE tokens (
        hash TEXT PRIMARY KEY CHECK (length(hash) > 0),
        user TEXT NOT NULL,
        role TEXT NOT NULL,
        queue TEXT NOT NULL,
        created INTEGER NOT NULL,
        revoked INTEGER NOT NULL
      );
      CREATE TABLE meta (
        "key" TEXT PRIMARY KEY,
        "value" TEXT NOT NULL
      );
    )sql",
};
constexpr int kSchemaVersion = static_cast<int>(std::size(kMigrations));

Error internal(std::string msg) { return {ErrorCode::kInternal, std::move(msg)}; }

std::string errno_text(int err) { return std::strerror(err); }

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using DbPtr = std::unique_ptr<sqlite3, DbCloser>;
struct StmtFinalizer {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using StmtPtr = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

// One connection plus the file name every error message carries.
struct Conn {
  DbPtr db;
  std::string path;

  // "PATH: WHAT: sqlite's message (OS error)".
  Error error(std::string_view what) const {
    std::string msg = path + ": " + std::string(what) + ": " + sqlite3_errmsg(db.get());
    // The OS error only where the failure was the OS's (it is stale otherwise).
    int code = errcode();
    bool os_failure = code == SQLITE_IOERR || code == SQLITE_CANTOPEN || code == SQLITE_FULL ||
                      code == SQLITE_READONLY || code == SQLITE_PERM;
    if (int os = sqlite3_system_errno(db.get()); os_failure && os != 0) msg += " (" + errno_text(os) + ")";
    return internal(std::move(msg));
  }
  int errcode() const { return sqlite3_errcode(db.get()) & 0xff; }

  Status exec(const char* sql, std::string_view what) const {
    if (sqlite3_exec(db.get(), sql, nullptr, nullptr, nullptr) != SQLITE_OK) return error(what);
    return {};
  }
  Result<StmtPtr> prepare(const char* sql) const {
    sqlite3_stmt* raw = nullptr;
    if (sqlite3_prepare_v3(db.get(), sql, -1, SQLITE_PREPARE_PERSISTENT, &raw, nullptr) != SQLITE_OK) {
      return error(std::string("cannot prepare \"") + sql + "\"");
    }
    return StmtPtr(raw);
  }
  // The first column of the first row of `sql`, as an integer (0 if no row).
  Result<int64_t> query_int(const char* sql) const {
    auto stmt = prepare(sql);
    if (!stmt) return stmt.error();
    int rc = sqlite3_step(stmt->get());
    if (rc == SQLITE_ROW) return static_cast<int64_t>(sqlite3_column_int64(stmt->get(), 0));
    if (rc == SQLITE_DONE) return int64_t{0};
    return error(std::string("\"") + sql + "\" failed");
  }
  Result<std::string> query_text(const char* sql) const {
    auto stmt = prepare(sql);
    if (!stmt) return stmt.error();
    int rc = sqlite3_step(stmt->get());
    if (rc == SQLITE_ROW) {
      const unsigned char* t = sqlite3_column_text(stmt->get(), 0);
      return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
    }
    if (rc == SQLITE_DONE) return std::string();
    return error(std::string("\"") + sql + "\" failed");
  }
  void rollback_if_open() const {
    if (!sqlite3_get_autocommit(db.get())) sqlite3_exec(db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
};

Result<Conn> open_conn(const std::string& path, int flags) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  Conn conn{DbPtr(raw), path};
  if (rc != SQLITE_OK) {
    if (!raw) return internal(path + ": cannot open: " + sqlite3_errstr(rc));
    return conn.error("cannot open");
  }
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, kBusyTimeoutMs);
  return conn;
}

Error not_tessera(const std::string& path, const std::string& why) {
  return failed_precondition(path + " is not a Tessera database (" + why + ")");
}

std::string hex32(int64_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", static_cast<unsigned>(v));
  return buf;
}

// Checks that `conn` is a Tessera store (or an empty database) this binary can read; returns its
// schema version (0 for an empty database).
Result<int> check_tessera(const Conn& conn) {
  auto app_id = conn.query_int("PRAGMA application_id");
  if (!app_id) {
    if (conn.errcode() == SQLITE_NOTADB) {
      return not_tessera(conn.path, std::string("not a SQLite file: ") + sqlite3_errmsg(conn.db.get()));
    }
    return app_id.error();
  }
  auto version = conn.query_int("PRAGMA user_version");
  if (!version) return version.error();
  if (*app_id == 0) {
    if (*version != 0) {
      return not_tessera(conn.path, "no Tessera application_id, user_version " + std::to_string(*version));
    }
    auto stmt = conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
    if (!stmt) return stmt.error();
    std::string tables;
    int rc;
    while ((rc = sqlite3_step(stmt->get())) == SQLITE_ROW) {
      if (!tables.empty()) tables += ", ";
      tables += reinterpret_cast<const char*>(sqlite3_column_text(stmt->get(), 0));
    }
    if (rc != SQLITE_DONE) return conn.error("cannot list tables");
    if (!tables.empty()) {
      return not_tessera(conn.path, "a SQLite database with other tables (" + tables +
                                        ") and no Tessera application_id");
    }
    return 0;  // empty: a new store
  }
  if (*app_id != kApplicationId) {
    return not_tessera(conn.path, "SQLite application_id " + hex32(*app_id) + ", Tessera's is " +
                                      hex32(kApplicationId));
  }
  if (*version > kSchemaVersion) {
    return failed_precondition(conn.path + " has schema version " + std::to_string(*version) +
                               ", newer than version " + std::to_string(kSchemaVersion) +
                               " that this tessera binary knows; run a newer tessera or restore an "
                               "older backup");
  }
  return static_cast<int>(*version);
}

// Brings the store from its current schema version up to kSchemaVersion, one transaction per step.
Status migrate(const Conn& conn) {
  for (int target = 1; target <= kSchemaVersion; ++target) {
    if (Status s = conn.exec("BEGIN IMMEDIATE", "cannot start migration"); !s.ok()) return s;
    // Re-read inside the write transaction: another process may have migrated meanwhile.
    auto version = conn.query_int("PRAGMA user_version");
    if (!version) {
      conn.rollback_if_open();
      return version.error();
    }
    if (*version >= target) {
      conn.rollback_if_open();
      continue;
    }
    std::string step = std::to_string(target);
    std::string set_version = "PRAGMA user_version = " + step + "; PRAGMA application_id = " +
                              std::to_string(kApplicationId) + ";";
    for (const char* sql : {kMigrations[target - 1], set_version.c_str(), "COMMIT"}) {
      if (Status s = conn.exec(sql, "schema migration to version " + step + " failed"); !s.ok()) {
        conn.rollback_if_open();
        return s;
      }
    }
  }
  return {};
}

// mkdir DIR (mode 0700) and its missing parents.
Status ensure_dir(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return failed_precondition(dir + " exists and is not a directory");
    return {};
  }
  std::error_code ec;
  std::filesystem::path parent = std::filesystem::path(dir).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) return internal(parent.string() + ": cannot create directory: " + ec.message());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return internal(dir + ": cannot create directory: " + errno_text(errno));
  }
  return {};
}

Status fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return internal(path + ": cannot open for fsync: " + errno_text(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return internal(path + ": fsync failed: " + errno_text(err));
  return {};
}

std::string parent_dir(const std::string& path) {
  std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

// Copies the database at `src` (a consistent snapshot, even while other connections write) into the
// existing empty file `dst` with the SQLite online backup API; `dst` ends self-contained (rollback
// journal mode, no -wal file) and fsynced.
Status copy_database(const Conn& src, const std::string& dst_path) {
  auto dst = open_conn(dst_path, SQLITE_OPEN_READWRITE);
  if (!dst) return dst.error();
  sqlite3_backup* backup = sqlite3_backup_init(dst->db.get(), "main", src.db.get(), "main");
  if (!backup) return dst->error("cannot start backup from " + src.path);
  // -1: all pages in one step, i.e. under one read transaction, so the copy is one snapshot.
  int rc = sqlite3_backup_step(backup, -1);
  for (int attempt = 0; (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) && attempt < 100; ++attempt) {
    sqlite3_sleep(50);
    rc = sqlite3_backup_step(backup, -1);
  }
  int finish_rc = sqlite3_backup_finish(backup);
  if (rc != SQLITE_DONE || finish_rc != SQLITE_OK) {
    return internal(src.path + " -> " + dst_path + ": backup failed: " +
                    sqlite3_errstr(rc != SQLITE_DONE ? rc : finish_rc) + ": " + sqlite3_errmsg(dst->db.get()));
  }
  auto mode = dst->query_text("PRAGMA journal_mode = DELETE");
  if (!mode) return mode.error();
  if (*mode != "delete") return internal(dst_path + ": cannot leave WAL mode (journal_mode " + *mode + ")");
  if (sqlite3_close(dst->db.release()) != SQLITE_OK) return internal(dst_path + ": close failed");
  if (Status s = fsync_path(dst_path, false); !s.ok()) return s;
  return fsync_path(parent_dir(dst_path), true);
}

std::string column_text(sqlite3_stmt* stmt, int col) {
  const unsigned char* text = sqlite3_column_text(stmt, col);
  int n = sqlite3_column_bytes(stmt, col);
  return text ? std::string(reinterpret_cast<const char*>(text), static_cast<size_t>(n)) : std::string();
}

void bind_text(sqlite3_stmt* stmt, int col, const std::string& s) {
  // SQLITE_STATIC: the batch outlives the statement's use of it (reset before the batch is released).
  sqlite3_bind_text(stmt, col, s.data(), static_cast<int>(s.size()), SQLITE_STATIC);
}

EventRow read_event(sqlite3_stmt* stmt) {
  EventRow e;
  e.seq = sqlite3_column_int64(stmt, 0);
  e.job_id = sqlite3_column_int64(stmt, 1);
  e.time = sqlite3_column_int64(stmt, 2);
  e.kind = column_text(stmt, 3);
  e.actor = column_text(stmt, 4);
  e.detail = column_text(stmt, 5);
  return e;
}

class SqliteStore final : public Store {
 public:
  struct WriteStatements {
    StmtPtr upsert_job, append_event, upsert_token, upsert_meta;
  };
  struct ReadStatements {
    StmtPtr jobs, tokens, meta, last_seq, events_for_job, events_after;
  };

  SqliteStore(Conn writer, WriteStatements ws, Conn reader, ReadStatements rs)
      : writer_(std::move(writer)), ws_(std::move(ws)), reader_(std::move(reader)), rs_(std::move(rs)) {
    writer_thread_ = std::thread([this] { writer_loop(); });
  }

  ~SqliteStore() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    work_cv_.notify_one();
    writer_thread_.join();
    // Statements before their connections.
    ws_ = {};
    rs_ = {};
  }

  void write(WriteBatch batch, std::function<void(Status)> done) override {
    {
      std::lock_guard lock(mu_);
      queue_.push_back({std::move(batch), std::move(done)});
      ++enqueued_;
    }
    work_cv_.notify_one();
  }

  void flush() override {
    std::unique_lock lock(mu_);
    uint64_t target = enqueued_;
    done_cv_.wait(lock, [&] { return completed_ >= target; });
  }

  Result<LoadedState> load() override {
    std::lock_guard lock(read_mu_);
    // One read transaction: the four queries see one snapshot.
    if (Status s = reader_.exec("BEGIN", "cannot start read transaction"); !s.ok()) return s.error();
    auto state = load_locked();
    reader_.rollback_if_open();
    return state;
  }

  Result<std::vector<EventRow>> events_for_job(int64_t job_id) override {
    std::lock_guard lock(read_mu_);
    sqlite3_stmt* stmt = rs_.events_for_job.get();
    sqlite3_bind_int64(stmt, 1, job_id);
    return read_events(stmt, "cannot read events of job " + std::to_string(job_id));
  }

  Result<std::vector<EventRow>> events_after(int64_t after_seq, int64_t limit) override {
    if (limit <= 0) return invalid_argument("events_after: limit must be positive, got " + std::to_string(limit));
    std::lock_guard lock(read_mu_);
    sqlite3_stmt* stmt = rs_.events_after.get();
    sqlite3_bind_int64(stmt, 1, after_seq);
    sqlite3_bind_int64(stmt, 2, limit);
    return read_events(stmt, "cannot read events after seq " + std::to_string(after_seq));
  }

  Status backup(const std::string& path) override {
    // O_EXCL: refuse an existing file without a check-then-create race.
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      if (errno == EEXIST) return failed_precondition(path + " already exists; backup writes a new file only");
      return internal(path + ": cannot create backup file: " + errno_text(errno));
    }
    ::close(fd);
    Status s = [&]() -> Status {
      auto src = open_conn(writer_.path, SQLITE_OPEN_READONLY);
      if (!src) return src.error();
      return copy_database(*src, path);
    }();
    if (!s.ok()) ::unlink(path.c_str());
    return s;
  }

  StoreStats stats() const override {
    return {batches_.load(std::memory_order_relaxed), transactions_.load(std::memory_order_relaxed)};
  }

 private:
  struct Pending {
    WriteBatch batch;
    std::function<void(Status)> done;
  };

  void writer_loop() {
    std::vector<Pending> group;
    for (;;) {
      group.clear();
      {
        std::unique_lock lock(mu_);
        work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and everything queued has been committed
        while (!queue_.empty() && group.size() < kMaxGroupBatches) {
          group.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
      }
      commit_group(group);
      {
        std::lock_guard lock(mu_);
        completed_ += group.size();
      }
      done_cv_.notify_all();
    }
  }

  static void report(Pending& p, const Status& s) {
    if (p.done) p.done(s);
  }

  // Commits `group` in one transaction; if that fails, each batch alone, so that only the bad batch
  // fails. Runs every `done` after its batch's COMMIT (or failure).
  void commit_group(std::vector<Pending>& group) {
    Status s = run_transaction(group.data(), group.size());
    if (s.ok() || group.size() == 1) {
      for (Pending& p : group) report(p, s);
      return;
    }
    for (Pending& p : group) report(p, run_transaction(&p, 1));
  }

  Status run_transaction(Pending* batches, size_t n) {
    if (Status s = writer_.exec("BEGIN IMMEDIATE", "cannot start write transaction"); !s.ok()) return s;
    for (size_t i = 0; i < n; ++i) {
      if (Status s = apply(batches[i].batch); !s.ok()) {
        writer_.rollback_if_open();
        return s;
      }
    }
    if (Status s = writer_.exec("COMMIT", "commit failed"); !s.ok()) {
      writer_.rollback_if_open();
      return s;
    }
    transactions_.fetch_add(1, std::memory_order_relaxed);
    batches_.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
    return {};
  }

  // Runs `stmt` (bound) to completion and resets it.
  Status step(sqlite3_stmt* stmt, const std::string& what) {
    int rc = sqlite3_step(stmt);
    Status s;
    if (rc != SQLITE_DONE) s = writer_.error("write failed (" + what + ")");
    sqlite3_reset(stmt);
    return s;
  }

  Status apply(const WriteBatch& batch) {
    for (const JobRow& j : batch.jobs) {
      sqlite3_stmt* st = ws_.upsert_job.get();
      sqlite3_bind_int64(st, 1, j.id);
      bind_text(st, 2, j.state);
      bind_text(st, 3, j.queue);
      bind_text(st, 4, j.user);
      sqlite3_bind_int64(st, 5, j.submitted);
      bind_text(st, 6, j.record);
      if (Status s = step(st, "job " + std::to_string(j.id)); !s.ok()) return s;
    }
    for (const EventRow& e : batch.events) {
      sqlite3_stmt* st = ws_.append_event.get();
      sqlite3_bind_int64(st, 1, e.job_id);
      sqlite3_bind_int64(st, 2, e.time);
      bind_text(st, 3, e.kind);
      bind_text(st, 4, e.actor);
      bind_text(st, 5, e.detail);
      if (Status s = step(st, "event " + e.kind + " of job " + std::to_string(e.job_id)); !s.ok()) return s;
    }
    for (const TokenRow& t : batch.tokens) {
      sqlite3_stmt* st = ws_.upsert_token.get();
      bind_text(st, 1, t.hash);
      bind_text(st, 2, t.user);
      bind_text(st, 3, t.role);
      bind_text(st, 4, t.queue);
      sqlite3_bind_int64(st, 5, t.created);
      sqlite3_bind_int(st, 6, t.revoked ? 1 : 0);
      if (Status s = step(st, "token of user " + t.user); !s.ok()) return s;
    }
    for (const auto& [key, value] : batch.meta) {
      sqlite3_stmt* st = ws_.upsert_meta.get();
      bind_text(st, 1, key);
      bind_text(st, 2, value);
      if (Status s = step(st, "meta " + key); !s.ok()) return s;
    }
    return {};
  }

  // Steps `stmt` through all rows; `row` reads one. Resets the statement. Caller holds read_mu_.
  template <class Fn>
  Status for_each_row(sqlite3_stmt* stmt, const std::string& what, Fn&& row) {
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) row(stmt);
    Status s;
    if (rc != SQLITE_DONE) s = reader_.error(what);
    sqlite3_reset(stmt);
    return s;
  }

  Result<std::vector<EventRow>> read_events(sqlite3_stmt* stmt, const std::string& what) {
    std::vector<EventRow> events;
    Status s = for_each_row(stmt, what, [&](sqlite3_stmt* st) { events.push_back(read_event(st)); });
    if (!s.ok()) return s.error();
    return events;
  }

  Result<LoadedState> load_locked() {
    LoadedState state;
    Status s = for_each_row(rs_.jobs.get(), "cannot read jobs", [&](sqlite3_stmt* st) {
      state.jobs.push_back({sqlite3_column_int64(st, 0), column_text(st, 1), column_text(st, 2),
                            column_text(st, 3), sqlite3_column_int64(st, 4), column_text(st, 5)});
    });
    if (!s.ok()) return s.error();
    s = for_each_row(rs_.tokens.get(), "cannot read tokens", [&](sqlite3_stmt* st) {
      state.tokens.push_back({column_text(st, 0), column_text(st, 1), column_text(st, 2), column_text(st, 3),
                              sqlite3_column_int64(st, 4), sqlite3_column_int(st, 5) != 0});
    });
    if (!s.ok()) return s.error();
    s = for_each_row(rs_.meta.get(), "cannot read meta", [&](sqlite3_stmt* st) {
      state.meta.emplace_back(column_text(st, 0), column_text(st, 1));
    });
    if (!s.ok()) return s.error();
    s = for_each_row(rs_.last_seq.get(), "cannot read the last event seq",
                     [&](sqlite3_stmt* st) { state.last_event_seq = sqlite3_column_int64(st, 0); });
    if (!s.ok()) return s.error();
    return state;
  }

  // Writer side: used by the writer thread only (and by the constructor before it starts).
  Conn writer_;
  WriteStatements ws_;
  std::atomic<int64_t> batches_{0};
  std::atomic<int64_t> transactions_{0};

  // Reader side.
  std::mutex read_mu_;
  Conn reader_;
  ReadStatements rs_;

  // The queue between write() and the writer thread.
  std::mutex mu_;
  std::condition_variable work_cv_;  // queue_ non-empty or stopping_
  std::condition_variable done_cv_;  // completed_ advanced
  std::deque<Pending> queue_;
  uint64_t enqueued_ = 0;
  uint64_t completed_ = 0;
  bool stopping_ = false;
  std::thread writer_thread_;
};

Result<SqliteStore::WriteStatements> prepare_writes(const Conn& conn) {
  SqliteStore::WriteStatements ws;
  std::pair<StmtPtr*, const char*> specs[] = {
      {&ws.upsert_job,
       "INSERT OR REPLACE INTO jobs (id, state, queue, user, submitted, record) VALUES (?, ?, ?, ?, ?, ?)"},
      {&ws.append_event, "INSERT INTO events (job_id, time, kind, actor, detail) VALUES (?, ?, ?, ?, ?)"},
      {&ws.upsert_token,
       "INSERT OR REPLACE INTO tokens (hash, user, role, queue, created, revoked) VALUES (?, ?, ?, ?, ?, ?)"},
      {&ws.upsert_meta, "INSERT OR REPLACE INTO meta (\"key\", \"value\") VALUES (?, ?)"},
  };
  for (auto& [stmt, sql] : specs) {
    auto prepared = conn.prepare(sql);
    if (!prepared) return prepared.error();
    *stmt = std::move(*prepared);
  }
  return ws;
}

Result<SqliteStore::ReadStatements> prepare_reads(const Conn& conn) {
  SqliteStore::ReadStatements rs;
  std::pair<StmtPtr*, const char*> specs[] = {
      {&rs.jobs, "SELECT id, state, queue, user, submitted, record FROM jobs ORDER BY id"},
      {&rs.tokens, "SELECT hash, user, role, queue, created, revoked FROM tokens ORDER BY hash"},
      {&rs.meta, "SELECT \"key\", \"value\" FROM meta ORDER BY \"key\""},
      {&rs.last_seq, "SELECT coalesce(max(seq), 0) FROM events"},
      {&rs.events_for_job,
       "SELECT seq, job_id, time, kind, actor, detail FROM events WHERE job_id = ? ORDER BY seq"},
      {&rs.events_after,
       "SELECT seq, job_id, time, kind, actor, detail FROM events WHERE seq > ? ORDER BY seq LIMIT ?"},
  };
  for (auto& [stmt, sql] : specs) {
    auto prepared = conn.prepare(sql);
    if (!prepared) return prepared.error();
    *stmt = std::move(*prepared);
  }
  return rs;
}

}  // namespace

int sqlite_schema_version() { return kSchemaVersion; }

Result<std::unique_ptr<Store>> open_sqlite_store(const std::string& dir) {
  if (Status s = ensure_dir(dir); !s.ok()) return s.error();
  std::string path = (std::filesystem::path(dir) / kDbFileName).string();

  auto writer = open_conn(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (!writer) return writer.error();
  if (auto version = check_tessera(*writer); !version) return version.error();
  auto mode = writer->query_text("PRAGMA journal_mode = WAL");
  if (!mode) return mode.error();
  if (*mode != "wal") return internal(path + ": cannot switch to WAL mode (journal_mode is " + *mode + ")");
  if (Status s = writer->exec("PRAGMA synchronous = FULL; PRAGMA foreign_keys = OFF", "cannot set pragmas");
      !s.ok()) {
    return s.error();
  }
  if (Status s = migrate(*writer); !s.ok()) return s.error();
  auto writes = prepare_writes(*writer);
  if (!writes) return writes.error();

  auto reader = open_conn(path, SQLITE_OPEN_READWRITE);
  if (!reader) return reader.error();
  if (Status s = reader->exec("PRAGMA query_only = ON", "cannot set pragmas"); !s.ok()) return s.error();
  auto reads = prepare_reads(*reader);
  if (!reads) return reads.error();

  return std::unique_ptr<Store>(
      std::make_unique<SqliteStore>(std::move(*writer), std::move(*writes), std::move(*reader), std::move(*reads)));
}

Status restore_sqlite_store(const std::string& backup_file, const std::string& dir, bool force) {
  struct stat st {};
  if (::stat(backup_file.c_str(), &st) != 0) return not_found(backup_file + ": " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) return invalid_argument(backup_file + " is not a regular file");

  auto src = open_conn(backup_file, SQLITE_OPEN_READONLY);
  if (!src) return src.error();
  auto version = check_tessera(*src);
  if (!version) return version.error();
  if (*version == 0) return not_tessera(backup_file, "an empty SQLite database");
  auto check = src->query_text("PRAGMA integrity_check");
  if (!check) return check.error();
  if (*check != "ok") return failed_precondition(backup_file + " fails the integrity check: " + *check);

  if (Status s = ensure_dir(dir); !s.ok()) return s;
  std::string target = (std::filesystem::path(dir) / kDbFileName).string();
  if (::access(target.c_str(), F_OK) == 0 && !force) {
    return failed_precondition(target + " already exists; use --force to replace it");
  }

  std::string temp = target + ".restore-XXXXXX";
  int fd = ::mkstemp(temp.data());
  if (fd < 0) return internal(dir + ": cannot create a temporary file: " + errno_text(errno));
  ::close(fd);
  if (Status s = copy_database(*src, temp); !s.ok()) {
    ::unlink(temp.c_str());
    return s;
  }
  // A stale WAL next to the new file would be replayed onto it: remove before the rename.
  for (const char* suffix : {"-wal", "-shm"}) {
    std::string stale = target + suffix;
    if (::unlink(stale.c_str()) != 0 && errno != ENOENT) {
      int err = errno;
      ::unlink(temp.c_str());
      return internal(stale + ": cannot remove: " + errno_text(err));
    }
  }
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    return internal(temp + " -> " + target + ": rename failed: " + errno_text(err));
  }
  return fsync_path(dir, true);
}

}  // namespace tessera::server
