// src/driver/driver.hpp: the driver layer, the only place in cuvmm that calls `cu*` functions.
//
// Design note
//  - Nothing links libcuda. Every entry point is resolved at run time, once and thread-safely, through
//    the CUDA runtime's cudaGetDriverEntryPointByVersion, by its *base* name ("cuMemGetInfo", never the
//    "_v2" that cuda.h's macros substitute) and at a pinned ABI version, the one of its
//    PFN_<name>_v<version> typedef in cudaTypedefs.h. A machine without a driver therefore starts,
//    and the first call reports "no CUDA driver found" instead of the loader failing.
//  - The entry points are one X-macro list: (wrapper, symbol, version). Each becomes one constant
//    wrapper object in this namespace, named after the symbol in snake case without the "cu" prefix:
//        driver::mem_map(ptr, size, 0, handle, 0);                    // throws on failure
//        CUresult r = driver::mem_unmap.no_throw(ptr, size);          // for destructors
//        driver::mem_create.throw_error(r, "creating ...");           // throw with context
//    The throwing form throws cuvmm::Error carrying the call name, the CUresult's name and text (from
//    cuGetErrorName/cuGetErrorString) and the caller's cuvmm::source_location;
//    CUDA_ERROR_OUT_OF_MEMORY becomes cuvmm::OutOfMemory, a symbol this driver lacks cuvmm::Unsupported
//    naming it, and no driver at all a cuvmm::Error saying "no CUDA driver found". The noexcept form
//    returns the CUresult untouched (CUDA_ERROR_DEINITIALIZED at process exit included), or
//    CUDA_ERROR_NOT_INITIALIZED without a driver and CUDA_ERROR_NOT_FOUND for a missing symbol.
//  - A symbol is only ever touched through # and ## in the macros below, so cuda.h's renaming
//    macros never apply to it. Call sites use the snake-case wrappers, never `cu*` names.
//  - RAII types for driver objects that more than one file needs live here too (primary context,
//    current-context scope). This layer holds no policy and no state beyond the resolved table.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <array>
#include <cstddef>
#include <cuvmm/source_location.hpp>
#include <string>
#include <string_view>
#include <utility>

