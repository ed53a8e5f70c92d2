// Sharing device memory between processes on a real GPU (CudaBackend), each case skipping without
// one: an importer process follows the exporter's growth and checks its random data with a kernel
// and writes back; a read-only importer's kernel write faults (in its own process: the fault
// poisons its context); device memory stays valid after the exporting process exits; and the
// fabric path (what an MPI exchange would create) ends, without an IMEX channel, in Unsupported
// naming the channel device and the administrator's remedy; an importer that has no free
// descriptor when a chunk arrives reports its own EMFILE, not a protocol violation by the exporter.
#include <cuda.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/device_caps.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/growable_storage.hpp>
#include <cuvmm/ipc/shared_buffer.hpp>
#include <cuvmm/physical_chunk.hpp>

#include "gpu.hpp"
#include "gpu_support.hpp"
#include "ipc_children.hpp"
#include "kernels.hpp"

using Catch::Matchers::ContainsSubstring;
using cuvmm::Access;
using cuvmm::ipc::PeerPolicy;
using cuvmm::ipc::SharedBufferExporter;
using cuvmm::ipc::SharedBufferImporter;
using cuvmm::test::check_pattern;
using cuvmm::test::device_pointer;

namespace {

constexpr std::string_view importer_case = "gpu importer process";
constexpr std::string_view exporter_case = "gpu exporter process";
constexpr std::string_view fault_marker = "cuvmm-child-result ";
constexpr std::size_t max_granules = 64;
/// The sizes the exporter grows to, in granules (then in bytes, see step_bytes).
constexpr std::size_t step_granules[] = {3, 9, 20, 40};

std::size_t granularity_of(const cuvmm::Backend& backend) {
  return backend.granularity({.shareable = cuvmm::HandleType::posix_fd}, cuvmm::GranularityKind::minimum);
}

/// Step sizes that are not whole granules (a growth step rounds them up).
std::size_t step_bytes(std::size_t step, std::size_t granularity) { return step_granules[step] * granularity - 4096; }
std::size_t final_bytes(std::size_t granularity) { return step_bytes(std::size(step_granules) - 1, granularity); }

PeerPolicy patient_policy() {
  PeerPolicy policy;
  policy.timeout = std::chrono::seconds(60);
  return policy;
}

cuvmm::GrowableOptions growable(std::size_t granularity) {
  cuvmm::GrowableOptions options;
  options.max_capacity_bytes = max_granules * granularity;
  return options;
}

/// Grows through the steps: poison what was not published yet, write the pattern up to the step
/// (the published part gets the values it already holds: importers may be reading it), wait, publish.
void grow_and_publish(SharedBufferExporter& exporter, std::uint64_t seed, std::size_t granularity, std::size_t steps) {
  cuvmm::test::Stream const stream;
  for (std::size_t i = 0; i < steps; ++i) {
    std::size_t const bytes = step_bytes(i, granularity);
    std::size_t const published = exporter.published_size();
    exporter.reserve(bytes);
    auto* const data = device_pointer<std::uint32_t>(exporter.data());
    CUVMM_CUDA_REQUIRE(cuvmm::test::launch_fill(data + published / 4, (exporter.capacity() - published) / 4,
                                                cuvmm::test::poison, stream.get()));
    CUVMM_CUDA_REQUIRE(cuvmm::test::launch_write_pattern(data, bytes / 4, seed, stream.get()));
    stream.synchronize();  // the data is written before importers are told
    exporter.publish(bytes);
  }
}

std::uint64_t parse_seed() { return std::stoull(cuvmm::test::child_setting(cuvmm::test::seed_variable)); }

}  // namespace

