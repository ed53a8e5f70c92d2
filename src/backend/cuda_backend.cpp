// src/backend/cuda_backend.cpp: CudaBackend, device memory through the driver layer's VMM calls.
//
// Owns: one retained primary context (made current on a calling thread that has none, as the
// runtime does), and a BackendLedger (src/backend/ledger.hpp) of what it handed out: reserved
// ranges, chunk handles with their sizes, mappings. The ledger is the real tally that leak checks
// read (live_counts), and its checks run before every driver call: they are the HostBackend's
// too, so both backends accept and refuse the same calls (the ledger follows the driver's measured
// rules). Device attributes come from the caps layer (src/caps/device_attributes.hpp).
// Invariants: a driver call that failed changes no record; a release that returned CUDA_SUCCESS or
// CUDA_ERROR_DEINITIALIZED (driver gone at exit) removes its object; a release the ledger refuses
// never reaches the driver (asserted in debug builds, as on the host).
// Never does: policy (rounding, caching, growth), driver calls while holding the tally's mutex, or
// cuMulticastCreate.
//
// Imported chunks: the driver reports no size for an imported handle, yet cuMemMap insists on the
// whole handle, so the importer is told the size by its exporter (cuvmm's IPC messages carry it).
// Before a size is trusted, one trial map of exactly that size into a scratch reservation checks it:
// cuMemMap refuses any size but the handle's own.
#include <cuvmm/cuda_backend.hpp>

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <cassert>

#include <cuvmm/device_caps.hpp>
#include <cuvmm/error.hpp>

#include "backend/ledger.hpp"
#include "caps/device_attributes.hpp"
#include "driver/driver.hpp"

namespace cuvmm {
namespace {

using Source = cuvmm::source_location;

std::string address_text(Address address) {
  char text[2 + 16 + 1] = {};
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(address));
  return text;
}

std::string handle_types_text(HandleType set) {
  std::string text;
  if (contains(set, HandleType::posix_fd)) text += "posix_fd";
  if (contains(set, HandleType::fabric)) text += text.empty() ? "fabric" : "+fabric";
  return text.empty() ? "none" : text;
}

CUmemAllocationHandleType driver_handle_types(HandleType set) {
  unsigned types = CU_MEM_HANDLE_TYPE_NONE;
  if (contains(set, HandleType::posix_fd)) types |= CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  if (contains(set, HandleType::fabric)) types |= CU_MEM_HANDLE_TYPE_FABRIC;
  return static_cast<CUmemAllocationHandleType>(types);
}

HandleType cuvmm_handle_types(CUmemAllocationHandleType types) {
  HandleType set = HandleType::none;
  if ((types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0) set = set | HandleType::posix_fd;
  if ((types & CU_MEM_HANDLE_TYPE_FABRIC) != 0) set = set | HandleType::fabric;
  return set;
}

CUmemAccess_flags access_flags(Access access) {
  switch (access) {
    case Access::none: return CU_MEM_ACCESS_FLAGS_PROT_NONE;
    case Access::read: return CU_MEM_ACCESS_FLAGS_PROT_READ;
    case Access::read_write: return CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  }
  return CU_MEM_ACCESS_FLAGS_PROT_NONE;
}

/// Fabric handles were refused for want of an IMEX channel (CUDA_ERROR_NOT_PERMITTED on the H200).
[[noreturn]] void throw_imex_unsupported(std::string_view call, CUresult result, std::string context, Source where) {
  ErrorDetails details = foreign_error_details(ErrorDomain::cuda, static_cast<int>(result), driver::error_name(result),
                                               driver::error_text(result), call, std::move(context), where);
  std::string capability = "IMEX channel (";
  capability += imex_channel_present() ? "one exists under " : "none exists under ";
  capability += imex_channel_directory;
  capability += "; fabric handles need one)";
  throw Unsupported(std::move(capability), std::string(imex_channel_remedy), std::move(details));
}

constexpr bool fabric_refused(CUresult result) {
  return result == CUDA_ERROR_NOT_PERMITTED || result == CUDA_ERROR_NOT_SUPPORTED;
}

/// A chunk request checked against the device's capabilities, as the driver wants it.
struct ChunkRequest {
  CUmemAllocationProp prop{};
  bool compression = false;  // compression requested and supported, so asked of the driver
};

}  // namespace

struct CudaBackend::State {
  int device = 0;                   // ordinal of the device whose primary context is held
  driver::PrimaryContext context;   // retained for the backend's lifetime

