// src/driver/driver.cpp: resolving the driver's entry points and turning CUresults into cuvmm errors.
//
// Owns: the table of resolved entry points, built once (thread-safe, on first use) by asking the
// statically linked CUDA runtime for each symbol at its pinned version, then calling cuInit(0).
// Invariants: a table entry is either null or the driver's function of exactly the ABI its wrapper
// was compiled against; when the driver is unavailable every entry is null and `availability()` says
// why. Never does: link libcuda, cache anything but the table, or throw from a noexcept path.
#include "driver/driver.hpp"

#include <cuda_runtime_api.h>

#include <string>

#include <cuvmm/error.hpp>

namespace cuvmm::driver {

static_assert(symbols[static_cast<std::size_t>(Slot::mem_get_info)].name == "cuMemGetInfo",
              "symbols must be base names, not the _v2 names cuda.h's macros substitute");
static_assert(symbols[static_cast<std::size_t>(Slot::device_total_mem)].name == "cuDeviceTotalMem");

namespace {

std::string runtime_version_text() {
  return std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10);
}

/// Why the runtime could not hand out driver entry points, in words a user can act on.
std::string unavailable_reason(cudaError_t error) {
  std::string const code = std::string(cudaGetErrorName(error)) + ", " + std::to_string(static_cast<int>(error));
  switch (error) {
    case cudaErrorInsufficientDriver:
      return "no CUDA driver found: libcuda.so.1 is missing or older than the CUDA " + runtime_version_text() +
             " runtime cuvmm uses (" + code + ")";
    case cudaErrorStubLibrary:
      return "no CUDA driver found: the libcuda stub library was loaded instead of a real NVIDIA driver (" + code +
             ")";
    case cudaErrorNoDevice:
      return "no CUDA device found: the NVIDIA driver reports no usable device (" + code + ")";
    default:
      return "CUDA driver unavailable: cudaGetDriverEntryPointByVersion failed (" + code + "): " +
             cudaGetErrorString(error);
  }
}

struct Table {
  std::array<void*, slot_count> functions{};  // resolved entry points; null when missing
  Availability availability;                  // whether the driver could be reached, and why not
};

Table resolve_table() {
  Table table;
  for (std::size_t i = 0; i < slot_count; ++i) {
    // The runtime wants a NUL-terminated name; the symbol names are literals, so data() is one.
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    cudaError_t const error = cudaGetDriverEntryPointByVersion(symbols[i].name.data(), &function,
                                                               symbols[i].version, cudaEnableDefault, &found);
    if (error != cudaSuccess) {
      // No driver (or no device): the runtime fails every query alike, so stop at the first.
      table.functions.fill(nullptr);
      table.availability.reason = unavailable_reason(error);
      return table;
    }
    // cudaSuccess with a null function means the symbol (at that version) is missing: check `found`.
    table.functions[i] = found == cudaDriverEntryPointSuccess ? function : nullptr;
  }
  auto* const init_function = reinterpret_cast<PFN_cuInit_v2000>(table.functions[static_cast<std::size_t>(Slot::init)]);
  if (init_function == nullptr) {
    table.functions.fill(nullptr);
    table.availability.reason = "no CUDA driver found: the driver does not provide cuInit";
    return table;
  }
  // The runtime has initialised the driver already; cuInit is idempotent and makes that explicit.
  if (CUresult const result = init_function(0); result != CUDA_SUCCESS) {
    // error_name() would re-enter table(): name the result through the local table instead.
    auto* const name_function =
        reinterpret_cast<PFN_cuGetErrorName_v6000>(table.functions[static_cast<std::size_t>(Slot::get_error_name)]);
    const char* name = nullptr;
    if (name_function == nullptr || name_function(result, &name) != CUDA_SUCCESS || name == nullptr) name = "?";
    table.functions.fill(nullptr);
    table.availability.reason = std::string(result == CUDA_ERROR_NO_DEVICE ? "no CUDA device found"
                                                                           : "CUDA driver unavailable") +
                                ": cuInit failed with " + name + " (" + std::to_string(static_cast<int>(result)) +
                                ")";
    return table;
  }
  table.availability.available = true;
  return table;
}

const Table& table() noexcept {
  static const Table resolved = resolve_table();  // thread-safe, once
  return resolved;
}

}  // namespace

const Availability& availability() noexcept { return table().availability; }

