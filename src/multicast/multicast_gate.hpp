// src/multicast/multicast_gate.hpp: the multicast capability gate on plain facts, and the count of
// multicast driver calls, so tests can check the gate without a multi-GPU machine.
#pragma once

#include <cstddef>
#include <functional>
#include <span>

#include <cuvmm/multicast.hpp>

namespace cuvmm::detail {

/// The gate's decision from facts: how many devices the machine has, why it has none (when the
/// driver is missing; may be empty), and whether a device reports multicast support (asked only
/// for devices that exist, each at most once). Throws cuvmm::Error for duplicate or negative
/// device ids: that is bad input, not a missing capability.
MulticastSupport multicast_gate(std::span<const int> devices, int device_count, std::string_view no_device_reason,
                                const std::function<bool(int)>& device_supports_multicast);

/// Multicast driver calls (cuMulticast*) made by this process through MulticastObject, ever.
std::size_t multicast_driver_calls() noexcept;

}  // namespace cuvmm::detail
