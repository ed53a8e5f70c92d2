// text_format.cpp: see text_format.hpp.
#include "text_format.hpp"

#include <cstdio>

#include <nlohmann/json.hpp>

#include <cuvmm/types.hpp>

namespace cuvmm::tools {

std::string json_string(std::string_view text) {
  // nlohmann::json escapes; bytes that are not UTF-8 become U+FFFD, and everything past ASCII is
  // written as \uXXXX, so the output is valid JSON (and ASCII) for any input.
  return nlohmann::json(std::string(text)).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

std::string human_bytes(std::size_t bytes) {
  struct Unit {
    std::size_t size;
    const char* name;
  };
  constexpr Unit units[] = {{cuvmm::GiB, "GiB"}, {cuvmm::MiB, "MiB"}, {cuvmm::KiB, "KiB"}};
  for (Unit const& unit : units) {
    if (bytes < unit.size) continue;
    char text[32] = {};
    if (bytes % unit.size == 0)
      std::snprintf(text, sizeof text, "%zu %s", bytes / unit.size, unit.name);
    else
      std::snprintf(text, sizeof text, "%.1f %s", static_cast<double>(bytes) / static_cast<double>(unit.size),
                    unit.name);
    return text;
  }
  return std::to_string(bytes) + " bytes";
}

}  // namespace cuvmm::tools