TEST_CASE("a GPU importer process follows the exporter's growth, checks its random data with a kernel and writes back",
          "[gpu][ipc][shared]") {
  cuvmm::test::require_gpu();
  cuvmm::test::init_runtime();
  cuvmm::CudaBackend cuda(0);
  std::size_t const g = granularity_of(cuda);
  cuvmm::test::LeakCheck const leaks(cuda);
  {
    SharedBufferExporter exporter(cuda, growable(g), patient_policy());
    std::uint64_t const seed = cuvmm::test::test_seed(41);
    CAPTURE(seed);
    auto child = cuvmm::test::start_importer_child(importer_case, "read_write", exporter.socket_path(), seed);
    exporter.accept_importer();
    grow_and_publish(exporter, seed, g, std::size(step_granules));
    cuvmm::test::ProgramRun const run = child.wait();
    INFO("importer output:\n" << run.output);
    REQUIRE(run.exit_status == 0);
    // The importer overwrote the last granule of data with the pattern of seed + 1.
    cuvmm::test::Stream const stream;
    auto const* const data = device_pointer<const std::uint32_t>(exporter.data());
    std::size_t const reply_at = (final_bytes(g) - g) / 4;
    CHECK(check_pattern(data + reply_at, g / 4, seed + 1, stream.get()).mismatches == 0);
    CHECK(check_pattern(data, reply_at, seed, stream.get()).mismatches == 0);
  }
  leaks.verify();
}

TEST_CASE("a read-only GPU importer process reads the data, and its kernel's write faults", "[gpu][ipc][shared][faults]") {
  cuvmm::test::require_gpu();
  cuvmm::test::init_runtime();
  cuvmm::CudaBackend cuda(0);
  std::size_t const g = granularity_of(cuda);
  SharedBufferExporter exporter(cuda, growable(g), patient_policy());
  std::uint64_t const seed = cuvmm::test::test_seed(42);
  CAPTURE(seed);
  auto child = cuvmm::test::start_importer_child(importer_case, "read_only", exporter.socket_path(), seed);
  exporter.accept_importer();
  grow_and_publish(exporter, seed, g, std::size(step_granules));
  cuvmm::test::ProgramRun const run = child.wait();
  INFO("importer output:\n" << run.output);
  REQUIRE(run.exit_status == 0);  // its reads checked out, and it saw its write fail
  std::size_t const marker = run.output.find(fault_marker);
  REQUIRE(marker != std::string::npos);
  int const reported = std::atoi(run.output.c_str() + marker + fault_marker.size());
  CHECK((reported == cudaErrorIllegalAddress || reported == cudaErrorLaunchFailure));
  cuvmm::test::Stream const stream;
  CHECK(check_pattern(device_pointer<const std::uint32_t>(exporter.data()), final_bytes(g) / 4, seed, stream.get())
            .mismatches == 0);  // the faulting write changed nothing
}

TEST_CASE("a GPU importer process with no free descriptor reports its own EMFILE; the exporter drops it and goes on",
          "[gpu][ipc][limit]") {
  cuvmm::test::require_gpu();
  cuvmm::test::init_runtime();
  cuvmm::CudaBackend cuda(0);
  std::size_t const g = granularity_of(cuda);
  SharedBufferExporter exporter(cuda, growable(g), patient_policy());
  std::uint64_t const seed = cuvmm::test::test_seed(43);
  CAPTURE(seed);
  auto child = cuvmm::test::start_importer_child(importer_case, "no_free_descriptor", exporter.socket_path(), seed);
  exporter.accept_importer();
  grow_and_publish(exporter, seed, g, 1);  // one chunk, its POSIX fd sent to the importer
  cuvmm::test::ProgramRun const run = child.wait();
  INFO("importer output:\n" << run.output);
  CHECK(run.exit_status == 0);
  CHECK_THAT(run.output, ContainsSubstring(std::string(fault_marker) + "EMFILE"));
  // The importer hung up: the next announcement finds it gone and drops it; the exporter goes on.
  grow_and_publish(exporter, seed, g, std::size(step_granules));
  CHECK(exporter.importer_count() == 0);
  CHECK(exporter.take_dropped_importers().size() == 1);
  cuvmm::test::Stream const stream;
  CHECK(check_pattern(device_pointer<const std::uint32_t>(exporter.data()), final_bytes(g) / 4, seed, stream.get())
            .mismatches == 0);
}

