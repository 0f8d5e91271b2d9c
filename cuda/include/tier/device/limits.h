// limits.h -- fixed bounds of the device library (plain constants; C++17, readable by nvcc).
#pragma once

#include <cstdint>

namespace tier::device {

inline constexpr std::uint32_t kMaxPlanesPerLayer = 8;  // planes of one layer (K, V, scales...)
inline constexpr std::uint32_t kMaxLayers = 1024;       // layers of one pool

}  // namespace tier::device
