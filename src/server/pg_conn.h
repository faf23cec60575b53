// libpq plumbing for the PostgreSQL store (pg_store.cc): a connection that can reconnect when
// PostgreSQL went away, statements with parameters, results read in binary, and errors that say
// whether a retry may succeed (connection lost, server starting or shutting down, disk full:
// kUnavailable, answered 503) or not (kInternal). Internal to src/server.
// A Conn is used by one thread at a time.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tessera::server::pg {

struct ResultFree {
  void operator()(PGresult* r) const { PQclear(r); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultFree>;
struct ConnFinish {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using ConnPtr = std::unique_ptr<PGconn, ConnFinish>;

// One statement parameter: text (an integer or a name) or binary bytes (a bytea column).
struct Param {
  std::string_view bytes;
  bool binary = false;
  bool null = false;  // SQL NULL
};
inline Param text(std::string_view s) { return {s, false, false}; }
inline Param blob(std::string_view s) { return {s, true, false}; }
inline Param null() { return {{}, false, true}; }

// A statement with owned parameter values, for a pipeline.
struct Statement {
  enum class Kind : uint8_t { kText, kBinary, kNull };
  Statement(const char* statement) : sql(statement) {}  // NOLINT: implicit, {"BEGIN"}
  const char* sql = nullptr;
  std::vector<std::string> values;
  std::vector<Kind> kinds;
  Statement& text(std::string v) { return add(std::move(v), Kind::kText); }
  Statement& blob(std::string v) { return add(std::move(v), Kind::kBinary); }
  Statement& null() { return add({}, Kind::kNull); }

 private:
  Statement& add(std::string v, Kind k) {
    values.push_back(std::move(v));
    kinds.push_back(k);
    return *this;
  }
};

// Why a pipeline stopped: the statement that failed, its SQLSTATE, and the error.
struct PipelineFailure {
  size_t index = 0;  // of the statement (statements.size() when the connection failed before any)
  std::string sqlstate;
  Error error;
  // The connection broke after every statement had been sent: a COMMIT among them may have taken
  // effect, and only the database can say whether it did.
  bool after_all_sent = false;
};

class Conn {
 public:
  // Connects to `dsn` (a URI or key=value string). The error names the server and the cause.
  static Result<Conn> open(const std::string& dsn);
  Conn() = default;

  // Reconnects if the connection was lost. Call only between transactions: a statement never
  // reconnects by itself, so the rest of a transaction cannot run outside it.
  Status ensure_connected();
  // Runs `sql` with `params`; rows come back in binary format.
  Result<ResultPtr> exec(const char* sql, const std::vector<Param>& params = {});
  Status run(const char* sql, const std::vector<Param>& params = {});
  // Several statements without parameters (a migration step).
  Status run_script(const char* sql);
  // Sends the statements in libpq's pipeline mode, up to kPipelineChunk at a time, each chunk one
  // round trip, and reads their results; stops at the first that fails (the server skips the rest of
  // its chunk). Results are not kept: for writes.
  std::optional<PipelineFailure> pipeline(const std::vector<Statement>& statements);
  static constexpr size_t kPipelineChunk = 256;
  // ROLLBACK if a transaction is open (errors ignored: the connection may be gone; after a broken
  // pipeline the coming reconnect ends it instead).
  void rollback_if_open();
  const std::string& where() const { return where_; }  // "PostgreSQL at HOST:PORT/DB"

 private:
  Error error_of(const PGresult* r, std::string_view what) const;
  ConnPtr conn_;
  std::string where_;
  bool must_reset_ = false;  // a pipeline broke: the next ensure_connected() reconnects
};

// Column readers for binary results (network byte order).
int64_t get_int64(const PGresult* r, int row, int col);
int32_t get_int32(const PGresult* r, int row, int col);
bool get_bool(const PGresult* r, int row, int col);
std::string get_bytes(const PGresult* r, int row, int col);

// Refuses a DSN that carries a password (it would show in `ps` and shell history): the message
// says where to put it instead (PGPASSWORD, a passfile). Also refuses a DSN libpq cannot parse.
Status check_dsn(const std::string& dsn);

}  // namespace tessera::server::pg
