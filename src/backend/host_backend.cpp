// HostBackend: the backend contract on plain Linux virtual memory.
//
// What it owns: every range it reserved (PROT_NONE anonymous mappings), every chunk it created or
// imported (one memfd each; the ChunkHandle value is the memfd number), and the book of mappings.
// All of it sits in one State behind one mutex; the books are ordered maps keyed by address, so
// "is this span reserved / unmapped / fully mapped" is a walk over neighbours.
//
// How each call maps onto the kernel:
//  - reserve:      mmap(PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE) of size + alignment,
//                  then munmap of the head and tail so the kept part is aligned.
//  - create_chunk: memfd_create(MFD_CLOEXEC | MFD_ALLOW_SEALING) + fallocate, so the pages exist now:
//                  exhaustion is OutOfMemory at this call, never a SIGBUS at first touch; then sealed
//                  against shrinking and growing (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), so no
//                  process that holds the fd can truncate the memory under another's mapping.
//  - map:          mmap(MAP_FIXED | MAP_SHARED, PROT_NONE) of the whole memfd. MAP_FIXED silently
//                  replaces whatever is there, so the books must first show the span reserved by us
//                  and not mapped; that check is what keeps this call from corrupting the process.
//  - unmap:        mmap(PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE) over the
//                  span: the memory goes, the reservation keeps no hole another mmap could take.
//  - set_access:   mprotect. Grants name devices; the host has one accessor (the CPU), so the most
//                  permissive grant in the list is applied to the whole span.
//  - posix fds:    export dups the memfd (close-on-exec); import dups the caller's fd (not consumed)
//                  after checking it is a memfd sealed against shrinking, of the announced size,
//                  open read-write: any other descriptor (a pipe, a file on disk, an unsealed memfd
//                  its sender could truncate into a SIGBUS here) is refused.
//  - fabric:       a handle made only of bytes, as a CUmemFabricHandle is: "cuvmmhst", version, the
//                  exporter's pid and memfd number, the memfd's device and inode, and the chunk's
//                  size. A process of the same machine opens it with pidfd_open + pidfd_getfd (or,
//                  where ptrace rules refuse that, /proc/PID/fd/N), checks the inode is still the
//                  exported chunk's, then imports it as a posix fd (all the checks above). It
//                  lets MPI exchange code run for real without IMEX; it never crosses machines,
//                  and it is valid only while the exporter keeps the chunk.
//
// Invariants, as the CUDA driver has them: chunk, range and mapping sizes are multiples of the
// granularity; map() maps whole chunks into reserved, unmapped spans (which may cross the boundary
// of two adjacent ranges, as cuMemMap allows); set_access() and unmap() cover whole mappings side by
// side; a range is freed only when no mapping overlaps it. Releasing a chunk that is still mapped
// closes its memfd but its memory stays valid until the last mapping goes (as with cuMemRelease):
// the chunk no longer counts in LiveCounts::chunks, its bytes still count in bytes_physical.
// Options::physical_limit caps bytes_physical at create_chunk (OutOfMemory past it); an imported
// chunk counts in bytes_physical (this process now holds that memory) but is never refused, since
// importing allocates nothing. memory_info() reports the limit minus bytes_physical when one is set.
//
// What it never does: round sizes, cache chunks, or touch memory it did not reserve. Violated
// preconditions of acquiring calls throw cuvmm::Error; the noexcept releasing calls assert in debug
// builds and otherwise ignore the bad request, leaving everything as it was.
#include <cuvmm/host_backend.hpp>

#include <cassert>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <unistd.h>
#include <utility>

#include <cuvmm/error.hpp>

#include "support/little_endian.hpp"

