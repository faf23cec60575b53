// The lease of leader_lease.h.
#include "server/leader_lease.h"

namespace tessera::server {
namespace {

std::string num(int64_t v) { return std::to_string(v); }

}  // namespace

Result<std::unique_ptr<LeaderLease>> LeaderLease::open(const std::string& dsn, LeaseOptions options) {
  if (options.lease_ms < 100) return invalid_argument("lease_ms must be at least 100");
  auto c = pg::Conn::open(dsn);
  if (!c.ok()) return c.error();
  auto lease = std::unique_ptr<LeaderLease>(new LeaderLease(std::move(*c), std::move(options)));
  auto has = lease->conn_.exec("SELECT to_regclass('leader') IS NOT NULL");
  if (!has.ok()) return has.error();
  if (!pg::get_bool(has->get(), 0, 0))
    return failed_precondition(lease->conn_.where() + " has no leader table: open the store first (it migrates the schema)");
  return lease;
}

Status LeaderLease::ready() { return conn_.ensure_connected(); }

Result<bool> LeaderLease::try_acquire() {
  if (Status s = ready(); !s.ok()) return s.error();
  const std::string ms = num(options_.lease_ms);
  // READ COMMITTED: the UPDATE waits for a writer's share lock on the row, then re-checks expiry.
  auto r = conn_.exec(
      "UPDATE leader SET epoch = epoch + 1, holder = $1, url = $2, agent_url = $3, expires = clock_timestamp() + "
      "$4::bigint * interval '1 millisecond' WHERE id = 1 AND expires <= clock_timestamp() RETURNING epoch",
      {pg::text(options_.holder), pg::text(options_.url), pg::text(options_.agent_url), pg::text(ms)});
  if (!r.ok()) return r.error();
  if (PQntuples(r->get()) != 1) return false;
  epoch_ = pg::get_int64(r->get(), 0, 0);
  return true;
}

Result<bool> LeaderLease::renew() {
  if (Status s = ready(); !s.ok()) return s.error();
  const std::string ms = num(options_.lease_ms), e = num(epoch_.load());
  auto r = conn_.exec("UPDATE leader SET expires = clock_timestamp() + $1::bigint * interval '1 millisecond' "
                      "WHERE id = 1 AND epoch = $2::bigint RETURNING epoch",
                      {pg::text(ms), pg::text(e)});
  if (!r.ok()) return r.error();
  return PQntuples(r->get()) == 1;
}

Result<LeaderInfo> LeaderLease::current() {
  if (Status s = ready(); !s.ok()) return s.error();
  auto r = conn_.exec("SELECT epoch, holder, url, agent_url, expires > clock_timestamp() FROM leader WHERE id = 1");
  if (!r.ok()) return r.error();
  LeaderInfo info;
  if (PQntuples(r->get()) != 1) return info;
  info.epoch = pg::get_int64(r->get(), 0, 0);
  info.holder = pg::get_bytes(r->get(), 0, 1);
  info.url = pg::get_bytes(r->get(), 0, 2);
  info.agent_url = pg::get_bytes(r->get(), 0, 3);
  info.live = pg::get_bool(r->get(), 0, 4);
  return info;
}

void LeaderLease::release() {
  if (epoch_.load() == 0 || !ready().ok()) return;
  const std::string e = num(epoch_.load());
  (void)conn_.run("UPDATE leader SET expires = '-infinity' WHERE id = 1 AND epoch = $1::bigint", {pg::text(e)});
}

}  // namespace tessera::server
