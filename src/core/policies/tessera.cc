// Tessera's own policy.
// Non-MIG tasks: the node score is FGD's (int(100 x sigmoid(fragmentation removed / 1000)); the
// fragment sums are exact integers) with three changes: every shape of the workload counts, not only
// the most frequent 95% (rare shapes, such as 8-GPU tasks, are the first that fragmentation shuts
// out); the fragmentation is multi-resource (FragModel: memory must fit, and GPUs that the free
// CPU or memory cannot carry are stranded); and a shape that excludes a node's GPU model does not
// count that node's GPUs as its fragments (no placement there changes them; counted, they draw every
// task to a rare model's nodes, which the tasks naming that model need). Its 100 levels are kept on
// purpose: finer resolution (the exact delta) spreads tasks by tiny differences and loses ~1 pp on
// openb, while equal scores broken by the fixed node rank pack like first fit. One tie-break comes
// before the rank: a CPU-only task prefers the node with the least free GPU milli (its CPU strands
// no GPU there). A sharing task takes the GPU removing the most fragmentation, then the tightest;
// a GPU it would leave with a dead gap (free milli that only the workload's rarest shares fit,
// DeadGaps) counts that gap twice. Whole GPUs are chosen for NVLink connectivity among themselves,
// then for what they leave.
// MIG tasks: reuse an idle instance of the profile, else create where the workload's MIG profiles
// stay most creatable. Gangs are packed onto as few nodes as possible.
// When the profile lists the cluster's nodes, the fragmentation removed is reduced by the capacity a
// task takes from shapes that fit few nodes (Scarcity), so that a task that fits anywhere leaves, for
// example, the only nodes with enough CPU for an 8-GPU shape, or a rare model's nodes, to the tasks
// that cannot go elsewhere. With node kinds it also keeps some untouched nodes (Reserve): a share
// of the nodes that whole-node shapes fit (8 GPUs where no node has more) and of those restricted
// shapes count on. A task that can go elsewhere scores below every other node there, so the rewards
// for opening a fresh node (it strands and fragments nothing) do not use up every empty node before
// the shapes that need one arrive.
#include <algorithm>
#include <cmath>
#include <map>

#include "core/policies/policies.h"
#include "core/policies/policy_util.h"

namespace tessera::policies {
namespace {

class TesseraPolicy final : public ScoringPolicy {
 public:
  std::string_view name() const override { return "tessera"; }
  bool packs_gangs() const override { return true; }
  void prepare(const WorkloadProfile& profile) override {
    model_.build(profile, 100, true, false);
    scarcity_.build(model_.shapes(), profile.nodes);
    reserve_.build(profile, scarcity_);
    dead_ = DeadGaps::of(profile);
    mig_counts_.clear();
    for (const WorkloadShape& s : profile.shapes)
      if (s.task.mig()) mig_counts_[s.task.mig_profile] += s.count;
  }

