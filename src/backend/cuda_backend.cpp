// src/backend/cuda_backend.cpp: CudaBackend, device memory through the driver layer's VMM calls.
//
// Owns: one retained primary context (made current on a calling thread that has none, as the
// runtime does), and the tally of what it handed out: reserved ranges, chunk handles with their
// sizes, mapped spans. The tally is the real one that leak checks read (live_counts), and it is
// also what the cheap precondition checks consult: a map must land inside a live range on an
// unmapped span with the chunk's exact size; access is set only on mapped spans.
// Invariants: a driver call that failed changes no tally; a release that returned CUDA_SUCCESS or
// CUDA_ERROR_DEINITIALIZED (driver gone at exit) removes its object from the tally.
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

#include <cuvmm/device_caps.hpp>
#include <cuvmm/error.hpp>

#include "driver/driver.hpp"

namespace cuvmm {
namespace {

using Source = cuvmm::source_location;

std::string bytes_text(std::size_t bytes) {
  if (bytes != 0 && bytes % GiB == 0) return std::to_string(bytes / GiB) + " GiB";
  if (bytes != 0 && bytes % MiB == 0) return std::to_string(bytes / MiB) + " MiB";
  if (bytes != 0 && bytes % KiB == 0) return std::to_string(bytes / KiB) + " KiB";
  return std::to_string(bytes) + " bytes";
}

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

[[noreturn]] void throw_unsupported(std::string capability, std::string remedy, std::string_view call,
                                    std::string context, Source where) {
  ErrorDetails details;
  details.call = std::string(call);
  details.domain = ErrorDomain::cuvmm;
  details.code_name = "unsupported";
  details.context = std::move(context);
  details.where = where;
  throw Unsupported(std::move(capability), std::move(remedy), std::move(details));
}

/// Fabric handles were refused for want of an IMEX channel (CUDA_ERROR_NOT_PERMITTED on the H200).
[[noreturn]] void throw_imex_unsupported(std::string_view call, CUresult result, std::string context, Source where) {
  ErrorDetails details;
  details.call = std::string(call);
  details.domain = ErrorDomain::cuda;
  details.code = static_cast<int>(result);
  details.code_name = driver::error_name(result);
  details.code_text = driver::error_text(result);
  details.context = std::move(context);
  details.where = where;
  std::string capability = "IMEX channel (";
  capability += imex_channel_present() ? "one exists under " : "none exists under ";
  capability += imex_channel_directory;
  capability += "; fabric handles need one)";
  throw Unsupported(std::move(capability), std::string(imex_channel_remedy), std::move(details));
}

constexpr bool fabric_refused(CUresult result) {
  return result == CUDA_ERROR_NOT_PERMITTED || result == CUDA_ERROR_NOT_SUPPORTED;
}

int driver_device_count(Source where) {
  int count = 0;
  driver::device_get_count(&count, where);
  return count;
}

bool device_attribute(CUdevice device, CUdevice_attribute attribute, Source where) {
  int value = 0;
  driver::device_get_attribute(&value, attribute, device, where);
  return value != 0;
}

/// A chunk request checked against the device's capabilities, as the driver wants it.
struct ChunkRequest {
  CUmemAllocationProp prop{};
  bool compression = false;  // compression requested and supported, so asked of the driver
};

}  // namespace

struct CudaBackend::State {
  struct Chunk {
    std::size_t size = 0;        // bytes of the handle (what cuMemMap must be given)
    std::size_t references = 0;  // times the driver handed out this handle value and it was not released
    std::optional<ChunkInfo> info;  // known without asking the driver (created here, uncompressed)
  };

  /// What a device can do, read once: attributes do not change while the process runs.
  struct DeviceFacts {
    CUdevice handle = 0;
    bool vmm = false;
    bool posix_fd = false;
    bool fabric = false;
    bool compression = false;
  };

