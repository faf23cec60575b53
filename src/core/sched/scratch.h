// ScratchEdits: trial edits to a working ClusterState (the cycle's scratch view) that are undone,
// newest first, when the guard ends or on undo(), instead of release/re-apply pairs written by hand.
//
// Ownership: the guard refers to the cluster and to the placements it was given (it does not copy
// them): both must outlive it. Thread-safety: none (one cycle, one thread). Invariants: every edit it
// records was applied whole (a release or apply is all or nothing: one the cluster refuses part-way
// is rolled back at once and reported false, and not recorded); undoing every recorded edit, newest
// first, restores the cluster as it was when the guard was made, MIG layouts included (an apply that
// created or destroyed instances is undone with ClusterState::undo_all).
#pragma once

#include <cstddef>
#include <vector>

#include "core/cluster.h"

namespace tessera::sched {

class ScratchEdits {
 public:
  explicit ScratchEdits(ClusterState& cluster) : cluster_(cluster) {}
  ScratchEdits(const ScratchEdits&) = delete;
  ScratchEdits& operator=(const ScratchEdits&) = delete;
  ~ScratchEdits() { undo(); }

  // Releases every task of `pl` (false, and nothing changed, if the cluster refuses one).
  bool release(const std::vector<TaskPlacement>& pl);
  // Applies every task of `pl` (false, and nothing changed, if the cluster refuses one).
  bool apply(const std::vector<TaskPlacement>& pl);
  // Undoes the newest edit; then every edit, newest first.
  void undo_last();
  void undo();
  size_t size() const { return edits_.size(); }

 private:
  struct Edit {
    const std::vector<TaskPlacement>* placement;
    bool released;  // true: a release (undone by applying it); false: an apply (undone by undo_all)
    ClusterState::MigLayouts mig_before;  // an apply: the MIG layouts it changed, as they were
  };
  ClusterState& cluster_;
  std::vector<Edit> edits_;
};

}  // namespace tessera::sched
