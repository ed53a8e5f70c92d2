// HostBackend: the backend contract on plain Linux virtual memory.
//
// What it owns: every range it reserved (PROT_NONE anonymous mappings), every chunk it created or
// imported (one memfd each; the ChunkHandle value is the memfd number), and a BackendLedger
// (src/backend/ledger.hpp) that books them with the mappings, behind one mutex. The ledger's
// checks are the CudaBackend's too, so both backends accept and refuse the same calls.
//
// How each call maps onto the kernel:
//  - reserve:      mmap(PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE) of size + alignment,
//                  then munmap of the head and tail so the kept part is aligned.
//  - create_chunk: first a check against the memory the machine has free (Options::available_memory,
//                  else host_available_memory_bytes(): MemAvailable and the cgroup limits), since
//                  fallocate on a memfd does not refuse more than that: the kernel's OOM killer
//                  acts instead, and may kill another process. Then memfd_create(MFD_CLOEXEC |
//                  MFD_ALLOW_SEALING) + fallocate, so the pages exist now:
//                  exhaustion is OutOfMemory at this call, never a SIGBUS at first touch; then sealed
//                  against shrinking and growing (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), so no
//                  process that holds the fd can truncate the memory under another's mapping.
//  - map:          mmap(MAP_FIXED | MAP_SHARED, PROT_NONE) of the whole memfd. MAP_FIXED silently
//                  replaces whatever is there, so the books must first show the span reserved by us
//                  and not mapped; that check is what keeps this call from corrupting the process.
//                  Then madvise(MADV_DONTFORK): a forked child does not inherit the mapping.
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
// Invariants: the ledger's (chunk, range and mapping sizes are multiples of the granularity; map()
// maps whole chunks into reserved, unmapped spans, which may cross the boundary of adjacent
// ranges; set_access() and unmap() cover runs of whole mappings; a range is freed only when no
// mapping overlaps it; precondition errors name the driver call, e.g. "cuMemMap"). Releasing a
// chunk that is still mapped closes its memfd but its memory stays valid until the last mapping
// goes (as with cuMemRelease): it leaves LiveCounts::chunks, its bytes stay in bytes_physical.
// Options::physical_limit caps bytes_physical at create_chunk (OutOfMemory past it); an imported
// chunk counts in bytes_physical (this process now holds that memory) but is never refused, since
// importing allocates nothing. memory_info() reports the limit minus bytes_physical when one is set,
// else the machine's total and what host_available_memory_bytes() (or available_memory) leaves.
//
// Fork: the memory is not inherited (as device memory is not). Mappings are MADV_DONTFORK, and a
// process other than the one that made the backend (a forked child, whose copy of the books names
// pages it does not have) is refused every acquiring call with Unsupported. Its releasing calls
// (destructors) act on its own copies only: its address space, its copies of the memfds. Without
// this, a child and its parent would both hand out the same pages.
//
// What it never does: round sizes, cache chunks, or touch memory it did not reserve. Violated
// preconditions of acquiring calls throw cuvmm::Error; the noexcept releasing calls assert in debug
// builds and otherwise ignore the bad request, leaving everything as it was.
#include <cuvmm/host_backend.hpp>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <unistd.h>
#include <utility>
#include <vector>

#include <cuvmm/error.hpp>

#include "backend/ledger.hpp"
#include "support/little_endian.hpp"