  int device = 0;                   // ordinal of the device whose primary context is held
  int device_count = 0;             // devices the driver reports (fixed for the process)
  driver::PrimaryContext context;   // retained for the backend's lifetime
  std::size_t address_granularity = 0;  // minimum granularity of plain chunks on `device`: addresses align to it

  mutable std::mutex mutex;                                 // guards the tally below
  LiveCounts live;                                          // what live_counts() reports
  std::map<Address, std::size_t> ranges;                    // reserved ranges: base → size
  std::map<Address, std::size_t> mappings;                  // mapped spans: address → size
  std::unordered_map<CUmemGenericAllocationHandle, Chunk> chunks;  // live chunk handles

  // Caches of immutable driver answers, so a growth step costs its create/map/access calls only.
  mutable std::mutex cache_mutex;                                    // guards the two caches
  mutable std::vector<std::optional<DeviceFacts>> device_facts;      // by ordinal
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

  /// The device's handle and capabilities, read from the driver on first use.
  DeviceFacts facts(int ordinal, std::string_view call, Source where) const {
    if (ordinal < 0 || ordinal >= device_count)
      throw_invalid_argument(call, "device " + std::to_string(ordinal) + " does not exist (the driver reports " +
                                       std::to_string(device_count) + " device(s))",
                             where);
    auto const index = static_cast<std::size_t>(ordinal);
    {
      std::lock_guard lock(cache_mutex);
      if (device_facts.size() > index && device_facts[index]) return *device_facts[index];
    }
    DeviceFacts read;
    driver::device_get(&read.handle, ordinal, where);
    read.vmm = device_attribute(read.handle, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, where);
    read.posix_fd = device_attribute(read.handle, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, where);
    read.fabric = device_attribute(read.handle, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, where);
    read.compression = device_attribute(read.handle, CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED, where);
    std::lock_guard lock(cache_mutex);
    if (device_facts.size() <= index) device_facts.resize(index + 1);
    device_facts[index] = read;
    return read;
  }

  CUdevice device_handle(int ordinal, std::string_view call, Source where) const {
    return facts(ordinal, call, where).handle;
  }