  std::optional<NodeChoice> score(const Node& n, const TaskRequest& t, PolicyContext&) const override {
    if (t.mig()) return score_mig(n, t);
    std::array<FragModel::Candidate, kMaxGpusPerNode> cands;
    int ncand = 0;
    GpuPick base;
    const int64_t cpu = score_cpu(t);
    if (t.gpu_share() && t.gpu_count == 1) {
      for (const Gpu& g : n.gpus) {
        if (g.index >= kMaxGpusPerNode || !gpu_fits_share(g, t)) continue;
        FragModel::Candidate& c = cands[ncand++];
        c.cpu = cpu;
        c.mem = t.memory.v;
        c.set(g.index, g.free_milli() - t.milli_per_gpu.v);
      }
      if (ncand == 0) return std::nullopt;
    } else {
      if (t.whole_gpus()) {
        if (!pick_connected(n, t.gpu_count, base)) return std::nullopt;
      } else if (!t.cpu_only() && !pick_default(n, t, base)) {
        return std::nullopt;
      }
      FragModel::Candidate& c = cands[ncand++];
      c.cpu = cpu;
      c.mem = t.memory.v;
      for (int k = 0; k < base.count; ++k) c.set(base.gpus[k], n.gpus[base.gpus[k]].free_milli() - t.milli_per_gpu.v);
    }
    std::array<int64_t, kMaxGpusPerNode> delta{};
    model_.deltas(n, cands.data(), ncand, delta.data());
    // A share that would leave a dead gap on its GPU counts that gap twice (DeadGaps).
    if (t.gpu_share() && t.gpu_count == 1)
      for (int c = 0; c < ncand; ++c)
        if (dead_.holds(cands[c].changes[0].free_after)) delta[c] -= model_.total() * cands[c].changes[0].free_after;
    // Best candidate: most fragmentation removed, then the tightest GPU, then the lowest index.
    int best = 0;
    for (int c = 1; c < ncand; ++c) {
      if (delta[c] != delta[best] ? delta[c] > delta[best]
                                  : cands[c].changes[0].free_after < cands[best].changes[0].free_after)
        best = c;
    }
    NodeChoice out;
    if (t.gpu_share() && t.gpu_count == 1) out.pick.add(cands[best].changes[0].gpu);
    else out.pick = base;
    // The capacity restricted shapes count on, taken from them (Scarcity): GPU milli taken x the
    // node's pressure, weighed like a fragment every typical task sees.
    const int64_t taken = t.gpu_share() && t.gpu_count == 1 ? t.milli_per_gpu.v
                                                            : base.count * std::min<int64_t>(t.milli_per_gpu.v, 1000);
    const int64_t claimed = taken * scarcity_.pressure(n) / 1000 * model_.total();
    out.score = combine(n, t, delta[best] - claimed);
    // An untouched node kept for the shapes that need it (Reserve) comes after every other node.
    if (reserve_.keeps(n, t)) out.score -= kKeptTier;
    return out;
  }

 private:
  // Dead gaps: free milli on a GPU above the workload's smallest share and below its smallest
  // typical share (the most frequent shares, taken until they cover kTypicalPct % of its share
  // tasks, as FGD picks its typical shapes). Only rare shares fit such a gap, so it stays unused
  // more often than a larger gap that a typical share fills, while FGD's fragment measure, which
  // counts a gap's milli, prefers the smaller. Best fit makes many of them (two 470-milli shares on
  // openb leave 60 milli, which only its 50-milli shares fit) and they hold much of the sliver waste
  // when the cluster is full. Empty (lo >= hi) without shares, or when the smallest share is typical.
  struct DeadGaps {
    static constexpr int64_t kTypicalPct = 95;
    int64_t lo = 0, hi = 0;
    bool holds(int64_t free) const { return free > lo && free < hi; }
    static DeadGaps of(const WorkloadProfile& profile) {
      std::map<int64_t, int64_t> by_milli;  // one-GPU shares: milli -> tasks
      int64_t all = 0;
      for (const WorkloadShape& s : profile.shapes)
        if (s.count > 0 && s.task.gpu_share() && s.task.gpu_count == 1 && s.task.milli_per_gpu.v > 0 &&
            s.task.milli_per_gpu.v < 1000)
          by_milli[s.task.milli_per_gpu.v] += s.count, all += s.count;
      DeadGaps d;
      if (by_milli.empty()) return d;
      d.lo = by_milli.begin()->first;
      // The typical shares: most frequent first (then larger), until they cover kTypicalPct %.
      std::vector<std::pair<int64_t, int64_t>> order;  // (count, milli)
      for (const auto& [milli, count] : by_milli) order.push_back({count, milli});
      std::sort(order.rbegin(), order.rend());
      int64_t seen = 0;
      d.hi = 1000;
      for (const auto& [count, milli] : order) {
        if (seen * 100 >= all * kTypicalPct) break;
        seen += count;
        d.hi = std::min(d.hi, milli);
      }
      return d;
    }
  };
  DeadGaps dead_;