  mutable std::mutex mutex;                    // guards the ledger
  std::optional<detail::BackendLedger> ledger;  // set once the address granularity is known

  // A cache of immutable driver answers, so a growth step costs its create/map/access calls only.
  mutable std::mutex cache_mutex;                                    // guards the cache
  mutable std::map<std::tuple<int, unsigned, bool, bool>, std::size_t> granularities;  // (device, handle
                                                                     // types, compression, recommended)

  /// Makes the primary context current if the calling thread has no context.
  void make_current(Source where) const {
    CUcontext current = nullptr;
    driver::ctx_get_current(&current, where);
    if (current == nullptr) driver::ctx_set_current(context.get(), where);
  }
  void make_current_no_throw() const noexcept {
    CUcontext current = nullptr;
    if (driver::ctx_get_current.no_throw(&current) == CUDA_SUCCESS && current == nullptr)
      (void)driver::ctx_set_current.no_throw(context.get());
  }

  CUdevice device_handle(int ordinal, std::string_view call, Source where) const {
    return caps::device_attributes(ordinal, call, where).handle;
  }

  /// Checks `props` against its device's capabilities and builds the driver's allocation properties.
  ChunkRequest request(const ChunkProperties& props, std::string_view call, Source where) const {
    caps::DeviceAttributes const device = caps::device_attributes(props.device, call, where);
    std::string const on_device = " on device " + std::to_string(props.device);
    if (!device.vmm)
      throw_unsupported_capability("virtual memory management" + on_device, "use a device that supports CUDA VMM",
                                   call, {}, where);
    if (contains(props.shareable, HandleType::posix_fd) && !device.posix_fd_handles)
      throw_unsupported_capability("POSIX file descriptor handles" + on_device,
                                   "create the chunk without HandleType::posix_fd", call, {}, where);
    if (contains(props.shareable, HandleType::fabric) && !device.fabric_handles)
      throw_unsupported_capability("fabric handles" + on_device,
                                   "fabric handles need a device and driver with NVLink fabric (IMEX) support", call,
                                   {}, where);
    if (props.gpu_direct_rdma && !device.gpu_direct_rdma_with_vmm)
      throw_unsupported_capability("GPUDirect RDMA on VMM memory" + on_device,
                                   "create the chunk without gpu_direct_rdma (the device or driver does not report "
                                   "CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED)",
                                   call, {}, where);
    ChunkRequest request;
    request.prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    request.prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    request.prop.location.id = props.device;
    request.prop.requestedHandleTypes = driver_handle_types(props.shareable);
    request.compression = props.compression && device.generic_compression;
    if (request.compression) request.prop.allocFlags.compressionType = CU_MEM_ALLOCATION_COMP_GENERIC;
    request.prop.allocFlags.gpuDirectRDMACapable = props.gpu_direct_rdma ? 1 : 0;
    return request;
  }

  /// The driver's granularity for chunks like `prop`, asked once per kind of chunk.
  std::size_t query_granularity(const CUmemAllocationProp& prop, GranularityKind kind, Source where) const {
    auto const key = std::make_tuple(prop.location.id, static_cast<unsigned>(prop.requestedHandleTypes),
                                     prop.allocFlags.compressionType == CU_MEM_ALLOCATION_COMP_GENERIC,
                                     kind == GranularityKind::recommended);
    {
      std::lock_guard lock(cache_mutex);
      if (auto const known = granularities.find(key); known != granularities.end()) return known->second;
    }
    std::size_t const granularity = query_granularity_from_driver(prop, kind, where);
    std::lock_guard lock(cache_mutex);
    granularities.emplace(key, granularity);
    return granularity;
  }

