// Strong id types. An Id<Tag> is a dense 32-bit index into the owning table; ids of different
// kinds do not convert into each other. Value types, trivially copyable, thread-compatible.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <limits>

namespace tessera {

template <class Tag>
struct Id {
  static constexpr uint32_t kInvalid = std::numeric_limits<uint32_t>::max();
  uint32_t value = kInvalid;

  constexpr Id() = default;
  constexpr explicit Id(uint32_t v) : value(v) {}
  constexpr bool valid() const { return value != kInvalid; }
  constexpr auto operator<=>(const Id&) const = default;
};

struct NodeTag {};
struct JobTag {};
struct TaskTag {};
struct QueueTag {};
struct PoolTag {};

using NodeId = Id<NodeTag>;
using JobId = Id<JobTag>;
using TaskId = Id<TaskTag>;
using QueueId = Id<QueueTag>;
using PoolId = Id<PoolTag>;

// A GPU is named by its node and its index on that node (as nvidia-smi numbers it).
struct GpuRef {
  NodeId node;
  uint16_t index = 0;
  constexpr auto operator<=>(const GpuRef&) const = default;
};

}  // namespace tessera

template <class Tag>
struct std::hash<tessera::Id<Tag>> {
  size_t operator()(const tessera::Id<Tag>& id) const noexcept { return std::hash<uint32_t>()(id.value); }
};
