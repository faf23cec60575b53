// Store locations (`--data`), open_store, and copy_store (store.h).
#include <openssl/evp.h>

#include <cstdio>
#include <memory>

#include "server/store.h"

namespace tessera::server {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// SHA-256 over rows, each field length-prefixed so that no two different row lists hash alike.
class RowHash {
 public:
  RowHash() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr); }
  void field(const std::string& s) {
    num(int64_t(s.size()));
    EVP_DigestUpdate(ctx_.get(), s.data(), s.size());
  }
  void num(int64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(uint64_t(v) >> (8 * i));
    EVP_DigestUpdate(ctx_.get(), b, sizeof b);
  }
  void job(const JobRow& j) {
    num(j.id), field(j.state), field(j.queue), field(j.user), num(j.submitted), field(j.record);
  }
  void token(const TokenRow& t) {
    field(t.hash), field(t.user), field(t.role), field(t.queue), num(t.created), num(t.revoked), field(t.node);
  }
  void event(const EventRow& e) {
    num(e.seq), num(e.job_id), num(e.time), field(e.kind), field(e.actor), field(e.detail), num(e.time_ms);
  }
  std::string hex() {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    EVP_DigestFinal_ex(ctx_.get(), d, &n);
    std::string out;
    char buf[3];
    for (unsigned i = 0; i < n; ++i) {
      std::snprintf(buf, sizeof buf, "%02x", d[i]);
      out += buf;
    }
    return out;
  }

 private:
  struct Free {
    void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
  };
  std::unique_ptr<EVP_MD_CTX, Free> ctx_;
};

constexpr int64_t kEventPage = 5000;
constexpr size_t kJobsPerBatch = 2000;

// Counts and checksum of everything `s` holds (what copy_store compares).
Result<CopyReport> summarize(StoreReader& s, const LoadedState& state) {
  CopyReport r;
  RowHash h;
  for (const JobRow& j : state.jobs) h.job(j);
  for (const TokenRow& t : state.tokens) h.token(t);
  for (const auto& [k, v] : state.meta) h.field(k), h.field(v);
  r.jobs = int64_t(state.jobs.size());
  r.tokens = int64_t(state.tokens.size());
  r.meta = int64_t(state.meta.size());
  for (int64_t after = 0;;) {
    auto page = s.events_after(after, kEventPage);
    if (!page.ok()) return page.error();
    for (const EventRow& e : *page) h.event(e);
    r.events += int64_t(page->size());
    if (int64_t(page->size()) < kEventPage) break;
    after = page->back().seq;
  }
  r.checksum = h.hex();
  return r;
}

}  // namespace

std::string StoreLocation::describe() const { return kind == Kind::kSqlite ? dir : dsn; }

Result<StoreLocation> parse_store_location(const std::string& spec) {
  StoreLocation loc;
  if (spec.empty()) return invalid_argument("--data is empty: give a directory, sqlite:DIR or postgres://...");
  if (starts_with(spec, "postgres://") || starts_with(spec, "postgresql://")) {
    loc.kind = StoreLocation::Kind::kPostgres;
    loc.dsn = spec;
  } else if (starts_with(spec, "postgres:")) {  // postgres:host=... dbname=...
    loc.kind = StoreLocation::Kind::kPostgres;
    loc.dsn = spec.substr(9);
    if (loc.dsn.empty()) return invalid_argument("--data postgres: needs a connection string after the colon");
  } else if (starts_with(spec, "sqlite:")) {
    loc.dir = spec.substr(7);
    if (loc.dir.empty()) return invalid_argument("--data sqlite: needs a directory after the colon");
  } else {
    loc.dir = spec;
  }
  return loc;
}

Result<std::unique_ptr<Store>> open_store(const StoreLocation& where, const SqliteOpenOptions& sqlite_options,
                                          const PostgresOpenOptions& postgres_options) {
  if (where.kind == StoreLocation::Kind::kPostgres) return open_postgres_store(where.dsn, postgres_options);
  return open_sqlite_store(where.dir, sqlite_options);
}

Result<CopyReport> copy_store(StoreReader& from, Store& to, const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  auto existing = to.load();
  if (!existing.ok()) return existing.error();
  if (!existing->jobs.empty() || !existing->tokens.empty() || !existing->meta.empty() || existing->last_event_seq > 0) {
    return failed_precondition("the destination store is not empty (" + std::to_string(existing->jobs.size()) +
                               " jobs, " + std::to_string(existing->tokens.size()) + " tokens, last event " +
                               std::to_string(existing->last_event_seq) + "); copy into an empty one");
  }
  auto state = from.load();
  if (!state.ok()) return state.error();
  // Jobs in batches (each one transaction), then tokens and meta.
  for (size_t i = 0; i < state->jobs.size(); i += kJobsPerBatch) {
    WriteBatch b;
    for (size_t k = i; k < std::min(state->jobs.size(), i + kJobsPerBatch); ++k) b.jobs.push_back(state->jobs[k]);
    if (Status s = to.write_sync(std::move(b)); !s.ok()) return s.error();
  }
  say("copied " + std::to_string(state->jobs.size()) + " jobs");
  WriteBatch rest;
  rest.tokens = state->tokens;
  rest.meta = state->meta;
  if (Status s = to.write_sync(std::move(rest)); !s.ok()) return s.error();
  say("copied " + std::to_string(state->tokens.size()) + " tokens and " + std::to_string(state->meta.size()) +
      " metadata values");
  int64_t events = 0;
  for (int64_t after = 0;;) {
    auto page = from.events_after(after, kEventPage);
    if (!page.ok()) return page.error();
    if (page->empty()) break;
    after = page->back().seq;
    events += int64_t(page->size());
    WriteBatch b;
    b.events = std::move(*page);
    if (Status s = to.write_sync(std::move(b)); !s.ok()) return s.error();
    if (events % (20 * kEventPage) == 0) say("copied " + std::to_string(events) + " events");
  }
  say("copied " + std::to_string(events) + " events; verifying");
  auto want = summarize(from, *state);
  if (!want.ok()) return want.error();
  auto copied = to.load();
  if (!copied.ok()) return copied.error();
  auto got = summarize(to, *copied);
  if (!got.ok()) return got.error();
  auto differs = [](const char* what, int64_t a, int64_t b) {
    return internal_error(std::string("verification failed: the source has ") + std::to_string(a) + " " + what +
                          ", the copy " + std::to_string(b));
  };
  if (want->jobs != got->jobs) return differs("jobs", want->jobs, got->jobs);
  if (want->tokens != got->tokens) return differs("tokens", want->tokens, got->tokens);
  if (want->meta != got->meta) return differs("metadata values", want->meta, got->meta);
  if (want->events != got->events) return differs("events", want->events, got->events);
  if (want->checksum != got->checksum)
    return internal_error("verification failed: the counts agree but the rows differ (SHA-256 " + want->checksum +
                          " in the source, " + got->checksum + " in the copy)");
  say("verified: " + std::to_string(got->jobs) + " jobs, " + std::to_string(got->events) + " events, " +
      std::to_string(got->tokens) + " tokens, " + std::to_string(got->meta) + " metadata values, SHA-256 " +
      got->checksum);
  return got;
}

}  // namespace tessera::server
