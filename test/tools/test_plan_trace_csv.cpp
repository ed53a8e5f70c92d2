// cuvmm-plan's trace reader: both formats read exactly, and every kind of malformed or
// inconsistent line is refused with cuvmm::Error naming the source, the line and the fault.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <algorithm>
#include <limits>
#include <sstream>
#include <string>

#include <cuvmm/error.hpp>

#include "trace_csv.hpp"

using Catch::Matchers::ContainsSubstring;
using namespace cuvmm::plan;

namespace {

Trace read(const std::string& text) {
  std::istringstream in(text);
  return read_trace_csv(in, "t.csv");
}

/// The context of the cuvmm::Error that reading `text` throws ("" if none is thrown).
std::string error_of(const std::string& text) {
  try {
    (void)read(text);
  } catch (const cuvmm::Error& error) {
    return error.context();
  }
  return "";
}

/// Whether every byte of `text` is printable ASCII: an error message shows what it quotes.
bool printable(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c < 0x7F; });
}

bool same(const cuvmm::plan::TraceOp& a, const cuvmm::plan::TraceOp& b) {
  return a.allocate == b.allocate && a.id == b.id && a.bytes == b.bytes;
}

}  // namespace

TEST_CASE("a cuvmm trace is read op by op with its peak and survivors", "[plan][trace]") {
  Trace const t = read("op,id,bytes\na,0,4096\na,7,100\r\n\nf,0,4096\na,3,5000\n");
  CHECK(t.format == TraceFormat::cuvmm);
  REQUIRE(t.ops.size() == 4);
  CHECK(same(t.ops[0], {true, 0, 4096}));
  CHECK(same(t.ops[1], {true, 7, 100}));
  CHECK(same(t.ops[2], {false, 0, 4096}));
  CHECK(same(t.ops[3], {true, 3, 5000}));
  CHECK(t.peak_requested_bytes == 5100);
  CHECK(t.live_at_end == 2);
}

TEST_CASE("a generated trace written as CSV reads back the same", "[plan][trace]") {
  auto const ops = cuvmm::plan::make_trace(300, 64 << 20, 99, 24);
  std::ostringstream out;
  cuvmm::plan::write_trace_csv(out, ops);
  Trace const t = read(out.str());
  REQUIRE(t.ops.size() == ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) REQUIRE(same(t.ops[i], ops[i]));
  for (auto const& op : ops) REQUIRE(op.bytes <= (std::size_t{1} << 24));
}

TEST_CASE("an RMM log is read with pointers matched to ids, reused pointers and failures", "[plan][trace]") {
  Trace const t = read(
      "Thread,Time,Action,Pointer,Size,Stream\n"
      "140573312345856,1634567890.123456,allocate,0x7f8a40000000,1024,0x7f8a38001020\n"
      "140573312345856,1634567890.234567,allocate,0x7f8a40000400,2048,0x7f8a38001020\n"
      "140573312345856,1634567890.345678,deallocate,0x7f8a40000000,1024,0x7f8a38001020\n"
      "140573312345856,1634567890.400000,allocate failure,0x0,99999999999,0x7f8a38001020\n"
      "140573312345857,1634567890.456789,allocate,0x7f8a40000000,512,0x0\n"
      "140573312345857,1634567890.567890,free,0x7f8a40000400,2048,0x0\n");
  CHECK(t.format == TraceFormat::rmm_log);
  CHECK(t.failed_allocations_skipped == 1);
  REQUIRE(t.ops.size() == 5);
  CHECK(same(t.ops[0], {true, 0, 1024}));
  CHECK(same(t.ops[1], {true, 1, 2048}));
  CHECK(same(t.ops[2], {false, 0, 1024}));
  CHECK(same(t.ops[3], {true, 2, 512}));  // the reused pointer is a new allocation
  CHECK(same(t.ops[4], {false, 1, 2048}));
  CHECK(t.peak_requested_bytes == 3072);
  CHECK(t.live_at_end == 1);
}