TEST_CASE("gpu importer process", "[.][child]") {
  std::string const role = cuvmm::test::child_role();
  if (role.empty()) SKIP("runs only in a child process started by a GPU sharing test");
  cuvmm::test::init_runtime();
  cuvmm::CudaBackend& cuda = cuvmm::cuda_backend(0);
  std::size_t const g = granularity_of(cuda);
  std::uint64_t const seed = parse_seed();
  Access const access = role == "read_only" ? Access::read : Access::read_write;
  SharedBufferImporter importer(cuda, cuvmm::test::child_setting(cuvmm::test::socket_variable), access,
                                patient_policy());
  CHECK(importer.max_capacity() == max_granules * g);
  if (role == "no_free_descriptor") {  // the chunk's fd arrives when this process can take no descriptor
    std::optional<cuvmm::Error> refused;
    {
      cuvmm::test::NoFreeDescriptors const none;
      try {
        importer.wait_for_size(step_bytes(0, g));
      } catch (const cuvmm::Error& e) {
        refused = e;
      }
    }
    REQUIRE(refused);
    INFO(refused->what());
    CHECK_FALSE(refused->is(cuvmm::ErrorCode::protocol_violation));
    CHECK(refused->domain() == cuvmm::ErrorDomain::posix);
    CHECK(refused->code_name() == "EMFILE");
    CHECK(refused->call() == "recvmsg");
    CHECK(importer.size() == 0);
    CHECK(cuda.live_counts().mappings == 0);
    std::printf("%.*s%s\n", static_cast<int>(fault_marker.size()), fault_marker.data(), refused->code_name().c_str());
    std::fflush(stdout);
    return;
  }
  cuvmm::test::Stream const stream;
  for (std::size_t i = 0; i < std::size(step_granules); ++i) {
    std::size_t const bytes = step_bytes(i, g);
    importer.wait_for_size(bytes);
    CHECK(cuda.live_counts().ranges == 1);
    CHECK(cuda.live_counts().bytes_reserved == max_granules * g);
    CHECK(check_pattern(device_pointer<const std::uint32_t>(importer.data()), bytes / 4, seed, stream.get()).mismatches == 0);
  }
  auto* const data = device_pointer<std::uint32_t>(importer.data());
  std::size_t const reply_at = (final_bytes(g) - g) / 4;
  if (role == "read_only") {
    cudaError_t const launched = cuvmm::test::launch_fill(data + reply_at, g / 4, 0x5EEDF00Du, stream.get());
    cudaError_t const synchronized = cudaStreamSynchronize(stream.get());
    cudaError_t const reported = launched != cudaSuccess ? launched : synchronized;
    std::printf("%.*s%d %s\n", static_cast<int>(fault_marker.size()), fault_marker.data(), static_cast<int>(reported),
                cudaGetErrorName(reported));
    std::fflush(stdout);
    CHECK(synchronized != cudaSuccess);
    return;  // the context is poisoned: the handles' destructors get errors back, which they tolerate
  }
  CUVMM_CUDA_REQUIRE(cuvmm::test::launch_write_pattern(data + reply_at, g / 4, seed + 1, stream.get()));
  stream.synchronize();
}

