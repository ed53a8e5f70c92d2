// text_format.hpp: the text helpers cuvmm's tools share (cuvmm-info, cuvmm-plan): JSON string
// literals and human-readable byte counts. Pure functions; nothing here touches a device.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cuvmm::tools {

/// `text` as a JSON string literal, quotes included, in ASCII: control characters and everything
/// past ASCII escaped, bytes that are not UTF-8 replaced by U+FFFD. Valid JSON for any input.
std::string json_string(std::string_view text);

/// "2 MiB" for exact multiples of a unit, "139.8 GiB" otherwise, "512 bytes" below 1 KiB.
std::string human_bytes(std::size_t bytes);

}  // namespace cuvmm::tools
