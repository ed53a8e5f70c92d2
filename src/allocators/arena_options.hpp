// What the Arena makes of ArenaOptions before it takes anything: the page geometry, checked once
// (src/allocators/arena_options.cpp), and the option text parser's counting entry point
// (src/allocators/arena_options_text.cpp), for tests.
#pragma once

#include <cstddef>
#include <string_view>

#include <cuvmm/arena.hpp>

namespace cuvmm::detail {

/// The sizes an Arena is built from.
struct ArenaGeometry {
  std::size_t page = 0;           ///< bytes of a small page, a multiple of the granularity
  std::size_t large_page = 0;     ///< bytes of a large page (a power-of-two multiple of page), 0: off
  std::size_t address_space = 0;  ///< bytes to reserve: a whole number of the largest page
};

/// The geometry of `options` on a backend of `granularity` whose device has `device_bytes`, or
/// cuvmm::Error (ErrorCode::invalid_argument, call "Arena") naming the option that cannot be used:
/// page_bytes not a multiple of the granularity; large_page_bytes not a power of two or not a
/// multiple of the page (one equal to the page turns large pages off); address_space_bytes (or
/// default_address_space_factor times the device's memory) that overflows when rounded up to
/// whole pages. Nothing is computed with a wrapped-around value.
ArenaGeometry check_arena_geometry(const ArenaOptions& options, std::size_t granularity, std::size_t device_bytes);

/// parse_arena_options(text, base), adding to `examined` every character of `text` it looks at:
/// at most a small multiple of text.size(), whatever the text (a test proves the work linear).
ArenaOptions parse_arena_options_counting(std::string_view text, ArenaOptions base, std::size_t& examined);

}  // namespace cuvmm::detail
