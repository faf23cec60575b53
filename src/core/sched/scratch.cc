// ScratchEdits (scratch.h).
#include "core/sched/scratch.h"

#include <cassert>
#include <utility>

namespace tessera::sched {

bool ScratchEdits::release(const std::vector<TaskPlacement>& pl) {
  if (!cluster_.release_all(pl).ok()) return false;  // all or nothing
  edits_.push_back({&pl, true, {}});
  return true;
}

bool ScratchEdits::apply(const std::vector<TaskPlacement>& pl) {
  ClusterState::MigLayouts before = cluster_.mig_layouts_changed_by(pl);
  if (!cluster_.apply_all(pl).ok()) return false;  // all or nothing
  edits_.push_back({&pl, false, std::move(before)});
  return true;
}

void ScratchEdits::undo_last() {
  if (edits_.empty()) return;
  const Edit e = std::move(edits_.back());
  edits_.pop_back();
  Status st = e.released ? cluster_.apply_all(*e.placement) : cluster_.undo_all(*e.placement, e.mig_before);
  assert(st.ok() && "undoing a scratch edit failed");
  (void)st;
}

void ScratchEdits::undo() {
  while (!edits_.empty()) undo_last();
}

}  // namespace tessera::sched
