#include "sim/repack.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "sim/lp.h"

namespace tessera::sim {

namespace {

constexpr int64_t kGpu = 1000;
constexpr int kMaxRounds = 5000;

struct ShareType {
  int64_t milli = 0, count = 0, per_gpu = 0;  // per_gpu: at most this many on one GPU
};

// The configuration of greatest dual value y: how many of each type on one GPU (bounded knapsack,
// each type split into binary pieces so that a 0/1 knapsack over capacity 1000 covers every count).
std::vector<int64_t> best_configuration(const std::vector<ShareType>& types, const std::vector<double>& y, double& value) {
  struct Piece {
    size_t type;
    int64_t n;
  };
  std::vector<Piece> pieces;
  for (size_t i = 0; i < types.size(); ++i)
    for (int64_t left = types[i].per_gpu, k = 1; left > 0; k *= 2) {
      const int64_t n = std::min(k, left);
      pieces.push_back({i, n});
      left -= n;
    }
  std::vector<double> best(kGpu + 1, 0.0);
  std::vector<std::vector<bool>> took(pieces.size(), std::vector<bool>(kGpu + 1, false));
  for (size_t p = 0; p < pieces.size(); ++p) {
    const int64_t size = pieces[p].n * types[pieces[p].type].milli;
    const double v = double(pieces[p].n) * y[pieces[p].type];
    if (v <= 0) continue;
    for (int64_t c = kGpu; c >= size; --c)
      if (best[size_t(c - size)] + v > best[size_t(c)]) best[size_t(c)] = best[size_t(c - size)] + v, took[p][size_t(c)] = true;
  }
  value = best[kGpu];
  std::vector<int64_t> config(types.size(), 0);
  int64_t c = kGpu;
  for (size_t p = pieces.size(); p-- > 0;)
    if (took[p][size_t(c)]) {
      config[pieces[p].type] += pieces[p].n;
      c -= pieces[p].n * types[pieces[p].type].milli;
    }
  return config;
}

}  // namespace

Result<int64_t> fewest_gpus_for_shares(const std::map<int64_t, int64_t>& by_milli) {
  std::vector<ShareType> types;
  int64_t milli = 0, above_half = 0;
  for (const auto& [m, n] : by_milli) {
    if (m < 1 || m >= kGpu) return invalid_argument("repack: a share's milli must be 1-999, got " + std::to_string(m));
    if (n <= 0) continue;
    types.push_back({m, n, std::min(n, kGpu / m)});
    milli += m * n;
    if (2 * m > kGpu) above_half += n;
  }
  const int64_t simple = std::max((milli + kGpu - 1) / kGpu, above_half);
  if (types.empty()) return int64_t(0);

  // Dual: maximise sum count_i y_i subject to sum a_i y_i <= 1 for every configuration a.
  LinearProgram lp;
  std::vector<int> col;
  for (const ShareType& t : types) col.push_back(lp.add_column(double(t.count)));
  for (size_t i = 0; i < types.size(); ++i) lp.add_row({{col[i], double(types[i].per_gpu)}}, 1);  // one type alone
  double lower = 0;
  std::vector<double> y(types.size());
  for (int round = 0; round < kMaxRounds; ++round) {
    auto obj = lp.solve();
    if (!obj) return obj.error();
    for (size_t i = 0; i < types.size(); ++i) y[i] = std::max(0.0, lp.value(col[i]));
    double most = 0;
    const std::vector<int64_t> config = best_configuration(types, y, most);
    double value = 0;  // y's own objective, as the solver's may carry its tolerance
    for (size_t i = 0; i < types.size(); ++i) value += double(types[i].count) * y[i];
    lower = std::max(lower, value / std::max(1.0, most));  // y / most is feasible for the dual
    if (most <= 1 + 1e-9) break;
    std::vector<LinearProgram::Term> row;
    for (size_t i = 0; i < types.size(); ++i)
      if (config[i] > 0) row.push_back({col[i], double(config[i])});
    lp.add_row(row, 1);
  }
  // A hair below, so that the solver's rounding never lifts the bound past an integer.
  const int64_t lp_bound = int64_t(std::ceil(lower - 1e-6 * std::max(1.0, lower)));
  return std::max(simple, lp_bound);
}

Result<int64_t> repack_ceiling_milli(const PlacedShares& placed, int64_t allocated_milli, int64_t total_gpus) {
  if (placed.mig) return invalid_argument("repack: MIG tasks are not modelled");
  const int64_t milli = placed.milli();
  if (milli > allocated_milli || allocated_milli > total_gpus * kGpu || placed.failed_whole_gpus < 0)
    return invalid_argument("repack: the run's shares, allocation and capacity do not agree");
  auto gpus = fewest_gpus_for_shares(placed.by_milli);
  if (!gpus) return gpus.error();
  // GPUs held whole now and the fewest the shares need; the rest could hold whole-GPU requests.
  const int64_t whole_now = (allocated_milli - milli) / kGpu;
  const int64_t room = std::max<int64_t>(0, total_gpus - whole_now - *gpus);
  return allocated_milli + std::min(room, placed.failed_whole_gpus) * kGpu;
}

}  // namespace tessera::sim
