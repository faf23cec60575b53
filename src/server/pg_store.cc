// The PostgreSQL store (store.h): the same tables as the SQLite store, in one database named by a
// DSN. Record and detail columns are bytea, so any bytes round-trip as they do in SQLite.
// Ownership: PgStore owns two connections: the writer's (used only by the writer thread once the
// constructor has started it) and the reader's (shared by load()/events_*() under read_mu_).
// backup() opens its own connection for its snapshot.
// Thread-safety: every public method may be called from any thread. write() only queues (WriteQueue,
// write_queue.h); the writer thread commits all queued batches (up to kMaxGroupBatches) in one transaction (group commit) and
// runs their `done` callbacks after COMMIT has returned (PostgreSQL's synchronous_commit: on disk).
// A lost connection fails the transaction with kUnavailable (unless its COMMIT is found to have taken
// effect); the next one reconnects.
// Invariants: batches commit in write() order; every transaction bumps meta "store/commits" and
// writes its own mark to meta "store/last_commit" (both hidden from load()), by which a transaction
// whose connection broke after COMMIT was sent is found committed or not; events get seq max + 1
// unless a copy names the source's seq.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include <spdlog/spdlog.h>

#include "server/pg_conn.h"
#include "server/sqlite_db.h"
#include "server/store.h"
#include "server/write_queue.h"

namespace tessera::server {
namespace {

using pg::blob;
using pg::text;

constexpr size_t kMaxGroupBatches = 4096;
constexpr int64_t kReadChunk = 5000;  // rows per query when a reader walks a whole table

// Schema migrations; kMigrations[i] brings a store from version i to i + 1 (tessera_schema.version).
// Append only: a released step is never edited, a change is a new step. Version 1 is the SQLite
// store's schema version 3 (tokens bound to nodes, event times in milliseconds).
constexpr const char* kMigrations[] = {
    R"sql(
      CREATE TABLE jobs (
        id bigint PRIMARY KEY CHECK (id > 0),
        state text NOT NULL,
        queue text NOT NULL,
        "user" text NOT NULL,
        submitted bigint NOT NULL,
        record bytea NOT NULL
      );
      CREATE INDEX jobs_state ON jobs(state);
      CREATE INDEX jobs_queue ON jobs(queue);
      CREATE INDEX jobs_user ON jobs("user");
      CREATE TABLE events (
        seq bigint PRIMARY KEY CHECK (seq > 0),
        job_id bigint NOT NULL,
        time bigint NOT NULL,
        kind text NOT NULL,
        actor text NOT NULL,
        detail bytea NOT NULL,
        time_ms bigint NOT NULL
      );
      CREATE INDEX events_job_id ON events(job_id, seq);
      CREATE TABLE tokens (
        hash text PRIMARY KEY CHECK (length(hash) > 0),
        "user" text NOT NULL,
        role text NOT NULL,
        queue text NOT NULL,
        created bigint NOT NULL,
        revoked boolean NOT NULL,
        node text NOT NULL DEFAULT ''
      );
      CREATE TABLE meta (
        key text PRIMARY KEY,
        value text NOT NULL
      );
    )sql",
    // 2: the leader lease (leader_lease.h): one row; epoch counts the leaders there have been.
    R"sql(
      CREATE TABLE leader (
        id integer PRIMARY KEY CHECK (id = 1),
        epoch bigint NOT NULL,
        holder text NOT NULL,
        url text NOT NULL,
        agent_url text NOT NULL,
        expires timestamptz NOT NULL
      );
      INSERT INTO leader VALUES (1, 0, '', '', '', '-infinity');
    )sql",
    // 3: the fence every write transaction of a leader starts with (PostgresOpenOptions::epoch): a
    // share lock on the lease row, and an error unless the lease is still `mine` and unexpired.
    R"sql(
      CREATE FUNCTION tessera_fence(mine bigint) RETURNS bigint LANGUAGE plpgsql AS $$
      DECLARE
        current_epoch bigint;
        live boolean;
      BEGIN
        SELECT epoch, expires > clock_timestamp() INTO current_epoch, live FROM leader WHERE id = 1 FOR SHARE;
        IF current_epoch IS DISTINCT FROM mine THEN
          RAISE EXCEPTION 'not the leader any more: the lease is at epoch %, this controller led epoch %',
            current_epoch, mine USING ERRCODE = 'TS001';
        END IF;
        IF NOT live THEN
          RAISE EXCEPTION 'this controller''s lease (epoch %) has expired and is not renewed yet', mine
            USING ERRCODE = 'TS002';
        END IF;
        RETURN current_epoch;
      END $$;
    )sql",
};
constexpr int kSchemaVersion = int(std::size(kMigrations));
// pg_advisory_xact_lock key held while a store is checked and migrated ("TSRA").
constexpr const char* kMigrationLock = "SELECT pg_advisory_xact_lock(1414746689)";