namespace cuvmm {
namespace {

std::size_t system_page_size() noexcept {
  long const page = ::sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<std::size_t>(page) : std::size_t{4096};
}

/// The seals of every chunk's memfd: its size is fixed for good.
constexpr int chunk_seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

std::string hex(Address address) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%" PRIxPTR, address);
  return text;
}

/// Smallest common multiple of a and b, or 0 when it does not fit a size_t.
std::size_t common_multiple(std::size_t a, std::size_t b) noexcept {
  std::size_t x = a;
  std::size_t y = b;
  while (y != 0) x = std::exchange(y, x % y);  // x = gcd(a, b)
  std::size_t const factor = a / x;
  return factor > SIZE_MAX / b ? 0 : factor * b;
}

/// The start of file `path` (up to 8 KiB, enough for /proc/meminfo and a cgroup's memory.stat),
/// read with plain system calls: this runs at every create_chunk. Empty when it cannot be read.
std::string file_text(const char* path) {
  int const fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string text(8 * KiB, '\0');
  std::size_t filled = 0;
  while (filled < text.size()) {
    ssize_t const got = ::read(fd, text.data() + filled, text.size() - filled);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    filled += static_cast<std::size_t>(got);
  }
  ::close(fd);
  text.resize(filled);
  return text;
}

/// The number after `key` (at the start of a line, then blanks) in `text`; nullopt when absent or
/// not a number (cgroup v2's "max").
std::optional<std::size_t> number_after(std::string_view text, std::string_view key) {
  for (std::size_t at = 0; at < text.size();) {
    std::size_t const line_end = std::min(text.find('\n', at), text.size());
    std::string_view const line = text.substr(at, line_end - at);
    at = line_end + 1;
    if (!line.starts_with(key)) continue;
    std::string_view rest = line.substr(key.size());
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    if (rest.empty() || rest.front() < '0' || rest.front() > '9') return std::nullopt;
    unsigned long long value = 0;
    for (char const c : rest) {
      if (c < '0' || c > '9') break;
      if (value > (std::numeric_limits<unsigned long long>::max() - 9) / 10) return std::nullopt;
      value = value * 10 + static_cast<unsigned long long>(c - '0');
    }
    return static_cast<std::size_t>(value);
  }
  return std::nullopt;
}

/// MemAvailable and MemTotal from /proc/meminfo in bytes; 0 for what cannot be read.
struct MachineMemory {
  std::size_t available = 0;
  std::size_t total = 0;
};
MachineMemory machine_memory() {
  std::string const meminfo = file_text("/proc/meminfo");
  return {number_after(meminfo, "MemAvailable:").value_or(0) * KiB, number_after(meminfo, "MemTotal:").value_or(0) * KiB};
}

/// A directory of one of this process's memory cgroups, or of one above it.
struct MemoryCgroup {
  std::string limit;      // memory.max (v2) or memory.limit_in_bytes (v1)
  std::string usage;      // memory.current or memory.usage_in_bytes
  std::string stat;       // memory.stat
  std::string_view inactive;  // the key of reclaimable file pages in memory.stat
};

/// The memory cgroups whose limits apply to this process: its own and those above it, in each
/// hierarchy that has the memory controller (/proc/self/cgroup lines are "id:controllers:path";
/// v2's has no controllers, v1's names "memory"). Found once per process: a process moved to
/// another cgroup later is still checked against the first one's limits.
const std::vector<MemoryCgroup>& memory_cgroups() {
  static std::vector<MemoryCgroup> const found = [] {
    std::vector<MemoryCgroup> cgroups;
    std::string const self = file_text("/proc/self/cgroup");
    for (std::size_t at = 0; at < self.size();) {
      std::size_t const line_end = std::min(self.find('\n', at), self.size());
      std::string const line = self.substr(at, line_end - at);
      at = line_end + 1;
      std::size_t const first = line.find(':');
      std::size_t const second = first == std::string::npos ? first : line.find(':', first + 1);
      if (second == std::string::npos) continue;
      std::string const controllers = "," + line.substr(first + 1, second - first - 1) + ",";
      bool const v2 = controllers == ",,";
      if (!v2 && controllers.find(",memory,") == std::string::npos) continue;
      std::string const root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
      for (std::string path = line.substr(second + 1);;) {
        std::string const dir = root + path + (path.ends_with('/') ? "" : "/");
        MemoryCgroup cgroup{dir + (v2 ? "memory.max" : "memory.limit_in_bytes"),
                            dir + (v2 ? "memory.current" : "memory.usage_in_bytes"), dir + "memory.stat",
                            v2 ? "inactive_file" : "total_inactive_file"};
        if (::access(cgroup.limit.c_str(), R_OK) == 0) cgroups.push_back(std::move(cgroup));
        if (path.empty() || path == "/") break;
        path.erase(path.rfind('/'));
        if (path.empty()) path = "/";
      }
    }
    return cgroups;
  }();
  return found;
}

/// The least that any of this process's memory cgroups leaves: its limit minus the usage it
/// cannot reclaim (inactive file pages it can). SIZE_MAX where none has a limit below the
/// machine's memory `machine_total` (0: unknown): a limit as large leaves at least what the machine
/// has free, and reading a cgroup's usage (memory.stat above all) is the costly part.
std::size_t cgroups_room(std::size_t machine_total) {
  std::size_t room = std::numeric_limits<std::size_t>::max();
  std::size_t const unlimited = machine_total != 0 ? machine_total : std::size_t{1} << 62;
  for (const MemoryCgroup& cgroup : memory_cgroups()) {
    std::optional<std::size_t> const limit = number_after(file_text(cgroup.limit.c_str()), "");
    if (!limit || *limit >= unlimited) continue;  // "max" (v2), or as large as the machine (v1 says ~2^63)
    std::size_t const usage = number_after(file_text(cgroup.usage.c_str()), "").value_or(0);
    std::size_t const reclaimable =
        std::min(usage, number_after(file_text(cgroup.stat.c_str()), std::string(cgroup.inactive) + " ").value_or(0));
    std::size_t const held = usage - reclaimable;
    room = std::min(room, *limit > held ? *limit - held : 0);
  }
  return room;
}

}  // namespace

