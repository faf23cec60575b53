// The libpq plumbing of pg_conn.h.
#include "server/pg_conn.h"

#include <endian.h>

#include <algorithm>
#include <cstring>

namespace tessera::server::pg {
namespace {

std::string trimmed(const char* s) {
  std::string out = s ? s : "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string where_of(PGconn* c) {
  const char* host = PQhost(c);
  const char* port = PQport(c);
  const char* db = PQdb(c);
  return std::string("PostgreSQL at ") + (host && *host ? host : "localhost") + ":" + (port && *port ? port : "5432") +
         "/" + (db ? db : "");
}

// SQLSTATE classes after which the same statement may succeed later: connection exceptions (08),
// insufficient resources (53: disk full, out of memory, too many connections), operator
// intervention (57: shutting down, starting up), and serialization failures and deadlocks (40).
bool transient_sqlstate(const char* state) {
  if (!state || std::strlen(state) != 5) return false;
  const std::string_view s(state, 5);
  return s.substr(0, 2) == "08" || s.substr(0, 2) == "53" || s.substr(0, 2) == "57" || s == "40001" || s == "40P01";
}

}  // namespace

Result<Conn> Conn::open(const std::string& dsn) {
  if (Status s = check_dsn(dsn); !s.ok()) return s.error();
  Conn c;
  c.conn_.reset(PQconnectdb(dsn.c_str()));
  if (!c.conn_) return internal_error("PostgreSQL: out of memory opening a connection");
  c.where_ = where_of(c.conn_.get());
  if (PQstatus(c.conn_.get()) != CONNECTION_OK) {
    return Error{ErrorCode::kUnavailable,
                 "cannot connect to " + c.where_ + ": " + trimmed(PQerrorMessage(c.conn_.get()))};
  }
  // Times and texts as the store writes them; warnings (NOTICE) are not errors.
  if (Status s = c.run("SET client_min_messages = warning"); !s.ok()) return s.error();
  return c;
}

Status Conn::ensure_connected() {
  if (PQstatus(conn_.get()) == CONNECTION_OK && !must_reset_) return {};
  must_reset_ = false;
  PQreset(conn_.get());
  if (PQstatus(conn_.get()) != CONNECTION_OK) {
    return Error{ErrorCode::kUnavailable,
                 "store unavailable: cannot reach " + where_ + ": " + trimmed(PQerrorMessage(conn_.get())) +
                     "; retry once PostgreSQL is back"};
  }
  return run("SET client_min_messages = warning");
}

Error Conn::error_of(const PGresult* r, std::string_view what) const {
  const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  const std::string msg = trimmed(r ? PQresultErrorMessage(r) : PQerrorMessage(conn_.get()));
  std::string text = where_ + ": " + std::string(what) + ": " + (msg.empty() ? "no answer" : msg);
  // No SQLSTATE: libpq itself failed the exchange (the server sends one with every error), which
  // means the connection, even where libpq has not yet marked it bad.
  if (PQstatus(conn_.get()) != CONNECTION_OK || !state || !*state || transient_sqlstate(state))
    return Error{ErrorCode::kUnavailable, "store unavailable: " + text + "; retry later"};
  return internal_error(std::move(text));
}

Result<ResultPtr> Conn::exec(const char* sql, const std::vector<Param>& params) {
  std::vector<const char*> values;
  std::vector<int> lengths, formats;
  values.reserve(params.size());
  for (const Param& p : params) {
    values.push_back(p.bytes.data() ? p.bytes.data() : "");
    lengths.push_back(int(p.bytes.size()));
    formats.push_back(p.binary ? 1 : 0);
  }
  // Text parameters must be NUL-terminated: copy those that are views into larger buffers.
  std::vector<std::string> copies;
  copies.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].null) values[i] = nullptr;
    else if (!params[i].binary) values[i] = copies.emplace_back(params[i].bytes).c_str();
  }
  ResultPtr r(PQexecParams(conn_.get(), sql, int(params.size()), nullptr, values.data(), lengths.data(),
                           formats.data(), 1));
  const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    std::string what(sql);
    if (what.size() > 60) what = what.substr(0, 57) + "...";
    return error_of(r.get(), "\"" + what + "\" failed");
  }
  return r;
}

Status Conn::run(const char* sql, const std::vector<Param>& params) {
  auto r = exec(sql, params);
  if (!r.ok()) return r.error();
  return {};
}

Status Conn::run_script(const char* sql) {
  ResultPtr r(PQexec(conn_.get(), sql));
  const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return error_of(r.get(), "a schema step failed");
  return {};
}