namespace cuvmm {
namespace {

std::size_t system_page_size() noexcept {
  long const page = ::sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<std::size_t>(page) : std::size_t{4096};
}

/// The seals of every chunk's memfd: its size is fixed for good.
constexpr int chunk_seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

bool is_power_of_two(std::size_t value) noexcept { return value != 0 && (value & (value - 1)) == 0; }

std::string hex(Address address) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%" PRIxPTR, address);
  return text;
}

std::string span_text(Address address, std::size_t size) {
  return "[" + hex(address) + ", +" + std::to_string(size) + ")";
}

/// Whether [address, address + size) wraps around the end of the address space.
bool wraps(Address address, std::size_t size) noexcept { return address + size < address; }

/// Smallest common multiple of a and b, or 0 when it does not fit a size_t.
std::size_t common_multiple(std::size_t a, std::size_t b) noexcept {
  std::size_t x = a;
  std::size_t y = b;
  while (y != 0) x = std::exchange(y, x % y);  // x = gcd(a, b)
  std::size_t const factor = a / x;
  return factor > SIZE_MAX / b ? 0 : factor * b;
}

/// MemAvailable from /proc/meminfo in bytes; 0 when it cannot be read.
std::size_t mem_available_bytes() noexcept {
  std::FILE* file = std::fopen("/proc/meminfo", "re");
  if (file == nullptr) return 0;
  std::size_t bytes = 0;
  char line[256];
  while (std::fgets(line, sizeof line, file) != nullptr) {
    unsigned long long kib = 0;
    if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
      bytes = static_cast<std::size_t>(kib) * KiB;
      break;
    }
  }
  std::fclose(file);
  return bytes;
}

}  // namespace

struct HostBackend::State {
  /// One physical chunk. Lives while its handle is unreleased or any mapping still shows it.
  struct Chunk {
    UniqueFd memfd;                // the memory; closed (invalid) once the handle is released
    ChunkInfo info;                // what was created or imported
    std::size_t mappings = 0;      // live mappings of this chunk
  };
  /// One mapping: a whole chunk at one address.
  struct MappingRecord {
    std::size_t size = 0;          // == the chunk's size
    std::shared_ptr<Chunk> chunk;  // keeps the books of a released chunk until it is unmapped
  };

  Options options;
  std::size_t page_size = 0;

  mutable std::mutex mutex;                                   // guards everything below
  std::map<Address, std::size_t> ranges;                      // base -> size of each reservation
  std::map<int, std::shared_ptr<Chunk>> chunks;               // memfd -> chunk, for unreleased handles
  std::map<Address, MappingRecord> mappings;                  // address -> mapping
  std::size_t bytes_reserved = 0;                             // sum of range sizes
  std::size_t bytes_physical = 0;                             // bytes of every live Chunk
  std::size_t bytes_mapped = 0;                               // sum of mapping sizes

  /// Whether [address, address + size) lies within reservations (one, or several side by side).
  bool span_reserved(Address address, std::size_t size) const {
    Address const end = address + size;
    auto it = ranges.upper_bound(address);
    if (it == ranges.begin()) return false;
    --it;
    Address covered = it->first;
    while (it != ranges.end() && it->first == covered) {
      covered += it->second;
      if (covered > address && covered >= end) return true;
      ++it;
    }
    return false;
  }

  /// Whether any mapping overlaps [address, address + size).
  bool span_touches_mapping(Address address, std::size_t size) const {
    Address const end = address + size;
    auto it = mappings.lower_bound(address);
    if (it != mappings.end() && it->first < end) return true;
    if (it == mappings.begin()) return false;
    --it;
    return it->first + it->second.size > address;
  }

  /// Whether [address, address + size) is exactly a run of whole mappings side by side.
  bool span_is_whole_mappings(Address address, std::size_t size) const {
    Address const end = address + size;
    Address next = address;
    for (auto it = mappings.find(address); it != mappings.end() && it->first == next; ++it) {
      next += it->second.size;
      if (next == end) return true;
      if (next > end) return false;
    }
    return false;
  }

  const std::shared_ptr<Chunk>& chunk(std::string_view call, ChunkHandle handle) const {
    auto const it = handle.value <= static_cast<std::uint64_t>(INT32_MAX)
                        ? chunks.find(static_cast<int>(handle.value))
                        : chunks.end();
    if (it == chunks.end()) {
      throw_invalid_argument(call, "unknown chunk handle " + std::to_string(handle.value) +
                                       " (never created here, or already released)");
    }
    return it->second;
  }

