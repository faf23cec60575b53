// GuaranteeLedger: the cycle's guarantee questions (guarantee_ledger.h).
#include "core/sched/guarantee_ledger.h"

#include <algorithm>
#include <cassert>
#include <set>
#include <utility>

namespace tessera::sched {

namespace {

int64_t amount(const ClassAmounts& m, const std::string& c) {
  auto it = m.find(c);
  return it == m.end() ? 0 : it->second;
}

bool contains(const std::vector<std::string>* sorted, const std::string& c) {
  return sorted && std::binary_search(sorted->begin(), sorted->end(), c);
}

}  // namespace

GuaranteeLedger::GuaranteeLedger(const QueueTree& tree, ClassAmounts capacity, FairShare fs, bool reclaim)
    : tree_(tree), fs_(std::move(fs)), capacity_(std::move(capacity)), reclaim_(reclaim), usable_(tree.size()) {}

bool GuaranteeLedger::short_of_guarantee(QueueId leaf) const {
  for (const auto& [c, g] : tree_.queue(leaf).guaranteed)
    if (fs_.allocated(leaf, c) < std::min(g, fs_.demand(leaf, c))) return true;
  return false;
}

void GuaranteeLedger::add_usable(const GuaranteeJob& j) {
  assert(owed_.empty() && "usable demand is recorded before any question");
  count_usable(usable_[j.queue.value], j);
}

void GuaranteeLedger::add_usable(OwedDelta& delta, const GuaranteeJob& j) const {
  count_usable(delta.usable[j.queue.value], j);
}

void GuaranteeLedger::count_usable(ClassAmounts& u, const GuaranteeJob& j) const {
  for (const auto& [c, v] : j.amounts()) u[c] += v;
  // A request that may be placed in several classes could use each guaranteed one it allows.
  for (const std::string& c : path_guaranteed(j.queue))
    if (!j.amounts().count(c) && contains(j.classes, c)) u[c] += j.milli;
}

void GuaranteeLedger::add(QueueId leaf, const ClassAmounts& delta, int sign) {
  // Only the leaf's own owed amount changes (inner queues are owed nothing).
  const Queue& q = tree_.queue(leaf);
  ClassAmounts before;
  for (const auto& [c, v] : delta)
    if (owed_.count(c)) before[c] = leaf_owed(fs_, q, c);
  fs_.add(leaf, delta, sign);
  for (const auto& [c, b] : before) {
    OwedBook& book = owed_[c];
    const int64_t after = leaf_owed(fs_, q, c);
    book.sum += after - b;
    if (after > 0) book.leaves.insert(leaf.value);
    else book.leaves.erase(leaf.value);
  }
}

const GuaranteeLedger::OwedBook& GuaranteeLedger::owed_book(const std::string& c) const {
  auto it = owed_.find(c);
  if (it != owed_.end()) return it->second;
  OwedBook book;
  for (const Queue& q : tree_.queues())
    if (const int64_t o = leaf_owed(fs_, q, c); o > 0) {
      book.sum += o;
      book.leaves.insert(q.id.value);
    }
  return owed_.emplace(c, std::move(book)).first->second;
}

std::vector<std::string> GuaranteeLedger::owed_classes(const GuaranteeJob& j) const {
  std::vector<std::string> classes;
  if (!reclaim_) return classes;
  const Queue& q = tree_.queue(j.queue);
  for (const auto& [c, g] : q.guaranteed) {
    if (g <= 0) continue;
    const bool usable = j.amounts().count(c) || (c != kAnyClass && contains(j.classes, c));
    if (usable && fs_.allocated(q.id, c) + j.milli <= g) classes.push_back(c);
  }
  return classes;
}

bool GuaranteeLedger::would_borrow(const FairShare& fs, QueueId leaf, const std::string& c, int64_t x) const {
  for (QueueId p : tree_.path_to_root(leaf))
    if (fs.allocated(p, c) + x > amount(tree_.queue(p).guaranteed, c)) return true;
  return false;
}

bool GuaranteeLedger::borrows_after(const GuaranteeJob& j) const {
  for (const auto& [c, x] : j.amounts())
    if (x > 0 && would_borrow(fs_, j.queue, c, x)) return true;
  return false;
}

int64_t GuaranteeLedger::leaf_owed(const FairShare& fs, QueueId leaf, const std::string& c) const {
  return leaf_owed(fs, tree_.queue(leaf), c);
}

int64_t GuaranteeLedger::leaf_owed(const FairShare& fs, const Queue& q, const std::string& c, const OwedDelta* delta) const {
  const int64_t g = amount(q.guaranteed, c);
  if (!q.leaf() || g <= 0) return 0;
  int64_t demand = fs.demand(q.id, c), usable = amount(usable_[q.id.value], c);
  if (delta) {
    if (auto d = delta->demand.find(q.id.value); d != delta->demand.end()) demand += amount(d->second, c);
    if (auto u = delta->usable.find(q.id.value); u != delta->usable.end()) usable += amount(u->second, c);
  }
  const int64_t gap = std::min(g, demand) - fs.allocated(q.id, c);
  return std::max<int64_t>(0, std::min(gap, usable));
}

int64_t GuaranteeLedger::owed_to_others(const FairShare& fs, QueueId leaf, const std::string& c,
                                        const OwedDelta* delta) const {
  // The only leaf on the path is `leaf` itself. Kept per class for the own fair share, summed afresh
  // for a trial copy or a delta.
  const Queue& own = tree_.queue(leaf);
  if (&fs == &fs_ && !delta) return owed_book(c).sum - leaf_owed(fs, own, c);
  int64_t owed = 0;
  for (const Queue& q : tree_.queues())
    if (q.id != own.id) owed += leaf_owed(fs, q, c, delta);
  return owed;
}

bool GuaranteeLedger::defers_to_owed(const GuaranteeJob& j) const {
  if (!reclaim_ || j.milli <= 0 || !borrows_after(j)) return false;
  for (const auto& [c, x] : j.amounts())
    if (x > 0 && owed_to_others(fs_, j.queue, c) > 0) return true;
  return false;
}

std::string GuaranteeLedger::takes_owed(const FairShare& fs, QueueId leaf, const ClassAmounts& got) const {
  return takes_owed(fs, leaf, got, nullptr);
}

std::string GuaranteeLedger::takes_owed_with(const FairShare& fs, QueueId leaf, const ClassAmounts& got,
                                             const OwedDelta& delta) const {
  assert(&fs != &fs_ && "asked of a trial copy (the owed book holds the books' demand only)");
  return takes_owed(fs, leaf, got, &delta);
}

std::string GuaranteeLedger::takes_owed(const FairShare& fs, QueueId leaf, const ClassAmounts& got,
                                        const OwedDelta* delta) const {
  if (!reclaim_) return "";  // nobody reclaims: nothing is owed
  // The classes in which the start stays within its leaf's own guarantee. Such a job is never
  // reclaimed for another class (reclaim_keeps_guarantee: reclaim does not take a leaf below its
  // guarantee in a class the victim holds), so refusing it where it borrows prevents no reclaim
  // loop; it would only leave the GPUs idle while two owed queues each wait for the other.
  // Asked only of a start about to be refused (this is on every start's path).
  const Queue& own = tree_.queue(leaf);
  auto within_elsewhere = [&](const std::string& c) {
    for (const auto& [d, y] : got)
      if (d != c && y > 0 && fs.allocated(leaf, d) + y <= amount(own.guaranteed, d)) return true;
    return false;
  };
  for (const auto& [c, x] : got) {
    if (x <= 0 || !would_borrow(fs, leaf, c, x)) continue;
    const int64_t owed = owed_to_others(fs, leaf, c, delta);
    if (owed <= 0) continue;
    int64_t used = 0;
    for (QueueId t : tree_.top_level()) used += fs.allocated(t, c);
    if (amount(capacity_, c) - used - owed < x && !within_elsewhere(c)) {
      std::string owner;  // the first leaf by id owed something, other than `leaf`
      if (&fs == &fs_) {
        for (uint32_t q : owed_book(c).leaves)
          if (q != leaf.value) {
            owner = tree_.queue(QueueId(q)).name;
            break;
          }
      } else {
        for (const Queue& q : tree_.queues())
          if (q.id != leaf && leaf_owed(fs, q, c, delta) > 0) {
            owner = q.name;
            break;
          }
      }
      return "guarantee: would borrow " + gpus_text(x) + " of class " + c + " that queue " + owner +
             " is owed (below its guarantee, with jobs waiting)";
    }
  }
  return "";
}

bool GuaranteeLedger::reclaimable(const GuaranteeJob& v, const GuaranteeJob& claimant,
                                  std::span<const std::string> classes) const {
  if (!(v.preemptible || v.class_value <= claimant.class_value)) return false;
  bool borrows_owed = false;
  for (const std::string& c : classes) borrows_owed = borrows_owed || (v.amounts().count(c) && fs_.borrowing(v.queue, c));
  return borrows_owed && reclaim_keeps_guarantee(fs_, v, claimant.queue, classes);
}

bool GuaranteeLedger::inside_own_guarantee(QueueId leaf, std::span<const std::string> classes) const {
  const Queue& q = tree_.queue(leaf);
  for (const std::string& c : classes)
    if (fs_.allocated(leaf, c) > amount(q.guaranteed, c)) return false;
  return true;
}

bool GuaranteeLedger::borrows(const GuaranteeJob& v) const {
  for (const auto& [c, m] : v.amounts())
    if (m > 0 && !fs_.borrowing(v.queue, c)) return false;
  return true;
}

bool GuaranteeLedger::still_borrows(const FairShare& fs, QueueId q, std::span<const std::string> classes) const {
  for (const std::string& c : classes)
    if (fs.borrowing(q, c)) return true;
  return false;
}

bool GuaranteeLedger::keeps_guarantee(const FairShare& fs, const GuaranteeJob& v) const {
  return keeps_guarantee_below(fs, v, {}, {});
}

bool GuaranteeLedger::reclaim_keeps_guarantee(const FairShare& fs, const GuaranteeJob& v, QueueId claimant,
                                              std::span<const std::string> classes) const {
  return keeps_guarantee_below(fs, v, tree_.path_to_root(claimant), classes);
}

bool GuaranteeLedger::keeps_guarantee_below(const FairShare& fs, const GuaranteeJob& v, const std::vector<QueueId>& stop,
                                            std::span<const std::string> skip) const {
  for (const auto& [c, m] : v.amounts()) {
    if (m <= 0 || std::find(skip.begin(), skip.end(), c) != skip.end()) continue;
    for (QueueId p : tree_.path_to_root(v.queue)) {
      if (std::find(stop.begin(), stop.end(), p) != stop.end()) break;
      if (fs.allocated(p, c) - m < amount(tree_.queue(p).guaranteed, c)) return false;
    }
  }
  return true;
}

const std::vector<std::string>& GuaranteeLedger::path_guaranteed(QueueId q) const {
  if (path_guaranteed_.empty()) path_guaranteed_.resize(tree_.size());
  auto& slot = path_guaranteed_[q.value];
  if (!slot) {
    std::set<std::string> classes;
    for (QueueId p : tree_.path_to_root(q))
      for (const auto& [c, g] : tree_.queue(p).guaranteed)
        if (g > 0 && c != kAnyClass) classes.insert(c);
    slot.emplace(classes.begin(), classes.end());
  }
  return *slot;
}

}  // namespace tessera::sched