  std::size_t query_granularity_from_driver(const CUmemAllocationProp& prop, GranularityKind kind,
                                            Source where) const {
    std::size_t granularity = 0;
    CUmemAllocationGranularity_flags const option = kind == GranularityKind::recommended
                                                        ? CU_MEM_ALLOC_GRANULARITY_RECOMMENDED
                                                        : CU_MEM_ALLOC_GRANULARITY_MINIMUM;
    CUresult const result = driver::mem_get_allocation_granularity.no_throw(&granularity, &prop, option);
    if (result == CUDA_SUCCESS) return granularity;
    if (fabric_refused(result) && (prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_FABRIC) != 0)
      throw_imex_unsupported(driver::mem_get_allocation_granularity.name(), result,
                             "querying the granularity of fabric-shareable chunks", where);
    driver::mem_get_allocation_granularity.throw_error(
        result, "querying the granularity of chunks on device " + std::to_string(prop.location.id), where);
  }

  /// The size of a live chunk handle (refused naming `op`'s driver call when unknown).
  std::size_t chunk_size(CUmemGenericAllocationHandle handle, BackendOp op) const {
    std::lock_guard lock(mutex);
    return ledger->chunk(ChunkHandle{handle}, op).size;
  }

  /// Checks that an imported handle is `size` bytes, as its exporter announced (see the note at the
  /// top of this file): one trial map of exactly that size into a scratch reservation.
  void verify_imported_size(CUmemGenericAllocationHandle handle, std::size_t size, std::string_view call,
                            Source where) const {
    {
      // The driver may hand back a handle value this backend already holds: its size is known.
      std::lock_guard lock(mutex);
      if (const detail::BackendLedger::Chunk* const known = ledger->find_chunk(ChunkHandle{handle})) {
        if (known->size != size) throw_wrong_import_size(call, known->size, size, where);
        return;
      }
    }
    CUmemAllocationProp prop{};
    driver::mem_get_allocation_properties_from_handle(&prop, handle, where);
    std::size_t const granularity = query_granularity(prop, GranularityKind::minimum, where);
    if (size == 0 || size % granularity != 0) {
      throw_invalid_argument(call, "announced size " + std::to_string(size) + " bytes" +
                                       " is not a positive multiple of the chunk's granularity " +
                                       format_bytes(granularity), where);
    }
    driver::PendingReservation const scratch(size, granularity,
                                             "reserving " + format_bytes(size) + " to check an imported chunk's size",
                                             where);  // never adopted: freed on return
    CUresult const result = driver::mem_map.no_throw(scratch.get(), size, 0, handle, 0);
    if (result != CUDA_SUCCESS) throw_wrong_import_size(call, 0, size, where);
    (void)driver::mem_unmap.no_throw(scratch.get(), size);
  }