  /// The chunk behind `handle`, which must have been created shareable as `type` (named `what`).
  const Chunk& shareable_chunk(std::string_view call, ChunkHandle handle, HandleType type, std::string_view what) const {
    const Chunk& found = *chunk(call, handle);
    if (!contains(found.info.shareable, type)) {
      throw_invalid_argument(call, "chunk " + std::to_string(handle.value) + " was not created shareable as " +
                                       std::string(what) + " (ChunkProperties::shareable)");
    }
    return found;
  }

  void check_granular(std::string_view call, std::string_view what, std::size_t value) const {
    if (value == 0 || value % options.granularity != 0) {
      throw_invalid_argument(call, std::string(what) + " " + std::to_string(value) +
                                       " is not a positive multiple of the granularity " +
                                       std::to_string(options.granularity));
    }
  }

  /// Drops a chunk's physical bytes once neither its handle nor a mapping holds it.
  void forget_if_unused(const Chunk& chunk) noexcept {
    if (!chunk.memfd.valid() && chunk.mappings == 0) bytes_physical -= chunk.info.size;
  }
};

HostBackend::HostBackend() : HostBackend(Options{}) {}

HostBackend::HostBackend(Options options) : state_(std::make_unique<State>()) {
  state_->page_size = system_page_size();
  if (options.granularity == 0 || options.granularity % state_->page_size != 0) {
    throw_invalid_argument("HostBackend", "granularity " + std::to_string(options.granularity) +
                                              " is not a positive multiple of the page size " +
                                              std::to_string(state_->page_size));
  }
  state_->options = options;
}

// Whatever the caller leaked is given back to the kernel: unmapping the ranges removes every
// mapping in them, and the chunk records close their memfds.
HostBackend::~HostBackend() {
  for (const auto& [base, size] : state_->ranges) ::munmap(reinterpret_cast<void*>(base), size);
}

const HostBackend::Options& HostBackend::options() const noexcept { return state_->options; }

std::size_t HostBackend::granularity(const ChunkProperties&, GranularityKind) const {
  return state_->options.granularity;
}

Backend::MemoryInfo HostBackend::memory_info(int) const {
  MemoryInfo info;
  if (state_->options.physical_limit != 0) {
    std::lock_guard lock(state_->mutex);
    info.total = state_->options.physical_limit;
    info.free = info.total > state_->bytes_physical ? info.total - state_->bytes_physical : 0;
    return info;
  }
  struct sysinfo system {};
  if (::sysinfo(&system) != 0) throw_errno("sysinfo", errno, "reading the machine's memory size");
  info.total = static_cast<std::size_t>(system.totalram) * system.mem_unit;
  info.free = mem_available_bytes();
  if (info.free == 0) info.free = static_cast<std::size_t>(system.freeram) * system.mem_unit;
  return info;
}

Address HostBackend::reserve(std::size_t size, std::size_t alignment) {
  State& s = *state_;
  s.check_granular("HostBackend::reserve", "size", size);
  if (alignment != 0 && !is_power_of_two(alignment)) {
    throw_invalid_argument("HostBackend::reserve",
                           "alignment " + std::to_string(alignment) + " is not a power of two");
  }
  // The base is aligned to the granularity (so offsets that are multiples of it are valid map
  // targets) and to the requested alignment; at least a page, as mmap returns.
  std::size_t const align = common_multiple(alignment == 0 ? s.options.granularity : alignment,
                                            s.options.granularity);
  std::size_t const padding = align > s.page_size ? align - s.page_size : 0;
  if (align == 0 || size > SIZE_MAX - padding) {
    throw_invalid_argument("HostBackend::reserve", "size " + std::to_string(size) + " with alignment " +
                                                       std::to_string(alignment) + " overflows");
  }
  std::size_t const padded = size + padding;
  void* const raw = ::mmap(nullptr, padded, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) {
    throw_errno("mmap", errno, "reserving " + std::to_string(size) + " bytes of address space");
  }
  Address const start = reinterpret_cast<Address>(raw);
  Address const base = (start + align - 1) / align * align;
  if (base > start) ::munmap(raw, base - start);
  if (start + padded > base + size) ::munmap(reinterpret_cast<void*>(base + size), start + padded - base - size);

  std::lock_guard lock(s.mutex);
  try {
    s.ranges.emplace(base, size);
  } catch (...) {
    ::munmap(reinterpret_cast<void*>(base), size);
    throw;
  }
  s.bytes_reserved += size;
  return base;
}

