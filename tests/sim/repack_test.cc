// The packing ceiling (sim/repack.h): the fewest GPUs for a set of shares against hand-made instances
// and an exhaustive search on random small ones, the ceiling's arithmetic, and on real runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "core/rng.h"
#include "sim/lp.h"
#include "sim/repack.h"

namespace tessera::sim {
namespace {

#define SKIP_WITHOUT_SOLVER()                                                      \
  if (!lp_available()) {                                                           \
    GTEST_SKIP() << "no LP solver in this build (" << lp_solver_name() << ")"; \
  }

int64_t fewest(const std::map<int64_t, int64_t>& shares) {
  auto r = fewest_gpus_for_shares(shares);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : -1;
}

// The fewest GPUs by exhaustive search: each share into a GPU already open or a new one.
int64_t exact_fewest(std::vector<int64_t> items) {
  std::sort(items.rbegin(), items.rend());
  int64_t best = int64_t(items.size());
  std::vector<int64_t> free;
  std::function<void(size_t)> go = [&](size_t i) {
    if (int64_t(free.size()) >= best) return;
    if (i == items.size()) {
      best = int64_t(free.size());
      return;
    }
    for (size_t b = 0; b < free.size(); ++b) {
      if (free[b] < items[i] || (b > 0 && free[b] == free[b - 1])) continue;  // same room: same subtree
      free[b] -= items[i];
      go(i + 1);
      free[b] += items[i];
    }
    free.push_back(1000 - items[i]);
    go(i + 1);
    free.pop_back();
  };
  go(0);
  return best;
}

TEST(Repack, FewestGpusOnHandMadeInstances) {
  SKIP_WITHOUT_SOLVER();
  EXPECT_EQ(fewest({}), 0);
  EXPECT_EQ(fewest({{810, 2}}), 2);              // no two fit one GPU
  EXPECT_EQ(fewest({{500, 4}}), 2);              // exactly full
  EXPECT_EQ(fewest({{600, 2}, {400, 2}}), 2);    // complements pair up
  EXPECT_EQ(fewest({{340, 3}}), 2);              // 1020 milli: two GPUs though the milli fit 1.02
  EXPECT_EQ(fewest({{810, 3}, {160, 6}}), 4);    // three 810+160, then three 160 alone
  EXPECT_EQ(fewest({{470, 5}, {60, 5}}), 3);     // 470+470+60 twice, 470+60x3
  EXPECT_EQ(fewest({{250, 7}, {260, 4}, {490, 1}}), 4);
  for (int64_t bad : {0, 1000, -5}) {
    auto r = fewest_gpus_for_shares({{bad, 1}});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find("milli must be 1-999"), std::string::npos) << r.error().message;
  }
}

// Never above the exact optimum (it is a lower bound), never below the milli over 1000, and equal
// to the optimum on nearly every instance (the configuration LP rounded up is rarely short).
TEST(Repack, FewestGpusNeverAboveTheExactOptimumOfRandomSmallInstances) {
  SKIP_WITHOUT_SOLVER();
  Rng rng(7);
  const int64_t sizes[] = {50, 110, 160, 230, 320, 370, 460, 470, 550, 650, 810};
  int equal = 0;
  const int trials = 300;
  for (int t = 0; t < trials; ++t) {
    std::map<int64_t, int64_t> shares;
    std::vector<int64_t> items;
    int64_t milli = 0;
    const int n = 1 + int(rng.uniform(10));
    for (int i = 0; i < n; ++i) {
      const int64_t m = sizes[rng.uniform(std::size(sizes))];
      ++shares[m];
      items.push_back(m);
      milli += m;
    }
    const int64_t got = fewest(shares), exact = exact_fewest(items);
    ASSERT_LE(got, exact) << "trial " << t;
    ASSERT_GE(got, (milli + 999) / 1000) << "trial " << t;
    equal += got == exact ? 1 : 0;
  }
  EXPECT_GE(equal, trials * 95 / 100);
}

TEST(Repack, CeilingGivesFreedGpusToFailedWholeGpuRequests) {
  SKIP_WITHOUT_SOLVER();
  // 10 GPUs: 3 held whole, four 500-milli shares on 4 GPUs (2 would do), 3 GPUs idle.
  PlacedShares p;
  p.by_milli = {{500, 4}};
  EXPECT_EQ(p.milli(), 2000);
  p.failed_whole_gpus = 9;
  auto c = repack_ceiling_milli(p, 5000, 10);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(*c, 10000);  // 2 GPUs for the shares, 5 more whole
  p.failed_whole_gpus = 1;
  EXPECT_EQ(*repack_ceiling_milli(p, 5000, 10), 6000);  // no more whole work than failed
  p.failed_whole_gpus = 0;
  EXPECT_EQ(*repack_ceiling_milli(p, 5000, 10), 5000);
  EXPECT_EQ(repack_ceiling_milli(p, 1999, 10).error().code, ErrorCode::kInvalidArgument);  // shares above it
  EXPECT_EQ(repack_ceiling_milli(p, 11000, 10).error().code, ErrorCode::kInvalidArgument);  // above capacity
  p.mig = true;
  auto m = repack_ceiling_milli(p, 5000, 10);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("MIG"), std::string::npos);
}

// On real runs: what each policy placed, and a ceiling between its final allocation and capacity.
TEST(Repack, RunsRecordTheirSharesAndCeilingsBracketTheirAllocation) {
  SKIP_WITHOUT_SOLVER();
  const AllocWorkload w = synthetic_workload(3, 120, SyntheticMix::kShareHeavy);
  auto res = run_alloc_matrix(w, {"first-fit", "best-fit", "tessera"}, {1, 2}, 1.3, 1);
  ASSERT_TRUE(res.ok()) << res.error().message;
  const int64_t gpus = w.cluster.total_gpus();
  for (const AllocSummary& s : *res)
    for (size_t k = 0; k < s.seeds.size(); ++k) {
      const PlacedShares& p = s.seed_shares[k];
      ASSERT_FALSE(p.by_milli.empty()) << s.policy;
      EXPECT_FALSE(p.mig);
      EXPECT_GT(p.failed_whole_gpus, 0) << s.policy << ": at 130% some whole-GPU pods fail";
      int64_t milli = 0;
      for (auto [m, n] : p.by_milli) {
        EXPECT_TRUE(m > 0 && m < 1000) << m;
        milli += m * n;
      }
      EXPECT_EQ(milli, p.milli());
      EXPECT_LE(p.milli(), s.seed_final_milli[k]);
      auto c = repack_ceiling_milli(p, s.seed_final_milli[k], gpus);
      ASSERT_TRUE(c.ok()) << c.error().message;
      EXPECT_GE(*c, s.seed_final_milli[k]) << s.policy;
      EXPECT_LE(*c, gpus * 1000) << s.policy;
    }
}

}  // namespace
}  // namespace tessera::sim