TEST_CASE("malformed and inconsistent traces are refused naming the line and the fault", "[plan][trace]") {
  CHECK_THAT(error_of("size,op\n"), ContainsSubstring("t.csv:1: unknown header 'size,op'"));
  CHECK_THAT(error_of("op,id,bytes\na,1\n"), ContainsSubstring("t.csv:2: expected 3 columns (op,id,bytes), found 2"));
  CHECK_THAT(error_of("op,id,bytes\na,1,10\nx,2,10\n"),
             ContainsSubstring("t.csv:3: column 'op' must be 'a' or 'f', not 'x'"));
  CHECK_THAT(error_of("op,id,bytes\na,one,10\n"), ContainsSubstring("t.csv:2: column 'id' is not an unsigned number: 'one'"));
  CHECK_THAT(error_of("op,id,bytes\na,1,-5\n"), ContainsSubstring("t.csv:2: column 'bytes' is not an unsigned number: '-5'"));
  CHECK_THAT(error_of("op,id,bytes\na,1,10x\n"), ContainsSubstring("column 'bytes' is not an unsigned number: '10x'"));
  CHECK_THAT(error_of("op,id,bytes\na,1,10\na,1,20\n"),
             ContainsSubstring("t.csv:3: allocation id 1 is allocated again while still live"));
  CHECK_THAT(error_of("op,id,bytes\nf,4,10\n"), ContainsSubstring("t.csv:2: allocation id 4 is freed but not live"));
  CHECK_THAT(error_of("op,id,bytes\na,4,10\nf,4,11\n"),
             ContainsSubstring("t.csv:3: allocation id 4 is freed with 11 bytes but was allocated with 10"));
  std::string const rmm = "Thread,Time,Action,Pointer,Size,Stream\n";
  CHECK_THAT(error_of(rmm + "1,2.0,allocate,0x10,8\n"),
             ContainsSubstring("t.csv:2: expected 6 columns (Thread,Time,Action,Pointer,Size,Stream), found 5"));
  CHECK_THAT(error_of(rmm + "1,2.0,grab,0x10,8,0x0\n"),
             ContainsSubstring("t.csv:2: column 'Action' must be 'allocate', 'deallocate' or 'allocate failure', not 'grab'"));
  CHECK_THAT(error_of(rmm + "1,2.0,allocate,0xZZ,8,0x0\n"),
             ContainsSubstring("t.csv:2: column 'Pointer' is not a hexadecimal number: '0xZZ'"));
  CHECK_THAT(error_of(rmm + "1,2.0,allocate,0x10,8,0x0\n1,2.0,deallocate,0x10,8,0x0\n1,2.0,deallocate,0x10,8,0x0\n"),
             ContainsSubstring("t.csv:4: pointer 0x10 is freed but not live"));  // a double free
  CHECK_THAT(error_of(rmm + "1,2.0,allocate,0x10,8,0x0\n1,2.0,allocate,0x10,8,0x0\n"),
             ContainsSubstring("t.csv:3: pointer 0x10 is allocated again while still live"));
}

TEST_CASE("a trace file that cannot be opened is a cuvmm::Error naming it", "[plan][trace]") {
  try {
    (void)read_trace_file("/nonexistent/cuvmm-plan-trace.csv");
    FAIL("no error");
  } catch (const cuvmm::Error& error) {
    CHECK_THAT(error.context(),
               ContainsSubstring("cannot open trace file '/nonexistent/cuvmm-plan-trace.csv': No such file or directory"));
  }
  try {
    (void)read_trace_file("/");
    FAIL("no error");
  } catch (const cuvmm::Error& error) {
    CHECK_THAT(error.context(), ContainsSubstring("trace file '/' is a directory"));
  }
}

TEST_CASE("an empty or header-only trace is an error", "[plan][trace]") {
  CHECK_THAT(error_of(""), ContainsSubstring("t.csv:0: the trace is empty (expected a header line)"));
  CHECK_THAT(error_of("\n\r\n\n"), ContainsSubstring("t.csv:3: the trace is empty (expected a header line)"));
  CHECK(error_of("op,id,bytes\n") == "t.csv:1: the trace has no allocations or frees after its header");
  CHECK(error_of("op,id,bytes\n\n") == "t.csv:2: the trace has no allocations or frees after its header");
  CHECK(error_of("Thread,Time,Action,Pointer,Size,Stream\n1,2.0,allocate failure,0x0,99,0x0\n") ==
        "t.csv:2: the trace has no allocations or frees after its header (only 1 failed allocations)");
}