  // Below any score combine() gives (its fragmentation level is 0-100, times 2^32).
  static constexpr int64_t kKeptTier = int64_t(128) << 32;

  // Node score: FGD's quantised score from the fragmentation removed (count-weighted milli), then
  // the tie-break described at the top (in the low 32 bits).
  int64_t combine(const Node& n, const TaskRequest& t, int64_t delta) const {
    const double x = double(delta) / double(std::max<int64_t>(model_.total(), 1)) / 1000.0;
    const int64_t frag = int64_t(100.0 * (1.0 / (1.0 + std::exp(-x))));
    // A CPU-only task goes where the fewest GPU milli are free: its CPU strands no GPU there.
    const int64_t tie = t.cpu_only() ? -n.free_gpu_milli : 0;
    return frag * (int64_t(1) << 32) + tie;
  }

  // k idle GPUs with the best links among themselves (worst link, then sum), then leaving the
  // best-connected idle GPUs behind (sum of their links), then the lowest indices.
  static bool pick_connected(const Node& n, int k, GpuPick& out) {
    out = GpuPick{};
    std::array<uint16_t, kMaxGpusPerNode> idle{};
    int m = 0;
    for (const Gpu& g : n.gpus)
      if (g.idle() && g.index < kMaxGpusPerNode) idle[m++] = g.index;
    if (m < k || k <= 0) return false;
    const NodeTopology* topo = n.topology.get();
    // Link scores among the idle GPUs; if they are all alike, any choice is as good.
    std::array<std::array<int, kMaxGpusPerNode>, kMaxGpusPerNode> link{};
    std::array<int, kMaxGpusPerNode> row{};
    int lo = 1 << 30, hi = -1, total = 0;
    if (topo && topo->gpu_count() >= int(n.gpus.size()))
      for (int a = 0; a < m; ++a)
        for (int b = a + 1; b < m; ++b) {
          const int s = topo->link_score(idle[a], idle[b]);
          link[a][b] = link[b][a] = s;
          row[a] += s, row[b] += s, total += s;
          lo = std::min(lo, s), hi = std::max(hi, s);
        }
    if (m == k || hi <= lo) {
      for (int i = 0; i < k; ++i) out.add(idle[i]);
      return true;
    }
    // Enumerate k-subsets in lexicographic order (C(16,8) = 12870 at most; stop after 4096).
    std::array<int, kMaxGpusPerNode> sel{};
    for (int i = 0; i < k; ++i) sel[i] = i;
    std::array<int, 3> best_key{};
    std::array<int, kMaxGpusPerNode> best_sel{};
    for (int evaluated = 0; evaluated < 4096; ++evaluated) {
      int worst = k > 1 ? 1 << 30 : 0, inner = 0, rows = 0;
      for (int i = 0; i < k; ++i) {
        rows += row[sel[i]];
        for (int j = i + 1; j < k; ++j) {
          inner += link[sel[i]][sel[j]];
          worst = std::min(worst, link[sel[i]][sel[j]]);
        }
      }
      const std::array<int, 3> key{worst, inner, total - rows + inner};  // last: links left among the rest
      if (evaluated == 0 || key > best_key) best_key = key, best_sel = sel;
      int i = k - 1;
      while (i >= 0 && sel[i] == m - k + i) --i;
      if (i < 0) break;
      ++sel[i];
      for (int j = i + 1; j < k; ++j) sel[j] = sel[j - 1] + 1;
    }
    for (int i = 0; i < k; ++i) out.add(idle[best_sel[i]]);
    return true;
  }

