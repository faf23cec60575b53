// The SQLite plumbing of sqlite_db.h, and restore_sqlite_store (store.h).
#include "server/sqlite_db.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "server/data_dir.h"

namespace tessera::server {
namespace sqlite {
namespace {

// "TSRA": marks a SQLite file as a Tessera store (PRAGMA application_id).
constexpr int32_t kApplicationId = 0x54535241;
constexpr int kBusyTimeoutMs = 10000;

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
    // 2: agent tokens are bound to a node name or pattern ("" on tokens made before: any node).
    R"sql(
      ALTER TABLE tokens ADD COLUMN node TEXT NOT NULL DEFAULT '';
    )sql",
    // 3: events keep their time in unix milliseconds as well (time stays in seconds). Rows stored
    // before have NULL there and read as time * 1000 (the store's reads say so), so the migration
    // changes the schema only and does not rewrite the log.
    R"sql(
      ALTER TABLE events ADD COLUMN time_ms INTEGER;
    )sql",
};
constexpr int kSchemaVersion = static_cast<int>(std::size(kMigrations));

Error internal(std::string msg) { return {ErrorCode::kInternal, std::move(msg)}; }

std::string errno_text(int err) { return std::strerror(err); }

Error not_tessera(const std::string& path, const std::string& why) {
  return failed_precondition(path + " is not a Tessera database (" + why + ")");
}

std::string hex32(int64_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", static_cast<unsigned>(v));
  return buf;
}

}  // namespace

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

bool is_corruption(int code) { return code == SQLITE_CORRUPT || code == SQLITE_NOTADB; }

Result<std::string> integrity_problems(const Conn& conn, StoreCheck check) {
  std::string problems;
  // One line per problem; SQLite heads a row with "*** in database main ***\n", which says nothing here.
  auto note = [&](std::string_view p) {
    size_t start = 0;
    while (start <= p.size()) {
      size_t end = std::min(p.find('\n', start), p.size());
      std::string_view line = p.substr(start, end - start);
      if (!line.empty() && line.rfind("*** in database", 0) != 0) {
        if (!problems.empty()) problems += "; ";
        problems += line;
      }
      start = end + 1;
    }
  };
  auto stmt = conn.prepare(check == StoreCheck::kFull ? "PRAGMA integrity_check(5)" : "PRAGMA quick_check(5)");
  if (!stmt) {
    if (!is_corruption(conn.errcode())) return stmt.error();
    note(sqlite3_errmsg(conn.db.get()));
    return problems;
  }
  int rc;
  while ((rc = sqlite3_step(stmt->get())) == SQLITE_ROW) {
    const unsigned char* line = sqlite3_column_text(stmt->get(), 0);
    std::string_view text = line ? reinterpret_cast<const char*>(line) : "";
    if (text != "ok") note(text);
  }
  if (rc != SQLITE_DONE) {
    if (!is_corruption(conn.errcode())) return conn.error("integrity check failed to run");
    note(sqlite3_errmsg(conn.db.get()));
  }
  return problems;
}

const char* check_name(StoreCheck check) {
  return check == StoreCheck::kFull ? "SQLite's integrity check" : "SQLite's quick check";
}

std::string restore_advice(const std::string& dir) {
  return "restore the last good backup with `tessera admin restore BACKUP --data " + dir +
         " --force` (stop the server first, and keep a copy of " + dir + ")";
}

Error damaged_store(const std::string& path, const std::string& dir, StoreCheck check, const std::string& problems,
                    const std::string& wal_note) {
  return failed_precondition(path + " is damaged and will not be used: it fails " + check_name(check) + " (" +
                             problems + ")" + wal_note + ". To recover, " + restore_advice(dir));
}

bool header_says_wal(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  unsigned char v[2] = {};
  bool wal = ::pread(fd, v, 2, 18) == 2 && v[0] == 2 && v[1] == 2;
  ::close(fd);
  return wal;
}

std::string parent_dir(const std::string& path) {
  std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

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
  return make_self_contained(std::move(*dst));
}

Status make_self_contained(Conn dst) {
  const std::string dst_path = dst.path;
  auto mode = dst.query_text("PRAGMA journal_mode = DELETE");
  if (!mode) return mode.error();
  if (*mode != "delete") return internal(dst_path + ": cannot leave WAL mode (journal_mode " + *mode + ")");
  if (sqlite3_close(dst.db.release()) != SQLITE_OK) return internal(dst_path + ": close failed");
  if (Status s = fsync_path(dst_path, false); !s.ok()) return s;
  return fsync_path(parent_dir(dst_path), true);
}

int schema_version() { return kSchemaVersion; }

}  // namespace sqlite

using namespace sqlite;

int sqlite_schema_version() { return kSchemaVersion; }

Status restore_sqlite_store(const std::string& backup_file, const std::string& dir, bool force) {
  struct stat st {};
  if (::stat(backup_file.c_str(), &st) != 0) return not_found(backup_file + ": " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) return invalid_argument(backup_file + " is not a regular file");

  auto src = open_conn(backup_file, SQLITE_OPEN_READONLY);
  if (!src) return src.error();
  auto version = check_tessera(*src);
  if (!version) return version.error();
  if (*version == 0) return sqlite::not_tessera(backup_file, "an empty SQLite database");
  auto check = src->query_text("PRAGMA integrity_check");
  if (!check) return check.error();
  if (*check != "ok") return failed_precondition(backup_file + " fails the integrity check: " + *check);

  // Held until the new store is in place: refused while a server runs on DIR.
  auto lock = lock_data_dir(dir);
  if (!lock) return lock.error();
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
  // A stale WAL next to the new file would be replayed onto it: remove before the rename. The old
  // store's commit record goes too (the backup holds fewer commits than it).
  for (const char* suffix : {"-wal", "-shm", "-state"}) {
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
