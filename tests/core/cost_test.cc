// Tests for the cost math (core/cost.h) against the worked examples of the cost reference
// (../shared/reference/cost.md §3.1, §4.2, §4.3) and hand-computed values.
#include "core/cost.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace tessera::cost {
namespace {

constexpr Micros usd(double dollars) { return static_cast<Micros>(dollars * 1'000'000.0 + 0.5); }
double dollars(Micros m) { return static_cast<double>(m) / 1e6; }
constexpr double kHour = 3600.0;

// --- Young / Daly: reference §3.1's table (C, M, R -> T Young / Daly in minutes, lost %). ---------

struct CheckpointRow {
  const char* scenario;
  double c_s, m_s, r_s;
  int64_t young_s, daly_s;              // hand-computed, rounded to the second
  double young_min_ref, daly_min_ref;   // as printed in the reference
  double lost_ckpt_ref, lost_total_ref; // % as printed: checkpoint+rework, +restart
};

const CheckpointRow kRows[] = {
    {"Llama-3 16k GPUs, async DCP", 6.3, 3.09 * kHour, 600, 374, 370, 6.2, 6.2, 3.4, 8.8},
    {"same, 60 s stall", 60, 3.09 * kHour, 600, 1155, 1116, 19.3, 18.6, 10.4, 15.8},
    {"same, 5-min sync save", 300, 3.09 * kHour, 600, 2583, 2387, 43.0, 40.0, 23.2, 28.6},
    {"spot 1.5 h", 30, 1.5 * kHour, 300, 569, 549, 9.5, 9.2, 10.5, 16.1},
    {"spot 1.5 h, 2-min save", 120, 1.5 * kHour, 300, 1138, 1060, 19.0, 17.7, 21.1, 26.6},
    {"spot pessimistic 0.5 h", 30, 0.5 * kHour, 300, 329, 309, 5.5, 5.1, 18.3, 34.9},
    {"spot calm 6 h", 60, 6 * kHour, 600, 1610, 1570, 26.8, 26.2, 7.5, 10.2},
};

TEST(YoungDaly, ReferenceWorkedExamples) {
  for (const CheckpointRow& r : kRows) {
    SCOPED_TRACE(r.scenario);
    auto young = checkpoint_interval_young(r.c_s, r.m_s);
    auto daly = checkpoint_interval_daly(r.c_s, r.m_s);
    ASSERT_TRUE(young.ok() && daly.ok());
    EXPECT_EQ(*young, r.young_s);
    EXPECT_EQ(*daly, r.daly_s);
    // The reference prints minutes to 0.1 (and "43" / "40" for the 5-minute save).
    const double tolerance = r.young_min_ref >= 40 ? 0.5 : 0.06;
    EXPECT_NEAR(*young / 60.0, r.young_min_ref, tolerance);
    EXPECT_NEAR(*daly / 60.0, r.daly_min_ref, tolerance);
    auto lost = lost_time_fraction(static_cast<double>(*young), r.c_s, r.m_s, r.r_s);
    ASSERT_TRUE(lost.ok());
    EXPECT_NEAR(100 * (lost->checkpoint + lost->rework), r.lost_ckpt_ref, 0.06);
    EXPECT_NEAR(100 * lost->total(), r.lost_total_ref, 0.06);
  }
}

TEST(YoungDaly, AtYoungsIntervalSaveAndReworkBalance) {
  // At T = sqrt(2CM), C/T = T/(2M) and their sum is sqrt(2C/M).
  const double c = 50, m = 7200;
  const double t = std::sqrt(2 * c * m);  // 848.5 s
  auto lost = lost_time_fraction(t, c, m, 0);
  ASSERT_TRUE(lost.ok());
  EXPECT_NEAR(lost->checkpoint, lost->rework, 1e-12);
  EXPECT_NEAR(lost->total(), std::sqrt(2 * c / m), 1e-12);
  EXPECT_EQ(*checkpoint_interval_young(c, m), 849);
  // Young's interval minimises the first-order loss: neighbours lose more.
  EXPECT_GT(lost_time_fraction(t * 0.8, c, m, 0)->total(), lost->total());
  EXPECT_GT(lost_time_fraction(t * 1.2, c, m, 0)->total(), lost->total());
}

TEST(YoungDaly, DalyFallsBackToMtbiWhenSaveIsSlowerThanTwoMtbi) {
  EXPECT_EQ(*checkpoint_interval_daly(200, 100), 100);  // C = 2M: outside Daly's range
  EXPECT_EQ(*checkpoint_interval_daly(500, 100), 100);
  EXPECT_LT(*checkpoint_interval_daly(199, 100), 1000);  // just inside: the formula applies
}

TEST(YoungDaly, RejectsNonPositiveInputs) {
  for (double bad : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    EXPECT_FALSE(checkpoint_interval_young(bad, 3600).ok());
    EXPECT_FALSE(checkpoint_interval_young(30, bad).ok());
    EXPECT_FALSE(checkpoint_interval_daly(bad, 3600).ok());
    EXPECT_FALSE(checkpoint_interval_daly(30, bad).ok());
    EXPECT_FALSE(lost_time_fraction(bad, 30, 3600, 0).ok());
  }
  EXPECT_FALSE(lost_time_fraction(600, 30, 3600, -1).ok());
  auto e = checkpoint_interval_young(0, 3600);
  EXPECT_NE(e.error().message.find("save cost"), std::string::npos) << e.error().message;
}

// --- Effective spot price: reference §3.1, p5 spot ~$25/h with 16% lost -> ~$29.8/h. --------------

TEST(SpotCost, EffectivePriceReferenceExample) {
  auto eff = effective_spot_price(usd(25), 0.16);
  ASSERT_TRUE(eff.ok());
  EXPECT_EQ(*eff, 29'761'905);  // 25 / 0.84 = 29.7619047...
  EXPECT_NEAR(dollars(*eff), 29.8, 0.05);
  // "still ~46% below the post-cut on-demand price of $55.04/h and ~70% below the old one ($98.32)".
  EXPECT_NEAR(1 - dollars(*eff) / 55.04, 0.46, 0.005);
  EXPECT_NEAR(1 - dollars(*eff) / 98.32, 0.70, 0.005);
}

TEST(SpotCost, EffectivePriceFromInterruptionModel) {
  // Spot with mean lifetime 1.5 h, 30 s save, 5 min restart (reference §3.1): 16.1% lost at Young's T.
  const double c = 30, m = 1.5 * kHour, r = 300;
  auto t = checkpoint_interval_young(c, m);
  auto lost = lost_time_fraction(static_cast<double>(*t), c, m, r);
  ASSERT_TRUE(lost.ok());
  auto eff = effective_spot_price(usd(3.125), lost->total());  // $25/h for 8 GPUs
  ASSERT_TRUE(eff.ok());
  EXPECT_EQ(*eff, std::llround(3'125'000 / (1 - lost->total())));
  EXPECT_NEAR(dollars(*eff), 3.72, 0.005);
}

TEST(SpotCost, EffectivePriceRejectsBadInputs) {
  EXPECT_FALSE(effective_spot_price(0, 0.1).ok());
  EXPECT_FALSE(effective_spot_price(usd(3), -0.1).ok());
  auto e = effective_spot_price(usd(3), 1.0);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("never"), std::string::npos);
  EXPECT_EQ(*effective_spot_price(usd(3), 0), usd(3));
}

