// SQLite plumbing shared by the store (sqlite_store.cc) and its checks, copies and restore
// (sqlite_db.cc): a connection that names its file in every error, the Tessera schema (application
// id, migrations), the integrity check and the messages that name the recovery. Internal to
// src/server. A Conn is used by one thread at a time.
#pragma once

#include <sqlite3.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "server/store.h"

namespace tessera::server::sqlite {

constexpr const char* kDbFileName = "tessera.db";
constexpr const char* kStateFileName = "tessera.db-state";  // the commit record (commit_record.h)

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
    const int os = sqlite3_system_errno(db.get());
    if (os_failure && os != 0) msg += " (" + std::string(std::strerror(os)) + ")";
    // No space: nothing of the transaction was written, and a later one may succeed once space
    // returns. Callers answer "retry later" (503), not an internal error.
    if (code == SQLITE_FULL || (os_failure && (os == ENOSPC || os == EDQUOT)))
      return Error{ErrorCode::kUnavailable, "store full: " + msg + "; free space on the store's disk, then retry"};
    return internal_error(std::move(msg));
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

// Opens `path` with `flags` (SQLITE_OPEN_*), extended result codes and a busy timeout.
Result<Conn> open_conn(const std::string& path, int flags);

// Checks that `conn` is a Tessera store (or an empty database) this binary can read; returns its
// schema version (0 for an empty database).
Result<int> check_tessera(const Conn& conn);
// Brings the store from its current schema version up to the current one, one transaction per step.
Status migrate(const Conn& conn);
int schema_version();

// SQLITE_CORRUPT or SQLITE_NOTADB (primary codes).
bool is_corruption(int code);
// The problems PRAGMA quick_check (or integrity_check) finds in `conn`'s database, at most five,
// joined by "; "; empty when it passes. A database too damaged to run the check is a problem too.
Result<std::string> integrity_problems(const Conn& conn, StoreCheck check);
const char* check_name(StoreCheck check);  // "SQLite's quick check", ...
// "restore the last good backup with `tessera admin restore BACKUP --data DIR --force` (...)".
std::string restore_advice(const std::string& dir);
// The refusal of a store that fails its check; `wal_note` adds what is known about its -wal.
Error damaged_store(const std::string& path, const std::string& dir, StoreCheck check, const std::string& problems,
                    const std::string& wal_note);
// Whether the file's header says WAL mode (bytes 18 and 19, the read and write versions, are 2).
bool header_says_wal(const std::string& path);
std::string parent_dir(const std::string& path);  // "." for a bare file name

// Copies the database at `src` (a consistent snapshot, even while other connections write) into the
// existing empty file `dst_path` with the SQLite online backup API; `dst_path` ends self-contained
// (rollback journal mode, no -wal file) and fsynced.
Status copy_database(const Conn& src, const std::string& dst_path);
// Leaves WAL mode (rollback journal), closes `dst` and fsyncs the file and its directory: the file
// alone is then the whole database.
Status make_self_contained(Conn dst);

}  // namespace tessera::server::sqlite
