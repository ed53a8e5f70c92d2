// Read-only mappings: a kernel reads through one what was written through a read-write alias, and a
// kernel writing through one faults. The fault poisons the CUDA context, so it happens in a child
// process: this test program started again (posix_spawn of /proc/self/exe) to run one hidden test
// case, which prints the error its kernel got. The child initialises CUDA itself; nothing of the
// parent's context crosses the exec.

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include <cuvmm/address_range.hpp>
#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/mapping.hpp>
#include <cuvmm/physical_chunk.hpp>

#include "child_process.hpp"
#include "gpu.hpp"
#include "gpu_support.hpp"
#include "kernels.hpp"

using cuvmm::Access;
using cuvmm::AccessGrant;
using cuvmm::test::check_pattern;
using cuvmm::test::device_pointer;

namespace {

constexpr std::string_view child_test_name = "child process writes through a read-only mapping";
constexpr std::string_view child_variable = "CUVMM_TEST_CHILD";
constexpr std::string_view child_role = "read_only_write";
constexpr std::string_view result_marker = "cuvmm-child-result ";

/// Runs this program again with only the hidden child test case selected, collecting its output.
cuvmm::test::ProgramRun run_child() {
  return cuvmm::test::run_program({cuvmm::test::own_executable(), std::string(child_test_name), "--reporter", "compact"},
                                  {std::string(child_variable) + "=" + std::string(child_role)});
}

}  // namespace

TEST_CASE("a read-only mapping reads what a kernel wrote through a read-write alias of the same chunk",
          "[gpu][access]") {
  cuvmm::test::require_gpu();
  cuvmm::test::init_runtime();
  cuvmm::CudaBackend cuda(0);
  cuvmm::test::LeakCheck const leaks(cuda);
  std::size_t const granularity = cuda.granularity({}, cuvmm::GranularityKind::minimum);
  {
    cuvmm::AddressRange range(cuda, 2 * granularity);
    cuvmm::PhysicalChunk const chunk(cuda, granularity);
    AccessGrant const writable{.device = 0, .access = Access::read_write};
    AccessGrant const readable{.device = 0, .access = Access::read};
    cuvmm::Mapping const writer(range, 0, chunk, std::span<const AccessGrant>(&writable, 1));
    cuvmm::Mapping const reader(range, granularity, chunk, std::span<const AccessGrant>(&readable, 1));
    CHECK(writer.access(0) == Access::read_write);
    CHECK(reader.access(0) == Access::read);

    auto* const written = device_pointer<std::uint32_t>(writer.address());
    auto const* const read = device_pointer<const std::uint32_t>(reader.address());
    std::size_t const count = granularity / sizeof(std::uint32_t);
    std::uint64_t const seed = cuvmm::test::test_seed(10);
    CAPTURE(seed);
    cuvmm::test::Stream const stream;
    CUVMM_CUDA_REQUIRE(cuvmm::test::launch_fill(written, count, cuvmm::test::poison, stream.get()));
    CHECK(check_pattern(read, count, seed, stream.get()).mismatches ==
          count - cuvmm::test::pattern_hits(seed, count, cuvmm::test::poison));
    CUVMM_CUDA_REQUIRE(cuvmm::test::launch_write_pattern(written, count, seed, stream.get()));
    CHECK(check_pattern(read, count, seed, stream.get()).mismatches == 0);
    CHECK(cuvmm::test::host_mismatches(read, count, seed) == 0);
  }
  leaks.verify();
}

TEST_CASE("a kernel writing through a read-only mapping faults (in a child process)", "[gpu][access][faults]") {
  cuvmm::test::require_gpu();
  cuvmm::test::ProgramRun const run = run_child();
  INFO("child output:\n" << run.output);
  REQUIRE(run.exit_status == 0);  // the child's own checks passed
  std::size_t const marker = run.output.find(result_marker);
  REQUIRE(marker != std::string::npos);
  int const reported = std::atoi(run.output.c_str() + marker + result_marker.size());
  CHECK(reported != cudaSuccess);
  // A write the MMU refuses is reported as an illegal address (or, on some drivers, a launch failure).
  CHECK((reported == cudaErrorIllegalAddress || reported == cudaErrorLaunchFailure));
}

TEST_CASE("child process writes through a read-only mapping", "[.][child]") {
  cuvmm::test::require_gpu();
  char const* const role = std::getenv(std::string(child_variable).c_str());
  if (role == nullptr || std::string_view(role) != child_role)
    SKIP("runs only in the child process started by the read-only fault test");
  CUVMM_CUDA_REQUIRE(cudaSetDevice(0));
  cuvmm::CudaBackend& cuda = cuvmm::cuda_backend(0);
  std::size_t const granularity = cuda.granularity({}, cuvmm::GranularityKind::minimum);
  cuvmm::AddressRange range(cuda, granularity);
  cuvmm::PhysicalChunk const chunk(cuda, granularity);
  AccessGrant const readable{.device = 0, .access = Access::read};
  cuvmm::Mapping const reader(range, 0, chunk, std::span<const AccessGrant>(&readable, 1));
  REQUIRE(reader.access(0) == Access::read);

  auto* const target = device_pointer<std::uint32_t>(reader.address());
  cudaError_t const launched =
      cuvmm::test::launch_fill(target, granularity / sizeof(std::uint32_t), 0x5EEDF00Du, nullptr);
  cudaError_t const synchronized = cudaDeviceSynchronize();
  cudaError_t const reported = launched != cudaSuccess ? launched : synchronized;
  std::printf("%.*s%d %s\n", static_cast<int>(result_marker.size()), result_marker.data(), static_cast<int>(reported),
              cudaGetErrorName(reported));
  std::fflush(stdout);
  CHECK(launched == cudaSuccess);  // the launch itself is fine; the write faults while the kernel runs
  CHECK(synchronized != cudaSuccess);
  // The context is poisoned now: the handles' destructors get errors back, which they tolerate.
}
