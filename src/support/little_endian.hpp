// src/support/little_endian.hpp (internal): integers written to and read from byte arrays in
// little-endian order, whatever the host's, for the formats cuvmm defines (IPC messages, the host
// backend's fabric handles). Callers check bounds; these never do.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cuvmm::detail {

/// Writes the sizeof(Int) bytes of `value` at `bytes + at`, least significant first.
template <class Int>
void put_little_endian(std::byte* bytes, std::size_t at, Int value) noexcept {
  for (std::size_t i = 0; i < sizeof(Int); ++i)
    bytes[at + i] = static_cast<std::byte>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xFF);
}

/// Reads what put_little_endian wrote.
template <class Int>
Int get_little_endian(const std::byte* bytes, std::size_t at) noexcept {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < sizeof(Int); ++i) value |= std::to_integer<std::uint64_t>(bytes[at + i]) << (8 * i);
  return static_cast<Int>(value);
}

}  // namespace cuvmm::detail
