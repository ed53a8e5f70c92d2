// libFuzzer target: cuvmm-plan's trace reader (tools/cuvmm-plan/trace_csv.cpp) on arbitrary bytes.
// Built and run by scripts/fuzz.sh (clang, ASan + UBSan). Checked for every input:
//  - the reader returns a Trace or throws cuvmm::Error, nothing else (no crash, no other exception);
//  - an error message is bounded (it quotes at most a prefix of a field) and printable ASCII: no
//    invisible character and no byte of binary input reaches it unescaped;
//  - a Trace is consistent with its operations, recomputed here without wrapping: every free names
//    a live allocation with its size, live_at_end and peak_requested_bytes are exact, there is at
//    least one operation; a cuvmm-format trace written back as CSV reads back the same.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <string_view>

#include <cuvmm/error.hpp>

#include "trace_csv.hpp"

#include "fuzz_check.hpp"

namespace {


/// Longest message the reader can make: fixed text, two numbers, a quoted field (at most
/// quote_prefix_bytes escaped to 4 bytes each, plus its length), and the source name.
constexpr std::size_t max_message_bytes = 512;

bool printable(std::string_view text) {
  for (char c : text) {
    if (c < 0x20 || c >= 0x7F) return false;
  }
  return true;
}

void check_consistent(const cuvmm::plan::Trace& trace) {
  FUZZ_CHECK(!trace.ops.empty());
  std::map<std::size_t, std::size_t> live;  // id -> bytes
  unsigned __int128 live_bytes = 0;
  unsigned __int128 peak = 0;
  for (const auto& op : trace.ops) {
    if (op.allocate) {
      FUZZ_CHECK(live.emplace(op.id, op.bytes).second);
      live_bytes += op.bytes;
      peak = live_bytes > peak ? live_bytes : peak;
    } else {
      auto const found = live.find(op.id);
      FUZZ_CHECK(found != live.end());
      FUZZ_CHECK(found->second == op.bytes);
      live_bytes -= op.bytes;
      live.erase(found);
    }
  }
  FUZZ_CHECK(trace.live_at_end == live.size());
  FUZZ_CHECK(peak == trace.peak_requested_bytes);  // never wrapped
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string const text(reinterpret_cast<const char*>(data), size);
  std::istringstream in(text);
  cuvmm::plan::Trace trace;
  try {
    trace = cuvmm::plan::read_trace_csv(in, "fuzz.csv");
  } catch (const cuvmm::Error& error) {
    FUZZ_CHECK(error.context().size() <= max_message_bytes);
    FUZZ_CHECK(printable(error.context()));
    FUZZ_CHECK(printable(error.what()));
    return 0;
  }
  check_consistent(trace);
  if (trace.format == cuvmm::plan::TraceFormat::cuvmm) {
    std::ostringstream out;
    cuvmm::plan::write_trace_csv(out, trace.ops);
    std::istringstream again(out.str());
    cuvmm::plan::Trace const back = cuvmm::plan::read_trace_csv(again, "fuzz-again.csv");
    FUZZ_CHECK(back.ops.size() == trace.ops.size());
    for (std::size_t i = 0; i < back.ops.size(); ++i) {
      FUZZ_CHECK(back.ops[i].allocate == trace.ops[i].allocate && back.ops[i].id == trace.ops[i].id &&
                 back.ops[i].bytes == trace.ops[i].bytes);
    }
    FUZZ_CHECK(back.peak_requested_bytes == trace.peak_requested_bytes);
  }
  return 0;
}