// --- Owned cost: reference §4.2 (8x H100 node). ---------------------------------------------------

OwnedCostInputs reference_h100_node() {
  OwnedCostInputs in;
  in.server_capex = usd(375'000);
  in.gpus_per_server = 8;
  in.amortisation_months = 36;
  in.provisioned_kw = 10.2;  // colo: 10.2 kW x $196
  in.average_draw_kw = 8.0;  // power: 8 kW x PUE 1.3 x 730 h x $0.08
  in.pue = 1.3;
  in.electricity_per_kwh = usd(0.08);
  in.colocation_per_kw_month = usd(196);
  in.support_per_server_month = usd(2'500);
  in.utilisation = 1.0;
  return in;
}

TEST(OwnedCost, ReferenceBreakdown) {
  auto c = owned_cost(reference_h100_node());
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->colocation_per_month, usd(1'999.20));  // "colo 10.2 kW x $196 = $2.0k"
  EXPECT_EQ(c->power_per_month, usd(607.36));         // "power ... = $0.6k"
  EXPECT_EQ(c->support_per_month, usd(2'500));        // "support and ops $2.5k"
  EXPECT_EQ(c->maintenance_per_month, 0);
  EXPECT_EQ(c->opex_per_month(), usd(5'106.56));      // "opex ~$5.1k/month"
  EXPECT_EQ(c->capex_per_month, 10'416'666'667);      // 375k / 36
  // (10,416.67 + 5,106.56) / (8 x 730) = 2.658088...
  EXPECT_EQ(c->total_per_gpu_hour, 2'658'087);
  EXPECT_NEAR(dollars(c->total_per_gpu_hour), 2.66, 0.005);
  EXPECT_EQ(c->capex_per_gpu_hour, 1'783'676);
  EXPECT_EQ(c->colocation_per_gpu_hour, 342'329);
  EXPECT_EQ(c->power_per_gpu_hour, 104'000);  // 607.36 / 5840 = 0.104 exactly
  EXPECT_EQ(c->support_per_gpu_hour, 428'082);
}

TEST(OwnedCost, ReferenceTableByLifeAndUtilisation) {
  // §4.2's table: cost per useful GPU-hour by depreciation life (rows) and utilisation (columns).
  // The reference rounds opex to $5.1k; with the itemised $5,106.56 every cell agrees to the cent
  // except 36 months at 50% ($5.316 -> 5.32 vs the printed 5.31, which is $5.1k's $5.314).
  const int lives[] = {36, 48, 60};
  const double utils[] = {1.0, 0.7, 0.5};
  const double table[3][3] = {{2.66, 3.80, 5.31}, {2.21, 3.16, 4.42}, {1.94, 2.78, 3.89}};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      OwnedCostInputs in = reference_h100_node();
      in.amortisation_months = lives[i];
      in.utilisation = utils[j];
      auto c = owned_cost(in);
      ASSERT_TRUE(c.ok());
      SCOPED_TRACE(::testing::Message() << lives[i] << " months at " << utils[j]);
      EXPECT_NEAR(dollars(c->total_per_gpu_hour), table[i][j], 0.0065);
      // With the reference's rounded opex ($5.1k as flat support, no separate power/colo): exact cents.
      OwnedCostInputs rounded = in;
      rounded.provisioned_kw = 0;
      rounded.average_draw_kw = 0;
      rounded.support_per_server_month = usd(5'100);
      auto r = owned_cost(rounded);
      ASSERT_TRUE(r.ok());
      EXPECT_NEAR(dollars(r->total_per_gpu_hour), table[i][j], 0.005);
    }
  }
}

TEST(OwnedCost, MaintenanceIsAYearlyShareOfCapex) {
  OwnedCostInputs in = reference_h100_node();
  in.maintenance_pct_per_year = 10;  // 10% of $375k a year = $3,125 a month
  auto c = owned_cost(in);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->maintenance_per_month, usd(3'125));
  EXPECT_EQ(c->opex_per_month(), usd(5'106.56 + 3'125));
}

TEST(OwnedCost, RejectsBadInputsNamingTheField) {
  auto expect_field = [](OwnedCostInputs in, const char* field) {
    auto c = owned_cost(in);
    ASSERT_FALSE(c.ok()) << field;
    EXPECT_NE(c.error().message.find(field), std::string::npos) << c.error().message;
  };
  OwnedCostInputs in = reference_h100_node();
  in.server_capex = 0;
  expect_field(in, "server_capex");
  in = reference_h100_node();
  in.utilisation = 0;
  expect_field(in, "utilisation");
  in.utilisation = 1.01;
  expect_field(in, "utilisation");
  in = reference_h100_node();
  in.pue = 0.9;
  expect_field(in, "pue");
  in = reference_h100_node();
  in.amortisation_months = 0;
  expect_field(in, "amortisation_months");
  in = reference_h100_node();
  in.gpus_per_server = -8;
  expect_field(in, "gpus_per_server");
  in = reference_h100_node();
  in.electricity_per_kwh = -1;
  expect_field(in, "electricity_per_kwh");
}

// --- Break-even: reference §4.3 (8x H100, capex $300k / $375k / $450k, opex $5.1k). ---------------

struct BreakEvenRow {
  const char* alternative;
  double per_gpu_hour;  // the instance price / 8 where the reference gives one (it computes from those)
  double months_u1[3];   // capex 300k / 375k / 450k at u = 1.0
  double months_u06[3];  // at u = 0.6 (0: not in the reference)
};

const BreakEvenRow kBreakEven[] = {
    {"AWS p5 / Azure ND H100 v5 on-demand, pre-cut", 98.32 / 8, {4.5, 5.6, 6.7}, {7.9, 9.9, 11.9}},
    {"GCP a3-highgpu-8g on-demand", 88.49 / 8, {5.0, 6.3, 7.6}, {8.9, 11.1, 13.4}},
    {"GCP a3 1-yr CUD", 7.67, {7.6, 9.4, 11.3}, {0, 0, 0}},
    {"AWS p5 on-demand, post-cut", 55.04 / 8, {8.6, 10.7, 12.8}, {15.8, 19.7, 23.7}},
    {"CoreWeave HGX H100 on-demand", 49.24 / 8, {9.7, 12.2, 14.6}, {18.2, 22.8, 27.3}},
    {"AWS p5 Capacity Block", 39.33 / 8, {12.7, 15.9, 19.1}, {0, 0, 0}},
    {"GCP a3 3-yr CUD", 4.86, {12.9, 16.1, 19.3}, {0, 0, 0}},
    {"Lambda 8x H100 on-demand", 3.99, {16.5, 20.6, 24.7}, {33.8, 42.2, 50.7}},
    {"AWS p5 spot ~$25/h, before overhead", 25.0 / 8, {22.8, 28.5, 34.2}, {0, 0, 0}},
    {"RunPod community H100", 2.69, {28.3, 35.3, 42.4}, {0, 0, 0}},
    {"CoreWeave H100 spot", 19.71 / 8, {32.3, 40.4, 48.4}, {0, 0, 0}},
    {"~$2.00/GPU-h neocloud reservation", 2.00, {45.6, 57.0, 68.4}, {0, 0, 0}},
};

TEST(BreakEven, ReferenceWorkedExamples) {
  const Micros capexes[] = {usd(300'000), usd(375'000), usd(450'000)};
  const Micros opex = usd(5'100);  // the reference's rounded opex per node-month
  for (const BreakEvenRow& row : kBreakEven) {
    SCOPED_TRACE(row.alternative);
    for (int k = 0; k < 3; ++k) {
      for (double u : {1.0, 0.6}) {
        const double expected = u == 1.0 ? row.months_u1[k] : row.months_u06[k];
        if (expected == 0) continue;
        auto cloud = cloud_cost_per_month(usd(row.per_gpu_hour), 8, u);
        ASSERT_TRUE(cloud.ok());
        auto b = break_even(capexes[k], opex, *cloud);
        ASSERT_TRUE(b.ok());
        ASSERT_FALSE(b->never);
        EXPECT_NEAR(b->months, expected, 0.05 + 1e-9) << "capex " << k << " u " << u;
      }
    }
  }
}

TEST(BreakEven, HandComputedFromTheItemisedModel) {
  // AWS p5 post-cut ($6.88/GPU-h, 8 GPUs, u = 1): cloud 8 x 6.88 x 730 = $40,179.20 a month;
  // saving over the itemised opex $5,106.56 is $35,072.64; 375,000 / 35,072.64 = 10.692 months.
  auto cloud = cloud_cost_per_month(usd(6.88), 8, 1.0);
  EXPECT_EQ(*cloud, usd(40'179.20));
  auto b = break_even(usd(375'000), usd(5'106.56), *cloud);
  ASSERT_TRUE(b.ok());
  EXPECT_NEAR(b->months, 375'000 / 35'072.64, 1e-9);
  EXPECT_NEAR(b->months, 10.692, 0.001);
}

TEST(BreakEven, TwelveToEighteenMonthsHoldsOnlyAgainstMidPricedOnDemand) {
  // The seed's "12-18 months of continuous use": the reference finds it holds at >= 80% use against
  // 2025-26 hyperscaler/CoreWeave on-demand ($5-7/GPU-h) with a ~$375k node, not against neoclouds.
  auto months = [](double price, double u) {
    return break_even(usd(375'000), usd(5'100), *cloud_cost_per_month(usd(price), 8, u))->months;
  };
  EXPECT_GE(months(6.16, 0.8), 12);
  EXPECT_LE(months(6.16, 0.8), 18);  // CoreWeave on-demand at 80%: 15.8
  EXPECT_GE(months(6.88, 0.8), 12);
  EXPECT_LE(months(6.88, 0.8), 18);  // AWS p5 post-cut at 80%: 13.9
  EXPECT_LT(months(12.29, 1.0), 7);  // pre-cut hyperscaler: ~5-7 months
  EXPECT_GT(months(3.99, 1.0), 20);  // neocloud: 20-60 months
}

TEST(BreakEven, NeverWhenCloudDoesNotExceedOpex) {
  auto b = break_even(usd(375'000), usd(5'100), usd(5'100));
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->never);
  EXPECT_TRUE(break_even(usd(375'000), usd(5'100), usd(4'000))->never);
  EXPECT_FALSE(break_even(usd(375'000), usd(5'100), usd(5'100) + 1)->never);
  // A $0.50/GPU-h cloud at 60%: $1,752 a month, below the $5.1k opex.
  EXPECT_TRUE(break_even(usd(375'000), usd(5'100), *cloud_cost_per_month(usd(0.5), 8, 0.6))->never);
}

TEST(BreakEven, MonthsFallAsUtilisationRises) {
  double previous = INFINITY;
  bool was_never = true;
  for (int pct = 5; pct <= 100; pct += 5) {
    auto b = break_even(usd(375'000), usd(5'106.56), *cloud_cost_per_month(usd(6.88), 8, pct / 100.0));
    ASSERT_TRUE(b.ok());
    if (b->never) {
      EXPECT_TRUE(was_never) << "never again after breaking even at a lower utilisation, pct " << pct;
      continue;
    }
    was_never = false;
    EXPECT_LT(b->months, previous) << pct;
    previous = b->months;
  }
  EXPECT_FALSE(was_never);
}

TEST(BreakEven, MonthsFallAsCloudPriceRises) {
  double previous = INFINITY;
  for (double price : {1.0, 2.0, 3.0, 5.0, 8.0, 12.0}) {
    auto b = break_even(usd(375'000), usd(5'106.56), *cloud_cost_per_month(usd(price), 8, 1.0));
    ASSERT_FALSE(b->never) << price;
    EXPECT_LT(b->months, previous);
    previous = b->months;
  }
}

TEST(BreakEven, RejectsBadInputs) {
  EXPECT_FALSE(break_even(0, usd(5'100), usd(40'000)).ok());
  EXPECT_FALSE(break_even(usd(375'000), -1, usd(40'000)).ok());
  EXPECT_FALSE(cloud_cost_per_month(usd(6.88), 0, 1.0).ok());
  EXPECT_FALSE(cloud_cost_per_month(usd(6.88), 8, 0).ok());
  EXPECT_FALSE(cloud_cost_per_month(usd(6.88), 8, 1.5).ok());
  EXPECT_FALSE(cloud_cost_per_month(-1, 8, 1.0).ok());
}

}  // namespace
}  // namespace tessera::cost
