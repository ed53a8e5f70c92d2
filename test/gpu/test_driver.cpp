// The driver layer on a real driver: every entry point resolves, results keep their driver names,
// and failures become the documented cuvmm error types.
#include <cuda_runtime_api.h>

#include <cstring>
#include <string>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/device_caps.hpp>
#include <cuvmm/error.hpp>

#include "driver/driver.hpp"
#include "gpu.hpp"
#include "gpu_support.hpp"

namespace driver = cuvmm::driver;
using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::EndsWith;

TEST_CASE("the driver is available and provides every entry point cuvmm resolves", "[gpu][driver]") {
  cuvmm::test::require_gpu();
  CHECK(driver::availability().available);
  CHECK(driver::availability().reason.empty());
  for (std::size_t slot = 0; slot < driver::slot_count; ++slot) {
    CAPTURE(driver::symbols[slot].name, driver::symbols[slot].version);
    CHECK(driver::detail::resolved(static_cast<driver::Slot>(slot)) != nullptr);
  }
  CHECK(driver::mem_create.available());
  CHECK(driver::mem_create.name() == "cuMemCreate");
  CHECK(driver::mem_get_info.name() == "cuMemGetInfo");
}

TEST_CASE("a wrapper returns the same results as the runtime for the same question", "[gpu][driver]") {
  cuvmm::test::require_gpu();
  int count = -1;
  REQUIRE(driver::device_get_count.no_throw(&count) == CUDA_SUCCESS);
  int runtime_count = -2;
  CUVMM_CUDA_REQUIRE(cudaGetDeviceCount(&runtime_count));
  CHECK(count == runtime_count);
  int version = 0;
  driver::driver_get_version(&version);
  int runtime_version = -1;
  CUVMM_CUDA_REQUIRE(cudaDriverGetVersion(&runtime_version));
  CHECK(version == runtime_version);
}

TEST_CASE("the noexcept form returns the driver's CUresult untouched", "[gpu][driver]") {
  cuvmm::test::require_gpu();
  CUdevice device = 0;
  CHECK(driver::device_get.no_throw(&device, 1 << 20) == CUDA_ERROR_INVALID_DEVICE);
  CHECK(driver::error_name(CUDA_ERROR_INVALID_DEVICE) == "CUDA_ERROR_INVALID_DEVICE");
  CHECK(driver::error_name(CUDA_ERROR_OUT_OF_MEMORY) == "CUDA_ERROR_OUT_OF_MEMORY");
  CHECK_FALSE(driver::error_text(CUDA_ERROR_INVALID_DEVICE).empty());
  CHECK(driver::released(CUDA_SUCCESS));
  CHECK(driver::released(CUDA_ERROR_DEINITIALIZED));
  CHECK_FALSE(driver::released(CUDA_ERROR_INVALID_VALUE));
}

TEST_CASE("a failed call throws cuvmm::Error with the call name, CUresult name and text, and the caller's line",
          "[gpu][driver]") {
  cuvmm::test::require_gpu();
  CUdevice device = 0;
  int const line = __LINE__ + 2;
  try {
    driver::device_get(&device, 1 << 20);
    FAIL("cuDeviceGet of a device that does not exist did not throw");
  } catch (const cuvmm::Unsupported&) {
    FAIL("a plain driver error must not be reported as a missing capability");
  } catch (const cuvmm::Error& error) {
    CHECK(error.call() == "cuDeviceGet");
    CHECK(error.domain() == cuvmm::ErrorDomain::cuda);
    CHECK(error.code() == CUDA_ERROR_INVALID_DEVICE);
    CHECK(error.code_name() == "CUDA_ERROR_INVALID_DEVICE");
    CHECK(error.code_text() == driver::error_text(CUDA_ERROR_INVALID_DEVICE));
    CHECK(error.where().line() == static_cast<unsigned>(line));
    CHECK_THAT(error.where().file_name(), EndsWith("test_driver.cpp"));
    CHECK_THAT(error.what(), ContainsSubstring("cuDeviceGet failed: CUDA_ERROR_INVALID_DEVICE (101)"));
  }
}

TEST_CASE("throw_error adds the caller's context to the message", "[gpu][driver]") {
  cuvmm::test::require_gpu();
  try {
    driver::mem_map.throw_error(CUDA_ERROR_INVALID_VALUE, "mapping 2 MiB at 0x0");
    FAIL("throw_error returned");
  } catch (const cuvmm::Error& error) {
    CHECK(error.call() == "cuMemMap");
    CHECK(error.code() == CUDA_ERROR_INVALID_VALUE);
    CHECK(error.context() == "mapping 2 MiB at 0x0");
    CHECK_THAT(error.what(), ContainsSubstring("; mapping 2 MiB at 0x0"));
  }
}