  [[noreturn]] static void throw_wrong_import_size(std::string_view call, std::size_t actual, std::size_t announced,
                                                   Source where) {
    throw_invalid_argument(call, "the imported chunk is " +
                                     (actual == 0 ? std::string("not") : std::to_string(actual) + " bytes, not") + " the " +
                                     std::to_string(announced) + " bytes its exporter announced (cuMemMap maps whole chunks only)",
                           where);
  }
};

CudaBackend::CudaBackend(int device) : state_(std::make_unique<State>()) {
  Source const where = Source::current();
  driver::require_driver("CudaBackend");
  State& s = *state_;
  s.device = device;
  ChunkRequest const plain = s.request(ChunkProperties{.device = device}, "CudaBackend", where);
  s.context = driver::PrimaryContext(s.device_handle(device, "CudaBackend", where), where);
  s.make_current(where);
  s.ledger.emplace(s.query_granularity(plain.prop, GranularityKind::minimum, where));
}

CudaBackend::~CudaBackend() = default;

int CudaBackend::device() const noexcept { return state_->device; }

std::size_t CudaBackend::granularity(const ChunkProperties& props, GranularityKind kind) const {
  Source const where = Source::current();
  ChunkRequest const request = state_->request(props, "cuMemGetAllocationGranularity", where);
  state_->make_current(where);
  return state_->query_granularity(request.prop, kind, where);
}

Backend::MemoryInfo CudaBackend::memory_info(int device) const {
  Source const where = Source::current();
  State const& s = *state_;
  CUdevice const handle = s.device_handle(device, "cuMemGetInfo", where);
  // cuMemGetInfo reports on the current context's device: borrow the device's primary context.
  driver::PrimaryContext other;
  if (device != s.device) other = driver::PrimaryContext(handle, where);
  driver::CurrentContextScope const scope(device == s.device ? s.context.get() : other.get(), where);
  MemoryInfo info;
  driver::mem_get_info(&info.free, &info.total, where);
  return info;
}

Address CudaBackend::reserve(std::size_t size, std::size_t alignment) {
  Source const where = Source::current();
  State& s = *state_;
  s.ledger->check_reserve(size, alignment);  // const: the granularity never changes
  s.make_current(where);
  // Freed again if booking it throws.
  driver::PendingReservation pending(size, alignment, "reserving " + format_bytes(size) + " of address space", where);
  std::lock_guard lock(s.mutex);
  s.ledger->add_range(pending.get(), size);
  return pending.adopt();
}

void CudaBackend::free_range(Address base, std::size_t size) noexcept {
  State& s = *state_;
  {
    std::lock_guard lock(s.mutex);
    [[maybe_unused]] const char* const refusal = s.ledger->free_range_refusal(base, size);
    assert(refusal == nullptr && "CudaBackend::free_range: refused (see BackendLedger::free_range_refusal)");
    if (refusal != nullptr) return;
  }
  s.make_current_no_throw();
  if (!driver::released(driver::mem_address_free.no_throw(base, size))) return;
  std::lock_guard lock(s.mutex);
  s.ledger->remove_range(base);
}

ChunkHandle CudaBackend::create_chunk(std::size_t size, const ChunkProperties& props) {
  Source const where = Source::current();
  State& s = *state_;
  ChunkRequest const request = s.request(props, "cuMemCreate", where);
  s.ledger->check_create(size, s.query_granularity(request.prop, GranularityKind::minimum, where));
  s.make_current(where);
  CUmemGenericAllocationHandle handle = 0;
  CUresult const result = driver::mem_create.no_throw(&handle, size, &request.prop, 0);
  if (result != CUDA_SUCCESS) {
    std::string context = "creating a " + format_bytes(size) + " chunk on device " + std::to_string(props.device) +
                          " (shareable: " + handle_types_text(props.shareable) +
                          (request.compression ? ", compressible)" : ")");
    if (contains(props.shareable, HandleType::fabric) && fabric_refused(result))
      throw_imex_unsupported(driver::mem_create.name(), result, std::move(context), where);
    driver::mem_create.throw_error(result, std::move(context), where);
  }
  driver::PendingAllocation pending(handle);  // released again if booking it throws
  // An uncompressed chunk made here is exactly what was asked for; only granted compression needs the
  // driver's word (chunk_info reads it).
  std::optional<ChunkInfo> known;
  if (!request.compression) {
    known = ChunkInfo{.size = size, .device = props.device, .shareable = props.shareable, .compression_granted = false,
                      .gpu_direct_rdma = props.gpu_direct_rdma};
  }
  std::lock_guard lock(s.mutex);
  s.ledger->add_chunk(ChunkHandle{handle}, size, known);
  return ChunkHandle{pending.adopt()};
}

void CudaBackend::release_chunk(ChunkHandle chunk) noexcept {
  State& s = *state_;
  {
    std::lock_guard lock(s.mutex);
    [[maybe_unused]] const char* const refusal = s.ledger->release_refusal(chunk);
    assert(refusal == nullptr && "CudaBackend::release_chunk: unknown chunk handle");
    if (refusal != nullptr) return;
  }
  s.make_current_no_throw();
  if (!driver::released(driver::mem_release.no_throw(chunk.value))) return;
  std::lock_guard lock(s.mutex);
  s.ledger->remove_chunk(chunk);
}

ChunkInfo CudaBackend::chunk_info(ChunkHandle chunk) const {
  Source const where = Source::current();
  State const& s = *state_;
  ChunkInfo info;
  {
    std::lock_guard lock(s.mutex);
    const detail::BackendLedger::Chunk& known = s.ledger->chunk(chunk, BackendOp::chunk_info);
    if (known.info) return *known.info;
    info.size = known.size;
  }
  s.make_current(where);
  CUmemAllocationProp prop{};
  CUresult const result = driver::mem_get_allocation_properties_from_handle.no_throw(&prop, chunk.value);
  if (result != CUDA_SUCCESS)
    driver::mem_get_allocation_properties_from_handle.throw_error(result, "reading a chunk's properties", where);
  info.device = prop.location.id;
  info.shareable = cuvmm_handle_types(prop.requestedHandleTypes);
  info.compression_granted = prop.allocFlags.compressionType == CU_MEM_ALLOCATION_COMP_GENERIC;
  info.gpu_direct_rdma = prop.allocFlags.gpuDirectRDMACapable != 0;
  return info;
}

void CudaBackend::map(Address address, std::size_t size, ChunkHandle chunk) {
  Source const where = Source::current();
  State& s = *state_;
  {
    std::lock_guard lock(s.mutex);
    s.ledger->check_map(address, size, chunk);
  }
  std::string const what = format_bytes(size) + " at " + address_text(address);
  s.make_current(where);
  CUresult const result = driver::mem_map.no_throw(address, size, 0, chunk.value, 0);
  if (result != CUDA_SUCCESS) driver::mem_map.throw_error(result, "mapping " + what, where);
  std::lock_guard lock(s.mutex);
  try {
    s.ledger->add_mapping(address, size, chunk);
  } catch (...) {
    (void)driver::mem_unmap.no_throw(address, size);
    throw;
  }
}

void CudaBackend::unmap(Address address, std::size_t size) noexcept {
  State& s = *state_;
  {
    std::lock_guard lock(s.mutex);
    [[maybe_unused]] const char* const refusal = s.ledger->unmap_refusal(address, size);
    assert(refusal == nullptr && "CudaBackend::unmap: the span is not a run of whole mappings");
    if (refusal != nullptr) return;
  }
  s.make_current_no_throw();
  if (!driver::released(driver::mem_unmap.no_throw(address, size))) return;
  std::lock_guard lock(s.mutex);
  s.ledger->remove_mappings(address, size);
}

void CudaBackend::set_access(Address address, std::size_t size, std::span<const AccessGrant> grants) {
  Source const where = Source::current();
  State& s = *state_;
  {
    std::lock_guard lock(s.mutex);
    s.ledger->check_set_access(address, size, grants);
  }
  std::vector<CUmemAccessDesc> descriptors;
  descriptors.reserve(grants.size());
  for (AccessGrant const& grant : grants) {
    (void)s.device_handle(grant.device, "cuMemSetAccess", where);
    CUmemAccessDesc descriptor{};
    descriptor.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    descriptor.location.id = grant.device;
    descriptor.flags = access_flags(grant.access);
    descriptors.push_back(descriptor);
  }
  std::string const what = format_bytes(size) + " at " + address_text(address);
  s.make_current(where);
  CUresult const result = driver::mem_set_access.no_throw(address, size, descriptors.data(), descriptors.size());
  if (result != CUDA_SUCCESS) driver::mem_set_access.throw_error(result, "setting access on " + what, where);
}

UniqueFd CudaBackend::export_posix_fd(ChunkHandle chunk) {
  Source const where = Source::current();
  State& s = *state_;
  (void)s.chunk_size(chunk.value, BackendOp::export_posix_fd);
  s.make_current(where);
  int descriptor = -1;
  CUresult const result = driver::mem_export_to_shareable_handle.no_throw(
      &descriptor, chunk.value, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  if (result != CUDA_SUCCESS)
    driver::mem_export_to_shareable_handle.throw_error(
        result, "exporting a chunk as a POSIX fd (it must be created with HandleType::posix_fd)", where);
  UniqueFd fd(descriptor);
  int const flags = ::fcntl(fd.get(), F_GETFD);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFD, flags | FD_CLOEXEC) < 0)
    throw_errno("fcntl(F_SETFD, FD_CLOEXEC)", errno, "making an exported chunk's fd close-on-exec", where);
  return fd;
}

