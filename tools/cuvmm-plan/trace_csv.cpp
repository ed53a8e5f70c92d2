// trace_csv.cpp: the two trace formats (see trace_csv.hpp). One pass, one line at a time; the
// live set is checked as the trace goes, so an inconsistent trace fails at its first bad line.
//
// Owns: nothing beyond the call (the reader, the live set and the Trace it returns).
// Invariants: a line is read into a fixed buffer of max_line_bytes (+2): no input makes it hold
//   more; an error quotes at most quote_prefix_bytes of a field, every byte that is not printable
//   ASCII escaped (\r, \t, \xNN), so invisible characters show and binary input is never echoed;
//   the live and peak byte counts never wrap (a sum past SIZE_MAX is an error).
// Never does: replay, allocate device memory, or keep a copy of a whole oversized field.
#include "trace_csv.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include <cuvmm/error.hpp>

namespace cuvmm::plan {
namespace {

constexpr std::string_view cuvmm_header = "op,id,bytes";
constexpr std::string_view rmm_header = "Thread,Time,Action,Pointer,Size,Stream";
constexpr std::string_view utf8_bom = "\xEF\xBB\xBF";

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

/// A control byte that no text trace holds (NUL, the C0 controls other than \t \n \v \f \r, DEL).
bool is_binary_byte(unsigned char c) noexcept { return c <= 0x08 || (c >= 0x0E && c <= 0x1F) || c == 0x7F; }

char hex_digit(unsigned value) noexcept { return "0123456789ABCDEF"[value & 0xF]; }

std::string hex_byte(unsigned char c) { return {'0', 'x', hex_digit(c >> 4u), hex_digit(c)}; }

}  // namespace

std::string quote_field(std::string_view text) {
  std::string out = "'";
  std::size_t const shown = std::min(text.size(), quote_prefix_bytes);
  for (std::size_t i = 0; i < shown; ++i) {
    auto const c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '\r': out += "\\r"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\\': out += "\\\\"; break;
      case '\'': out += "\\'"; break;
      default:
        if (c < 0x20 || c >= 0x7F) {
          out += "\\x";
          out += hex_digit(c >> 4u);
          out += hex_digit(c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '\'';
  if (shown < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

namespace {

/// Reads lines into a fixed buffer and reports errors with the source and line number.
class LineReader {
 public:
  LineReader(std::istream& in, std::string_view source) : in_(in), source_(source) {}

  /// The next non-blank line without one trailing '\r' (and, on line 1, a UTF-8 byte order mark);
  /// false at the end. The view is valid until the next call.
  bool next(std::string_view& line) {
    for (;;) {
      in_.getline(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
      if (in_.bad()) fail("the input could not be read");
      auto const extracted = static_cast<std::size_t>(in_.gcount());
      if (extracted == 0 && in_.eof()) return false;
      ++number_;
      if (in_.fail() && !in_.eof()) {
        fail("the line is longer than " + std::to_string(max_line_bytes) + " bytes (no trace line is)");
      }
      std::size_t length = in_.eof() ? extracted : extracted - 1;  // the '\n' was extracted, not stored
      if (length > max_line_bytes) {
        fail("the line is longer than " + std::to_string(max_line_bytes) + " bytes (no trace line is)");
      }
      line = std::string_view(buffer_.data(), length);
      for (std::size_t i = 0; i < line.size(); ++i) {
        auto const c = static_cast<unsigned char>(line[i]);
        if (is_binary_byte(c)) {
          fail("the input is not text (control byte " + hex_byte(c) + " at byte " + std::to_string(i + 1) +
               " of the line): a trace is a CSV text file");
        }
      }
      if (number_ == 1 && line.starts_with(utf8_bom)) line.remove_prefix(utf8_bom.size());
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (!line.empty()) return true;
    }
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
           " number: " + quote_field(field));
    }
    return value;
  }

  [[nodiscard]] std::size_t line_number() const noexcept { return number_; }

 private:
  std::istream& in_;
  std::string_view source_;
  std::size_t number_ = 0;
  std::array<char, max_line_bytes + 2> buffer_{};  // +1 to see a line that is too long, +1 for the '\0'
};

/// What an operation names: a cuvmm allocation id or an RMM pointer (named only when a line fails).
enum class KeyKind { id, pointer };

std::string name_of(KeyKind kind, std::size_t key) {
  if (kind == KeyKind::id) return "allocation id " + std::to_string(key);
  std::array<char, 2 + 16> digits{};
  auto const end = std::to_chars(digits.data(), digits.data() + digits.size(), key, 16).ptr;
  return "pointer 0x" + std::string(digits.data(), end);
}

/// The live set while reading: key (id or pointer) -> (id, bytes).
struct LiveSet {
  struct Entry {
    std::size_t id;
    std::size_t bytes;
  };
  explicit LiveSet(KeyKind key_kind) : kind(key_kind) {}
  KeyKind kind;
  std::unordered_map<std::size_t, Entry> live;
  std::size_t live_bytes = 0;
  std::size_t peak_bytes = 0;

  void allocate(const LineReader& reader, std::size_t key, std::size_t id, std::size_t bytes) {
    if (bytes > std::numeric_limits<std::size_t>::max() - live_bytes) {
      reader.fail(name_of(kind, key) + " of " + std::to_string(bytes) + " bytes takes the bytes live at once past " +
                  std::to_string(std::numeric_limits<std::size_t>::max()) + " (" + std::to_string(live_bytes) +
                  " live before it)");
    }
    if (!live.emplace(key, Entry{id, bytes}).second) reader.fail(name_of(kind, key) + " is allocated again while still live");
    live_bytes += bytes;
    peak_bytes = std::max(peak_bytes, live_bytes);
  }
  Entry free(const LineReader& reader, std::size_t key, std::size_t bytes) {
    auto const found = live.find(key);
    if (found == live.end()) reader.fail(name_of(kind, key) + " is freed but not live");
    Entry const entry = found->second;
    if (entry.bytes != bytes) {
      reader.fail(name_of(kind, key) + " is freed with " + std::to_string(bytes) + " bytes but was allocated with " +
                  std::to_string(entry.bytes));
    }
    live.erase(found);
    live_bytes -= bytes;
    return entry;
  }
};

void read_cuvmm(LineReader& reader, Trace& trace) {
  LiveSet live(KeyKind::id);
  std::string_view line;
  while (reader.next(line)) {
    auto const fields = split_fields(line);
    if (fields.size() != 3) reader.fail("expected 3 columns (op,id,bytes), found " + std::to_string(fields.size()));
    std::size_t const id = reader.parse_unsigned(fields[1], "id");
    std::size_t const bytes = reader.parse_unsigned(fields[2], "bytes");
    if (fields[0] == "a") {
      live.allocate(reader, id, id, bytes);
      trace.ops.push_back({true, id, bytes});
    } else if (fields[0] == "f") {
      live.free(reader, id, bytes);
      trace.ops.push_back({false, id, bytes});
    } else {
      reader.fail("column 'op' must be 'a' or 'f', not " + quote_field(fields[0]));
    }
  }
  trace.live_at_end = live.live.size();
  trace.peak_requested_bytes = live.peak_bytes;
}

void read_rmm_log(LineReader& reader, Trace& trace) {
  LiveSet live(KeyKind::pointer);
  // Every pointer the log has named so far. A free of a pointer the log has never named is of
  // memory allocated before logging began (skipped and counted); a free of one it has named and
  // that is no longer live is a double free (an error).
  std::unordered_set<std::size_t> named;
  std::size_t next_id = 0;
  std::string_view line;
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
    if (action == "allocate") {
      live.allocate(reader, pointer, next_id, bytes);
      named.insert(pointer);
      trace.ops.push_back({true, next_id, bytes});
      ++next_id;
    } else if (action == "deallocate" || action == "free") {
      if (named.insert(pointer).second) {  // first seen freed: allocated before the log began
        ++trace.frees_before_log_skipped;
        continue;
      }
      auto const entry = live.free(reader, pointer, bytes);
      trace.ops.push_back({false, entry.id, bytes});
    } else {
      reader.fail("column 'Action' must be 'allocate', 'deallocate' or 'allocate failure', not " +
                  quote_field(action));
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
  std::string_view header;
  if (!reader.next(header)) reader.fail("the trace is empty (expected a header line)");
  Trace trace;
  if (header == cuvmm_header) {
    trace.format = TraceFormat::cuvmm;
    read_cuvmm(reader, trace);
  } else if (header == rmm_header) {
    trace.format = TraceFormat::rmm_log;
    read_rmm_log(reader, trace);
  } else {
    reader.fail("unknown header " + quote_field(header) + ": expected '" + std::string(cuvmm_header) +
                "' (cuvmm) or '" + std::string(rmm_header) + "' (RMM logging_resource_adaptor)");
  }
  if (trace.ops.empty()) {
    std::string skipped;
    if (trace.failed_allocations_skipped != 0) skipped = std::to_string(trace.failed_allocations_skipped) + " failed allocations";
    if (trace.frees_before_log_skipped != 0) {
      skipped += (skipped.empty() ? "" : " and ") + std::to_string(trace.frees_before_log_skipped) +
                 " frees of memory allocated before the log began";
    }
    reader.fail("the trace has no allocations or frees after its header" +
                (skipped.empty() ? std::string() : " (only " + skipped + ")"));
  }
  return trace;
}

Trace read_trace_file(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    throw_invalid_argument("read_trace_file", "trace file " + quote_field(path) + " is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw_invalid_argument("read_trace_file", "cannot open trace file " + quote_field(path) + ": " + std::strerror(errno));
  }
  return read_trace_csv(in, path);
}

}  // namespace cuvmm::plan
