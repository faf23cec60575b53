// QueueTree validation and the per-cycle fair-share computation (see queues.h).
// Pure and deterministic: queues are visited in id order, classes in name order, and every
// integer split hands its leftover milli to children in id order.
#include "core/sched/queues.h"

#include <algorithm>
#include <cmath>
#include <cassert>
#include <limits>

namespace tessera {
namespace {

constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();

int64_t get(const ClassAmounts& m, const std::string& cls, int64_t absent = 0) {
  auto it = m.find(cls);
  return it == m.end() ? absent : it->second;
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// "64 GPUs", "1 GPU" or "1500 milli-GPU".
std::string gpus(int64_t milli) {
  if (milli % 1000 != 0) return std::to_string(milli) + " milli-GPU";
  return std::to_string(milli / 1000) + (milli == 1000 ? " GPU" : " GPUs");
}

Status check_amounts(const QueueSpec& s, const char* field, const ClassAmounts& m) {
  for (const auto& [cls, v] : m) {
    if (cls.empty()) return invalid_argument("queue " + quoted(s.name) + ": " + field + ": class name must not be empty");
    if (v < 0)
      return invalid_argument("queue " + quoted(s.name) + ": " + field + "[" + cls + "]: must be >= 0 (got " +
                              std::to_string(v) + ")");
  }
  return {};
}

}  // namespace

Result<QueueTree> QueueTree::build(const std::vector<QueueSpec>& specs) {
  // Per-spec fields, in file order so the first bad entry is reported.
  for (size_t i = 0; i < specs.size(); ++i) {
    const QueueSpec& s = specs[i];
    if (s.name.empty()) return invalid_argument("queue #" + std::to_string(i + 1) + ": name: must not be empty");
    if (s.weight < 1)
      return invalid_argument("queue " + quoted(s.name) + ": weight: must be >= 1 (got " + std::to_string(s.weight) + ")");
    if (Status st = check_amounts(s, "guaranteed", s.guaranteed); !st.ok()) return st.error();
    if (Status st = check_amounts(s, "limit", s.limit); !st.ok()) return st.error();
    for (const auto& [cls, g] : s.guaranteed) {
      int64_t lim = get(s.limit, cls, kUnlimited);
      if (g > lim)
        return invalid_argument("queue " + quoted(s.name) + ": guaranteed " + std::to_string(g) + " milli of class " +
                                cls + " exceeds its limit " + std::to_string(lim));
    }
  }
  // Ids in name order, so results do not depend on the order of the file.
  std::vector<size_t> order(specs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return specs[a].name != specs[b].name ? specs[a].name < specs[b].name : a < b;
  });
  std::map<std::string, QueueId> ids;
  QueueTree t;
  for (size_t rank = 0; rank < order.size(); ++rank) {
    const QueueSpec& s = specs[order[rank]];
    QueueId id(static_cast<uint32_t>(rank));
    if (!ids.emplace(s.name, id).second) return invalid_argument("queue " + quoted(s.name) + ": name: defined more than once");
    Queue q;
    q.id = id;
    q.name = s.name;
    q.guaranteed = s.guaranteed;
    q.limit = s.limit;
    q.weight = s.weight;
    t.queues_.push_back(std::move(q));
  }
  for (size_t rank = 0; rank < order.size(); ++rank) {
    const QueueSpec& s = specs[order[rank]];
    if (s.parent.empty()) continue;
    auto it = ids.find(s.parent);
    if (it == ids.end()) return invalid_argument("queue " + quoted(s.name) + ": parent " + quoted(s.parent) + " does not exist");
    t.queues_[rank].parent = it->second;
  }
  // Cycles: a queue on a cycle reaches itself within n steps. Report the smallest such id.
  const size_t n = t.queues_.size();
  for (const Queue& q : t.queues_) {
    std::string path = q.name;
    QueueId p = q.parent;
    for (size_t steps = 0; p.valid() && steps < n; ++steps) {
      path += " -> " + t.queues_[p.value].name;
      if (p == q.id) return invalid_argument("queue " + quoted(q.name) + ": parent: cycle " + path);
      p = t.queues_[p.value].parent;
    }
  }
  // Children (pushed in id order, hence sorted), depth, top level.
  for (Queue& q : t.queues_) {
    if (!q.parent.valid()) {
      t.top_.push_back(q.id);
      continue;
    }
    t.queues_[q.parent.value].children.push_back(q.id);
    for (QueueId p = q.parent; p.valid(); p = t.queues_[p.value].parent) ++q.depth;
  }
  // Children's guarantees fit in the parent's, per class.
  for (const Queue& q : t.queues_) {
    std::map<std::string, __int128> sum;
    for (QueueId c : q.children)
      for (const auto& [cls, g] : t.queues_[c.value].guaranteed) sum[cls] += g;
    for (const auto& [cls, s] : sum) {
      int64_t own = get(q.guaranteed, cls);
      if (s > own) {
        std::string total = s > kUnlimited ? std::string("more than 2^63") : std::to_string(static_cast<int64_t>(s));
        return invalid_argument("queue " + quoted(q.name) + ": children guarantee " + total + " milli of class " + cls +
                                " but the queue guarantees only " + std::to_string(own));
      }
    }
  }
  t.paths_.resize(t.queues_.size());
  for (const Queue& q : t.queues_)
    for (QueueId p = q.id; p.valid(); p = t.queues_[p.value].parent) t.paths_[q.id.value].push_back(p);
  return t;
}

Result<QueueId> QueueTree::find(const std::string& name) const {
  // Ids are in name order: binary search.
  auto it = std::lower_bound(queues_.begin(), queues_.end(), name,
                             [](const Queue& q, const std::string& n) { return q.name < n; });
  if (it == queues_.end() || it->name != name) return not_found("queue " + quoted(name) + " does not exist");
  return it->id;
}


// ---- FairShare ----

namespace {

// Splits `amount` among siblings: each first gets min(guaranteed, cap, what is left) in id order,
// then the rest is water-filled by weight up to each child's cap (min(demand, limit)). Floor
// division; the leftover milli of a round go one each to the uncapped children in id order.
// Returns what each child receives (indexed like `kids`).
std::vector<int64_t> split(int64_t amount, const std::vector<int64_t>& guar, const std::vector<int64_t>& cap,
                           const std::vector<int64_t>& weight) {
  const size_t k = guar.size();
  std::vector<int64_t> got(k, 0);
  int64_t left = amount;
  for (size_t i = 0; i < k; ++i) {
    got[i] = std::min({guar[i], cap[i], left});
    left -= got[i];
  }
  std::vector<size_t> active;
  for (size_t i = 0; i < k; ++i)
    if (got[i] < cap[i]) active.push_back(i);
  while (left > 0 && !active.empty()) {
    __int128 w = 0;
    for (size_t i : active) w += weight[i];
    // Children whose weighted part would reach their cap are filled to it; the water level only
    // rises when they leave, so this is exact max-min filling.
    std::vector<size_t> open;
    int64_t filled = 0;
    for (size_t i : active) {
      __int128 part = static_cast<__int128>(left) * weight[i] / w;
      if (part >= cap[i] - got[i]) {
        filled += cap[i] - got[i];
        got[i] = cap[i];
      } else {
        open.push_back(i);
      }
    }
    if (filled > 0) {
      left -= filled;
      active = std::move(open);
      continue;
    }
    // No one capped: hand out the weighted parts, then the leftover (< active.size()) milli.
    int64_t given = 0;
    for (size_t i : active) {
      int64_t part = static_cast<int64_t>(static_cast<__int128>(left) * weight[i] / w);
      got[i] += part;
      given += part;
    }
    left -= given;
    for (size_t i : active) {
      if (left == 0) break;
      if (got[i] < cap[i]) {
        ++got[i];
        --left;
      }
    }
    active.erase(std::remove_if(active.begin(), active.end(), [&](size_t i) { return got[i] >= cap[i]; }), active.end());
  }
  return got;
}

void add_into(ClassAmounts& to, const ClassAmounts& from, int sign = 1) {
  for (const auto& [cls, v] : from) to[cls] += sign * v;
}

}  // namespace

FairShare FairShare::compute(const QueueTree& tree, const ClassAmounts& capacity, const std::vector<QueueLoad>& load) {
  FairShare fs;
  fs.tree_ = &tree;
  const size_t n = tree.size();
  fs.fair_.assign(n, {});
  fs.alloc_.assign(n, {});
  fs.demand_.assign(n, {});
  fs.usage_.assign(n, 0.0);
  // Aggregate leaf inputs up the tree (values given for inner queues are ignored).
  for (const Queue& q : tree.queues()) {
    if (!q.leaf() || q.id.value >= load.size()) continue;
    const QueueLoad& l = load[q.id.value];
    for (QueueId p : tree.path_to_root(q.id)) {
      add_into(fs.alloc_[p.value], l.allocated);
      add_into(fs.demand_[p.value], l.demand);
      fs.usage_[p.value] += l.decayed_usage;
    }
  }
  // Top-down per class, parents before children (BFS from the top level).
  std::vector<QueueId> frontier;
  for (const auto& class_capacity : capacity) {
    // Named (not a structured binding) so the lambda may capture it: clang before 16 cannot.
    const std::string& cls = class_capacity.first;
    const int64_t cap = class_capacity.second;
    auto distribute = [&](int64_t amount, const std::vector<QueueId>& kids) {
      std::vector<int64_t> g, c, w;
      for (QueueId k : kids) {
        const Queue& q = tree.queue(k);
        int64_t d = std::max<int64_t>(0, get(fs.demand_[k.value], cls));
        g.push_back(get(q.guaranteed, cls));
        c.push_back(std::min(d, get(q.limit, cls, kUnlimited)));
        w.push_back(q.weight);
      }
      std::vector<int64_t> got = split(amount, g, c, w);
      for (size_t i = 0; i < kids.size(); ++i) fs.fair_[kids[i].value][cls] = got[i];
    };
    distribute(std::max<int64_t>(0, cap), tree.top_level());
    frontier = tree.top_level();
    while (!frontier.empty()) {
      std::vector<QueueId> next;
      for (QueueId p : frontier) {
        const Queue& q = tree.queue(p);
        if (q.leaf()) continue;
        distribute(fs.fair_[p.value][cls], q.children);
        next.insert(next.end(), q.children.begin(), q.children.end());
      }
      frontier = std::move(next);
    }
  }
  return fs;
}

int64_t FairShare::fair_share(QueueId q, const std::string& cls) const { return get(fair_[q.value], cls); }
int64_t FairShare::allocated(QueueId q, const std::string& cls) const { return get(alloc_[q.value], cls); }
int64_t FairShare::demand(QueueId q, const std::string& cls) const { return get(demand_[q.value], cls); }

double FairShare::raw_saturation(QueueId q) const {
  double s = 0;
  auto consider = [&](const std::string& cls) {
    int64_t a = allocated(q, cls), f = fair_share(q, cls);
    if (f > 0) s = std::max(s, static_cast<double>(a) / static_cast<double>(f));
    else if (a > 0) s = std::max(s, kUnfundedSaturation);
  };
  for (const auto& [cls, v] : fair_[q.value]) consider(cls);
  for (const auto& [cls, v] : alloc_[q.value])
    if (!fair_[q.value].count(cls)) consider(cls);
  return s;
}

double FairShare::saturation(QueueId q) const { return raw_saturation(q) * (1.0 + kUsageWeight * usage_[q.value]); }

bool FairShare::below_guarantee(QueueId q) const {
  for (const auto& [cls, g] : tree_->queue(q).guaranteed) {
    int64_t a = allocated(q, cls);
    if (a < g && a < demand(q, cls)) return true;
  }
  return false;
}

const FairShare::Key& FairShare::key(QueueId q) const {
  if (key_.size() < tree_->size()) key_.resize(tree_->size());
  Key& k = key_[q.value];
  if (!k.valid) k = {true, below_guarantee(q), saturation(q)};
  return k;
}

bool FairShare::before(QueueId a, QueueId b) const {
  if (a == b) return false;
  const Key& ka = key(a);
  const Key& kb = key(b);
  if (ka.below != kb.below) return ka.below;
  if (ka.saturation != kb.saturation) return ka.saturation < kb.saturation;
  if (usage_[a.value] != usage_[b.value]) return usage_[a.value] < usage_[b.value];
  return a < b;
}

Status FairShare::within_limits(QueueId q, const ClassAmounts& extra) const {
  for (QueueId p : tree_->path_to_root(q)) {
    const Queue& qu = tree_->queue(p);
    for (const auto& [cls, x] : extra) {
      if (x <= 0) continue;
      int64_t lim = get(qu.limit, cls, kUnlimited);
      if (lim == kUnlimited) continue;
      if (allocated(p, cls) > lim - x)
        return Error{ErrorCode::kResourceExhausted, "queue " + qu.name + " at its limit of " + gpus(lim) + " of class " + cls};
    }
  }
  return {};
}

bool FairShare::borrowing(QueueId q, const std::string& cls) const {
  for (QueueId p : tree_->path_to_root(q))
    if (allocated(p, cls) > get(tree_->queue(p).guaranteed, cls)) return true;
  return false;
}

void FairShare::add(QueueId leaf, const ClassAmounts& delta, int sign) {
  assert(sign == 1 || sign == -1);
  generation_ = fresh_generation();
  for (QueueId p : tree_->path_to_root(leaf)) {
    add_into(alloc_[p.value], delta, sign);
    if (p.value < key_.size()) key_[p.value].valid = false;
  }
}

double decay_usage(double usage, double share, int64_t elapsed_s, int64_t half_life_s) {
  const double d = std::exp2(-double(elapsed_s) / double(std::max<int64_t>(1, half_life_s)));
  return decay_usage_by(usage, share, d);
}

double usage_decay_factor_ms(int64_t elapsed_ms, int64_t half_life_s) {
  return std::exp2(-double(elapsed_ms) / (1000.0 * double(std::max<int64_t>(1, half_life_s))));
}

}  // namespace tessera