TEST_CASE("the bytes live at once past SIZE_MAX are refused, never wrapped", "[plan][trace]") {
  constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
  std::string const half = std::to_string(max / 2 + 1);  // 2^63
  CHECK(error_of("op,id,bytes\na,0," + half + "\na,1," + half + "\na,2,5\n") ==
        "t.csv:3: allocation id 1 of 9223372036854775808 bytes takes the bytes live at once past "
        "18446744073709551615 (9223372036854775808 live before it)");
  CHECK(error_of("Thread,Time,Action,Pointer,Size,Stream\n1,2.0,allocate,0xA0,18446744073709551615,0x0\n"
                 "1,2.0,allocate,0xB0,1,0x0\n") ==
        "t.csv:3: pointer 0xb0 of 1 bytes takes the bytes live at once past 18446744073709551615 "
        "(18446744073709551615 live before it)");
  // Exactly SIZE_MAX live is a (strange but) consistent trace.
  Trace const t = read("op,id,bytes\na,0," + half + "\na,1," + std::to_string(max / 2) + "\nf,0," + half + "\n");
  CHECK(t.peak_requested_bytes == max);
  CHECK(t.live_at_end == 1);
}

TEST_CASE("a UTF-8 byte order mark before the header is accepted", "[plan][trace]") {
  Trace const t = read("\xEF\xBB\xBFop,id,bytes\r\na,0,4096\r\nf,0,4096\r\n");
  CHECK(t.format == TraceFormat::cuvmm);
  REQUIRE(t.ops.size() == 2);
  CHECK(same(t.ops[1], {false, 0, 4096}));
  Trace const r = read("\xEF\xBB\xBFThread,Time,Action,Pointer,Size,Stream\n1,2.0,allocate,0x10,8,0x0\n");
  CHECK(r.format == TraceFormat::rmm_log);
  CHECK(r.ops.size() == 1);
  // Anywhere else it is three invisible bytes of a field, shown escaped.
  CHECK(error_of("op,id,bytes\n\xEF\xBB\xBF"
                 "a,0,1\n") == "t.csv:2: column 'op' must be 'a' or 'f', not '\\xEF\\xBB\\xBFa'");
}

TEST_CASE("invisible characters in a refused field are shown escaped", "[plan][trace]") {
  // A doubled CR: one '\r' is the line end, the other is part of the last field.
  std::string const doubled_cr = error_of("op,id,bytes\r\na,0,10\r\r\n");
  CHECK(doubled_cr == "t.csv:2: column 'bytes' is not an unsigned number: '10\\r'");
  CHECK(error_of("op,id,bytes\r\r\n") ==
        "t.csv:1: unknown header 'op,id,bytes\\r': expected 'op,id,bytes' (cuvmm) or "
        "'Thread,Time,Action,Pointer,Size,Stream' (RMM logging_resource_adaptor)");
  CHECK(error_of("op,id,bytes\na,\t1,10\n") == "t.csv:2: column 'id' is not an unsigned number: '\\t1'");
  CHECK(error_of("op,id,bytes\na\xC2\xA0,1,10\n") == "t.csv:2: column 'op' must be 'a' or 'f', not 'a\\xC2\\xA0'");
  CHECK(error_of("op,id,bytes\na,1,1\x0B\n") == "t.csv:2: column 'bytes' is not an unsigned number: '1\\x0B'");
  CHECK(error_of("op,id,bytes\nx'\\,1,10\n") == "t.csv:2: column 'op' must be 'a' or 'f', not 'x\\'\\\\'");
  for (std::string const& message : {doubled_cr, error_of("op,id,bytes\r\r\n"), error_of("op,id,bytes\na,\t1,10\n")}) {
    CHECK(printable(message));
  }
}

TEST_CASE("an error quotes a bounded prefix of an oversized field", "[plan][trace]") {
  std::string const op(3000, 'z');
  std::string const message = error_of("op,id,bytes\n" + op + ",1,10\n");
  CHECK(message == "t.csv:2: column 'op' must be 'a' or 'f', not '" + std::string(40, 'z') + "'... (3000 bytes)");
  std::string const id = std::string(2000, '9');
  CHECK(error_of("op,id,bytes\na," + id + ",10\n") ==
        "t.csv:2: column 'id' is not an unsigned number: '" + std::string(40, '9') + "'... (2000 bytes)");
  // Leading zeros make a valid but long pointer: it is named by its value, not copied.
  std::string const pointer = "0x" + std::string(3000, '0') + "10";
  CHECK(error_of("Thread,Time,Action,Pointer,Size,Stream\n1,2.0,allocate,0x10,8,0x0\n1,2.0,deallocate,0x10,8,0x0\n"
                 "1,2.0,deallocate," + pointer + ",8,0x0\n") ==
        "t.csv:4: pointer 0x10 is freed but not live");
  std::string const header(4000, 'H');
  CHECK(error_of(header + "\n").size() < 300);
}