namespace detail {

void* resolved(Slot slot) noexcept { return table().functions[static_cast<std::size_t>(slot)]; }

CUresult unresolved_result() noexcept {
  return availability().available ? CUDA_ERROR_NOT_FOUND : CUDA_ERROR_NOT_INITIALIZED;
}

namespace {
[[noreturn]] void throw_no_driver(std::string_view call, std::string context, cuvmm::source_location where) {
  // No ErrorCode names a missing driver (it is neither a capability nor a bad argument): the
  // driver layer's reason is the description users read.
  ErrorDetails details = cuvmm_error_details(ErrorCode::unspecified, call, std::move(context), where);
  details.code_text = availability().reason;
  throw Error(std::move(details));
}
}  // namespace

void throw_error(Slot slot, CUresult result, std::string context, cuvmm::source_location where) {
  SymbolInfo const& symbol = symbols[static_cast<std::size_t>(slot)];
  if (!availability().available) throw_no_driver(symbol.name, std::move(context), where);
  if (resolved(slot) == nullptr) {
    std::string const needed = std::to_string(symbol.version / 1000) + "." + std::to_string(symbol.version % 1000 / 10);
    throw Unsupported("driver entry point " + std::string(symbol.name) + " (CUDA " + needed + " or newer)",
                      "install an NVIDIA driver that supports CUDA " + runtime_version_text() + " or newer",
                      foreign_error_details(ErrorDomain::cuda, CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND",
                                            "the installed NVIDIA driver does not provide this entry point",
                                            symbol.name, std::move(context), where));
  }
  ErrorDetails details = foreign_error_details(ErrorDomain::cuda, static_cast<int>(result), error_name(result),
                                               error_text(result), symbol.name, std::move(context), where);
  if (result == CUDA_ERROR_OUT_OF_MEMORY) throw OutOfMemory(std::move(details));
  throw Error(std::move(details));
}

}  // namespace detail

void require_driver(std::string_view what, cuvmm::source_location where) {
  if (!availability().available) detail::throw_no_driver(what, {}, where);
}

std::string error_name(CUresult result) noexcept {
  const char* name = nullptr;
  if (get_error_name.no_throw(result, &name) == CUDA_SUCCESS && name != nullptr) return name;
  return "CUresult " + std::to_string(static_cast<int>(result));
}

std::string error_text(CUresult result) noexcept {
  const char* text = nullptr;
  if (get_error_string.no_throw(result, &text) == CUDA_SUCCESS && text != nullptr) return text;
  return "unknown CUDA driver error";
}

PrimaryContext::PrimaryContext(CUdevice device, cuvmm::source_location where) : device_(device) {
  CUresult const result = device_primary_ctx_retain.no_throw(&context_, device);
  if (result != CUDA_SUCCESS) {
    context_ = nullptr;
    device_primary_ctx_retain.throw_error(result, "retaining the primary context of device " + std::to_string(device),
                                          where);
  }
}

void PrimaryContext::reset() noexcept {
  if (context_ == nullptr) return;
  // CUDA_ERROR_DEINITIALIZED at process exit: the context is gone with the driver; nothing to do.
  (void)device_primary_ctx_release.no_throw(device_);
  context_ = nullptr;
}

PendingAllocation::~PendingAllocation() {
  if (handle_ != 0) (void)mem_release.no_throw(handle_);
}

PendingReservation::PendingReservation(std::size_t size, std::size_t alignment, std::string context,
                                       cuvmm::source_location where)
    : size_(size) {
  CUresult const result = mem_address_reserve.no_throw(&base_, size, alignment, 0, 0);
  if (result != CUDA_SUCCESS) {
    base_ = 0;
    mem_address_reserve.throw_error(result, std::move(context), where);
  }
}

PendingReservation::~PendingReservation() {
  if (base_ != 0) (void)mem_address_free.no_throw(base_, size_);
}

CurrentContextScope::CurrentContextScope(CUcontext context, cuvmm::source_location where) {
  CUresult result = ctx_get_current.no_throw(&previous_);
  if (result != CUDA_SUCCESS) ctx_get_current.throw_error(result, "reading the current context", where);
  if (previous_ == context) return;
  result = ctx_set_current.no_throw(context);
  if (result != CUDA_SUCCESS) ctx_set_current.throw_error(result, "making a context current", where);
  switched_ = true;
}

CurrentContextScope::~CurrentContextScope() {
  if (switched_) (void)ctx_set_current.no_throw(previous_);
}

}  // namespace cuvmm::driver
