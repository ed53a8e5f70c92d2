// cuvmm-plan's trace reader: both formats read exactly, and every kind of malformed or
// inconsistent line is refused with cuvmm::Error naming the source, the line and the fault.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

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

bool same(const cuvmm::bench::TraceOp& a, const cuvmm::bench::TraceOp& b) {
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
  auto const ops = cuvmm::bench::make_trace(300, 64 << 20, 99, 24);
  std::ostringstream out;
  cuvmm::bench::write_trace_csv(out, ops);
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
  CHECK_THAT(error_of(""), ContainsSubstring("t.csv:0: the trace is empty"));
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
  CHECK_THAT(error_of(rmm + "1,2.0,deallocate,0x10,8,0x0\n"), ContainsSubstring("t.csv:2: pointer 0x10 is freed but not live"));
  CHECK_THAT(error_of(rmm + "1,2.0,allocate,0x10,8,0x0\n1,2.0,allocate,0x10,8,0x0\n"),
             ContainsSubstring("t.csv:3: pointer 0x10 is allocated again while still live"));
}

TEST_CASE("a trace file that cannot be opened is a cuvmm::Error naming it", "[plan][trace]") {
  try {
    (void)read_trace_file("/nonexistent/cuvmm-plan-trace.csv");
    FAIL("no error");
  } catch (const cuvmm::Error& error) {
    CHECK_THAT(error.context(), ContainsSubstring("cannot open trace file '/nonexistent/cuvmm-plan-trace.csv'"));
  }
}