void HostBackend::free_range(Address base, std::size_t size) noexcept {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  auto const it = s.ranges.find(base);
  bool const known = it != s.ranges.end() && it->second == size;
  assert(known && "HostBackend::free_range: not a range reserved here (base and size must match)");
  if (!known) return;
  bool const mapped = s.span_touches_mapping(base, size);
  assert(!mapped && "HostBackend::free_range: the range still has mappings; unmap them first");
  if (mapped) return;
  ::munmap(reinterpret_cast<void*>(base), size);
  s.ranges.erase(it);
  s.bytes_reserved -= size;
}

ChunkHandle HostBackend::create_chunk(std::size_t size, const ChunkProperties& props) {
  State& s = *state_;
  constexpr std::string_view call = "HostBackend::create_chunk";
  s.check_granular(call, "size", size);
  if (size > static_cast<std::size_t>(INT64_MAX)) {
    throw_invalid_argument(call, "size " + std::to_string(size) + " does not fit a file offset");
  }
  std::string const what = "creating a chunk of " + std::to_string(size) + " bytes";

  // The bytes count as in use from the limit check on (so concurrent calls cannot both pass it);
  // the kernel work runs outside the lock and the hold is given back if it fails.
  {
    std::lock_guard lock(s.mutex);
    std::size_t const limit = s.options.physical_limit;
    if (limit != 0 && (size > limit || s.bytes_physical > limit - size)) {
      ErrorDetails details;
      details.call = std::string(call);
      details.code_name = "physical limit reached";
      details.context = what + ": " + std::to_string(s.bytes_physical) + " of the " + std::to_string(limit) +
                        " bytes allowed (HostBackend::Options::physical_limit) are in use";
      throw OutOfMemory(std::move(details));
    }
    s.bytes_physical += size;
  }
  struct TallyHold {
    State& state;
    std::size_t bytes;
    ~TallyHold() {
      if (bytes == 0) return;
      std::lock_guard lock(state.mutex);
      state.bytes_physical -= bytes;
    }
  } hold{s, size};

  UniqueFd memfd(::memfd_create("cuvmm-chunk", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!memfd) throw_errno("memfd_create", errno, what);
  int error = 0;
  do {
    error = ::fallocate(memfd.get(), 0, 0, static_cast<off_t>(size)) == 0 ? 0 : errno;
  } while (error == EINTR);
  if (error != 0) throw_errno("fallocate", error, what);
  if (::fcntl(memfd.get(), F_ADD_SEALS, chunk_seals) != 0) throw_errno("fcntl(F_ADD_SEALS)", errno, what);

  auto chunk = std::make_shared<State::Chunk>();
  chunk->info = ChunkInfo{size, props.device, props.shareable, false};
  int const key = memfd.get();
  chunk->memfd = std::move(memfd);  // from here on, `chunk` closes the memfd if anything throws
  std::lock_guard lock(s.mutex);
  s.chunks.emplace(key, chunk);
  hold.bytes = 0;  // the chunk now holds them
  return ChunkHandle{static_cast<std::uint64_t>(key)};
}

void HostBackend::release_chunk(ChunkHandle handle) noexcept {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  auto const it = handle.value <= static_cast<std::uint64_t>(INT32_MAX)
                      ? s.chunks.find(static_cast<int>(handle.value))
                      : s.chunks.end();
  assert(it != s.chunks.end() && "HostBackend::release_chunk: unknown chunk handle");
  if (it == s.chunks.end()) return;
  std::shared_ptr<State::Chunk> const chunk = std::move(it->second);
  s.chunks.erase(it);
  chunk->memfd.reset();  // mappings keep the memory itself alive
  s.forget_if_unused(*chunk);
}

ChunkInfo HostBackend::chunk_info(ChunkHandle handle) const {
  std::lock_guard lock(state_->mutex);
  return state_->chunk("HostBackend::chunk_info", handle)->info;
}

void HostBackend::map(Address address, std::size_t size, ChunkHandle handle) {
  State& s = *state_;
  constexpr std::string_view call = "HostBackend::map";
  std::lock_guard lock(s.mutex);
  const std::shared_ptr<State::Chunk>& chunk = s.chunk(call, handle);
  if (size != chunk->info.size) {
    throw_invalid_argument(call, "size " + std::to_string(size) + " is not the chunk's size " +
                                     std::to_string(chunk->info.size) + ": only whole chunks are mapped");
  }
  if (address % s.options.granularity != 0 || wraps(address, size)) {
    throw_invalid_argument(call, "address " + hex(address) + " is not a multiple of the granularity " +
                                     std::to_string(s.options.granularity));
  }
  if (!s.span_reserved(address, size)) {
    throw_invalid_argument(call, span_text(address, size) + " is not inside a range reserved by this backend");
  }
  if (s.span_touches_mapping(address, size)) {
    throw_invalid_argument(call, span_text(address, size) + " overlaps a chunk already mapped there");
  }
  auto const inserted = s.mappings.emplace(address, State::MappingRecord{size, chunk});
  void* const at = ::mmap(reinterpret_cast<void*>(address), size, PROT_NONE, MAP_FIXED | MAP_SHARED,
                          chunk->memfd.get(), 0);
  if (at == MAP_FAILED) {
    int const error = errno;
    s.mappings.erase(inserted.first);
    throw_errno("mmap", error, "mapping chunk " + std::to_string(handle.value) + " at " + span_text(address, size));
  }
  ++chunk->mappings;
  s.bytes_mapped += size;
}

void HostBackend::unmap(Address address, std::size_t size) noexcept {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  bool const whole = !wraps(address, size) && s.span_is_whole_mappings(address, size);
  assert(whole && "HostBackend::unmap: the span is not a run of whole mappings");
  if (!whole) return;
  void* const at = ::mmap(reinterpret_cast<void*>(address), size, PROT_NONE,
                          MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (at == MAP_FAILED) {
    // The kernel could not allocate its own bookkeeping. Leave the chunk mapped but inaccessible:
    // the reservation still has no hole, and freeing the range unmaps it. Only its memory lingers.
    ::mprotect(reinterpret_cast<void*>(address), size, PROT_NONE);
  }
  auto it = s.mappings.find(address);
  while (it != s.mappings.end() && it->first < address + size) {
    State::Chunk& chunk = *it->second.chunk;
    --chunk.mappings;
    s.bytes_mapped -= it->second.size;
    s.forget_if_unused(chunk);
    it = s.mappings.erase(it);
  }
}

void HostBackend::set_access(Address address, std::size_t size, std::span<const AccessGrant> grants) {
  State& s = *state_;
  constexpr std::string_view call = "HostBackend::set_access";
  if (grants.empty()) throw_invalid_argument(call, "no access grant was given");
  Access most = Access::none;
  for (const AccessGrant& grant : grants) {
    if (grant.access != Access::none && grant.access != Access::read && grant.access != Access::read_write) {
      throw_invalid_argument(call, "unknown access value " + std::to_string(static_cast<int>(grant.access)));
    }
    if (static_cast<int>(grant.access) > static_cast<int>(most)) most = grant.access;
  }
  int const protection = most == Access::read_write ? PROT_READ | PROT_WRITE
                         : most == Access::read     ? PROT_READ
                                                    : PROT_NONE;
  std::lock_guard lock(s.mutex);
  if (size == 0 || wraps(address, size) || !s.span_is_whole_mappings(address, size)) {
    throw_invalid_argument(call, span_text(address, size) + " is not a run of whole mappings side by side");
  }
  if (::mprotect(reinterpret_cast<void*>(address), size, protection) != 0) {
    throw_errno("mprotect", errno, "setting " + std::string(to_string(most)) + " access on " + span_text(address, size));
  }
}

UniqueFd HostBackend::export_posix_fd(ChunkHandle handle) {
  constexpr std::string_view call = "HostBackend::export_posix_fd";
  std::lock_guard lock(state_->mutex);
  const State::Chunk& chunk = state_->shareable_chunk(call, handle, HandleType::posix_fd, "a POSIX fd");
  int const fd = ::fcntl(chunk.memfd.get(), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) throw_errno("fcntl(F_DUPFD_CLOEXEC)", errno, "exporting chunk " + std::to_string(handle.value));
  return UniqueFd(fd);
}

ChunkHandle HostBackend::import_posix_fd(int fd, std::size_t expected_size) {
  State& s = *state_;
  constexpr std::string_view call = "HostBackend::import_posix_fd";
  if (fd < 0) throw_invalid_argument(call, "fd " + std::to_string(fd) + " is not a descriptor");
  std::string const what = "importing fd " + std::to_string(fd);
  struct stat status {};
  if (::fstat(fd, &status) != 0) throw_errno("fstat", errno, what);
  if (!S_ISREG(status.st_mode)) throw_invalid_argument(call, what + ": not a memfd (not even a regular file)");
  std::size_t const size = static_cast<std::size_t>(status.st_size);
  s.check_granular(call, what + ": file size", size);
  if (size != expected_size) {
    throw_invalid_argument(call, what + ": the chunk is " + std::to_string(size) + " bytes, not the " +
                                     std::to_string(expected_size) + " announced");
  }
  int const flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) throw_errno("fcntl(F_GETFL)", errno, what);
  if ((flags & O_ACCMODE) != O_RDWR) throw_invalid_argument(call, what + ": not open for reading and writing");
  int const seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0 && errno != EINVAL) throw_errno("fcntl(F_GET_SEALS)", errno, what);
  if (seals < 0) throw_invalid_argument(call, what + ": a regular file, not a memfd");
  if ((seals & F_SEAL_SHRINK) == 0) {
    throw_invalid_argument(call, what + ": a memfd not sealed against shrinking (F_SEAL_SHRINK), which its "
                                        "sender could truncate under the mapping");
  }

  UniqueFd own(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!own) throw_errno("fcntl(F_DUPFD_CLOEXEC)", errno, what);
  auto chunk = std::make_shared<State::Chunk>();
  chunk->info = ChunkInfo{size, 0, HandleType::posix_fd, false};
  int const key = own.get();
  chunk->memfd = std::move(own);
  std::lock_guard lock(s.mutex);
  s.chunks.emplace(key, chunk);
  s.bytes_physical += size;
  return ChunkHandle{static_cast<std::uint64_t>(key)};
}