  /// Checks `props` against its device's capabilities and builds the driver's allocation properties.
  ChunkRequest request(const ChunkProperties& props, std::string_view call, Source where) const {
    DeviceFacts const device = facts(props.device, call, where);
    std::string const on_device = " on device " + std::to_string(props.device);
    if (!device.vmm)
      throw_unsupported("virtual memory management" + on_device, "use a device that supports CUDA VMM", call, {},
                        where);
    if (contains(props.shareable, HandleType::posix_fd) && !device.posix_fd)
      throw_unsupported("POSIX file descriptor handles" + on_device, "create the chunk without HandleType::posix_fd",
                        call, {}, where);
    if (contains(props.shareable, HandleType::fabric) && !device.fabric)
      throw_unsupported("fabric handles" + on_device,
                        "fabric handles need a device and driver with NVLink fabric (IMEX) support", call, {}, where);
    ChunkRequest request;
    request.prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    request.prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    request.prop.location.id = props.device;
    request.prop.requestedHandleTypes = driver_handle_types(props.shareable);
    request.compression = props.compression && device.compression;
    if (request.compression) request.prop.allocFlags.compressionType = CU_MEM_ALLOCATION_COMP_GENERIC;
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

  /// Adds a chunk handle the driver just handed out (with what it is, when that is known).
  void record_chunk(CUmemGenericAllocationHandle handle, std::size_t size, std::optional<ChunkInfo> info = {}) {
    std::lock_guard lock(mutex);
    Chunk& chunk = chunks[handle];
    chunk.size = size;
    if (chunk.references == 0) chunk.info = info;
    ++chunk.references;
    ++live.chunks;
    live.bytes_physical += size;
  }

  std::size_t chunk_size(CUmemGenericAllocationHandle handle, std::string_view call, Source where) const {
    std::lock_guard lock(mutex);
    auto const found = chunks.find(handle);
    if (found == chunks.end())
      throw_invalid_argument(call, "chunk handle " + std::to_string(handle) + " is not a live chunk of this backend",
                             where);
    return found->second.size;
  }

  /// Checks that an imported handle is `size` bytes, as its exporter announced (see the note at the
  /// top of this file): one trial map of exactly that size into a scratch reservation.
  void verify_imported_size(CUmemGenericAllocationHandle handle, std::size_t size, std::string_view call,
                            Source where) const {
    {
      // The driver may hand back a handle value this backend already holds: its size is known.
      std::lock_guard lock(mutex);
      if (auto const known = chunks.find(handle); known != chunks.end()) {
        if (known->second.size != size) throw_wrong_import_size(call, known->second.size, size, where);
        return;
      }
    }
    CUmemAllocationProp prop{};
    driver::mem_get_allocation_properties_from_handle(&prop, handle, where);
    std::size_t const granularity = query_granularity(prop, GranularityKind::minimum, where);
    if (size == 0 || size % granularity != 0) {
      throw_invalid_argument(call, "announced size " + bytes_text(size) +
                                       " is not a positive multiple of the chunk's granularity " +
                                       bytes_text(granularity), where);
    }
    driver::PendingReservation const scratch(size, granularity,
                                             "reserving " + bytes_text(size) + " to check an imported chunk's size",
                                             where);  // never adopted: freed on return
    CUresult const result = driver::mem_map.no_throw(scratch.get(), size, 0, handle, 0);
    if (result != CUDA_SUCCESS) throw_wrong_import_size(call, 0, size, where);
    (void)driver::mem_unmap.no_throw(scratch.get(), size);
  }

  [[noreturn]] static void throw_wrong_import_size(std::string_view call, std::size_t actual, std::size_t announced,
                                                   Source where) {
    throw_invalid_argument(call, "the imported chunk is " +
                                     (actual == 0 ? std::string("not") : bytes_text(actual) + ", not") + " the " +
                                     bytes_text(announced) + " its exporter announced (cuMemMap maps whole chunks only)",
                           where);
  }
};

CudaBackend::CudaBackend(int device) : state_(std::make_unique<State>()) {
  Source const where = Source::current();
  driver::require_driver("CudaBackend");
  State& s = *state_;
  s.device = device;
  s.device_count = driver_device_count(where);
  ChunkRequest const plain = s.request(ChunkProperties{.device = device}, "CudaBackend", where);
  s.context = driver::PrimaryContext(s.device_handle(device, "CudaBackend", where), where);
  s.make_current(where);
  s.address_granularity = s.query_granularity(plain.prop, GranularityKind::minimum, where);
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
  if (size == 0 || size % s.address_granularity != 0)
    throw_invalid_argument("cuMemAddressReserve", "size " + std::to_string(size) +
                                                      " is not a positive multiple of the granularity " +
                                                      bytes_text(s.address_granularity), where);
  if ((alignment & (alignment - 1)) != 0)
    throw_invalid_argument("cuMemAddressReserve",
                           "alignment " + std::to_string(alignment) + " is neither 0 nor a power of two", where);
  s.make_current(where);
  CUdeviceptr base = 0;
  CUresult const result = driver::mem_address_reserve.no_throw(&base, size, alignment, 0, 0);
  if (result != CUDA_SUCCESS)
    driver::mem_address_reserve.throw_error(result, "reserving " + bytes_text(size) + " of address space", where);
  std::lock_guard lock(s.mutex);
  s.ranges.emplace(base, size);
  ++s.live.ranges;
  s.live.bytes_reserved += size;
  return base;
}

void CudaBackend::free_range(Address base, std::size_t size) noexcept {
  State& s = *state_;
  s.make_current_no_throw();
  if (!driver::released(driver::mem_address_free.no_throw(base, size))) return;
  std::lock_guard lock(s.mutex);
  if (auto const found = s.ranges.find(base); found != s.ranges.end()) {
    --s.live.ranges;
    s.live.bytes_reserved -= found->second;
    s.ranges.erase(found);
  }
}

ChunkHandle CudaBackend::create_chunk(std::size_t size, const ChunkProperties& props) {
  Source const where = Source::current();
  State& s = *state_;
  ChunkRequest const request = s.request(props, "cuMemCreate", where);
  std::size_t const granularity = s.query_granularity(request.prop, GranularityKind::minimum, where);
  if (size == 0 || size % granularity != 0)
    throw_invalid_argument("cuMemCreate", "size " + std::to_string(size) +
                                              " is not a positive multiple of the granularity " +
                                              bytes_text(granularity), where);
  s.make_current(where);
  CUmemGenericAllocationHandle handle = 0;
  CUresult const result = driver::mem_create.no_throw(&handle, size, &request.prop, 0);
  if (result != CUDA_SUCCESS) {
    std::string context = "creating a " + bytes_text(size) + " chunk on device " + std::to_string(props.device) +
                          " (shareable: " + handle_types_text(props.shareable) +
                          (request.compression ? ", compressible)" : ")");
    if (contains(props.shareable, HandleType::fabric) && fabric_refused(result))
      throw_imex_unsupported(driver::mem_create.name(), result, std::move(context), where);
    driver::mem_create.throw_error(result, std::move(context), where);
  }
  // An uncompressed chunk made here is exactly what was asked for; only granted compression needs the
  // driver's word (chunk_info reads it).
  std::optional<ChunkInfo> known;
  if (!request.compression) known = ChunkInfo{size, props.device, props.shareable, false};
  s.record_chunk(handle, size, known);
  return ChunkHandle{handle};
}

void CudaBackend::release_chunk(ChunkHandle chunk) noexcept {
  State& s = *state_;
  s.make_current_no_throw();
  if (!driver::released(driver::mem_release.no_throw(chunk.value))) return;
  std::lock_guard lock(s.mutex);
  auto const found = s.chunks.find(chunk.value);
  if (found == s.chunks.end()) return;
  --s.live.chunks;
  s.live.bytes_physical -= found->second.size;
  if (--found->second.references == 0) s.chunks.erase(found);
}

ChunkInfo CudaBackend::chunk_info(ChunkHandle chunk) const {
  Source const where = Source::current();
  State const& s = *state_;
  {
    std::lock_guard lock(s.mutex);
    if (auto const found = s.chunks.find(chunk.value); found != s.chunks.end() && found->second.info)
      return *found->second.info;
  }
  ChunkInfo info;
  info.size = s.chunk_size(chunk.value, "cuMemGetAllocationPropertiesFromHandle", where);
  s.make_current(where);
  CUmemAllocationProp prop{};
  CUresult const result = driver::mem_get_allocation_properties_from_handle.no_throw(&prop, chunk.value);
  if (result != CUDA_SUCCESS)
    driver::mem_get_allocation_properties_from_handle.throw_error(result, "reading a chunk's properties", where);
  info.device = prop.location.id;
  info.shareable = cuvmm_handle_types(prop.requestedHandleTypes);
  info.compression_granted = prop.allocFlags.compressionType == CU_MEM_ALLOCATION_COMP_GENERIC;
  return info;
}

void CudaBackend::map(Address address, std::size_t size, ChunkHandle chunk) {
  Source const where = Source::current();
  State& s = *state_;
  std::size_t const chunk_bytes = s.chunk_size(chunk.value, "cuMemMap", where);
  std::string const what = bytes_text(size) + " at " + address_text(address);
  if (size != chunk_bytes)
    throw_invalid_argument("cuMemMap", "mapping " + what + ": the size must be the whole chunk's, " +
                                           bytes_text(chunk_bytes), where);
  if (address == 0 || address % s.address_granularity != 0)
    throw_invalid_argument("cuMemMap", "mapping " + what + ": the address is not a multiple of the granularity " +
                                           bytes_text(s.address_granularity), where);
  {
    std::lock_guard lock(s.mutex);
    auto const after = s.ranges.upper_bound(address);  // the first range starting past `address`
    bool const inside = after != s.ranges.begin() &&
                        address + size <= std::prev(after)->first + std::prev(after)->second;
    if (!inside)
      throw_invalid_argument("cuMemMap", "mapping " + what + ": the span is not inside a reserved range", where);
    auto const next = s.mappings.lower_bound(address);
    bool const overlaps_next = next != s.mappings.end() && next->first < address + size;
    bool const overlaps_previous =
        next != s.mappings.begin() && std::prev(next)->first + std::prev(next)->second > address;
    if (overlaps_next || overlaps_previous)
      throw_invalid_argument("cuMemMap", "mapping " + what + ": the span is already mapped", where);
  }
  s.make_current(where);
  CUresult const result = driver::mem_map.no_throw(address, size, 0, chunk.value, 0);
  if (result != CUDA_SUCCESS) driver::mem_map.throw_error(result, "mapping " + what, where);
  std::lock_guard lock(s.mutex);
  s.mappings.emplace(address, size);
  ++s.live.mappings;
  s.live.bytes_mapped += size;
}

void CudaBackend::unmap(Address address, std::size_t size) noexcept {
  State& s = *state_;
  s.make_current_no_throw();
  if (!driver::released(driver::mem_unmap.no_throw(address, size))) return;
  std::lock_guard lock(s.mutex);
  auto first = s.mappings.lower_bound(address);
  auto last = first;
  while (last != s.mappings.end() && last->first < address + size) {
    --s.live.mappings;
    s.live.bytes_mapped -= last->second;
    ++last;
  }
  s.mappings.erase(first, last);
}

void CudaBackend::set_access(Address address, std::size_t size, std::span<const AccessGrant> grants) {
  Source const where = Source::current();
  State& s = *state_;
  std::string const what = bytes_text(size) + " at " + address_text(address);
  if (grants.empty()) throw_invalid_argument("cuMemSetAccess", "setting access on " + what + ": no grants", where);
  if (size == 0 || size % s.address_granularity != 0 || address % s.address_granularity != 0)
    throw_invalid_argument("cuMemSetAccess", "setting access on " + what +
                                                 ": address and size must be multiples of the granularity " +
                                                 bytes_text(s.address_granularity), where);
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
  {
    // The span must be covered by mappings side by side, from its first byte to its last.
    std::lock_guard lock(s.mutex);
    auto span = s.mappings.upper_bound(address);
    bool covered = span != s.mappings.begin();
    Address reached = address;
    if (covered) {
      --span;
      while (span != s.mappings.end() && span->first <= reached && reached < address + size) {
        reached = std::max(reached, span->first + span->second);
        ++span;
      }
      covered = reached >= address + size;
    }
    if (!covered)
      throw_invalid_argument("cuMemSetAccess", "setting access on " + what + ": the span is not fully mapped", where);
  }
  s.make_current(where);
  CUresult const result = driver::mem_set_access.no_throw(address, size, descriptors.data(), descriptors.size());
  if (result != CUDA_SUCCESS) driver::mem_set_access.throw_error(result, "setting access on " + what, where);
}

UniqueFd CudaBackend::export_posix_fd(ChunkHandle chunk) {
  Source const where = Source::current();
  State& s = *state_;
  (void)s.chunk_size(chunk.value, "cuMemExportToShareableHandle", where);
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
  s.verify_imported_size(pending.get(), size, "import_posix_fd", where);
  s.record_chunk(pending.adopt(), size);
  return ChunkHandle{handle};
}

FabricHandle CudaBackend::export_fabric(ChunkHandle chunk) {
  Source const where = Source::current();
  State& s = *state_;
  (void)s.chunk_size(chunk.value, "cuMemExportToShareableHandle", where);
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
  s.verify_imported_size(pending.get(), size, "import_fabric", where);
  s.record_chunk(pending.adopt(), size);
  return ChunkHandle{handle};
}

LiveCounts CudaBackend::live_counts() const noexcept {
  std::lock_guard lock(state_->mutex);
  return state_->live;
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