std::size_t host_available_memory_bytes() {
  MachineMemory const machine = machine_memory();
  std::size_t const room = cgroups_room(machine.total);
  return machine.available == 0 ? room : std::min(machine.available, room);
}

struct HostBackend::State {
  Options options;
  std::size_t page_size = 0;
  pid_t owner = ::getpid();  // the process whose memory this is (a forked child is refused)

  mutable std::mutex mutex;          // guards everything below
  detail::BackendLedger ledger;      // ranges, chunks, mappings and the checks on them
  std::map<int, UniqueFd> memfds;    // memfd of each unreleased chunk handle (the handle's value)
  std::size_t bytes_held = 0;        // bytes of chunks being created, held against physical_limit

  explicit State(std::size_t granularity) : ledger(granularity) {}

  /// The memfd of a live chunk, which must have been created shareable as `type` (named `what`).
  int shareable_memfd(BackendOp op, ChunkHandle handle, HandleType type, std::string_view what) const {
    const detail::BackendLedger::Chunk& found = ledger.chunk(handle, op);
    if (!found.info || !contains(found.info->shareable, type)) {
      throw_invalid_argument(detail::call_name(op), "chunk " + std::to_string(handle.value) +
                                                        " was not created shareable as " + std::string(what) +
                                                        " (ChunkProperties::shareable)");
    }
    return memfds.at(static_cast<int>(handle.value)).get();
  }

  /// Whether this is the process that made the backend (false in a forked child).
  bool in_owner() const noexcept { return ::getpid() == owner; }

  /// Refuses an acquiring call `op` in a forked child (see the fork note at the top).
  void check_owner(BackendOp op) const {
    if (in_owner()) return;
    throw_unsupported_capability(
        "host-backend memory in a forked child",
        "make a new HostBackend in the child: its memory is not inherited across fork, as device memory is not",
        detail::call_name(op),
        "process " + std::to_string(::getpid()) + " calls a HostBackend that process " + std::to_string(owner) +
            " made; its mappings were not inherited and its books name the parent's pages");
  }
};

HostBackend::HostBackend() : HostBackend(Options{}) {}

HostBackend::HostBackend(Options options) {
  std::size_t const page_size = system_page_size();
  if (options.granularity == 0 || options.granularity % page_size != 0) {
    throw_invalid_argument("HostBackend", "granularity " + std::to_string(options.granularity) +
                                              " is not a positive multiple of the page size " +
                                              std::to_string(page_size));
  }
  state_ = std::make_unique<State>(options.granularity);
  state_->page_size = page_size;
  state_->options = options;
}

// Whatever the caller leaked is given back to the kernel: unmapping the ranges removes every
// mapping in them, and the memfds close with the State.
HostBackend::~HostBackend() {
  for (const auto& [base, size] : state_->ledger.ranges()) ::munmap(reinterpret_cast<void*>(base), size);
}

const HostBackend::Options& HostBackend::options() const noexcept { return state_->options; }

std::size_t HostBackend::granularity(const ChunkProperties&, GranularityKind) const {
  return state_->options.granularity;
}