namespace cuvmm::driver {

// X(wrapper, symbol, version): the wrapper's name, the driver symbol's base name, and the CUDA
// version whose ABI (PFN_<symbol>_v<version>) cuvmm is compiled against.
#define CUVMM_DRIVER_ENTRY_POINTS(X)                                                           \
  /* initialisation, errors, version */                                                        \
  X(init, cuInit, 2000)                                                                        \
  X(get_error_name, cuGetErrorName, 6000)                                                      \
  X(get_error_string, cuGetErrorString, 6000)                                                  \
  X(driver_get_version, cuDriverGetVersion, 2020)                                              \
  /* devices */                                                                                \
  X(device_get_count, cuDeviceGetCount, 2000)                                                  \
  X(device_get, cuDeviceGet, 2000)                                                             \
  X(device_get_name, cuDeviceGetName, 2000)                                                    \
  X(device_get_attribute, cuDeviceGetAttribute, 2000)                                          \
  X(device_total_mem, cuDeviceTotalMem, 3020)                                                  \
  /* contexts */                                                                               \
  X(device_primary_ctx_retain, cuDevicePrimaryCtxRetain, 7000)                                 \
  X(device_primary_ctx_release, cuDevicePrimaryCtxRelease, 11000)                              \
  X(ctx_get_current, cuCtxGetCurrent, 4000)                                                    \
  X(ctx_set_current, cuCtxSetCurrent, 4000)                                                    \
  X(mem_get_info, cuMemGetInfo, 3020)                                                          \
  /* virtual memory management */                                                              \
  X(mem_address_reserve, cuMemAddressReserve, 10020)                                           \
  X(mem_address_free, cuMemAddressFree, 10020)                                                 \
  X(mem_create, cuMemCreate, 10020)                                                            \
  X(mem_release, cuMemRelease, 10020)                                                          \
  X(mem_map, cuMemMap, 10020)                                                                  \
  X(mem_unmap, cuMemUnmap, 10020)                                                              \
  X(mem_set_access, cuMemSetAccess, 10020)                                                     \
  X(mem_get_allocation_granularity, cuMemGetAllocationGranularity, 10020)                      \
  X(mem_export_to_shareable_handle, cuMemExportToShareableHandle, 10020)                       \
  X(mem_import_from_shareable_handle, cuMemImportFromShareableHandle, 10020)                   \
  X(mem_get_allocation_properties_from_handle, cuMemGetAllocationPropertiesFromHandle, 10020) \
  X(mem_get_handle_for_address_range, cuMemGetHandleForAddressRange, 11070)                   \
  /* multicast (never created unless the device supports it and the caller asked) */           \
  X(multicast_get_granularity, cuMulticastGetGranularity, 12010)                               \
  X(multicast_create, cuMulticastCreate, 12010)                                                \
  X(multicast_add_device, cuMulticastAddDevice, 12010)                                         \
  X(multicast_bind_mem, cuMulticastBindMem, 12010)                                             \
  X(multicast_unbind, cuMulticastUnbind, 12010)

/// Index of each entry point in the resolved table.
enum class Slot : std::size_t {
#define CUVMM_DRIVER_SLOT(wrapper, symbol, version) wrapper,
  CUVMM_DRIVER_ENTRY_POINTS(CUVMM_DRIVER_SLOT)
#undef CUVMM_DRIVER_SLOT
};

inline constexpr std::size_t slot_count = 0
#define CUVMM_DRIVER_COUNT(wrapper, symbol, version) +1
    CUVMM_DRIVER_ENTRY_POINTS(CUVMM_DRIVER_COUNT)
#undef CUVMM_DRIVER_COUNT
    ;

/// The driver symbol's base name and pinned ABI version of each slot.
struct SymbolInfo {
  std::string_view name;  ///< e.g. "cuMemGetInfo"
  unsigned version;       ///< e.g. 3020
};
inline constexpr std::array<SymbolInfo, slot_count> symbols = {{
#define CUVMM_DRIVER_SYMBOL(wrapper, symbol, version) {#symbol, version},
    CUVMM_DRIVER_ENTRY_POINTS(CUVMM_DRIVER_SYMBOL)
#undef CUVMM_DRIVER_SYMBOL
}};

/// Whether the driver could be reached. Resolving happens on the first call (of this or any wrapper).
struct Availability {
  bool available = false;
  std::string reason;  ///< empty when available; starts with "no CUDA driver found" when there is none
};
const Availability& availability() noexcept;

/// Throws cuvmm::Error ("no CUDA driver found: ...") unless the driver is available.
void require_driver(std::string_view what, cuvmm::source_location where = cuvmm::source_location::current());

/// The driver's name and description of a result, e.g. "CUDA_ERROR_OUT_OF_MEMORY"; never throws.
std::string error_name(CUresult result) noexcept;
std::string error_text(CUresult result) noexcept;

/// True when a releasing call's object is gone: it succeeded, or the driver has already shut down
/// (process exit), which takes every object with it.
constexpr bool released(CUresult result) noexcept {
  return result == CUDA_SUCCESS || result == CUDA_ERROR_DEINITIALIZED;
}

namespace detail {
/// The resolved function of `slot`, or null (no driver, or the driver lacks the symbol).
void* resolved(Slot slot) noexcept;
/// What a noexcept wrapper returns when `slot` has no function.
CUresult unresolved_result() noexcept;
/// Throws the cuvmm error for `result` of the call in `slot`.
[[noreturn]] void throw_error(Slot slot, CUresult result, std::string context, cuvmm::source_location where);
}  // namespace detail

template <class Function>
class EntryPoint;

/// One driver entry point: `operator()` throws, `no_throw` returns the CUresult.
template <class... Params>
class EntryPoint<CUresult (*)(Params...)> {
 public:
  using Function = CUresult (*)(Params...);

  explicit constexpr EntryPoint(Slot slot) noexcept : slot_(slot) {}

  [[nodiscard]] constexpr Slot slot() const noexcept { return slot_; }
  /// The driver symbol's name, e.g. "cuMemMap".
  [[nodiscard]] constexpr std::string_view name() const noexcept {
    return symbols[static_cast<std::size_t>(slot_)].name;
  }
  /// Whether the driver provides this entry point.
  [[nodiscard]] bool available() const noexcept { return detail::resolved(slot_) != nullptr; }

  /// Calls the driver; never throws.
  CUresult no_throw(Params... args) const noexcept {
    void* const function = detail::resolved(slot_);
    if (function == nullptr) return detail::unresolved_result();
    return reinterpret_cast<Function>(function)(args...);
  }