ChunkHandle CudaBackend::import_posix_fd(int fd, std::size_t size) {
  Source const where = Source::current();
  State& s = *state_;
  if (fd < 0)
    throw_invalid_argument("cuMemImportFromShareableHandle", "fd " + std::to_string(fd) + " is invalid", where);
  s.make_current(where);
  CUmemGenericAllocationHandle handle = 0;
  // The driver reads the descriptor and leaves it open: the caller still owns it.
  void* const os_handle = reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd));
  CUresult const result =
      driver::mem_import_from_shareable_handle.no_throw(&handle, os_handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  if (result != CUDA_SUCCESS)
    driver::mem_import_from_shareable_handle.throw_error(result, "importing a chunk from fd " + std::to_string(fd),
                                                         where);
  driver::PendingAllocation pending(handle);
  s.verify_imported_size(pending.get(), size, detail::call_name(BackendOp::import_posix_fd), where);
  std::lock_guard lock(s.mutex);
  s.ledger->add_chunk(ChunkHandle{handle}, size);
  return ChunkHandle{pending.adopt()};
}

FabricHandle CudaBackend::export_fabric(ChunkHandle chunk) {
  Source const where = Source::current();
  State& s = *state_;
  (void)s.chunk_size(chunk.value, BackendOp::export_fabric);
  s.make_current(where);
  CUmemFabricHandle exported{};
  CUresult const result =
      driver::mem_export_to_shareable_handle.no_throw(&exported, chunk.value, CU_MEM_HANDLE_TYPE_FABRIC, 0);
  if (result != CUDA_SUCCESS) {
    std::string context = "exporting a chunk as a fabric handle (it must be created with HandleType::fabric)";
    if (fabric_refused(result))
      throw_imex_unsupported(driver::mem_export_to_shareable_handle.name(), result, std::move(context), where);
    driver::mem_export_to_shareable_handle.throw_error(result, std::move(context), where);
  }
  static_assert(sizeof exported.data == sizeof(FabricHandle::data));
  FabricHandle handle;
  std::memcpy(handle.data, exported.data, sizeof handle.data);
  return handle;
}

