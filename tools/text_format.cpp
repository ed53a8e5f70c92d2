// text_format.cpp: see text_format.hpp.
#include "text_format.hpp"

#include <nlohmann/json.hpp>

namespace cuvmm::tools {

std::string json_string(std::string_view text) {
  // nlohmann::json escapes; bytes that are not UTF-8 become U+FFFD, and everything past ASCII is
  // written as \uXXXX, so the output is valid JSON (and ASCII) for any input.
  return nlohmann::json(std::string(text)).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

}  // namespace cuvmm::tools
