// Chargeback and usage reports as CSV and JSON (accounting.h, docs/chargeback.md): the rows of a
// Report or a Ledger's usage, formatted with the integer helpers. Pure; thread-compatible.
#include "server/accounting.h"

#include <string>
#include <vector>

namespace tessera::server::accounting {

using Json = nlohmann::json;

const std::vector<std::string>& chargeback_columns() {
  static const std::vector<std::string> cols = {
      "BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory",
      "BillingCurrency", "ResourceType", "SkuId", "x_Team", "x_Queue", "x_Project", "x_User", "x_GpuModel", "x_Pool",
      "ConsumedQuantity", "ConsumedUnit", "PricingQuantity", "PricingUnit", "ListUnitPrice", "BilledCost",
      "EffectiveCost", "x_AllocatedGpuHours", "x_UsedGpuHours", "x_IdleAllocatedGpuHours", "x_UnmeasuredGpuHours",
      "x_PreemptedGpuHours", "x_LostGpuHours", "x_IdleShareGpuHours", "x_AllocatedCost", "x_IdleShareCost",
      "x_IdleShareRule", "x_InterruptedGpuHours", "x_InterruptedCost", "x_Interruptions"};
  return cols;
}

namespace {

std::vector<std::string> row_values(const Ledger& L, const std::vector<Dim>& by, const std::vector<std::string>& key,
                                    const Amounts& a) {
  auto dim = [&](Dim d) {
    for (size_t i = 0; i < by.size(); ++i)
      if (by[i] == d) return key[i];
    return std::string();
  };
  const std::string model = dim(Dim::kModel);
  std::string unit_price;
  if (!model.empty())
    if (auto r = L.rates_micro.find(model); r != L.rates_micro.end()) unit_price = format_micro(r->second);
  if (auto r = L.pool_rates_micro.find(dim(Dim::kPool)); r != L.pool_rates_micro.end()) unit_price = format_micro(r->second);
  const std::string cost = format_micro(a.cost());
  return {format_utc(L.from), format_utc(L.to), format_utc(L.start), format_utc(L.end), "Usage", L.currency, "GPU",
          model, dim(Dim::kTeam), dim(Dim::kQueue), dim(Dim::kProject), dim(Dim::kUser), model, dim(Dim::kPool),
          format_gpu_hours(a.allocated), "GPU-Hour", format_gpu_hours(a.allocated + a.idle_share), "GPU-Hour",
          unit_price, cost, cost, format_gpu_hours(a.allocated), format_gpu_hours(a.used),
          format_gpu_hours(a.measured - a.used), format_gpu_hours(a.allocated - a.measured),
          format_gpu_hours(a.preempted), format_gpu_hours(a.lost), format_gpu_hours(a.idle_share),
          format_micro(a.allocated_cost), format_micro(a.idle_share_cost), config::idle_share_name(L.rule),
          format_gpu_hours(a.interrupted), format_micro(a.interrupted_cost), std::to_string(a.interruptions)};
}

ModelUsage usage_total(const Ledger& L) {
  ModelUsage t;
  t.model = "(all)";
  t.pool = "(all)";
  for (const ModelUsage& u : L.usage) {
    t.gpus += u.gpus;
    t.capacity += u.capacity;
    t.allocated += u.allocated;
    t.idle += u.idle;
    t.reserved += u.reserved;
    t.down += u.down;
    t.interrupted += u.interrupted;
    t.interrupted_cost += u.interrupted_cost;
    t.interruptions += u.interruptions;
  }
  return t;
}

Json cluster_json(const Ledger& L) {
  const ModelUsage t = usage_total(L);
  return Json{{"gpus", t.gpus},
              {"capacity_gpu_hours", format_gpu_hours(t.capacity)},
              {"allocated_gpu_hours", format_gpu_hours(t.allocated)},
              {"idle_gpu_hours", format_gpu_hours(t.idle)},
              {"reserved_gpu_hours", format_gpu_hours(t.reserved)},
              {"down_gpu_hours", format_gpu_hours(t.down)},
              {"capacity_milli_gpu_seconds", t.capacity},
              {"allocated_milli_gpu_seconds", t.allocated},
              {"idle_milli_gpu_seconds", t.idle},
              {"reserved_milli_gpu_seconds", t.reserved},
              {"down_milli_gpu_seconds", t.down},
              {"interrupted_gpu_hours", format_gpu_hours(t.interrupted)},
              {"interrupted_cost", format_micro(t.interrupted_cost)},
              {"interruptions", t.interruptions},
              {"interrupted_milli_gpu_seconds", t.interrupted},
              {"interrupted_cost_micro", t.interrupted_cost}};
}

}  // namespace

std::string chargeback_csv(const Ledger& L, const Report& rep) {
  std::string out;
  const auto& cols = chargeback_columns();
  for (size_t i = 0; i < cols.size(); ++i) out += (i ? "," : "") + cols[i];
  out += "\r\n";
  for (const Row& r : rep.rows) {
    const auto v = row_values(L, rep.by, r.key, r.amounts);
    for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + csv_field(v[i]);
    out += "\r\n";
  }
  return out;
}

Json chargeback_json(const Ledger& L, const Report& rep) {
  Json by = Json::array();
  for (Dim d : rep.by) by.push_back(dim_name(d));
  Json rows = Json::array();
  const auto& cols = chargeback_columns();
  for (const Row& r : rep.rows) {
    const auto v = row_values(L, rep.by, r.key, r.amounts);
    Json o = Json::object();
    for (size_t i = 0; i < cols.size(); ++i) o[cols[i]] = v[i];
    rows.push_back(o);
  }
  const Amounts& t = rep.totals;
  Json rates = Json::object();
  for (const auto& [m, r] : L.rates_micro) rates[m] = format_micro(r);
  Json out = Json{{"from", format_utc(L.from)},
              {"to", format_utc(L.to)},
              {"charge_period_start", format_utc(L.start)},
              {"charge_period_end", format_utc(L.end)},
              {"by", by},
              {"currency", L.currency},
              {"idle_share", config::idle_share_name(L.rule)},
              {"rates", rates},
              {"columns", cols},
              {"rows", rows},
              {"totals",
               {{"allocated_gpu_hours", format_gpu_hours(t.allocated)},
                {"used_gpu_hours", format_gpu_hours(t.used)},
                {"idle_allocated_gpu_hours", format_gpu_hours(t.measured - t.used)},
                {"unmeasured_gpu_hours", format_gpu_hours(t.allocated - t.measured)},
                {"preempted_gpu_hours", format_gpu_hours(t.preempted)},
                {"lost_gpu_hours", format_gpu_hours(t.lost)},
                {"idle_share_gpu_hours", format_gpu_hours(t.idle_share)},
                {"interrupted_gpu_hours", format_gpu_hours(t.interrupted)},
                {"interrupted_cost", format_micro(t.interrupted_cost)},
                {"interruptions", t.interruptions},
                {"allocated_cost", format_micro(t.allocated_cost)},
                {"idle_share_cost", format_micro(t.idle_share_cost)},
                {"billed_cost", format_micro(t.cost())},
                {"allocated_milli_gpu_seconds", t.allocated},
                {"idle_share_milli_gpu_seconds", t.idle_share},
                {"cost_micro", t.cost()},
                {"interrupted_milli_gpu_seconds", t.interrupted},
                {"interrupted_cost_micro", t.interrupted_cost}}},
              {"cluster", cluster_json(L)}};
  if (!L.pool_rates_micro.empty()) {  // only with priced pools: reports without pools are unchanged
    Json pool_rates = Json::object();
    for (const auto& [p, r] : L.pool_rates_micro) pool_rates[p] = format_micro(r);
    out["pool_rates"] = pool_rates;
  }
  return out;
}

namespace {
const std::vector<std::string> kUsageColumns = {
    "period_start", "period_end", "gpu_model", "pool", "gpus", "capacity_gpu_hours", "allocated_gpu_hours",
    "idle_gpu_hours", "reserved_gpu_hours", "down_gpu_hours", "allocated_pct", "idle_pct", "reserved_pct", "down_pct",
    "interrupted_gpu_hours", "interrupted_cost", "interruptions"};

std::vector<std::string> usage_values(const Ledger& L, const ModelUsage& u) {
  return {format_utc(L.start), format_utc(L.end), u.model, u.pool, std::to_string(u.gpus),
          format_gpu_hours(u.capacity), format_gpu_hours(u.allocated), format_gpu_hours(u.idle),
          format_gpu_hours(u.reserved), format_gpu_hours(u.down), format_pct(u.allocated, u.capacity), format_pct(u.idle, u.capacity),
          format_pct(u.reserved, u.capacity), format_pct(u.down, u.capacity), format_gpu_hours(u.interrupted),
          format_micro(u.interrupted_cost), std::to_string(u.interruptions)};
}

}  // namespace

std::string usage_csv(const Ledger& L) {
  std::string out;
  for (size_t i = 0; i < kUsageColumns.size(); ++i) out += (i ? "," : "") + kUsageColumns[i];
  out += "\r\n";
  std::vector<ModelUsage> lines = L.usage;
  lines.push_back(usage_total(L));
  for (const ModelUsage& u : lines) {
    const auto v = usage_values(L, u);
    for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + csv_field(v[i]);
    out += "\r\n";
  }
  return out;
}

Json usage_json(const Ledger& L) {
  Json rows = Json::array();
  for (const ModelUsage& u : L.usage) {
    const auto v = usage_values(L, u);
    Json o = Json::object();
    for (size_t i = 0; i < kUsageColumns.size(); ++i) o[kUsageColumns[i]] = v[i];
    rows.push_back(o);
  }
  const auto tv = usage_values(L, usage_total(L));
  Json total = Json::object();
  for (size_t i = 0; i < kUsageColumns.size(); ++i) total[kUsageColumns[i]] = tv[i];
  return Json{{"from", format_utc(L.from)}, {"to", format_utc(L.to)}, {"charge_period_start", format_utc(L.start)},
              {"charge_period_end", format_utc(L.end)}, {"columns", kUsageColumns}, {"rows", rows},
              {"totals", total}, {"cluster", cluster_json(L)}};
}

}  // namespace tessera::server::accounting
