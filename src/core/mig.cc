// MigLayout: interval allocation on the memory-slice axis (hardware.md §1.3, §6), plus the compute-slice,
// max_instances and single-+me rules.
#include "core/mig.h"

#include <algorithm>
#include <bit>
#include <string>
#include <utility>

namespace tessera {
namespace {

uint8_t interval_mask(int start, int size) { return static_cast<uint8_t>(((1u << size) - 1u) << start); }

std::string slice(int s) { return std::to_string(s); }

Error exhausted(std::string msg) { return {ErrorCode::kResourceExhausted, std::move(msg)}; }

}  // namespace

// NVIDIA's placement order (upper half first), precomputed for the 8- and 4-slice axes.
constexpr std::array<int, 8> kOrder8{4, 5, 6, 7, 0, 1, 2, 3};
constexpr std::array<int, 4> kOrder4{2, 3, 0, 1};

std::vector<int> MigLayout::start_order(int memory_slices) {
  std::vector<int> order;
  for (int i = 0; i < memory_slices; ++i) order.push_back((i + memory_slices / 2) % memory_slices);
  return order;
}

int MigLayout::free_memory_slices() const {
  return model_ ? model_->memory_slices - std::popcount(occupied_) : 0;
}

int MigLayout::used_compute_slices() const { return compute_used_; }

void MigLayout::recount() {
  compute_used_ = 0;
  has_me_ = false;
  count_by_id_.fill(0);
  if (!model_) return;
  for (const MigInstance& in : instances_) {
    if (const MigProfile* p = model_->find_profile_id(in.profile_id)) {
      compute_used_ += p->compute_slices;
      has_me_ = has_me_ || p->media_extension;
    }
    if (in.profile_id >= 0 && in.profile_id < 32) ++count_by_id_[in.profile_id];
  }
}

const MigProfile* MigLayout::own(const MigProfile& profile) const {
  if (!model_) return nullptr;
  const auto& ps = model_->mig_profiles;
  if (!ps.empty() && &profile >= &ps.front() && &profile <= &ps.back()) return &profile;  // fast path
  const MigProfile* p = model_->find_profile_id(profile.id);
  return p && p->name == profile.name ? p : nullptr;
}

MigLayout::Rule MigLayout::violated(const MigProfile& profile, int start) const {
  if (!model_ || !model_->mig_capable()) return Rule::kNoModel;
  const MigProfile* p = own(profile);
  if (!p) return Rule::kForeignProfile;
  const int same = p->id >= 0 && p->id < 32 ? count_by_id_[p->id] : 0;
  return check_counts(*p, start, occupied_, same, has_me_, compute_used_);
}

MigLayout::Rule MigLayout::check_counts(const MigProfile& p, int start, uint8_t occupied, int same, bool has_me,
                                        int compute) const {
  if (start < 0 || start >= model_->memory_slices) return Rule::kOutOfRange;
  if (!(p.allowed_starts >> start & 1)) return Rule::kUnaligned;
  if (start + p.memory_slices > model_->memory_slices) return Rule::kOutOfRange;
  if (occupied & interval_mask(start, p.memory_slices)) return Rule::kOverlap;
  if (same >= p.max_instances) return Rule::kMaxInstances;
  if (p.media_extension && has_me) return Rule::kMediaExtension;
  if (compute + p.compute_slices > model_->compute_slices) return Rule::kCompute;
  return Rule::kOk;
}

Error MigLayout::explain(Rule rule, const MigProfile& given, int start) const {
  const MigProfile& profile = own(given) ? *own(given) : given;
  const std::string& name = profile.name;
  switch (rule) {
    case Rule::kNoModel:
      return failed_precondition(model_ ? "GPU model " + model_->name + " is not MIG-capable"
                                        : std::string("MIG layout has no GPU model"));
    case Rule::kForeignProfile:
      return invalid_argument("MIG profile " + name + " (id " + std::to_string(profile.id) +
                              ") is not a profile of GPU model " + model_->name);
    case Rule::kOutOfRange:
      return invalid_argument(name + " cannot start at slice " + slice(start) +
                              ": the memory-slice axis is [0," + slice(model_->memory_slices) + ")");
    case Rule::kUnaligned:
      return invalid_argument(name + " cannot start at slice " + slice(start) + ": allowed starts are " +
                              slice_set_string(profile.allowed_starts));
    case Rule::kOverlap: {
      const uint8_t want = interval_mask(start, profile.memory_slices);
      return exhausted(name + " at slice " + slice(start) + " needs memory slices [" + slice(start) + "," +
                       slice(start + profile.memory_slices) + ") but " + slice_set_string(occupied_ & want) +
                       " are occupied");
    }
    case Rule::kMaxInstances:
      return exhausted(name + ": max_instances is " + std::to_string(profile.max_instances) +
                       " per GPU and that many exist");
    case Rule::kMediaExtension:
      return exhausted(name + ": at most one +me instance per GPU, and one exists");
    case Rule::kCompute:
      return exhausted(name + " needs " + std::to_string(profile.compute_slices) +
                       " compute slices but only " +
                       std::to_string(model_->compute_slices - used_compute_slices()) + " of " +
                       std::to_string(model_->compute_slices) + " are free");
    case Rule::kOk:
      break;
  }
  return {ErrorCode::kInternal, "no rule violated"};
}

bool MigLayout::can_create(const MigProfile& profile, int start) const {
  return violated(profile, start) == Rule::kOk;
}

bool MigLayout::can_create_anywhere(const MigProfile& profile) const {
  if (!model_) return false;
  for (int s = 0; s < model_->memory_slices; ++s)
    if ((profile.allowed_starts >> s & 1) && can_create(profile, s)) return true;
  return false;
}

int MigLayout::reclaim_start(const MigProfile& profile, uint8_t* destroy) const {
  if (!model_ || !model_->mig_capable()) return -1;
  const MigProfile* p = own(profile);
  if (!p) return -1;
  const int* order = model_->memory_slices == 4 ? kOrder4.data() : kOrder8.data();
  int best = -1, best_cost = 99;
  uint8_t best_destroy = 0;
  for (int i = 0; i < model_->memory_slices; ++i) {
    const int s = order[i];
    if (!(p->allowed_starts >> s & 1) || s + p->memory_slices > model_->memory_slices) continue;
    const uint8_t want = interval_mask(s, p->memory_slices);
    uint8_t freed = 0, starts = 0;
    int same = p->id >= 0 && p->id < 32 ? count_by_id_[p->id] : 0, compute = compute_used_;
    bool has_me = false, blocked = false;
    for (const MigInstance& in : instances_) {
      const uint8_t m = interval_mask(in.start, in.size);
      const MigProfile* q = model_->find_profile_id(in.profile_id);
      if (m & want) {
        if (in.in_use) {
          blocked = true;
          break;
        }
        freed |= m;
        starts |= uint8_t(1u << in.start);
        same -= in.profile_id == p->id;
        compute -= q ? q->compute_slices : 0;
      } else {
        has_me = has_me || (q && q->media_extension);
      }
    }
    if (blocked || starts == 0) continue;  // starts == 0: no reclaim needed (plain create covers it)
    if (check_counts(*p, s, uint8_t(occupied_ & ~freed), same, has_me, compute) != Rule::kOk) continue;
    const int cost = std::popcount(freed);
    if (cost < best_cost) best = s, best_cost = cost, best_destroy = starts;
  }
  if (destroy) *destroy = best_destroy;
  return best;
}

int MigLayout::creatable_count_reclaiming(const MigProfile& profile) const {
  if (std::none_of(instances_.begin(), instances_.end(), [](const MigInstance& m) { return !m.in_use; }))
    return creatable_count(profile);
  MigLayout busy = *this;
  for (const MigInstance& m : instances_)
    if (!m.in_use) (void)busy.destroy(m.start);
  return busy.creatable_count(profile);
}

std::vector<int> MigLayout::feasible_starts(const MigProfile& profile) const {
  std::vector<int> out;
  if (!model_) return out;
  for (int s = 0; s < model_->memory_slices; ++s) {
    if (can_create(profile, s)) out.push_back(s);
  }
  return out;
}

Status MigLayout::create(const MigProfile& profile, int start) {
  if (Rule r = violated(profile, start); r != Rule::kOk) return explain(r, profile, start);
  const MigProfile& p = *own(profile);
  const MigInstance in{p.id, static_cast<uint8_t>(start), static_cast<uint8_t>(p.memory_slices), false};
  auto at = std::find_if(instances_.begin(), instances_.end(),
                         [&](const MigInstance& o) { return o.start > start; });
  instances_.insert(at, in);
  occupied_ |= interval_mask(start, p.memory_slices);
  recount();
  return {};
}

Result<int> MigLayout::create_first_fit(const MigProfile& profile) {
  if (!model_ || !model_->mig_capable()) return explain(Rule::kNoModel, profile, 0);
  const int* order = model_->memory_slices == 4 ? kOrder4.data() : kOrder8.data();
  for (int i = 0; i < model_->memory_slices; ++i) {
    const int s = order[i];
    switch (const Rule r = violated(profile, s)) {
      case Rule::kOk:
        if (Status st = create(profile, s); !st.ok()) return st.error();
        return s;
      case Rule::kUnaligned:
      case Rule::kOutOfRange:
      case Rule::kOverlap:
        continue;  // depends on the start: try the next one
      default:
        return explain(r, profile, s);  // fails at every start
    }
  }
  return exhausted("insufficient resources: no allowed start of " + profile.name + " " +
                   slice_set_string(profile.allowed_starts) + " is free; occupied memory slices are " +
                   slice_set_string(occupied_));
}

Status MigLayout::destroy(int start) {
  auto it = std::find_if(instances_.begin(), instances_.end(),
                         [&](const MigInstance& in) { return in.start == start; });
  if (it == instances_.end()) return not_found("no GPU instance starts at memory slice " + slice(start));
  if (it->in_use) {
    return failed_precondition("GPU instance at memory slice " + slice(start) +
                               " is in use: release its task before destroying it");
  }
  occupied_ &= static_cast<uint8_t>(~interval_mask(it->start, it->size));
  instances_.erase(it);
  recount();
  return {};
}

Status MigLayout::set_in_use(int start, bool in_use) {
  for (MigInstance& in : instances_) {
    if (in.start == start) {
      in.in_use = in_use;
      return {};
    }
  }
  return not_found("no GPU instance starts at memory slice " + slice(start));
}

int MigLayout::creatable_count(const MigProfile& profile) const {
  // Greedy first-fit in NVIDIA's order on counters only (no copy, no allocation).
  if (!model_ || !model_->mig_capable()) return 0;
  const MigProfile* p = own(profile);
  if (!p) return 0;
  uint8_t occupied = occupied_;
  int same = p->id >= 0 && p->id < 32 ? count_by_id_[p->id] : 0;
  bool has_me = has_me_;
  int compute = compute_used_;
  const int* order = model_->memory_slices == 4 ? kOrder4.data() : kOrder8.data();
  int n = 0;
  for (bool placed = true; placed;) {
    placed = false;
    for (int i = 0; i < model_->memory_slices && !placed; ++i) {
      const int s = order[i];
      if (check_counts(*p, s, occupied, same, has_me, compute) != Rule::kOk) continue;
      occupied |= interval_mask(s, p->memory_slices);
      ++same;
      has_me = has_me || p->media_extension;
      compute += p->compute_slices;
      ++n;
      placed = true;
    }
  }
  return n;
}

Status MigLayout::check() const {
  if (!model_) {
    return instances_.empty() && occupied_ == 0
               ? Status()
               : Status(failed_precondition("layout without a model holds instances"));
  }
  uint8_t mask = 0;
  int compute = 0, me = 0, prev_start = -1;
  for (const MigInstance& in : instances_) {
    const std::string at = "instance at slice " + slice(in.start) + ": ";
    const MigProfile* p = model_->find_profile_id(in.profile_id);
    if (!p)
      return Status(Error{ErrorCode::kInternal, at + "unknown profile id " + std::to_string(in.profile_id)});
    if (in.start <= prev_start)
      return Status(Error{ErrorCode::kInternal, at + "instances not sorted by start"});
    prev_start = in.start;
    if (in.size != p->memory_slices || !(p->allowed_starts >> in.start & 1) ||
        in.start + in.size > model_->memory_slices) {
      return Status(Error{ErrorCode::kInternal, at + p->name + " has a bad start or size"});
    }
    const uint8_t m = interval_mask(in.start, in.size);
    if (mask & m) return Status(Error{ErrorCode::kInternal, at + "overlaps another instance"});
    mask |= m;
    compute += p->compute_slices;
    me += p->media_extension;
    const auto same = std::count_if(instances_.begin(), instances_.end(),
                                    [&](const MigInstance& o) { return o.profile_id == p->id; });
    if (same > p->max_instances)
      return Status(Error{ErrorCode::kInternal, at + p->name + " exceeds max_instances"});
  }
  if (mask != occupied_) {
    return Status(Error{ErrorCode::kInternal, "occupied mask " + slice_set_string(occupied_) +
                                                  " disagrees with the instances " + slice_set_string(mask)});
  }
  if (me > 1) return Status(Error{ErrorCode::kInternal, "more than one +me instance"});
  if (compute > model_->compute_slices) {
    return Status(Error{ErrorCode::kInternal, "instances use " + std::to_string(compute) +
                                                  " compute slices of " +
                                                  std::to_string(model_->compute_slices)});
  }
  return {};
}

}  // namespace tessera
