// Integer resource quantities. No floating point is used in allocation: CPU in milli-cores,
// memory in MiB, GPU share in milli-GPU (1000 = one whole GPU). Value types.
#pragma once

#include <compare>
#include <cstdint>

namespace tessera {

template <class Tag>
struct Quantity {
  int64_t v = 0;
  constexpr Quantity() = default;
  constexpr explicit Quantity(int64_t x) : v(x) {}
  constexpr auto operator<=>(const Quantity&) const = default;
  constexpr Quantity operator+(Quantity o) const { return Quantity(v + o.v); }
  constexpr Quantity operator-(Quantity o) const { return Quantity(v - o.v); }
  constexpr Quantity operator*(int64_t k) const { return Quantity(v * k); }
  constexpr Quantity& operator+=(Quantity o) {
    v += o.v;
    return *this;
  }
  constexpr Quantity& operator-=(Quantity o) {
    v -= o.v;
    return *this;
  }
};

struct MilliCpuTag {};
struct MibTag {};
struct MilliGpuTag {};

using MilliCpu = Quantity<MilliCpuTag>;
using MiB = Quantity<MibTag>;
using MilliGpu = Quantity<MilliGpuTag>;

inline constexpr MilliGpu kWholeGpu{1000};

}  // namespace tessera
