// Leader election among controllers that share one PostgreSQL store (docs/ha.md): a lease row
// (table `leader`, one row) that the leader renews every renew interval. Its `epoch` counts the
// leaders there have been; taking the lease bumps it, and every write a leader makes is fenced on it
// (PostgresOpenOptions::epoch): once another controller has taken the lease, the old leader's
// writes are refused by the database, whatever the old leader believes.
//
// Why a lease row rather than an advisory lock: an advisory lock lives as long as its session, and a
// controller that is frozen (SIGSTOP, a long GC-like pause) or partitioned keeps its TCP session, and
// so the lock, until the server notices; a lease expires on the database's clock after a bounded
// time, and an epoch in the row gives every write something to be fenced on. All times are the
// database's (clock_timestamp()), so the controllers' clocks do not matter.
//
// Ownership: a LeaderLease owns its own connection. Not thread-safe: one thread (the lease loop)
// calls it; epoch() may be read from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "server/pg_conn.h"

namespace tessera::server {

struct LeaseOptions {
  std::string holder;     // this controller, as people read it (host:port and pid)
  std::string url;        // where its API is reached (standbys redirect there)
  std::string agent_url;  // where agents reach it (the agents' listener, or url)
  int64_t lease_ms = 5000;  // a lease not renewed this long may be taken
};

struct LeaderInfo {
  int64_t epoch = 0;
  std::string holder, url, agent_url;
  bool live = false;  // not expired
};

class LeaderLease {
 public:
  // Connects to the store's database (its schema must already be migrated: open_postgres_store).
  static Result<std::unique_ptr<LeaderLease>> open(const std::string& dsn, LeaseOptions options);

  // Takes the lease if it has expired (or was released): true and epoch() is the new epoch.
  Result<bool> try_acquire();
  // Extends the lease held at epoch(): false when another controller has taken it since.
  Result<bool> renew();
  // Who leads now (may be this controller, or nobody if expired).
  Result<LeaderInfo> current();
  // Ends the lease at once (a clean stop), so that a standby need not wait for it to expire.
  void release();
  int64_t epoch() const { return epoch_.load(); }

 private:
  LeaderLease(pg::Conn c, LeaseOptions o) : conn_(std::move(c)), options_(std::move(o)) {}
  Status ready();
  pg::Conn conn_;
  LeaseOptions options_;
  std::atomic<int64_t> epoch_{0};  // 0: never led
};

}  // namespace tessera::server
