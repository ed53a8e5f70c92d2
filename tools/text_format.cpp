// text_format.cpp: see text_format.hpp.
#include "text_format.hpp"

#include <cstdio>

#include <cuvmm/types.hpp>

namespace cuvmm::tools {

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (char const c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8] = {};
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
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