std::optional<PipelineFailure> Conn::pipeline(const std::vector<Statement>& statements) {
  PGconn* c = conn_.get();
  // The exchange itself failed (a send, a missing result): the server may already have closed the
  // connection (a FATAL notice arrives before libpq marks it bad), and its results are out of step.
  // Either way it is the connection that failed, so: unavailable, and a fresh connection next time.
  bool all_sent = false;
  auto broken = [&](size_t index) {
    PipelineFailure f{index, "", error_of(nullptr, "sending a pipeline failed"), all_sent};
    if (PQpipelineStatus(c) != PQ_PIPELINE_OFF) PQexitPipelineMode(c);
    must_reset_ = true;
    return f;
  };
  if (PQenterPipelineMode(c) != 1) return broken(statements.size());
  std::vector<const char*> values;
  std::vector<int> lengths, formats;
  for (size_t start = 0; start < statements.size(); start += kPipelineChunk) {
    const size_t end = std::min(statements.size(), start + kPipelineChunk);
    for (size_t i = start; i < end; ++i) {
      const Statement& st = statements[i];
      values.clear(), lengths.clear(), formats.clear();
      for (size_t k = 0; k < st.values.size(); ++k) {
        values.push_back(st.kinds[k] == Statement::Kind::kNull ? nullptr : st.values[k].c_str());
        lengths.push_back(int(st.values[k].size()));
        formats.push_back(st.kinds[k] == Statement::Kind::kBinary ? 1 : 0);
      }
      if (PQsendQueryParams(c, st.sql, int(st.values.size()), nullptr, values.data(), lengths.data(), formats.data(),
                            1) != 1)
        return broken(i);
    }
    if (PQpipelineSync(c) != 1) return broken(start);
    all_sent = end == statements.size();
    std::optional<PipelineFailure> failed;
    for (size_t i = start; i < end; ++i) {
      ResultPtr r(PQgetResult(c));
      if (!r) return broken(i);
      const ExecStatusType st = PQresultStatus(r.get());
      if (!failed && st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        const char* state = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
        std::string what(statements[i].sql);
        if (what.size() > 60) what = what.substr(0, 57) + "...";
        failed = PipelineFailure{i, state ? state : "", error_of(r.get(), "\"" + what + "\" failed")};
      }
      while (ResultPtr more{PQgetResult(c)}) {
      }  // the end of this statement's results
    }
    ResultPtr sync(PQgetResult(c));  // PGRES_PIPELINE_SYNC
    if (!sync || PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC) return broken(end);
    if (failed) {
      PQexitPipelineMode(c);
      return failed;
    }
  }
  if (PQexitPipelineMode(c) != 1) return broken(statements.size());
  return std::nullopt;
}

void Conn::rollback_if_open() {
  if (!conn_ || PQstatus(conn_.get()) != CONNECTION_OK || must_reset_) return;  // a reset ends it
  if (PQtransactionStatus(conn_.get()) == PQTRANS_IDLE) return;
  ResultPtr(PQexec(conn_.get(), "ROLLBACK"));
}

int64_t get_int64(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col) || PQgetlength(r, row, col) != 8) return 0;
  uint64_t v;
  std::memcpy(&v, PQgetvalue(r, row, col), 8);
  return int64_t(be64toh(v));
}

int32_t get_int32(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col) || PQgetlength(r, row, col) != 4) return 0;
  uint32_t v;
  std::memcpy(&v, PQgetvalue(r, row, col), 4);
  return int32_t(be32toh(v));
}

bool get_bool(const PGresult* r, int row, int col) {
  return !PQgetisnull(r, row, col) && PQgetlength(r, row, col) == 1 && PQgetvalue(r, row, col)[0] != 0;
}

std::string get_bytes(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return {};
  return std::string(PQgetvalue(r, row, col), size_t(PQgetlength(r, row, col)));
}

Status check_dsn(const std::string& dsn) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(dsn.c_str(), &err);
  if (!opts) {
    std::string msg = err ? trimmed(err) : "out of memory";
    PQfreemem(err);
    return invalid_argument("--data: not a PostgreSQL connection string: " + msg);
  }
  bool has_password = false;
  for (PQconninfoOption* o = opts; o->keyword; ++o)
    if (std::strcmp(o->keyword, "password") == 0 && o->val && *o->val) has_password = true;
  PQconninfoFree(opts);
  if (has_password) {
    return invalid_argument(
        "--data: the PostgreSQL connection string carries a password, which would show in the process list "
        "and shell history; remove it and give the password in PGPASSWORD or a password file (PGPASSFILE, "
        "~/.pgpass, or passfile=PATH in the connection string)");
  }
  return {};
}

}  // namespace tessera::server::pg