constexpr const char* kUpsertJob =
    "INSERT INTO jobs (id, state, queue, \"user\", submitted, record) VALUES ($1::bigint, $2, $3, $4, $5::bigint, $6) "
    "ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state, queue = EXCLUDED.queue, \"user\" = EXCLUDED.\"user\", "
    "submitted = EXCLUDED.submitted, record = EXCLUDED.record";
constexpr const char* kAppendEvent =
    "INSERT INTO events (seq, job_id, time, kind, actor, detail, time_ms) SELECT coalesce($7::bigint, "
    "coalesce(max(seq), 0) + 1), $1::bigint, $2::bigint, $3, $4, $5, $6::bigint FROM events";
constexpr const char* kUpsertToken =
    "INSERT INTO tokens (hash, \"user\", role, queue, created, revoked, node) VALUES ($1, $2, $3, $4, $5::bigint, "
    "$6::boolean, $7) ON CONFLICT (hash) DO UPDATE SET \"user\" = EXCLUDED.\"user\", role = EXCLUDED.role, queue = "
    "EXCLUDED.queue, created = EXCLUDED.created, revoked = EXCLUDED.revoked, node = EXCLUDED.node";
constexpr const char* kUpsertMeta =
    "INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value";
constexpr const char* kBumpCommits =
    "INSERT INTO meta (key, value) VALUES ('store/commits', '1') ON CONFLICT (key) DO UPDATE SET value = "
    "(meta.value::bigint + 1)::text RETURNING value::bigint";
constexpr const char* kMarkCommit =
    "INSERT INTO meta (key, value) VALUES ('store/last_commit', $1) ON CONFLICT (key) DO UPDATE SET value = $1";
constexpr const char* kFence = "SELECT tessera_fence($1::bigint)";
constexpr const char* kEventColumns = "SELECT seq, job_id, time, kind, actor, detail, time_ms FROM events ";

std::string num(int64_t v) { return std::to_string(v); }

// 64 random bits in hex and a dash: no two store instances mark their commits alike.
std::string random_mark_prefix() {
  std::random_device rd;
  const uint64_t v = (uint64_t(rd()) << 32) ^ uint64_t(rd());
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx-", static_cast<unsigned long long>(v));
  return buf;
}