  // MIG: reuse an idle instance of the profile (tightest GPU); else create where the workload's MIG
  // profiles lose the least creatable count, on the GPU with the fewest free slices left; else
  // reconfigure (destroy idle instances, as pick_mig_first_fit would) with the same preferences.
  std::optional<NodeChoice> score_mig(const Node& n, const TaskRequest& t) const {
    const MigProfile* p = resolve_mig_profile(n, t);
    const GpuModel* model = n.gpu_model();
    if (!p || !model) return std::nullopt;
    // Weights of the profiles to keep creatable: the workload's MIG shapes on this model, or
    // every profile of the model alike when the workload names none.
    std::array<std::pair<const MigProfile*, int64_t>, 16> keep{};
    int nkeep = 0;
    for (const auto& [name, count] : mig_counts_)
      if (const MigProfile* q = model->find_profile(name); q && nkeep < 16) keep[nkeep++] = {q, count};
    if (nkeep == 0)
      for (const MigProfile& q : model->mig_profiles)
        if (nkeep < 16) keep[nkeep++] = {&q, 1};

    struct Key {
      int tier = 0;          // 2 reuse, 1 create, 0 reconfigure
      int64_t loss = 0;      // weighted creatable instances lost (lower is better)
      int free_after = 0;    // free memory slices left on the GPU (lower is better: packing)
      bool operator>(const Key& o) const {
        if (tier != o.tier) return tier > o.tier;
        if (loss != o.loss) return loss < o.loss;
        return free_after < o.free_after;
      }
    };
    bool found = false;
    Key best;
    NodeChoice out;
    auto consider = [&](const Key& k, uint16_t gpu, int start, bool create, uint8_t destroy) {
      if (found && !(k > best)) return;
      found = true, best = k;
      out.pick = GpuPick{};
      out.pick.add(gpu);
      out.pick.mig_start = int8_t(start);
      out.pick.mig_create = create;
      out.pick.mig_destroy = destroy;
    };
    auto loss_of = [&](const MigLayout& before, const MigLayout& after) {
      int64_t loss = 0;
      for (int i = 0; i < nkeep; ++i)
        loss += keep[i].second * (before.creatable_count(*keep[i].first) - after.creatable_count(*keep[i].first));
      return loss;
    };
    for (const Gpu& g : n.gpus) {
      if (!g.mig_enabled || g.health != GpuHealth::kHealthy) continue;
      for (const MigInstance& inst : g.mig.instances())
        if (!inst.in_use && inst.profile_id == p->id) consider({2, 0, g.mig.free_memory_slices()}, g.index, inst.start, false, 0);
      for (int start : g.mig.feasible_starts(*p)) {
        MigLayout trial = g.mig;
        if (trial.create(*p, start).ok()) consider({1, loss_of(g.mig, trial), trial.free_memory_slices()}, g.index, start, true, 0);
      }
    }
    if (!found)
      for (const Gpu& g : n.gpus) {
        if (!g.mig_enabled || g.health != GpuHealth::kHealthy) continue;
        uint8_t destroy = 0;
        const int start = g.mig.reclaim_start(*p, &destroy);
        if (start < 0) continue;
        MigLayout trial = g.mig;
        bool ok = true;
        for (int s = 0; s < 8; ++s)
          if (destroy >> s & 1) ok = ok && trial.destroy(s).ok();
        if (ok && trial.create(*p, start).ok())
          consider({0, loss_of(g.mig, trial), trial.free_memory_slices()}, g.index, start, true, destroy);
      }
    if (!found) return std::nullopt;
    const int64_t loss = std::clamp<int64_t>(best.loss, -(int64_t(1) << 30), (int64_t(1) << 30) - 1);
    out.score = int64_t(best.tier) * (int64_t(1) << 50) - loss * 64 - best.free_after;
    return out;
  }

  FragModel model_;
  Scarcity scarcity_;
  Reserve reserve_;
  std::map<std::string, int64_t> mig_counts_;
};

}  // namespace

std::unique_ptr<ScoringPolicy> make_tessera() { return std::make_unique<TesseraPolicy>(); }

}  // namespace tessera::policies