TEST_CASE("CUDA_ERROR_OUT_OF_MEMORY becomes cuvmm::OutOfMemory, a std::bad_alloc", "[gpu][driver]") {
  cuvmm::test::require_gpu();
  try {
    driver::mem_create.throw_error(CUDA_ERROR_OUT_OF_MEMORY, "creating a chunk");
    FAIL("throw_error returned");
  } catch (const std::bad_alloc& caught) {
    auto const* error = dynamic_cast<const cuvmm::OutOfMemory*>(&caught);
    REQUIRE(error != nullptr);
    CHECK(error->call() == "cuMemCreate");
    CHECK(error->code() == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(error->code_name() == "CUDA_ERROR_OUT_OF_MEMORY");
  }
}

TEST_CASE("creating a chunk larger than the device's memory throws cuvmm::OutOfMemory from cuMemCreate",
          "[gpu][driver][backend]") {
  cuvmm::test::require_gpu();
  cuvmm::CudaBackend backend(0);
  std::size_t const granularity = backend.granularity({}, cuvmm::GranularityKind::minimum);
  std::size_t const too_much = cuvmm::round_up(backend.memory_info(0).total * 2, granularity);
  try {
    (void)backend.create_chunk(too_much, {});
    FAIL("a chunk twice the size of the device was created");
  } catch (const cuvmm::OutOfMemory& error) {
    CHECK(error.call() == "cuMemCreate");
    CHECK(error.code() == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_THAT(error.context(), ContainsSubstring("creating a"));
  }
  CHECK(backend.live_counts() == cuvmm::LiveCounts{});
}

TEST_CASE("a retained primary context can be made current for a scope and the previous one comes back",
          "[gpu][driver]") {
  cuvmm::test::require_gpu();
  CUdevice device = 0;
  driver::device_get(&device, 0);
  driver::PrimaryContext const context(device);
  REQUIRE(context.get() != nullptr);
  CUcontext before = nullptr;
  driver::ctx_get_current(&before);
  {
    driver::CurrentContextScope const scope(context.get());
    CUcontext inside = nullptr;
    driver::ctx_get_current(&inside);
    CHECK(inside == context.get());
  }
  CUcontext after = nullptr;
  driver::ctx_get_current(&after);
  CHECK(after == before);
}

// The rules src/backend/ledger.hpp takes from the driver (measured on the H200, docs/H200.md),
// asked of the driver itself, so a driver that changes them fails here and not in a user's program.
TEST_CASE("the driver accepts and refuses what the backend ledger assumes of it", "[gpu][driver][ledger]") {
  cuvmm::test::require_gpu();
  cuvmm::test::init_runtime();  // device 0's primary context is current
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  std::size_t g = 0;
  REQUIRE(driver::mem_get_allocation_granularity.no_throw(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS);
  CUmemGenericAllocationHandle chunk = 0;
  REQUIRE(driver::mem_create.no_throw(&chunk, 2 * g, &prop, 0) == CUDA_SUCCESS);
  CUdeviceptr lower = 0;
  REQUIRE(driver::mem_address_reserve.no_throw(&lower, 2 * g, 0, 0, 0) == CUDA_SUCCESS);
  CUdeviceptr upper = 0;  // asked for just past `lower`: honoured while nothing else was reserved there
  REQUIRE(driver::mem_address_reserve.no_throw(&upper, 2 * g, 0, lower + 2 * g, 0) == CUDA_SUCCESS);
  bool const adjacent = upper == lower + 2 * g;

  // cuMemMap takes whole handles only.
  CHECK(driver::mem_map.no_throw(lower, g, 0, chunk, 0) == CUDA_ERROR_NOT_SUPPORTED);
  CUresult partial_access = CUDA_SUCCESS;
  if (adjacent) {
    // A chunk maps across the boundary of two adjacent reservations; one cuMemSetAccess covers it.
    CHECK(driver::mem_map.no_throw(lower + g, 2 * g, 0, chunk, 0) == CUDA_SUCCESS);
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = 0;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK(driver::mem_set_access.no_throw(lower + g, 2 * g, &access, 1) == CUDA_SUCCESS);
    partial_access = driver::mem_set_access.no_throw(lower + g, g, &access, 1);
    // cuMemUnmap of a span that cuts a handle is refused; the whole handle unmaps.
    CHECK(driver::mem_unmap.no_throw(lower + g, g) == CUDA_ERROR_INVALID_VALUE);
    CHECK(driver::mem_unmap.no_throw(lower + g, 2 * g) == CUDA_SUCCESS);
    // Two reservations are not freed by one cuMemAddressFree.
    CHECK(driver::mem_address_free.no_throw(lower, 4 * g) == CUDA_ERROR_INVALID_VALUE);
  }
  CHECK(driver::mem_address_free.no_throw(upper, 2 * g) == CUDA_SUCCESS);
  CHECK(driver::mem_address_free.no_throw(lower, 2 * g) == CUDA_SUCCESS);
  CHECK(driver::mem_release.no_throw(chunk) == CUDA_SUCCESS);
  if (!adjacent) SKIP("the driver did not place the second reservation just past the first");
  // Not measured before: the ledger refuses set_access over part of a mapping whatever the driver
  // says; this records the driver's own answer for H200.md.
  WARN("cuMemSetAccess over half of one mapped chunk returned " << driver::error_name(partial_access));
}