std::vector<EventRow> read_events(const PGresult* r) {
  std::vector<EventRow> out;
  out.reserve(size_t(PQntuples(r)));
  for (int i = 0; i < PQntuples(r); ++i) {
    EventRow e;
    e.seq = pg::get_int64(r, i, 0);
    e.job_id = pg::get_int64(r, i, 1);
    e.time = pg::get_int64(r, i, 2);
    e.kind = pg::get_bytes(r, i, 3);
    e.actor = pg::get_bytes(r, i, 4);
    e.detail = pg::get_bytes(r, i, 5);
    e.time_ms = pg::get_int64(r, i, 6);
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<EventRow>> events_after_on(pg::Conn& c, int64_t after_seq, int64_t limit) {
  if (limit <= 0) return invalid_argument("events_after: limit must be positive, got " + num(limit));
  const std::string a = num(after_seq), l = num(limit);
  auto r = c.exec((std::string(kEventColumns) + "WHERE seq > $1::bigint ORDER BY seq LIMIT $2::bigint").c_str(),
                  {text(a), text(l)});
  if (!r.ok()) return r.error();
  return read_events(r->get());
}

// Everything but events, read on `c` (the caller holds a transaction for one snapshot).
Result<LoadedState> load_on(pg::Conn& c) {
  LoadedState state;
  for (int64_t after = 0;;) {
    const std::string a = num(after), l = num(kReadChunk);
    auto r = c.exec("SELECT id, state, queue, \"user\", submitted, record FROM jobs WHERE id > $1::bigint ORDER BY id "
                    "LIMIT $2::bigint",
                    {text(a), text(l)});
    if (!r.ok()) return r.error();
    const PGresult* res = r->get();
    for (int i = 0; i < PQntuples(res); ++i) {
      state.jobs.push_back({pg::get_int64(res, i, 0), pg::get_bytes(res, i, 1), pg::get_bytes(res, i, 2),
                            pg::get_bytes(res, i, 3), pg::get_int64(res, i, 4), pg::get_bytes(res, i, 5)});
    }
    if (PQntuples(res) < kReadChunk) break;
    after = state.jobs.back().id;
  }
  auto t = c.exec("SELECT hash, \"user\", role, queue, created, revoked, node FROM tokens ORDER BY hash");
  if (!t.ok()) return t.error();
  for (int i = 0; i < PQntuples(t->get()); ++i) {
    const PGresult* res = t->get();
    state.tokens.push_back({pg::get_bytes(res, i, 0), pg::get_bytes(res, i, 1), pg::get_bytes(res, i, 2),
                            pg::get_bytes(res, i, 3), pg::get_int64(res, i, 4), pg::get_bool(res, i, 5),
                            pg::get_bytes(res, i, 6)});
  }
  auto m = c.exec("SELECT key, value FROM meta WHERE key NOT IN ('store/commits', 'store/last_commit') ORDER BY key "
                  "COLLATE \"C\"");
  if (!m.ok()) return m.error();
  for (int i = 0; i < PQntuples(m->get()); ++i)
    state.meta.emplace_back(pg::get_bytes(m->get(), i, 0), pg::get_bytes(m->get(), i, 1));
  auto s = c.exec("SELECT coalesce(max(seq), 0)::bigint FROM events");
  if (!s.ok()) return s.error();
  state.last_event_seq = pg::get_int64(s->get(), 0, 0);
  return state;
}

// Checks that the database is a Tessera store (or empty) this binary can read, and migrates it to
// the current schema, under an advisory lock so that controllers starting together take turns.
Status check_and_migrate(pg::Conn& c) {
  if (Status s = c.run("BEGIN"); !s.ok()) return s;
  auto fail = [&](Status s) {
    c.rollback_if_open();
    return s;
  };
  if (Status s = c.run(kMigrationLock); !s.ok()) return fail(s);
  auto has = c.exec("SELECT to_regclass('tessera_schema') IS NOT NULL");
  if (!has.ok()) return fail(has.error());
  if (!pg::get_bool(has->get(), 0, 0)) {
    auto tables = c.exec("SELECT string_agg(tablename, ', ' ORDER BY tablename) FROM pg_tables WHERE schemaname = "
                         "current_schema()");
    if (!tables.ok()) return fail(tables.error());
    const std::string names = pg::get_bytes(tables->get(), 0, 0);
    if (!names.empty()) {
      return fail(failed_precondition(c.where() + " is not a Tessera database: it has tables (" + names +
                                      ") and no tessera_schema; name an empty database"));
    }
    if (Status s = c.run_script("CREATE TABLE tessera_schema (version integer NOT NULL); INSERT INTO tessera_schema VALUES (0)");
        !s.ok())
      return fail(s);
  }
  auto v = c.exec("SELECT version FROM tessera_schema");
  if (!v.ok()) return fail(v.error());
  const int version = PQntuples(v->get()) == 1 ? pg::get_int32(v->get(), 0, 0) : -1;
  if (version < 0) return fail(failed_precondition(c.where() + ": tessera_schema must hold one row"));
  if (version > kSchemaVersion) {
    return fail(failed_precondition(c.where() + " has schema version " + std::to_string(version) +
                                    ", newer than version " + std::to_string(kSchemaVersion) +
                                    " that this tessera binary knows; run a newer tessera"));
  }
  for (int target = version + 1; target <= kSchemaVersion; ++target) {
    if (Status s = c.run_script(kMigrations[target - 1]); !s.ok()) return fail(s);
    const std::string t = std::to_string(target);
    if (Status s = c.run("UPDATE tessera_schema SET version = $1::integer", {text(t)}); !s.ok()) return fail(s);
    spdlog::info("event=store_migrated where=\"{}\" version={}", c.where(), target);
  }
  return c.run("COMMIT");
}

class PgStore final : public Store {
 public:
  PgStore(std::string dsn, PostgresOpenOptions options, pg::Conn writer, pg::Conn reader)
      : dsn_(std::move(dsn)), options_(std::move(options)), writer_(std::move(writer)), reader_(std::move(reader)) {}

  ~PgStore() override { queue_.stop(); }

  void write(WriteBatch batch, std::function<void(Status)> done) override { queue_.write(std::move(batch), std::move(done)); }
  void flush() override { queue_.flush(); }

  Result<LoadedState> load() override {
    std::lock_guard lock(read_mu_);
    if (Status s = reader_.ensure_connected(); !s.ok()) return s.error();
    if (Status s = reader_.run("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); !s.ok()) return s.error();
    auto state = load_on(reader_);
    reader_.rollback_if_open();
    return state;
  }

  Result<std::vector<EventRow>> events_for_job(int64_t job_id) override {
    std::lock_guard lock(read_mu_);
    if (Status s = reader_.ensure_connected(); !s.ok()) return s.error();
    const std::string j = num(job_id);
    auto r = reader_.exec((std::string(kEventColumns) + "WHERE job_id = $1::bigint ORDER BY seq").c_str(), {text(j)});
    if (!r.ok()) return r.error();
    return read_events(r->get());
  }

  Result<std::vector<EventRow>> events_after(int64_t after_seq, int64_t limit) override {
    std::lock_guard lock(read_mu_);
    if (Status s = reader_.ensure_connected(); !s.ok()) return s.error();
    return events_after_on(reader_, after_seq, limit);
  }

  Status backup(const std::string& path) override;

  StoreStats stats() const override {
    return {batches_.load(std::memory_order_relaxed), transactions_.load(std::memory_order_relaxed)};
  }

 private:
  using Pending = WriteQueue::Pending;

  // One transaction for the group; if it fails for a reason of its own batches (not the
  // connection), each batch alone, so that only the bad batch fails.
  void commit_group(std::vector<Pending>& group) {
    Status s = run_transaction(group.data(), group.size());
    if (s.ok() || group.size() == 1 || s.error().code == ErrorCode::kUnavailable) {
      for (Pending& p : group)
        if (p.done) p.done(s);
      return;
    }
    for (Pending& p : group) {
      Status one = run_transaction(&p, 1);
      if (p.done) p.done(one);
    }
  }

  // The whole transaction in one pipeline (one round trip per kPipelineChunk statements): BEGIN, the
  // fence, every batch's rows, the commit count, COMMIT.
  Status run_transaction(Pending* batches, size_t n) {
    if (Status s = writer_.ensure_connected(); !s.ok()) return s;
    std::vector<pg::Statement> stmts;
    std::vector<std::string> labels;  // per statement: what a failure names
    auto add = [&](pg::Statement st, std::string label) {
      stmts.push_back(std::move(st));
      labels.push_back(std::move(label));
    };
    add({"BEGIN"}, "");
    if (options_.epoch) {
      pg::Statement fence{kFence};
      fence.text(num(options_.epoch()));
      add(std::move(fence), "");
    }
    for (size_t i = 0; i < n; ++i)
      if (Status s = apply(batches[i].batch, add); !s.ok()) return s;
    add({kBumpCommits}, "the commit count");
    const std::string mark = commit_mark_prefix_ + num(++commit_marks_);
    pg::Statement mark_st{kMarkCommit};
    mark_st.text(mark);
    add(std::move(mark_st), "the commit mark");
    add({"COMMIT"}, "");
    auto failed = writer_.pipeline(stmts);
    // The connection failed after COMMIT went out (while the rest was answered, or at COMMIT itself,
    // e.g. the server shutting down as it commits): ask the database whether this transaction's mark
    // is there.
    if (failed && failed->error.code == ErrorCode::kUnavailable &&
        (failed->after_all_sent || failed->index + 1 >= stmts.size())) {
      switch (committed(mark)) {
        case Outcome::kCommitted: failed.reset(); break;
        case Outcome::kNotCommitted: break;
        case Outcome::kUnknown:
          failed->error.message += " (the connection broke after COMMIT was sent and the database cannot be asked yet "
                                   "whether it took effect)";
          break;
      }
    }
    if (!failed) {
      transactions_.fetch_add(1, std::memory_order_relaxed);
      batches_.fetch_add(int64_t(n), std::memory_order_relaxed);
      return {};
    }
    writer_.rollback_if_open();
    if (failed->sqlstate == "TS001" || failed->sqlstate == "TS002") {
      std::string msg = failed->error.message;
      if (const size_t at = msg.find("ERROR:  "); at != std::string::npos) msg = msg.substr(at + 8);
      if (const size_t nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
      if (failed->sqlstate == "TS001" && options_.on_fenced) options_.on_fenced(msg);
      return Error{ErrorCode::kUnavailable, "write refused: " + msg + "; retry against the leader"};
    }
    const std::string& label = failed->index < labels.size() ? labels[failed->index] : std::string();
    if (label.empty()) return failed->error;
    return Error{failed->error.code, label + ": " + failed->error.message};
  }

  enum class Outcome { kCommitted, kNotCommitted, kUnknown };
  // Whether the transaction that wrote `mark` committed, asked on a fresh connection at once (the
  // writer thread runs nothing in between, so only another store's commit could have replaced it).
  // A few tries, 50 ms apart: the new connection may be ended too (a shutdown under way).
  Outcome committed(const std::string& mark) {
    for (int attempt = 0; attempt < kResolveAttempts; ++attempt) {
      if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (!writer_.ensure_connected().ok()) continue;
      auto r = writer_.exec("SELECT value FROM meta WHERE key = 'store/last_commit'");
      if (!r.ok()) continue;
      const bool found = PQntuples(r->get()) == 1 && pg::get_bytes(r->get(), 0, 0) == mark;
      return found ? Outcome::kCommitted : Outcome::kNotCommitted;
    }
    return Outcome::kUnknown;
  }
  static constexpr int kResolveAttempts = 3;

  // Appends the statements of `batch` through add(statement, label).
  template <class Add>
  static Status apply(const WriteBatch& batch, Add& add) {
    for (const JobRow& j : batch.jobs) {
      std::string record = j.record;
      if (j.record.empty() && j.encode) {
        try {
          record = j.encode();
        } catch (const std::exception& e) {
          return internal_error("job " + num(j.id) + ": cannot encode its record (" + e.what() + ")");
        }
      }
      pg::Statement st{kUpsertJob};
      st.text(num(j.id)).text(j.state).text(j.queue).text(j.user).text(num(j.submitted)).blob(std::move(record));
      add(std::move(st), "job " + num(j.id));
    }
    for (const EventRow& e : batch.events) {
      pg::Statement st{kAppendEvent};
      st.text(num(e.job_id)).text(num(e.time)).text(e.kind).text(e.actor).blob(e.detail);
      st.text(num(e.time_ms >= 0 ? e.time_ms : e.time * 1000));
      if (e.seq > 0) st.text(num(e.seq));
      else st.null();
      add(std::move(st), "event " + e.kind + " of job " + num(e.job_id));
    }
    for (const TokenRow& t : batch.tokens) {
      pg::Statement st{kUpsertToken};
      st.text(t.hash).text(t.user).text(t.role).text(t.queue).text(num(t.created)).text(t.revoked ? "true" : "false");
      st.text(t.node);
      add(std::move(st), "token of user " + t.user);
    }
    for (const auto& [key, value] : batch.meta) {
      pg::Statement st{kUpsertMeta};
      st.text(key).text(value);
      add(std::move(st), "meta " + key);
    }
    return {};
  }

  const std::string dsn_;
  const PostgresOpenOptions options_;
  // Writer side: the writer thread only.
  pg::Conn writer_;
  // Each transaction writes meta "store/last_commit" = prefix + count, unique to it (committed()).
  const std::string commit_mark_prefix_ = random_mark_prefix();
  int64_t commit_marks_ = 0;
  std::atomic<int64_t> batches_{0};
  std::atomic<int64_t> transactions_{0};
  // Reader side.
  std::mutex read_mu_;
  pg::Conn reader_;
  // Last: its writer thread starts once everything it commits with exists.
  WriteQueue queue_{kMaxGroupBatches, [this](std::vector<Pending>& group) { commit_group(group); }};
};

// A reader pinned to one moment: a REPEATABLE READ transaction on its own connection.
class PgSnapshot final : public StoreReader {
 public:
  explicit PgSnapshot(pg::Conn c) : c_(std::move(c)) {}
  Status begin() { return c_.run("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); }
  Result<LoadedState> load() override { return load_on(c_); }
  Result<std::vector<EventRow>> events_after(int64_t after_seq, int64_t limit) override {
    return events_after_on(c_, after_seq, limit);
  }

 private:
  pg::Conn c_;
};

std::string parent_of(const std::string& path) {
  const auto p = std::filesystem::path(path).parent_path();
  return p.empty() ? std::string(".") : p.string();
}

Status PgStore::backup(const std::string& path) {
  // O_EXCL: refuse an existing file without a check-then-create race; replaced by the copy below.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return failed_precondition(path + " already exists; backup writes a new file only");
    return internal_error(path + ": cannot create backup file: " + std::strerror(errno));
  }
  ::close(fd);
  std::string tmpl = parent_of(path) + "/.tessera-backup-XXXXXX";
  if (!::mkdtemp(tmpl.data())) {
    const int e = errno;
    ::unlink(path.c_str());
    return internal_error(parent_of(path) + ": cannot make a working directory for the backup: " + std::strerror(e));
  }
  const std::string work = tmpl;
  Status s = [&]() -> Status {
    auto conn = pg::Conn::open(dsn_);
    if (!conn.ok()) return conn.error();
    PgSnapshot snap(std::move(*conn));
    if (Status b = snap.begin(); !b.ok()) return b;
    {
      SqliteOpenOptions quiet;
      quiet.warn = [](const std::string&) {};
      auto copy = open_sqlite_store(work, quiet);
      if (!copy.ok()) return copy.error();
      auto report = copy_store(snap, **copy);
      if (!report.ok()) return report.error();
    }  // closed: the -wal is checkpointed into tessera.db and removed
    auto file = sqlite::open_conn(work + "/" + sqlite::kDbFileName, SQLITE_OPEN_READWRITE);
    if (!file.ok()) return file.error();
    if (Status j = sqlite::make_self_contained(std::move(*file)); !j.ok()) return j;
    if (std::rename((work + "/" + sqlite::kDbFileName).c_str(), path.c_str()) != 0)
      return internal_error("cannot move the backup into " + path + ": " + std::strerror(errno));
    return {};
  }();
  std::error_code ec;
  std::filesystem::remove_all(work, ec);
  if (!s.ok()) ::unlink(path.c_str());
  return s;
}

}  // namespace

Result<std::unique_ptr<Store>> open_postgres_store(const std::string& dsn, const PostgresOpenOptions& options) {
  auto writer = pg::Conn::open(dsn);
  if (!writer.ok()) return writer.error();
  if (Status s = check_and_migrate(*writer); !s.ok()) return s.error();
  auto reader = pg::Conn::open(dsn);
  if (!reader.ok()) return reader.error();
  return std::unique_ptr<Store>(std::make_unique<PgStore>(dsn, options, std::move(*writer), std::move(*reader)));
}

int postgres_schema_version() { return kSchemaVersion; }

}  // namespace tessera::server