  /// Calls the driver; throws the matching cuvmm error unless it returns CUDA_SUCCESS.
  void operator()(Params... args, cuvmm::source_location where = cuvmm::source_location::current()) const {
    CUresult const result = no_throw(args...);
    if (result != CUDA_SUCCESS) detail::throw_error(slot_, result, {}, where);
  }

  /// Throws the cuvmm error for `result` (not CUDA_SUCCESS) of this call, with `context`.
  [[noreturn]] void throw_error(CUresult result, std::string context = {},
                                cuvmm::source_location where = cuvmm::source_location::current()) const {
    detail::throw_error(slot_, result, std::move(context), where);
  }

 private:
  Slot slot_;
};

#define CUVMM_DRIVER_WRAPPER(wrapper, symbol, version) \
  inline constexpr EntryPoint<PFN_##symbol##_v##version> wrapper{Slot::wrapper};
CUVMM_DRIVER_ENTRY_POINTS(CUVMM_DRIVER_WRAPPER)
#undef CUVMM_DRIVER_WRAPPER

/// A retained primary context of one device: retained on construction, released on destruction.
class PrimaryContext {
 public:
  PrimaryContext() noexcept = default;
  /// Throws cuvmm::Error.
  explicit PrimaryContext(CUdevice device, cuvmm::source_location where = cuvmm::source_location::current());
  PrimaryContext(const PrimaryContext&) = delete;
  PrimaryContext& operator=(const PrimaryContext&) = delete;
  PrimaryContext(PrimaryContext&& other) noexcept
      : device_(other.device_), context_(std::exchange(other.context_, nullptr)) {}
  PrimaryContext& operator=(PrimaryContext&& other) noexcept {
    if (this != &other) {
      reset();
      device_ = other.device_;
      context_ = std::exchange(other.context_, nullptr);
    }
    return *this;
  }
  ~PrimaryContext() { reset(); }

  [[nodiscard]] CUcontext get() const noexcept { return context_; }
  [[nodiscard]] CUdevice device() const noexcept { return device_; }
  void reset() noexcept;

 private:
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
};

/// A generic allocation handle (a chunk, or a multicast object) owned until adopted: released on
/// destruction unless adopt() handed it on. For multi-step constructions that may still throw.
class PendingAllocation {
 public:
  explicit PendingAllocation(CUmemGenericAllocationHandle handle) noexcept : handle_(handle) {}
  PendingAllocation(const PendingAllocation&) = delete;
  PendingAllocation& operator=(const PendingAllocation&) = delete;
  ~PendingAllocation();
  [[nodiscard]] CUmemGenericAllocationHandle get() const noexcept { return handle_; }
  [[nodiscard]] CUmemGenericAllocationHandle adopt() noexcept { return std::exchange(handle_, 0); }

 private:
  CUmemGenericAllocationHandle handle_;  // 0 once adopted
};

/// An address reservation owned until adopted: freed on destruction unless adopt() handed it on.
class PendingReservation {
 public:
  /// Reserves `size` bytes aligned to `alignment`; throws cuvmm::Error with `context` when refused.
  PendingReservation(std::size_t size, std::size_t alignment, std::string context,
                     cuvmm::source_location where = cuvmm::source_location::current());
  PendingReservation(const PendingReservation&) = delete;
  PendingReservation& operator=(const PendingReservation&) = delete;
  ~PendingReservation();
  [[nodiscard]] CUdeviceptr get() const noexcept { return base_; }
  [[nodiscard]] CUdeviceptr adopt() noexcept { return std::exchange(base_, 0); }

 private:
  CUdeviceptr base_ = 0;  // 0 once adopted
  std::size_t size_;
};

/// Makes a context current on the calling thread for a scope, then puts the previous one back.
class CurrentContextScope {
 public:
  /// Throws cuvmm::Error.
  explicit CurrentContextScope(CUcontext context,
                               cuvmm::source_location where = cuvmm::source_location::current());
  CurrentContextScope(const CurrentContextScope&) = delete;
  CurrentContextScope& operator=(const CurrentContextScope&) = delete;
  ~CurrentContextScope();

 private:
  CUcontext previous_ = nullptr;
  bool switched_ = false;
};

}  // namespace cuvmm::driver
