// ScratchEdits (scratch.h).
#include "core/sched/scratch.h"

#include <cassert>

namespace tessera::sched {

bool ScratchEdits::release(const std::vector<TaskPlacement>& pl) {
  if (!cluster_.release_all(pl).ok()) return false;  // all or nothing
  edits_.push_back({&pl, true});
  return true;
}

bool ScratchEdits::apply(const std::vector<TaskPlacement>& pl) {
  if (!cluster_.apply_all(pl).ok()) return false;  // all or nothing
  edits_.push_back({&pl, false});
  return true;
}

void ScratchEdits::undo_last() {
  if (edits_.empty()) return;
  const Edit e = edits_.back();
  edits_.pop_back();
  Status st = e.released ? cluster_.apply_all(*e.placement) : cluster_.release_all(*e.placement);
  assert(st.ok() && "undoing a scratch edit failed");
  (void)st;
}

void ScratchEdits::undo() {
  while (!edits_.empty()) undo_last();
}

}  // namespace tessera::sched
