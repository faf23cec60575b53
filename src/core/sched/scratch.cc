// ScratchEdits (scratch.h).
#include "core/sched/scratch.h"

#include <cassert>

namespace tessera::sched {

bool ScratchEdits::release(const std::vector<TaskPlacement>& pl) {
  size_t done = 0;
  for (; done < pl.size(); ++done)
    if (!cluster_.release(pl[done]).ok()) break;
  if (done < pl.size()) {  // refused part-way: put back what was released
    for (size_t k = 0; k < done; ++k) {
      Status st = cluster_.apply(pl[k]);
      assert(st.ok() && "restoring a partly released placement failed");
      (void)st;
    }
    return false;
  }
  edits_.push_back({&pl, true});
  return true;
}

bool ScratchEdits::apply(const std::vector<TaskPlacement>& pl) {
  if (!cluster_.apply_all(pl).ok()) return false;  // all or nothing
  edits_.push_back({&pl, false});
  return true;
}

void ScratchEdits::release_whole(const std::vector<TaskPlacement>& pl) {
  for (const TaskPlacement& p : pl) {
    Status st = cluster_.release(p);
    assert(st.ok() && "undoing an applied placement failed");
    (void)st;
  }
}

void ScratchEdits::undo_last() {
  if (edits_.empty()) return;
  const Edit e = edits_.back();
  edits_.pop_back();
  if (!e.released) {
    release_whole(*e.placement);
    return;
  }
  Status st = cluster_.apply_all(*e.placement);
  assert(st.ok() && "undoing a release failed");
  (void)st;
}

void ScratchEdits::undo() {
  while (!edits_.empty()) undo_last();
}

}  // namespace tessera::sched
