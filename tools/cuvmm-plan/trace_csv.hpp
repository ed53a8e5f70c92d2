// trace_csv.hpp: reading allocation traces for cuvmm-plan's replay, in two CSV formats.
//
//  - cuvmm's own (trace.hpp writes it):  header `op,id,bytes`, then `a,ID,BYTES` / `f,ID,BYTES`.
//  - RMM's logging_resource_adaptor log:        header `Thread,Time,Action,Pointer,Size,Stream`, then
//    one line per `allocate` / `deallocate` (older RMM writes `free`; allocations are matched to frees by pointer; a pointer
//    may be reused once freed). `allocate failure` lines are counted and skipped; so are frees of
//    pointers the log has not named before (memory allocated before logging began), while a free
//    of a pointer the log allocated and already freed is still an error.
// The format is chosen by the header line. Every operation is checked as it is read: a free must
// name a live allocation with its size, an allocation must not reuse a live id or pointer or take
// the bytes live at once past SIZE_MAX. Any other line is an error naming the source, the line
// number and what was wrong (cuvmm::Error); so is an empty trace, one with a header and no
// operations, a line longer than max_line_bytes, and input that is not text (a control byte such
// as NUL: refused without being echoed). Errors quote at most quote_prefix_bytes of a field, with
// invisible characters escaped. Blank lines, one trailing '\r' per line and a UTF-8 byte order
// mark before the header are ignored. Nothing is replayed here.
#pragma once

#include <cstddef>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "trace.hpp"  // TraceOp, make_trace, write_trace_csv

namespace cuvmm::plan {

enum class TraceFormat { cuvmm, rmm_log };

struct Trace {
  TraceFormat format = TraceFormat::cuvmm;
  std::vector<TraceOp> ops;         ///< in order; ids are dense from 0 in allocation order (RMM)
  std::size_t failed_allocations_skipped = 0;  ///< RMM `allocate failure` lines
  /// RMM frees of pointers the log never showed allocated: memory allocated before logging began.
  std::size_t frees_before_log_skipped = 0;
  std::size_t live_at_end = 0;             ///< allocations never freed
  std::size_t peak_requested_bytes = 0;    ///< most bytes live at once, as the trace asked
};

/// The longest line read (a trace line is ~100 bytes): longer is an error, and no more is buffered.
inline constexpr std::size_t max_line_bytes = 4096;
/// The most bytes of a field an error message quotes.
inline constexpr std::size_t quote_prefix_bytes = 40;

/// `text` quoted for an error message: its first quote_prefix_bytes bytes in single quotes, every
/// byte that is not printable ASCII (and \\, ') escaped as \r \n \t \xNN, then "... (N bytes)"
/// if it was cut.
std::string quote_field(std::string_view text);

/// Reads a trace. `source` names it in error messages (a file name). Throws cuvmm::Error on
/// an empty input, a header without operations, an unknown header, binary input or a malformed
/// or inconsistent line.
Trace read_trace_csv(std::istream& in, std::string_view source);

/// Reads the trace in file `path` (cuvmm::Error if it cannot be opened).
Trace read_trace_file(const std::string& path);

std::string_view to_string(TraceFormat format) noexcept;

}  // namespace cuvmm::plan
