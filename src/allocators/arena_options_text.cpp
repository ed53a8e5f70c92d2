// parse_arena_options: ArenaOptions from text, for programs configured by an environment variable
// (cuvmm's PyTorch plug-ins read CUVMM_ARENA_CONF, as PyTorch reads PYTORCH_CUDA_ALLOC_CONF). The
// format is in include/cuvmm/arena.hpp. The text is read whole before anything is set, so a bad
// text changes nothing. One pass, linear in the text: the scan for each comma starts where the
// last one ended, and only the pair between them is trimmed and read (never the rest of the text).
// detail::parse_arena_options_counting counts the characters examined, so a test can prove it.
#include "allocators/arena_options.hpp"

#include <cuvmm/arena.hpp>

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <cuvmm/error.hpp>
#include <cuvmm/types.hpp>

namespace cuvmm {
namespace {

constexpr std::string_view call = "parse_arena_options";

/// `s` without the blanks (spaces, tabs) at either end; adds the characters looked at to `examined`.
std::string_view trimmed(std::string_view s, std::size_t& examined) {
  auto const blank = [&](char c) {
    ++examined;
    return c == ' ' || c == '\t';
  };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
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

/// "10": a whole number without a unit, or nullopt.
std::optional<std::size_t> parse_count(std::string_view value) {
  if (value.empty() || value.back() < '0' || value.back() > '9') return std::nullopt;  // no unit
  return parse_size(value);
}

std::optional<bool> parse_bool(std::string_view value) {
  if (value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  return std::nullopt;
}

/// The Compression whose name (to_string, types.hpp) is `value`.
std::optional<Compression> parse_compression(std::string_view value) {
  for (Compression const c : {Compression::none, Compression::preferred, Compression::required}) {
    if (to_string(c) == value) return c;
  }
  return std::nullopt;
}

/// A key a text can set: how to set it from a value (false: the value is not of its kind), and
/// what it wants when the value is refused.
struct Key {
  std::string_view name;
  bool (*set)(std::string_view value, ArenaOptions& o);
  std::string_view wants;
};

/// Sets `field` to what `parse` reads from `value`; false when it reads nothing.
template <auto parse, auto field>
bool set(std::string_view value, ArenaOptions& o) {
  auto const parsed = parse(value);
  if (parsed) o.*field = *parsed;
  return parsed.has_value();
}

constexpr std::string_view size_wants =
    "wants a whole number of bytes, or one followed by KiB, MiB, GiB or TiB, that fits in 64 bits";

constexpr std::array<Key, 12> keys = {{
    {"address_space_bytes", set<parse_size, &ArenaOptions::address_space_bytes>, size_wants},
    {"page_bytes", set<parse_size, &ArenaOptions::page_bytes>, size_wants},
    {"large_page_bytes", set<parse_size, &ArenaOptions::large_page_bytes>, size_wants},
    {"byte_limit", set<parse_size, &ArenaOptions::byte_limit>, size_wants},
    {"max_lent_bytes", set<parse_size, &ArenaOptions::max_lent_bytes>, size_wants},
    {"max_lent_tail_bytes", set<parse_size, &ArenaOptions::max_lent_tail_bytes>, size_wants},
    {"share_large_page_tails", set<parse_bool, &ArenaOptions::share_large_page_tails>, "wants true, false, 1 or 0"},
    {"compression", set<parse_compression, &ArenaOptions::compression>, "wants none, preferred or required"},
    {"stream_cache_run_bytes", set<parse_size, &ArenaOptions::stream_cache_run_bytes>, size_wants},
    {"max_idle_percent", set<parse_count, &ArenaOptions::max_idle_percent>, "wants a whole number that fits in 64 bits"},
    {"whole_chunk_bytes", set<parse_size, &ArenaOptions::whole_chunk_bytes>, size_wants},
    {"wait_before_create", set<parse_bool, &ArenaOptions::wait_before_create>, "wants true, false, 1 or 0"},
}};

}  // namespace

namespace detail {

ArenaOptions parse_arena_options_counting(std::string_view text, ArenaOptions base, std::size_t& examined) {
  auto const refuse = [&](std::string_view pair, std::string_view why) {
    throw_invalid_argument(call, "'" + std::string(pair) + "' in \"" + std::string(text) + "\": " + std::string(why));
  };
  std::array<bool, keys.size()> given{};
  for (std::size_t begin = 0; begin <= text.size();) {
    std::size_t end = begin;
    while (end < text.size() && (++examined, text[end] != ',')) ++end;
    std::string_view const pair = trimmed(text.substr(begin, end - begin), examined);
    begin = end + 1;
    if (pair.empty()) continue;  // blanks only, ",," or a trailing comma
    examined += pair.size();     // the search for ':', the key's name and the value's parse
    std::size_t const colon = pair.find(':');
    if (colon == std::string_view::npos) refuse(pair, "wants key:value");
    std::string_view const name = trimmed(pair.substr(0, colon), examined);
    std::size_t k = 0;
    while (k < keys.size() && keys[k].name != name) ++k;
    if (k == keys.size()) {
      std::string known;
      for (Key const& key : keys) known += (known.empty() ? "" : ", ") + std::string(key.name);
      refuse(pair, "no such key (" + known + ")");
    }
    if (given[k]) refuse(pair, "'" + std::string(name) + "' is given twice");
    given[k] = true;
    if (!keys[k].set(trimmed(pair.substr(colon + 1), examined), base)) refuse(pair, keys[k].wants);
  }
  return base;
}

}  // namespace detail

ArenaOptions parse_arena_options(std::string_view text, ArenaOptions base) {
  std::size_t examined = 0;
  return detail::parse_arena_options_counting(text, std::move(base), examined);
}

}  // namespace cuvmm