ChunkHandle CudaBackend::import_fabric(const FabricHandle& fabric, std::size_t size) {
  Source const where = Source::current();
  State& s = *state_;
  s.make_current(where);
  CUmemFabricHandle imported{};
  std::memcpy(imported.data, fabric.data, sizeof imported.data);
  CUmemGenericAllocationHandle handle = 0;
  CUresult const result =
      driver::mem_import_from_shareable_handle.no_throw(&handle, &imported, CU_MEM_HANDLE_TYPE_FABRIC);
  if (result != CUDA_SUCCESS) {
    std::string context = "importing a chunk from a fabric handle";
    if (fabric_refused(result))
      throw_imex_unsupported(driver::mem_import_from_shareable_handle.name(), result, std::move(context), where);
    driver::mem_import_from_shareable_handle.throw_error(result, std::move(context), where);
  }
  driver::PendingAllocation pending(handle);
  s.verify_imported_size(pending.get(), size, detail::call_name(BackendOp::import_fabric), where);
  std::lock_guard lock(s.mutex);
  s.ledger->add_chunk(ChunkHandle{handle}, size);
  return ChunkHandle{pending.adopt()};
}

LiveCounts CudaBackend::live_counts() const noexcept {
  std::lock_guard lock(state_->mutex);
  return state_->ledger->counts();
}

CudaBackend& cuda_backend(int device) {
  // Leaked on purpose, registry included: objects destroyed at process exit may still use them.
  struct Registry {
    std::mutex mutex;
    std::map<int, CudaBackend*> backends;
  };
  static Registry* const registry = new Registry;
  std::lock_guard lock(registry->mutex);
  CudaBackend*& backend = registry->backends[device];
  if (backend == nullptr) {
    try {
      backend = new CudaBackend(device);
    } catch (...) {
      registry->backends.erase(device);
      throw;
    }
  }
  return *backend;
}

}  // namespace cuvmm