Backend::MemoryInfo HostBackend::memory_info(int) const {
  MemoryInfo info;
  if (state_->options.physical_limit != 0) {
    std::lock_guard lock(state_->mutex);
    std::size_t const in_use = state_->ledger.counts().bytes_physical;
    info.total = state_->options.physical_limit;
    info.free = info.total > in_use ? info.total - in_use : 0;
    return info;
  }
  struct sysinfo system {};
  if (::sysinfo(&system) != 0) throw_errno("sysinfo", errno, "reading the machine's memory size");
  info.total = static_cast<std::size_t>(system.totalram) * system.mem_unit;
  if (state_->options.available_memory != 0) {
    std::lock_guard lock(state_->mutex);
    std::size_t const in_use = state_->ledger.counts().bytes_physical;
    info.free = state_->options.available_memory > in_use ? state_->options.available_memory - in_use : 0;
  } else {
    info.free = host_available_memory_bytes();
    if (info.free == std::numeric_limits<std::size_t>::max())
      info.free = static_cast<std::size_t>(system.freeram) * system.mem_unit;
  }
  info.free = std::min(info.free, info.total);
  return info;
}

Address HostBackend::reserve(std::size_t size, std::size_t alignment) {
  State& s = *state_;
  s.check_owner(BackendOp::reserve);
  s.ledger.check_reserve(size, alignment);  // const and lock-free: the granularity never changes
  // The base is aligned to the granularity (so offsets that are multiples of it are valid map
  // targets) and to the requested alignment; at least a page, as mmap returns.
  std::size_t const align = common_multiple(alignment == 0 ? s.options.granularity : alignment,
                                            s.options.granularity);
  std::size_t const padding = align > s.page_size ? align - s.page_size : 0;
  if (align == 0 || size > SIZE_MAX - padding) {
    throw_invalid_argument(detail::call_name(BackendOp::reserve), "size " + std::to_string(size) +
                                                                      " with alignment " + std::to_string(alignment) +
                                                                      " overflows");
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
    s.ledger.add_range(base, size);
  } catch (...) {
    ::munmap(reinterpret_cast<void*>(base), size);
    throw;
  }
  return base;
}

void HostBackend::free_range(Address base, std::size_t size) noexcept {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  [[maybe_unused]] const char* const refusal = s.ledger.free_range_refusal(base, size);
  assert(refusal == nullptr && "HostBackend::free_range: refused (see BackendLedger::free_range_refusal)");
  if (refusal != nullptr) return;
  ::munmap(reinterpret_cast<void*>(base), size);
  s.ledger.remove_range(base);
}