TEST_CASE("a line longer than 4096 bytes is refused; one of 4096 is read", "[plan][trace]") {
  static_assert(max_line_bytes == 4096);
  std::string const prefix = "a,0,";
  std::string const longest = prefix + std::string(4096 - prefix.size() - 2, '0') + "10";  // 4096 bytes, 10
  REQUIRE(longest.size() == 4096);
  Trace const t = read("op,id,bytes\n" + longest + "\n");
  REQUIRE(t.ops.size() == 1);
  CHECK(same(t.ops[0], {true, 0, 10}));
  CHECK(read("op,id,bytes\n" + longest).ops.size() == 1);  // the same as a last line without '\n'
  CHECK(read("op,id,bytes\n" + longest.substr(0, 4095) + "\r\n").ops.size() == 1);  // a '\r' counts
  CHECK(error_of("op,id,bytes\n" + longest + "\r\n") == "t.csv:2: the line is longer than 4096 bytes (no trace line is)");
  std::string const too_long = prefix + std::string(4097 - prefix.size() - 2, '0') + "10";
  CHECK(error_of("op,id,bytes\n" + too_long + "\n") == "t.csv:2: the line is longer than 4096 bytes (no trace line is)");
  CHECK(error_of("op,id,bytes\n" + too_long) == "t.csv:2: the line is longer than 4096 bytes (no trace line is)");
  CHECK(error_of(std::string(1 << 20, 'x')) == "t.csv:1: the line is longer than 4096 bytes (no trace line is)");
}

TEST_CASE("binary input is refused without echoing it", "[plan][trace]") {
  std::string const elf("\x7F" "ELF\x02\x01\x01\0\0\0secret", 16);
  std::string const message = error_of(elf);
  CHECK(message == "t.csv:1: the input is not text (control byte 0x7F at byte 1 of the line): a trace is a CSV text file");
  std::string const nul_in_data("op,id,bytes\na,0,1\0secret\n", 26);
  CHECK(error_of(nul_in_data) ==
        "t.csv:2: the input is not text (control byte 0x00 at byte 6 of the line): a trace is a CSV text file");
  CHECK(error_of("\x1F\x8B\x08\x00gzip") ==
        "t.csv:1: the input is not text (control byte 0x1F at byte 1 of the line): a trace is a CSV text file");
  CHECK(message.find("ELF") == std::string::npos);
  CHECK(error_of(nul_in_data).find("secret") == std::string::npos);
}

TEST_CASE("an RMM log's frees of memory allocated before logging began are skipped and counted", "[plan][trace]") {
  std::istringstream in("Thread,Time,Action,Pointer,Size,Stream\n"
                        "1,0.1,deallocate,0x9000,4096,0x0\n"   // allocated before the log: skipped
                        "1,0.2,allocate,0x1000,100,0x0\n"
                        "1,0.3,free,0x9100,512,0x0\n"          // another one, older RMM's spelling
                        "1,0.4,deallocate,0x1000,100,0x0\n"
                        "1,0.5,allocate,0x9000,64,0x0\n"       // the old pointer reused in the log
                        "1,0.6,deallocate,0x9000,64,0x0\n");
  Trace const trace = read_trace_csv(in, "t.csv");
  CHECK(trace.frees_before_log_skipped == 2);
  REQUIRE(trace.ops.size() == 4);
  CHECK(same(trace.ops[0], {true, 0, 100}));
  CHECK(same(trace.ops[1], {false, 0, 100}));
  CHECK(same(trace.ops[2], {true, 1, 64}));
  CHECK(same(trace.ops[3], {false, 1, 64}));
  CHECK(trace.live_at_end == 0);
  CHECK(trace.peak_requested_bytes == 100);
  // Only such frees: there is nothing to replay, and the error says what was skipped.
  CHECK(error_of("Thread,Time,Action,Pointer,Size,Stream\n1,0.1,deallocate,0x9000,4096,0x0\n") ==
        "t.csv:2: the trace has no allocations or frees after its header (only 1 frees of memory allocated before "
        "the log began)");
}