namespace {

/// The bytes of a host fabric handle (see the note at the top of this file).
constexpr char host_handle_tag[8] = {'c', 'u', 'v', 'm', 'm', 'h', 's', 't'};
constexpr std::uint32_t host_handle_version = 1;
struct HostHandleFields {
  std::uint32_t pid = 0;
  std::uint32_t fd = 0;
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  std::uint64_t size = 0;
};
constexpr std::size_t tag_at = 0, version_at = 8, pid_at = 12, fd_at = 16, device_at = 24, inode_at = 32,
                      size_at = 40, end_at = 48;

template <class Int>
void put_bytes(FabricHandle& handle, std::size_t at, Int value) {
  detail::put_little_endian(handle.data, at, value);
}

template <class Int>
Int get_bytes(const FabricHandle& handle, std::size_t at) {
  return detail::get_little_endian<Int>(handle.data, at);
}

/// A descriptor for fd `fd` of process `pid`: pidfd_getfd, else a reopen through /proc.
UniqueFd open_peer_fd(std::uint32_t pid, std::uint32_t fd, const std::string& what) {
  constexpr std::string_view call = "HostBackend::import_fabric";
  UniqueFd process(static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0)));
  if (!process && errno == ESRCH)
    throw_invalid_argument(call, what + ": process " + std::to_string(pid) +
                                     " does not exist (a host fabric handle lives only as long as its exporter)");
  if (!process) throw_errno("pidfd_open", errno, what);
  UniqueFd got(static_cast<int>(::syscall(SYS_pidfd_getfd, process.get(), static_cast<int>(fd), 0)));
  if (got) return got;  // pidfd_getfd sets close-on-exec
  int const error = errno;
  if (error == EBADF)
    throw_invalid_argument(call, what + ": process " + std::to_string(pid) + " has no fd " + std::to_string(fd) +
                                     " (the chunk was released)");
  if (error != EPERM && error != ENOSYS) throw_errno("pidfd_getfd", error, what);
  std::string const path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  got.reset(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!got) throw_errno("open", errno, what + " through " + path + " (pidfd_getfd was refused with errno " + std::to_string(error) + ")");
  return got;
}

}  // namespace

