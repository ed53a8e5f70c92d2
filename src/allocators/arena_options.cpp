// check_arena_geometry: the one check of the sizes in ArenaOptions (see arena_options.hpp). Every
// size is checked before it is used in arithmetic, so that a value near SIZE_MAX is refused by
// name instead of wrapping around into a small arena, and a value that the docs refuse (a large
// page that is not a multiple of the page) is refused instead of quietly turning a feature off.
#include "allocators/arena_options.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <string>

#include <cuvmm/error.hpp>

namespace cuvmm::detail {
namespace {

[[noreturn]] void refuse(std::string_view option, std::size_t value, std::string why) {
  throw_invalid_argument("Arena", "ArenaOptions::" + std::string(option) + " " + std::to_string(value) + " " +
                                      std::move(why));
}

}  // namespace

ArenaGeometry check_arena_geometry(const ArenaOptions& options, std::size_t granularity, std::size_t device_bytes) {
  constexpr std::size_t most = std::numeric_limits<std::size_t>::max();
  ArenaGeometry g;
  g.page = options.page_bytes == 0 ? granularity : options.page_bytes;
  if (granularity == 0 || g.page % granularity != 0)
    refuse("page_bytes", options.page_bytes, "is not a multiple of the granularity " + std::to_string(granularity));

  if (options.large_page_bytes != 0) {
    if (!std::has_single_bit(options.large_page_bytes) || options.large_page_bytes % g.page != 0)
      refuse("large_page_bytes", options.large_page_bytes,
             "is not a power of two multiple of the page size " + std::to_string(g.page) + " (0 turns large pages off)");
    if (options.large_page_bytes > g.page) g.large_page = options.large_page_bytes;
  }

  std::size_t const alignment = g.large_page != 0 ? g.large_page : g.page;
  std::size_t space = options.address_space_bytes;
  if (space == 0) {
    if (device_bytes > most / default_address_space_factor)
      refuse("address_space_bytes", 0, "(the default) overflows: the device reports " + std::to_string(device_bytes) +
                                           " bytes; set address_space_bytes");
    space = default_address_space_factor * device_bytes;
  }
  if (space > most - (alignment - 1))
    refuse("address_space_bytes", options.address_space_bytes,
           "does not fit in 64 bits once rounded up to whole pages of " + std::to_string(alignment) + " bytes");
  g.address_space = std::max(round_up(space, alignment), alignment);
  return g;
}

}  // namespace cuvmm::detail
