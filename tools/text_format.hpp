// text_format.hpp: the text helpers cuvmm's tools share (cuvmm-info, cuvmm-plan): JSON string
// literals (byte counts: the library's cuvmm::format_bytes, error.hpp). Pure functions; nothing here touches a device.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cuvmm::tools {

/// `text` as a JSON string literal, quotes included, in ASCII: control characters and everything
/// past ASCII escaped, bytes that are not UTF-8 replaced by U+FFFD. Valid JSON for any input.
std::string json_string(std::string_view text);

}  // namespace cuvmm::tools