FabricHandle HostBackend::export_fabric(ChunkHandle handle) {
  constexpr std::string_view call = "HostBackend::export_fabric";
  std::lock_guard lock(state_->mutex);
  const State::Chunk& chunk = state_->shareable_chunk(call, handle, HandleType::fabric, "a fabric handle");
  struct stat status {};
  if (::fstat(chunk.memfd.get(), &status) != 0) throw_errno("fstat", errno, "exporting chunk " + std::to_string(handle.value));
  FabricHandle exported;
  std::memcpy(exported.data, host_handle_tag, sizeof host_handle_tag);
  put_bytes(exported, version_at, host_handle_version);
  put_bytes(exported, pid_at, static_cast<std::uint32_t>(::getpid()));
  put_bytes(exported, fd_at, static_cast<std::uint32_t>(chunk.memfd.get()));
  put_bytes(exported, device_at, static_cast<std::uint64_t>(status.st_dev));
  put_bytes(exported, inode_at, static_cast<std::uint64_t>(status.st_ino));
  put_bytes(exported, size_at, static_cast<std::uint64_t>(chunk.info.size));
  return exported;
}

ChunkHandle HostBackend::import_fabric(const FabricHandle& handle, std::size_t size) {
  constexpr std::string_view call = "HostBackend::import_fabric";
  bool const tagged = std::memcmp(handle.data, host_handle_tag, sizeof host_handle_tag) == 0;
  bool padding_clear = get_bytes<std::uint32_t>(handle, 20) == 0;
  for (std::size_t i = end_at; i < sizeof handle.data; ++i) padding_clear = padding_clear && handle.data[i] == std::byte{0};
  if (!tagged || get_bytes<std::uint32_t>(handle, version_at) != host_handle_version || !padding_clear)
    throw_invalid_argument(call, "not a host fabric handle of version " + std::to_string(host_handle_version) +
                                     " (a CUmemFabricHandle, or forged bytes?)");
  HostHandleFields const fields{get_bytes<std::uint32_t>(handle, pid_at), get_bytes<std::uint32_t>(handle, fd_at),
                                get_bytes<std::uint64_t>(handle, device_at), get_bytes<std::uint64_t>(handle, inode_at),
                                get_bytes<std::uint64_t>(handle, size_at)};
  std::string const what = "importing fd " + std::to_string(fields.fd) + " of process " + std::to_string(fields.pid);
  if (fields.size != size)
    throw_invalid_argument(call, what + ": the handle is of a " + std::to_string(fields.size) + "-byte chunk, not the " +
                                     std::to_string(size) + " announced");
  UniqueFd const peer_fd = open_peer_fd(fields.pid, fields.fd, what);
  struct stat status {};
  if (::fstat(peer_fd.get(), &status) != 0) throw_errno("fstat", errno, what);
  if (static_cast<std::uint64_t>(status.st_dev) != fields.device || static_cast<std::uint64_t>(status.st_ino) != fields.inode)
    throw_invalid_argument(call, what + ": that fd is no longer the exported chunk (its inode differs)");
  ChunkHandle const imported = import_posix_fd(peer_fd.get(), size);
  std::lock_guard lock(state_->mutex);
  // (Another thread may already have released the new handle: then there is nothing to record.)
  if (auto const found = state_->chunks.find(static_cast<int>(imported.value)); found != state_->chunks.end())
    found->second->info.shareable = HandleType::fabric;
  return imported;
}

LiveCounts HostBackend::live_counts() const noexcept {
  const State& s = *state_;
  std::lock_guard lock(s.mutex);
  return LiveCounts{s.ranges.size(), s.chunks.size(), s.mappings.size(),
                    s.bytes_reserved, s.bytes_physical, s.bytes_mapped};
}

}  // namespace cuvmm
