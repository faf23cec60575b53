// Cost math for capacity planning: checkpoint intervals under interruptions (Young/Daly), the time a
// job loses to checkpoints, rework and restarts, the effective price of spot capacity, the amortised
// cost of owned GPUs per useful GPU-hour, and the break-even between owning and renting.
//
// Pure functions, no I/O. Money is integer micro-dollars (Micros, 1 USD = 1,000,000). Physical
// quantities and ratios (seconds, kW, PUE, utilisation, fractions) are doubles. Every money result is
// rounded once, half away from zero (std::llround), at the point the function documents. A month is
// 730 hours (8,760 / 12), as in the reference's TCO model (docs/cost.md).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace tessera::cost {

using Micros = int64_t;  // micro-dollars
inline constexpr Micros kMicrosPerDollar = 1'000'000;
inline constexpr double kHoursPerMonth = 730.0;

// --- Checkpoint interval -------------------------------------------------------------------------

// Young (1974): T = sqrt(2 * C * M), with C the checkpoint stall (seconds) and M the mean time between
// interruptions (seconds). Both must be > 0. Seconds, rounded to the nearest whole second (at least 1).
Result<int64_t> checkpoint_interval_young(double save_cost_s, double mtbi_s);

// Daly (2006), higher order: T = sqrt(2CM) * (1 + sqrt(C/2M)/3 + (C/2M)/9) - C, valid for C < 2M;
// when C >= 2M it returns M (checkpointing more often than failures cannot help). Same units/rounding.
Result<int64_t> checkpoint_interval_daly(double save_cost_s, double mtbi_s);

// Expected fraction of wall time lost with checkpoints every interval_s seconds (first order):
// C/T (saving) + T/(2M) (rework: on average half an interval is redone per interruption) + R/M
// (restart_s per interruption: re-provision, load, warm-up). interval, C and M > 0; R >= 0.
// May exceed 1 when interruptions are too frequent for the job to make progress.
struct LostTime {
  double checkpoint = 0;  // C/T
  double rework = 0;      // T/(2M)
  double restart = 0;     // R/M
  double total() const { return checkpoint + rework + restart; }
};
Result<LostTime> lost_time_fraction(double interval_s, double save_cost_s, double mtbi_s, double restart_s);

// Spot price paid per unit of useful work: spot / (1 - lost), rounded to the micro-dollar.
// spot > 0; lost in [0, 1) (at 1 or more the job never finishes: an error saying so).
Result<Micros> effective_spot_price(Micros spot_per_gpu_hour, double lost_fraction);

// --- Owned hardware ------------------------------------------------------------------------------

// One server (node) of owned GPUs. Colocation is billed on provisioned power, electricity on the
// average draw times PUE. Maintenance is a yearly percentage of capex (0 when support is a flat fee).
struct OwnedCostInputs {
  Micros server_capex = 0;            // all-in price of one server, network share included; > 0
  int gpus_per_server = 8;            // > 0
  int amortisation_months = 36;       // > 0: capex is spread evenly over these months
  double provisioned_kw = 0;          // colocation basis (e.g. nameplate max); >= 0
  double average_draw_kw = 0;         // electricity basis (IT load); >= 0
  double pue = 1.0;                   // >= 1
  Micros electricity_per_kwh = 0;     // >= 0
  Micros colocation_per_kw_month = 0; // >= 0
  Micros support_per_server_month = 0;  // flat support/ops fee; >= 0
  double maintenance_pct_per_year = 0;  // of capex; >= 0
  double utilisation = 1.0;           // share of GPU-hours doing useful work; in (0, 1]
};

// Per server-month components (each rounded to the micro-dollar), and the cost per useful GPU-hour:
// total_per_month / (gpus_per_server * 730 * utilisation), rounded once.
struct OwnedCost {
  Micros capex_per_month = 0;        // server_capex / amortisation_months
  Micros power_per_month = 0;        // average_draw_kw * pue * 730 * electricity_per_kwh
  Micros colocation_per_month = 0;   // provisioned_kw * colocation_per_kw_month
  Micros support_per_month = 0;      // support_per_server_month
  Micros maintenance_per_month = 0;  // server_capex * maintenance_pct_per_year / 100 / 12
  Micros opex_per_month() const {
    return power_per_month + colocation_per_month + support_per_month + maintenance_per_month;
  }
  Micros total_per_month() const { return capex_per_month + opex_per_month(); }
  // The same split per useful GPU-hour (each rounded; they may differ from total by a few micros).
  Micros capex_per_gpu_hour = 0;
  Micros power_per_gpu_hour = 0;
  Micros colocation_per_gpu_hour = 0;
  Micros support_per_gpu_hour = 0;
  Micros maintenance_per_gpu_hour = 0;
  Micros total_per_gpu_hour = 0;
};
Result<OwnedCost> owned_cost(const OwnedCostInputs& in);

// --- Renting and break-even ----------------------------------------------------------------------

// Cloud bill for one month: price * gpus * 730 * billed_fraction, rounded. billed_fraction is the
// share of hours billed: the utilisation for on-demand and spot, 1 for commitments (billed regardless
// of use). price >= 0, gpus > 0, billed_fraction in (0, 1].
Result<Micros> cloud_cost_per_month(Micros price_per_gpu_hour, int64_t gpus, double billed_fraction);

// Months after which owning costs less than renting: capex / (cloud_per_month - owned_opex_per_month).
// `never` when the monthly cloud bill does not exceed the owned running cost (owning never catches
// up). capex > 0; the monthly figures >= 0.
struct BreakEven {
  bool never = false;
  double months = 0;  // meaningful when !never
};
Result<BreakEven> break_even(Micros capex, Micros owned_opex_per_month, Micros cloud_per_month);

}  // namespace tessera::cost
