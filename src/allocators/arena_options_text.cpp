// parse_arena_options: ArenaOptions from text, for programs configured by an environment variable
// (cuvmm's PyTorch plug-ins read CUVMM_ARENA_CONF, as PyTorch reads PYTORCH_CUDA_ALLOC_CONF). The
// format is in include/cuvmm/arena.hpp. The text is read whole before anything is set, so a bad
// text changes nothing.
#include <cuvmm/arena.hpp>

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include <cuvmm/error.hpp>

namespace cuvmm {
namespace {

constexpr std::string_view call = "parse_arena_options";

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// "1048576", "128MiB", "2GiB": bytes, or nullopt when it is not a size that fits in 64 bits.
std::optional<std::size_t> parse_size(std::string_view value) {
  std::size_t digits = 0;
  while (digits < value.size() && value[digits] >= '0' && value[digits] <= '9') ++digits;
  if (digits == 0) return std::nullopt;
  constexpr std::array<std::pair<std::string_view, unsigned>, 5> units = {
      {{"", 0}, {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}}};
  std::string_view const unit = value.substr(digits);
  unsigned shift = 0;
  bool known = false;
  for (auto const& [name, bits] : units) {
    if (unit == name) {
      shift = bits;
      known = true;
    }
  }
  if (!known) return std::nullopt;
  constexpr std::size_t most = std::numeric_limits<std::size_t>::max();
  std::size_t number = 0;
  for (char const c : value.substr(0, digits)) {
    auto const digit = static_cast<std::size_t>(c - '0');
    if (number > (most - digit) / 10) return std::nullopt;
    number = number * 10 + digit;
  }
  if (number > (most >> shift)) return std::nullopt;
  return number << shift;
}

std::optional<bool> parse_bool(std::string_view value) {
  if (value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  return std::nullopt;
}

std::optional<Compression> parse_compression(std::string_view value) {
  if (value == "none") return Compression::none;
  if (value == "preferred") return Compression::preferred;
  if (value == "required") return Compression::required;
  return std::nullopt;
}

}  // namespace

ArenaOptions parse_arena_options(std::string_view text, ArenaOptions base) {
  auto const refuse = [&](std::string_view pair, const std::string& why) {
    throw_invalid_argument(call, "'" + std::string(pair) + "' in \"" + std::string(text) + "\": " + why);
  };
  struct Key {
    std::string_view name;
    enum Kind { size, boolean, compression } kind;
    std::size_t ArenaOptions::* size_field = nullptr;
  };
  static constexpr std::array<Key, 6> keys = {{
      {"address_space_bytes", Key::size, &ArenaOptions::address_space_bytes},
      {"page_bytes", Key::size, &ArenaOptions::page_bytes},
      {"large_page_bytes", Key::size, &ArenaOptions::large_page_bytes},
      {"byte_limit", Key::size, &ArenaOptions::byte_limit},
      {"share_large_page_tails", Key::boolean},
      {"compression", Key::compression},
  }};
  std::array<bool, keys.size()> given{};
  std::string_view rest = text;
  while (!trimmed(rest).empty()) {
    std::size_t const comma = rest.find(',');
    std::string_view const pair = trimmed(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (pair.empty()) continue;  // ",," or a trailing comma
    std::size_t const colon = pair.find(':');
    if (colon == std::string_view::npos) refuse(pair, "wants key:value");
    std::string_view const name = trimmed(pair.substr(0, colon));
    std::string_view const value = trimmed(pair.substr(colon + 1));
    std::size_t k = 0;
    while (k < keys.size() && keys[k].name != name) ++k;
    if (k == keys.size()) {
      refuse(pair, "no such key (address_space_bytes, page_bytes, large_page_bytes, byte_limit, "
                   "share_large_page_tails, compression)");
    }
    if (given[k]) refuse(pair, "'" + std::string(name) + "' is given twice");
    given[k] = true;
    switch (keys[k].kind) {
      case Key::size:
        if (auto const bytes = parse_size(value)) {
          base.*(keys[k].size_field) = *bytes;
        } else {
          refuse(pair, "wants a whole number of bytes, or one followed by KiB, MiB, GiB or TiB, that fits in 64 bits");
        }
        break;
      case Key::boolean:
        if (auto const on = parse_bool(value)) {
          base.share_large_page_tails = *on;
        } else {
          refuse(pair, "wants true, false, 1 or 0");
        }
        break;
      case Key::compression:
        if (auto const c = parse_compression(value)) {
          base.compression = *c;
        } else {
          refuse(pair, "wants none, preferred or required");
        }
        break;
    }
  }
  return base;
}

}  // namespace cuvmm