TEST_CASE("device memory stays valid for the importer after the exporting process exits", "[gpu][ipc][shared]") {
  cuvmm::test::require_gpu();
  cuvmm::test::init_runtime();
  cuvmm::CudaBackend cuda(0);
  std::size_t const g = granularity_of(cuda);
  cuvmm::test::LeakCheck const leaks(cuda);
  std::uint64_t const seed = cuvmm::test::test_seed(43);
  CAPTURE(seed);
  auto child = cuvmm::test::start_exporter_child(exporter_case, "export_and_exit", seed);
  std::string const path = child.read_line_starting(std::string(cuvmm::test::socket_marker), std::chrono::seconds(60));
  {
    SharedBufferImporter importer(cuda, path, Access::read_write, patient_policy());
    cuvmm::test::ProgramRun const run = child.wait();
    INFO("exporter output:\n" << run.output);
    REQUIRE(run.exit_status == 0);
    importer.wait_for_size(final_bytes(g));
    CHECK(importer.update() == 0);
    CHECK_FALSE(importer.connected());
    cuvmm::test::Stream const stream;
    auto* const data = device_pointer<std::uint32_t>(importer.data());
    CHECK(check_pattern(data, final_bytes(g) / 4, seed, stream.get()).mismatches == 0);
    CUVMM_CUDA_REQUIRE(cuvmm::test::launch_write_pattern(data, g / 4, seed + 5, stream.get()));
    CHECK(check_pattern(data, g / 4, seed + 5, stream.get()).mismatches == 0);
  }
  leaks.verify();
}

TEST_CASE("gpu exporter process", "[.][child]") {
  std::string const role = cuvmm::test::child_role();
  if (role.empty()) SKIP("runs only in a child process started by a GPU sharing test");
  cuvmm::test::init_runtime();
  cuvmm::CudaBackend& cuda = cuvmm::cuda_backend(0);
  std::size_t const g = granularity_of(cuda);
  SharedBufferExporter exporter(cuda, growable(g), patient_policy());
  std::printf("%s%s\n", cuvmm::test::socket_marker.data(), exporter.socket_path().c_str());
  std::fflush(stdout);
  exporter.accept_importer();
  grow_and_publish(exporter, parse_seed(), g, std::size(step_granules));
}

TEST_CASE("without an IMEX channel, fabric chunks for an MPI exchange fail with Unsupported naming channel0 and the remedy",
          "[gpu][ipc][fabric]") {
  cuvmm::test::require_gpu();
  if (cuvmm::imex_channel_present()) SKIP("an IMEX channel exists here: fabric handles may work (MPI test program)");
  cuvmm::DeviceCaps const caps = cuvmm::device_caps(0);
  cuvmm::CudaBackend cuda(0);
  cuvmm::ChunkProperties const fabric{.device = 0, .shareable = cuvmm::HandleType::fabric};
  auto const expect_unsupported = [&](auto&& make) {
    try {
      make();
      FAIL("fabric-shareable memory was created without an IMEX channel");
    } catch (const cuvmm::Unsupported& error) {
      if (!caps.fabric_handles) {
        CHECK_THAT(error.capability(), ContainsSubstring("fabric handles"));
        return;
      }
      CHECK_THAT(error.capability(), ContainsSubstring("IMEX channel (none exists under /dev/nvidia-caps-imex-channels"));
      CHECK(error.remedy() == cuvmm::imex_channel_remedy);
      CHECK_THAT(error.what(), ContainsSubstring("/dev/nvidia-caps-imex-channels/channel0") &&
                                   ContainsSubstring("nvidia-imex") && ContainsSubstring("NVreg_CreateImexChannel0=1"));
      CHECK((error.code() == CUDA_ERROR_NOT_PERMITTED || error.code() == CUDA_ERROR_NOT_SUPPORTED));
    }
  };
  // One chunk, as cuvmm's MPI exchange exports, and a growable buffer made fabric-shareable.
  expect_unsupported([&] { (void)cuvmm::PhysicalChunk(cuda, cuda.granularity(fabric, cuvmm::GranularityKind::minimum), fabric); });
  expect_unsupported([&] {
    cuvmm::GrowableOptions options;
    options.max_capacity_bytes = 64 * cuda.granularity({}, cuvmm::GranularityKind::minimum);
    options.shareable = cuvmm::HandleType::fabric;
    cuvmm::GrowableStorage storage(cuda, options);
    storage.reserve(1);
  });
  CHECK(cuda.live_counts() == cuvmm::LiveCounts{});  // refused creations leave nothing behind
}
