// trace_csv.cpp: the two trace formats (see trace_csv.hpp). One pass, one line at a time; the
// live set is checked as the trace goes, so an inconsistent trace fails at its first bad line.
#include "trace_csv.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <unordered_map>

#include <cuvmm/error.hpp>

namespace cuvmm::plan {
namespace {

constexpr std::string_view cuvmm_header = "op,id,bytes";
constexpr std::string_view rmm_header = "Thread,Time,Action,Pointer,Size,Stream";

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  for (;;) {
    std::size_t const comma = line.find(',', start);
    fields.push_back(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

/// Reads lines and reports errors with the source and line number.
class LineReader {
 public:
  LineReader(std::istream& in, std::string_view source) : in_(in), source_(source) {}

  /// The next non-blank line without its '\r'; false at the end.
  bool next(std::string& line) {
    while (std::getline(in_, line)) {
      ++number_;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) return true;
    }
    if (in_.bad()) fail("the input could not be read");
    return false;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw_invalid_argument("read_trace_csv", std::string(source_) + ":" + std::to_string(number_) + ": " + what);
  }

  std::size_t parse_unsigned(std::string_view field, std::string_view name, int base = 10) const {
    std::size_t value = 0;
    std::string_view digits = field;
    if (base == 16 && (digits.starts_with("0x") || digits.starts_with("0X"))) digits.remove_prefix(2);
    auto const [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value, base);
    if (digits.empty() || error != std::errc{} || end != digits.data() + digits.size()) {
      fail("column '" + std::string(name) + "' is not " + (base == 16 ? "a hexadecimal" : "an unsigned") +
           " number: '" + std::string(field) + "'");
    }
    return value;
  }

 private:
  std::istream& in_;
  std::string_view source_;
  std::size_t number_ = 0;
};

/// The live set while reading: key (id or pointer) -> (id, bytes).
struct LiveSet {
  struct Entry {
    std::size_t id;
    std::size_t bytes;
  };
  std::unordered_map<std::size_t, Entry> live;
  std::size_t live_bytes = 0;
  std::size_t peak_bytes = 0;

  void allocate(const LineReader& reader, std::size_t key, std::size_t id, std::size_t bytes, std::string_view what) {
    if (!live.emplace(key, Entry{id, bytes}).second) reader.fail(std::string(what) + " is allocated again while still live");
    live_bytes += bytes;
    peak_bytes = std::max(peak_bytes, live_bytes);
  }
  Entry free(const LineReader& reader, std::size_t key, std::size_t bytes, std::string_view what) {
    auto const found = live.find(key);
    if (found == live.end()) reader.fail(std::string(what) + " is freed but not live");
    Entry const entry = found->second;
    if (entry.bytes != bytes) {
      reader.fail(std::string(what) + " is freed with " + std::to_string(bytes) + " bytes but was allocated with " +
                  std::to_string(entry.bytes));
    }
    live.erase(found);
    live_bytes -= bytes;
    return entry;
  }
};

void read_cuvmm(LineReader& reader, Trace& trace) {
  LiveSet live;
  std::string line;
  while (reader.next(line)) {
    auto const fields = split_fields(line);
    if (fields.size() != 3) reader.fail("expected 3 columns (op,id,bytes), found " + std::to_string(fields.size()));
    std::size_t const id = reader.parse_unsigned(fields[1], "id");
    std::size_t const bytes = reader.parse_unsigned(fields[2], "bytes");
    std::string const what = "allocation id " + std::to_string(id);
    if (fields[0] == "a") {
      live.allocate(reader, id, id, bytes, what);
      trace.ops.push_back({true, id, bytes});
    } else if (fields[0] == "f") {
      live.free(reader, id, bytes, what);
      trace.ops.push_back({false, id, bytes});
    } else {
      reader.fail("column 'op' must be 'a' or 'f', not '" + std::string(fields[0]) + "'");
    }
  }
  trace.live_at_end = live.live.size();
  trace.peak_requested_bytes = live.peak_bytes;
}

void read_rmm_log(LineReader& reader, Trace& trace) {
  LiveSet live;
  std::size_t next_id = 0;
  std::string line;
  while (reader.next(line)) {
    auto const fields = split_fields(line);
    if (fields.size() != 6) {
      reader.fail("expected 6 columns (Thread,Time,Action,Pointer,Size,Stream), found " + std::to_string(fields.size()));
    }
    std::string_view const action = fields[2];
    if (action == "allocate failure") {
      ++trace.failed_allocations_skipped;
      continue;
    }
    std::size_t const pointer = reader.parse_unsigned(fields[3], "Pointer", 16);
    std::size_t const bytes = reader.parse_unsigned(fields[4], "Size");
    std::string const what = "pointer " + std::string(fields[3]);
    if (action == "allocate") {
      live.allocate(reader, pointer, next_id, bytes, what);
      trace.ops.push_back({true, next_id, bytes});
      ++next_id;
    } else if (action == "deallocate" || action == "free") {
      auto const entry = live.free(reader, pointer, bytes, what);
      trace.ops.push_back({false, entry.id, bytes});
    } else {
      reader.fail("column 'Action' must be 'allocate', 'deallocate' or 'allocate failure', not '" +
                  std::string(action) + "'");
    }
  }
  trace.live_at_end = live.live.size();
  trace.peak_requested_bytes = live.peak_bytes;
}

}  // namespace

std::string_view to_string(TraceFormat format) noexcept {
  return format == TraceFormat::cuvmm ? "cuvmm" : "rmm_log";
}

Trace read_trace_csv(std::istream& in, std::string_view source) {
  LineReader reader(in, source);
  std::string header;
  if (!reader.next(header)) reader.fail("the trace is empty (expected a header line)");
  Trace trace;
  if (header == cuvmm_header) {
    trace.format = TraceFormat::cuvmm;
    read_cuvmm(reader, trace);
  } else if (header == rmm_header) {
    trace.format = TraceFormat::rmm_log;
    read_rmm_log(reader, trace);
  } else {
    reader.fail("unknown header '" + header + "': expected '" + std::string(cuvmm_header) + "' (cuvmm) or '" +
                std::string(rmm_header) + "' (RMM logging_resource_adaptor)");
  }
  return trace;
}

Trace read_trace_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw_invalid_argument("read_trace_file", "cannot open trace file '" + path + "'");
  return read_trace_csv(in, path);
}

}  // namespace cuvmm::plan
