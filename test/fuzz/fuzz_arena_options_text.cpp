// libFuzzer target: cuvmm::parse_arena_options (src/allocators/arena_options_text.cpp) on arbitrary
// bytes, as a CUVMM_ARENA_CONF could hold them. Built and run by scripts/fuzz.sh (clang, ASan +
// UBSan). Checked for every input:
//  - it returns options or throws cuvmm::Error of ErrorCode::invalid_argument, nothing else;
//  - a refusal quotes the offending pair and the whole text: "'PAIR' in \"TEXT\": ...";
//  - what a text cannot set (device, access) is the base's;
//  - options it returns, written back as a text of every key, parse again (over other options) to
//    the very same values.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <cuvmm/arena.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/types.hpp>

#include "fuzz_check.hpp"

namespace {

/// Every key a text can set, with `o`'s values.
std::string as_text(const cuvmm::ArenaOptions& o) {
  return "address_space_bytes:" + std::to_string(o.address_space_bytes) + ",page_bytes:" + std::to_string(o.page_bytes) +
         ",large_page_bytes:" + std::to_string(o.large_page_bytes) + ",byte_limit:" + std::to_string(o.byte_limit) +
         ",max_lent_bytes:" + std::to_string(o.max_lent_bytes) + ",max_lent_tail_bytes:" + std::to_string(o.max_lent_tail_bytes) +
         ",stream_cache_run_bytes:" + std::to_string(o.stream_cache_run_bytes) + ",share_large_page_tails:" + (o.share_large_page_tails ? "true" : "false") +
         ",compression:" + std::string(cuvmm::to_string(o.compression)) +
         ",max_idle_percent:" + std::to_string(o.max_idle_percent) + ",whole_chunk_bytes:" + std::to_string(o.whole_chunk_bytes) +
         ",wait_before_create:" + (o.wait_before_create ? "true" : "false");
}

bool same(const cuvmm::ArenaOptions& a, const cuvmm::ArenaOptions& b) {
  return a.device == b.device && a.address_space_bytes == b.address_space_bytes && a.page_bytes == b.page_bytes &&
         a.large_page_bytes == b.large_page_bytes && a.byte_limit == b.byte_limit &&
         a.max_lent_bytes == b.max_lent_bytes && a.max_lent_tail_bytes == b.max_lent_tail_bytes &&
         a.stream_cache_run_bytes == b.stream_cache_run_bytes && a.share_large_page_tails == b.share_large_page_tails && a.compression == b.compression &&
         a.max_idle_percent == b.max_idle_percent && a.whole_chunk_bytes == b.whole_chunk_bytes &&
         a.wait_before_create == b.wait_before_create && a.access.size() == b.access.size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view const text(reinterpret_cast<const char*>(data), size);
  cuvmm::ArenaOptions base;
  base.device = 5;
  base.access = {{.device = 5, .access = cuvmm::Access::read_write}};
  cuvmm::ArenaOptions parsed;
  try {
    parsed = cuvmm::parse_arena_options(text, base);
  } catch (const cuvmm::Error& error) {
    FUZZ_CHECK(error.is(cuvmm::ErrorCode::invalid_argument));
    std::string const& context = error.context();
    FUZZ_CHECK(context.size() > 1 && context.front() == '\'');
    FUZZ_CHECK(context.find("' in \"" + std::string(text) + "\": ") != std::string::npos);
    return 0;
  }
  FUZZ_CHECK(parsed.device == 5 && parsed.access.size() == 1);
  cuvmm::ArenaOptions other;  // defaults: every field differs from at least one fuzzed value somewhere
  other.device = 5;
  other.access = base.access;
  cuvmm::ArenaOptions const again = cuvmm::parse_arena_options(as_text(parsed), other);
  FUZZ_CHECK(same(again, parsed));
  return 0;
}
