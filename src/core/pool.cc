#include "core/pool.h"

#include <algorithm>

#include "core/cost.h"

namespace tessera {

const char* pool_kind_name(PoolKind k) {
  switch (k) {
    case PoolKind::kOwned: return "owned";
    case PoolKind::kReserved: return "reserved";
    case PoolKind::kOnDemand: return "on-demand";
    case PoolKind::kSpot: return "spot";
  }
  return "?";
}

Result<PoolKind> parse_pool_kind(std::string_view s) {
  for (int i = 0; i < kPoolKinds; ++i)
    if (s == pool_kind_name(PoolKind(i))) return PoolKind(i);
  return invalid_argument("unknown pool kind '" + std::string(s) + "' (known: owned, reserved, on-demand, spot)");
}

std::string pool_kinds_text(PoolKindMask m) {
  std::string s;
  for (int i = 0; i < kPoolKinds; ++i)
    if (m & pool_kind_bit(PoolKind(i))) s += (s.empty() ? "" : "/") + std::string(pool_kind_name(PoolKind(i)));
  return s.empty() ? "none" : s;
}

int64_t mean_seconds_between_interruptions(const Pool& p) {
  if (p.kind != PoolKind::kSpot || p.interruptions_per_million_hours <= 0) return 0;
  return std::max<int64_t>(1, 3600LL * 1'000'000 / p.interruptions_per_million_hours);
}

int64_t spot_checkpoint_interval(const Pool& p, int64_t save_cost_s, int nodes, int64_t fallback) {
  const int64_t m = mean_seconds_between_interruptions(p);
  if (m <= 0 || save_cost_s <= 0) return fallback;
  auto t = cost::checkpoint_interval_young(double(save_cost_s), double(m) / double(std::max(1, nodes)));
  if (!t.ok()) return fallback;
  return fallback > 0 ? std::min(*t, fallback) : *t;
}

Pool default_pool() {
  Pool p;
  p.id = PoolId(0);
  p.name = "default";
  p.kind = PoolKind::kOwned;
  return p;
}

const char* spot_policy_name(SpotPolicy s) {
  switch (s) {
    case SpotPolicy::kNever: return "never";
    case SpotPolicy::kAllowed: return "allowed";
    case SpotPolicy::kPreferred: return "preferred";
  }
  return "?";
}

Result<SpotPolicy> parse_spot_policy(std::string_view s) {
  if (s == "never") return SpotPolicy::kNever;
  if (s == "allowed") return SpotPolicy::kAllowed;
  if (s == "preferred") return SpotPolicy::kPreferred;
  return invalid_argument("must be never, allowed or preferred, got '" + std::string(s) + "'");
}

}  // namespace tessera