ChunkHandle HostBackend::create_chunk(std::size_t size, const ChunkProperties& props) {
  State& s = *state_;
  std::string_view const call = detail::call_name(BackendOp::create_chunk);
  s.check_owner(BackendOp::create_chunk);
  s.ledger.check_create(size, s.options.granularity);
  if (size > static_cast<std::size_t>(INT64_MAX)) {
    throw_invalid_argument(call, "size " + std::to_string(size) + " does not fit a file offset");
  }
  std::string const what = "creating a chunk of " + std::to_string(size) + " bytes";

  // The machine's free memory is read before the lock (files under /proc and /sys).
  std::size_t const machine_free = s.options.available_memory == 0 ? host_available_memory_bytes() : 0;
  // The bytes are held against the limits from the check on (so concurrent calls cannot both pass
  // them); the kernel work runs outside the lock and the hold is given back if it fails.
  {
    std::lock_guard lock(s.mutex);
    std::size_t const limit = s.options.physical_limit;
    std::size_t const in_use = s.ledger.counts().bytes_physical + s.bytes_held;
    if (limit != 0 && (size > limit || in_use > limit - size)) {
      throw_out_of_memory(call, what + ": " + std::to_string(in_use) + " of the " + std::to_string(limit) +
                                    " bytes allowed (HostBackend::Options::physical_limit) are in use");
    }
    // Chunks being created by other threads may not show in the machine's reading yet.
    std::size_t const taken = s.options.available_memory != 0 ? in_use : s.bytes_held;
    std::size_t const available = s.options.available_memory != 0 ? s.options.available_memory : machine_free;
    std::size_t const free = available > taken ? available - taken : 0;
    if (size > free) {
      throw_out_of_memory(call, what + ": the machine has " + std::to_string(free) + " bytes free for it (" +
                                    (s.options.available_memory != 0
                                         ? std::string("HostBackend::Options::available_memory")
                                         : std::string("MemAvailable and the cgroup's memory limit")) +
                                    "); the kernel would have to kill a process to give more");
    }
    s.bytes_held += size;
  }
  struct Hold {
    State& state;
    std::size_t bytes;
    ~Hold() {
      std::lock_guard lock(state.mutex);
      state.bytes_held -= bytes;
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

  int const key = memfd.get();
  ChunkHandle const handle{static_cast<std::uint64_t>(key)};
  std::lock_guard lock(s.mutex);
  s.memfds.emplace(key, std::move(memfd));
  try {
    s.ledger.add_chunk(handle, size, ChunkInfo{size, props.device, props.shareable, false});
  } catch (...) {
    s.memfds.erase(key);
    throw;
  }
  return handle;
}

void HostBackend::release_chunk(ChunkHandle handle) noexcept {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  [[maybe_unused]] const char* const refusal = s.ledger.release_refusal(handle);
  assert(refusal == nullptr && "HostBackend::release_chunk: unknown chunk handle");
  if (refusal != nullptr) return;
  s.memfds.erase(static_cast<int>(handle.value));  // closes it; mappings keep the memory itself alive
  s.ledger.remove_chunk(handle);
}

ChunkInfo HostBackend::chunk_info(ChunkHandle handle) const {
  state_->check_owner(BackendOp::chunk_info);
  std::lock_guard lock(state_->mutex);
  return *state_->ledger.chunk(handle, BackendOp::chunk_info).info;
}

void HostBackend::map(Address address, std::size_t size, ChunkHandle handle) {
  State& s = *state_;
  s.check_owner(BackendOp::map);
  // MAP_FIXED replaces whatever is there: the check and the mmap happen under one lock.
  std::lock_guard lock(s.mutex);
  s.ledger.check_map(address, size, handle);
  void* const at = ::mmap(reinterpret_cast<void*>(address), size, PROT_NONE, MAP_FIXED | MAP_SHARED,
                          s.memfds.at(static_cast<int>(handle.value)).get(), 0);
  if (at == MAP_FAILED) {
    throw_errno("mmap", errno, "mapping chunk " + std::to_string(handle.value) + " at " + hex(address));
  }
  try {
    if (::madvise(at, size, MADV_DONTFORK) != 0)  // not inherited by a forked child (fork note above)
      throw_errno("madvise(MADV_DONTFORK)", errno, "mapping chunk " + std::to_string(handle.value) + " at " + hex(address));
    s.ledger.add_mapping(address, size, handle);
  } catch (...) {
    ::mmap(reinterpret_cast<void*>(address), size, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
           -1, 0);
    throw;
  }
}

void HostBackend::unmap(Address address, std::size_t size) noexcept {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  [[maybe_unused]] const char* const refusal = s.ledger.unmap_refusal(address, size);
  assert(refusal == nullptr && "HostBackend::unmap: the span is not a run of whole mappings");
  if (refusal != nullptr) return;
  void* const at = ::mmap(reinterpret_cast<void*>(address), size, PROT_NONE,
                          MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (at == MAP_FAILED) {
    // The kernel could not allocate its own bookkeeping. Leave the chunk mapped but inaccessible:
    // the reservation still has no hole, and freeing the range unmaps it. Only its memory lingers.
    ::mprotect(reinterpret_cast<void*>(address), size, PROT_NONE);
  }
  s.ledger.remove_mappings(address, size);
}

void HostBackend::set_access(Address address, std::size_t size, std::span<const AccessGrant> grants) {
  State& s = *state_;
  s.check_owner(BackendOp::set_access);
  std::lock_guard lock(s.mutex);
  s.ledger.check_set_access(address, size, grants);
  // The host has one accessor (the CPU): the most permissive grant applies to the whole span.
  Access most = Access::none;
  for (const AccessGrant& grant : grants) {
    if (static_cast<int>(grant.access) > static_cast<int>(most)) most = grant.access;
  }
  int const protection = most == Access::read_write ? PROT_READ | PROT_WRITE
                         : most == Access::read     ? PROT_READ
                                                    : PROT_NONE;
  if (::mprotect(reinterpret_cast<void*>(address), size, protection) != 0) {
    throw_errno("mprotect", errno, "setting " + std::string(to_string(most)) + " access on " + hex(address) +
                                       " (" + std::to_string(size) + " bytes)");
  }
}

UniqueFd HostBackend::export_posix_fd(ChunkHandle handle) {
  state_->check_owner(BackendOp::export_posix_fd);
  std::lock_guard lock(state_->mutex);
  int const memfd = state_->shareable_memfd(BackendOp::export_posix_fd, handle, HandleType::posix_fd, "a POSIX fd");
  int const fd = ::fcntl(memfd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) throw_errno("fcntl(F_DUPFD_CLOEXEC)", errno, "exporting chunk " + std::to_string(handle.value));
  return UniqueFd(fd);
}

ChunkHandle HostBackend::import_posix_fd(int fd, std::size_t expected_size) {
  State& s = *state_;
  std::string_view const call = detail::call_name(BackendOp::import_posix_fd);
  s.check_owner(BackendOp::import_posix_fd);
  if (fd < 0) throw_invalid_argument(call, "fd " + std::to_string(fd) + " is not a descriptor");
  std::string const what = "importing fd " + std::to_string(fd);
  struct stat status {};
  if (::fstat(fd, &status) != 0) throw_errno("fstat", errno, what);
  if (!S_ISREG(status.st_mode)) throw_invalid_argument(call, what + ": not a memfd (not even a regular file)");
  std::size_t const size = static_cast<std::size_t>(status.st_size);
  if (size == 0 || size % s.options.granularity != 0) {
    throw_invalid_argument(call, what + ": file size " + std::to_string(size) +
                                     " is not a positive multiple of the granularity " +
                                     std::to_string(s.options.granularity));
  }
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
  int const key = own.get();
  ChunkHandle const imported{static_cast<std::uint64_t>(key)};
  std::lock_guard lock(s.mutex);
  s.memfds.emplace(key, std::move(own));
  try {
    s.ledger.add_chunk(imported, size, ChunkInfo{size, 0, HandleType::posix_fd, false});
  } catch (...) {
    s.memfds.erase(key);
    throw;
  }
  return imported;
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
  std::string_view const call = detail::call_name(BackendOp::import_fabric);
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
  state_->check_owner(BackendOp::export_fabric);
  std::lock_guard lock(state_->mutex);
  int const memfd = state_->shareable_memfd(BackendOp::export_fabric, handle, HandleType::fabric, "a fabric handle");
  std::size_t const size = state_->ledger.chunk(handle, BackendOp::export_fabric).size;
  struct stat status {};
  if (::fstat(memfd, &status) != 0) throw_errno("fstat", errno, "exporting chunk " + std::to_string(handle.value));
  FabricHandle exported;
  std::memcpy(exported.data, host_handle_tag, sizeof host_handle_tag);
  put_bytes(exported, version_at, host_handle_version);
  put_bytes(exported, pid_at, static_cast<std::uint32_t>(::getpid()));
  put_bytes(exported, fd_at, static_cast<std::uint32_t>(memfd));
  put_bytes(exported, device_at, static_cast<std::uint64_t>(status.st_dev));
  put_bytes(exported, inode_at, static_cast<std::uint64_t>(status.st_ino));
  put_bytes(exported, size_at, static_cast<std::uint64_t>(size));
  return exported;
}

ChunkHandle HostBackend::import_fabric(const FabricHandle& handle, std::size_t size) {
  std::string_view const call = detail::call_name(BackendOp::import_fabric);
  state_->check_owner(BackendOp::import_fabric);
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
  if (detail::BackendLedger::Chunk* const found = state_->ledger.find_chunk(imported); found && found->info)
    found->info->shareable = HandleType::fabric;
  return imported;
}

LiveCounts HostBackend::live_counts() const noexcept {
  std::lock_guard lock(state_->mutex);
  return state_->ledger.counts();
}

}  // namespace cuvmm
