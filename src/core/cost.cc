#include "core/cost.h"

#include <algorithm>
#include <cmath>

namespace tessera::cost {
namespace {

bool finite_positive(double x) { return std::isfinite(x) && x > 0; }
bool finite_non_negative(double x) { return std::isfinite(x) && x >= 0; }

// Money values here stay far below 2^53 micro-dollars (~$9 billion), so double arithmetic then one
// llround is exact enough and well defined.
Micros round_micros(double x) { return static_cast<Micros>(std::llround(x)); }

Status check_checkpoint_inputs(double save_cost_s, double mtbi_s) {
  if (!finite_positive(save_cost_s))
    return invalid_argument("checkpoint save cost must be > 0 seconds (the time the job stalls per save)");
  if (!finite_positive(mtbi_s))
    return invalid_argument("mean time between interruptions must be > 0 seconds");
  return {};
}

int64_t whole_seconds(double s) { return std::max<int64_t>(1, std::llround(s)); }

}  // namespace

Result<int64_t> checkpoint_interval_young(double save_cost_s, double mtbi_s) {
  if (Status s = check_checkpoint_inputs(save_cost_s, mtbi_s); !s.ok()) return s.error();
  return whole_seconds(std::sqrt(2.0 * save_cost_s * mtbi_s));
}

Result<int64_t> checkpoint_interval_daly(double save_cost_s, double mtbi_s) {
  if (Status s = check_checkpoint_inputs(save_cost_s, mtbi_s); !s.ok()) return s.error();
  if (save_cost_s >= 2.0 * mtbi_s) return whole_seconds(mtbi_s);
  const double ratio = save_cost_s / (2.0 * mtbi_s);
  const double t = std::sqrt(2.0 * save_cost_s * mtbi_s) * (1.0 + std::sqrt(ratio) / 3.0 + ratio / 9.0) -
                   save_cost_s;
  return whole_seconds(t);
}

Result<LostTime> lost_time_fraction(double interval_s, double save_cost_s, double mtbi_s, double restart_s) {
  if (!finite_positive(interval_s)) return invalid_argument("checkpoint interval must be > 0 seconds");
  if (Status s = check_checkpoint_inputs(save_cost_s, mtbi_s); !s.ok()) return s.error();
  if (!finite_non_negative(restart_s)) return invalid_argument("restart time must be >= 0 seconds");
  LostTime lost;
  lost.checkpoint = save_cost_s / interval_s;
  lost.rework = interval_s / (2.0 * mtbi_s);
  lost.restart = restart_s / mtbi_s;
  return lost;
}

Result<Micros> effective_spot_price(Micros spot_per_gpu_hour, double lost_fraction) {
  if (spot_per_gpu_hour <= 0) return invalid_argument("spot price must be > 0 per GPU-hour");
  if (!finite_non_negative(lost_fraction))
    return invalid_argument("lost-time fraction must be >= 0");
  if (lost_fraction >= 1.0)
    return invalid_argument("lost-time fraction is >= 1: interruptions leave no useful time, spot never "
                            "finishes the work (checkpoint faster or use a calmer pool)");
  return round_micros(static_cast<double>(spot_per_gpu_hour) / (1.0 - lost_fraction));
}

Result<OwnedCost> owned_cost(const OwnedCostInputs& in) {
  if (in.server_capex <= 0) return invalid_argument("server_capex must be > 0");
  if (in.gpus_per_server <= 0) return invalid_argument("gpus_per_server must be > 0");
  if (in.amortisation_months <= 0) return invalid_argument("amortisation_months must be > 0");
  if (!finite_non_negative(in.provisioned_kw)) return invalid_argument("provisioned_kw must be >= 0");
  if (!finite_non_negative(in.average_draw_kw)) return invalid_argument("average_draw_kw must be >= 0");
  if (!std::isfinite(in.pue) || in.pue < 1.0) return invalid_argument("pue must be >= 1 (facility / IT power)");
  if (in.electricity_per_kwh < 0) return invalid_argument("electricity_per_kwh must be >= 0");
  if (in.colocation_per_kw_month < 0) return invalid_argument("colocation_per_kw_month must be >= 0");
  if (in.support_per_server_month < 0) return invalid_argument("support_per_server_month must be >= 0");
  if (!finite_non_negative(in.maintenance_pct_per_year))
    return invalid_argument("maintenance_pct_per_year must be >= 0");
  if (!std::isfinite(in.utilisation) || in.utilisation <= 0 || in.utilisation > 1)
    return invalid_argument("utilisation must be in (0, 1]");

  OwnedCost c;
  c.capex_per_month = round_micros(static_cast<double>(in.server_capex) / in.amortisation_months);
  c.power_per_month =
      round_micros(in.average_draw_kw * in.pue * kHoursPerMonth * static_cast<double>(in.electricity_per_kwh));
  c.colocation_per_month = round_micros(in.provisioned_kw * static_cast<double>(in.colocation_per_kw_month));
  c.support_per_month = in.support_per_server_month;
  c.maintenance_per_month =
      round_micros(static_cast<double>(in.server_capex) * in.maintenance_pct_per_year / 100.0 / 12.0);

  const double useful_gpu_hours = in.gpus_per_server * kHoursPerMonth * in.utilisation;
  auto per_hour = [&](Micros per_month) { return round_micros(static_cast<double>(per_month) / useful_gpu_hours); };
  c.capex_per_gpu_hour = per_hour(c.capex_per_month);
  c.power_per_gpu_hour = per_hour(c.power_per_month);
  c.colocation_per_gpu_hour = per_hour(c.colocation_per_month);
  c.support_per_gpu_hour = per_hour(c.support_per_month);
  c.maintenance_per_gpu_hour = per_hour(c.maintenance_per_month);
  c.total_per_gpu_hour = per_hour(c.total_per_month());
  return c;
}

Result<Micros> cloud_cost_per_month(Micros price_per_gpu_hour, int64_t gpus, double billed_fraction) {
  if (price_per_gpu_hour < 0) return invalid_argument("cloud price must be >= 0 per GPU-hour");
  if (gpus <= 0) return invalid_argument("gpus must be > 0");
  if (!std::isfinite(billed_fraction) || billed_fraction <= 0 || billed_fraction > 1)
    return invalid_argument("billed fraction (utilisation) must be in (0, 1]");
  return round_micros(static_cast<double>(price_per_gpu_hour) * static_cast<double>(gpus) * kHoursPerMonth *
                      billed_fraction);
}

Result<BreakEven> break_even(Micros capex, Micros owned_opex_per_month, Micros cloud_per_month) {
  if (capex <= 0) return invalid_argument("capex must be > 0");
  if (owned_opex_per_month < 0) return invalid_argument("owned opex per month must be >= 0");
  if (cloud_per_month < 0) return invalid_argument("cloud cost per month must be >= 0");
  BreakEven b;
  const Micros saving_per_month = cloud_per_month - owned_opex_per_month;
  if (saving_per_month <= 0) {
    b.never = true;
    return b;
  }
  b.months = static_cast<double>(capex) / static_cast<double>(saving_per_month);
  return b;
}

}  // namespace tessera::cost
