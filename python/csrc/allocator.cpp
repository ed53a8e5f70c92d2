// cuvmm_torch._C: PyTorch's CUDA allocations served by cuvmm's Arena, with PyTorch's own errors.
//
// Owns: one Arena per device index, made on the first request for that device and never destroyed
// (PyTorch frees tensors during interpreter shutdown, after static destructors may have run; the
// driver takes the memory back when the process ends). Its options are the defaults with what
// $CUVMM_ARENA_CONF sets (cuvmm::parse_arena_options), read when it is made; a bad text is a
// ValueError naming the variable, and no arena is made. A test hook may install a host-backend
// Arena for an index instead; it then owns that backend too.
//
// Invariants:
// - cuvmm_torch_malloc either returns memory for `size` bytes (null only for 0 bytes, which PyTorch
//   never dereferences) or throws a c10::Error: c10::OutOfMemoryError (Python: torch.OutOfMemoryError)
//   when the Arena cannot back the request, after it reclaimed its cached pages and this file gave the
//   pages backing no allocation back to the device. PyTorch's default allocator throws the same type
//   from the same place, so every caller of an allocator is ready for it. It never returns null
//   for a failure: PyTorch 2.11 does not check a pluggable allocator's result.
// - The message says how much was asked, how much the arena holds (live and physical), how much
//   it just gave back and how much the device has free.
// - cuvmm_torch_free never throws (PyTorch calls it from deleters): a bad free is reported on
//   stderr and changes nothing.
//
// Streams are cuvmm::Stream, i.e. CUstream_st*, the type cudaStream_t names: the extension needs no
// CUDA headers, so it builds against a CPU-only torch too.
//
// Never does: call the CUDA driver itself (only the Arena's public API and its backend's
// memory_info), synchronize the device outside the Arena, or touch PyTorch's allocator state.
#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/Exceptions.h>

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include <cuvmm/arena.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/host_backend.hpp>
#include <cuvmm/types.hpp>

#include "arena_dicts.hpp"
#include "growable_tensor.hpp"

namespace py = pybind11;

namespace {

constexpr int max_devices = 64;

/// The defaults with what `text` (the value of $CUVMM_ARENA_CONF) sets; a ValueError naming the
/// variable for a bad text.
cuvmm::ArenaOptions options_from(const std::string& text) {
  try {
    return cuvmm::parse_arena_options(text);
  } catch (const cuvmm::Error& e) {
    throw c10::ValueError(c10::SourceLocation{__func__, __FILE__, static_cast<std::uint32_t>(__LINE__)},
                          std::string("cuvmm_torch: ") + cuvmm::arena_conf_variable + "=\"" + text + "\": " + e.context());
  }
}

/// The arenas' options now: the defaults with what $CUVMM_ARENA_CONF sets.
cuvmm::ArenaOptions options_from_environment() {
  const char* const conf = std::getenv(cuvmm::arena_conf_variable);
  return options_from(conf != nullptr ? conf : "");
}

/// One device index's arena and, for a host-backend test arena, the backend it runs on.
struct DeviceArena {
  std::unique_ptr<cuvmm::Backend> backend;  // null: the Arena's own CUDA backend of the device
  std::unique_ptr<cuvmm::Arena> arena;
};

/// The arenas by device index. Leaked on purpose (see the note at the top).
class ArenaRegistry {
 public:
  static ArenaRegistry& instance() {
    static auto* const registry = new ArenaRegistry;
    return *registry;
  }

  /// The device's arena, made now if it has none.
  cuvmm::Arena& get(int device) {
    check_index(device);
    std::lock_guard const lock(mutex_);
    DeviceArena& slot = slots_[static_cast<std::size_t>(device)];
    if (!slot.arena) {
      cuvmm::ArenaOptions options = options_from_environment();
      options.device = device;
      slot.arena = std::make_unique<cuvmm::Arena>(options);
    }
    return *slot.arena;
  }

  /// The device's arena, or null when nothing was allocated on it yet.
  cuvmm::Arena* find(int device) {
    check_index(device);
    std::lock_guard const lock(mutex_);
    return slots_[static_cast<std::size_t>(device)].arena.get();
  }

  /// Test hook: device index `device` is served by an Arena (with `byte_limit`) over host memory
  /// that reports `device_bytes` in all (HostBackend's physical_limit; 0: the machine's memory).
  void install_host_arena(int device, std::size_t byte_limit, std::size_t address_space_bytes,
                          std::size_t device_bytes) {
    check_index(device);
    std::lock_guard const lock(mutex_);
    DeviceArena& slot = slots_[static_cast<std::size_t>(device)];
    TORCH_CHECK_VALUE(!slot.arena, "cuvmm_torch: device index ", device, " already has an arena");
    cuvmm::HostBackend::Options backend_options;
    backend_options.physical_limit = device_bytes;
    auto backend = std::make_unique<cuvmm::HostBackend>(backend_options);
    cuvmm::ArenaOptions options;
    options.device = device;
    options.byte_limit = byte_limit;
    options.address_space_bytes = address_space_bytes;
    slot.arena = std::make_unique<cuvmm::Arena>(*backend, options);
    slot.backend = std::move(backend);
  }

 private:
  ArenaRegistry() = default;

  static void check_index(int device) {
    TORCH_CHECK_VALUE(device >= 0 && device < max_devices, "cuvmm_torch: device index ", device,
                      " is outside 0..", max_devices - 1);
  }

  std::mutex mutex_;
  std::array<DeviceArena, max_devices> slots_;
};

/// "106.00 GiB (113816633344 bytes)": the unit PyTorch's messages use, then the exact count.
std::string bytes_text(std::size_t bytes) {
  static constexpr std::array<const char*, 4> units = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  const char* unit = "bytes";
  for (const char* u : units) {
    if (value < 1024) break;
    value /= 1024;
    unit = u;
  }
  char text[96];
  if (unit[0] == 'b') {
    std::snprintf(text, sizeof text, "%zu bytes", bytes);
  } else {
    std::snprintf(text, sizeof text, "%.2f %s (%zu bytes)", value, unit, bytes);
  }
  return text;
}

/// The out-of-memory error PyTorch's callers expect, after giving back every page that backs no
/// allocation (the Arena already reclaimed its cached memory for the request itself; what it still
/// holds unused goes back to the device so that other users of the device can have it).
[[noreturn]] void throw_out_of_memory(cuvmm::Arena& arena, std::size_t size, const cuvmm::OutOfMemory& cause) {
  std::size_t given_back = 0;
  std::string trim_failure;
  try {
    given_back = arena.trim();
  } catch (const std::exception& e) {
    trim_failure = std::string("; giving back cached pages failed: ") + e.what();
  }
  cuvmm::ArenaStats const s = arena.stats();
  std::string device_free;
  try {
    auto const info = arena.backend().memory_info(arena.device());
    device_free = bytes_text(info.free) + " free of " + bytes_text(info.total);
  } catch (const std::exception& e) {
    device_free = std::string("unknown free memory (") + e.what() + ")";
  }
  std::string message = "cuvmm: out of memory on device " + std::to_string(arena.device()) + ": tried to allocate " +
                        bytes_text(size) + "; the arena holds " + bytes_text(s.bytes_requested.current) + " in " +
                        std::to_string(s.allocations.current) + " live allocations and " +
                        bytes_text(s.bytes_physical.current) + " of physical memory in all, after giving back " +
                        bytes_text(given_back) + " of cached pages" + trim_failure + "; the device has " + device_free +
                        ". (" + cause.what() + ")";
  throw c10::OutOfMemoryError(c10::SourceLocation{__func__, __FILE__, static_cast<std::uint32_t>(__LINE__)},
                              std::move(message));
}

std::size_t checked_size(ssize_t size) {
  TORCH_CHECK_VALUE(size >= 0, "cuvmm_torch: negative allocation size ", size);
  return static_cast<std::size_t>(size);
}

}  // namespace

extern "C" {

/// PyTorch's allocation hook (torch.cuda.memory.CUDAPluggableAllocator). Throws, never returns
/// null for a failure (see the note at the top).
__attribute__((visibility("default"))) void* cuvmm_torch_malloc(ssize_t size, int device, cuvmm::Stream stream) {
  std::size_t const bytes = checked_size(size);
  cuvmm::Arena& arena = ArenaRegistry::instance().get(device);
  try {
    return arena.allocate(bytes, stream);
  } catch (const cuvmm::OutOfMemory& e) {
    throw_out_of_memory(arena, bytes, e);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "cuvmm: allocating ", bytes, " bytes on device ", device, " failed: ", e.what());
  }
}

/// PyTorch's free hook. Never throws.
__attribute__((visibility("default"))) void cuvmm_torch_free(void* ptr, ssize_t size, int device, cuvmm::Stream stream) {
  try {
    if (cuvmm::Arena* arena = ArenaRegistry::instance().find(device)) {
      arena->deallocate(ptr, static_cast<std::size_t>(size), stream);
    } else {
      std::fprintf(stderr, "cuvmm_torch_free(%p, %zd bytes, device %d): the device has no arena\n", ptr, size, device);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuvmm_torch_free(%p, %zd bytes, device %d): %s\n", ptr, size, device, e.what());
  }
}

}  // extern "C"

namespace {

/// Every ArenaStats field; counters as {"current", "peak", "total"}. None: the device has no arena.
py::object stats(int device) {
  HANDLE_TH_ERRORS
  cuvmm::Arena* arena = ArenaRegistry::instance().find(device);
  if (arena == nullptr) return py::none();
  cuvmm::ArenaStats const s = arena->stats();
  return cuvmm_torch::arena_stats_dict(s);
  END_HANDLE_TH_ERRORS_PYBIND
}

/// Gives the device's unused pages back to the driver; the bytes given back (0: no arena).
std::size_t trim(int device) {
  HANDLE_TH_ERRORS
  cuvmm::Arena* arena = ArenaRegistry::instance().find(device);
  return arena == nullptr ? 0 : arena->trim();
  END_HANDLE_TH_ERRORS_PYBIND
}

/// The options `text` gives (parse_arena_options over the defaults), as a dict; a ValueError for a
/// bad text. enable() checks $CUVMM_ARENA_CONF with it before anything changes.
py::dict arena_options(const std::string& text) {
  HANDLE_TH_ERRORS
  cuvmm::ArenaOptions const o = options_from(text);
  return cuvmm_torch::arena_options_dict(o);
  END_HANDLE_TH_ERRORS_PYBIND
}

void install_host_arena(int device, std::size_t byte_limit, std::size_t address_space_bytes,
                        std::size_t device_bytes) {
  HANDLE_TH_ERRORS
  ArenaRegistry::instance().install_host_arena(device, byte_limit, address_space_bytes, device_bytes);
  END_HANDLE_TH_ERRORS_PYBIND
}

/// Test hook: the very function PyTorch calls, with its errors translated as PyTorch does.
std::uintptr_t malloc_hook(ssize_t size, int device) {
  HANDLE_TH_ERRORS
  return reinterpret_cast<std::uintptr_t>(cuvmm_torch_malloc(size, device, nullptr));
  END_HANDLE_TH_ERRORS_PYBIND
}

void free_hook(std::uintptr_t ptr, ssize_t size, int device) {
  cuvmm_torch_free(reinterpret_cast<void*>(ptr), size, device, nullptr);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "cuvmm's Arena as PyTorch's CUDA allocator (use the cuvmm_torch package, not this module)";
  m.def("stats", &stats, py::arg("device"));
  m.def("stats_of_no_arena", [] { return cuvmm_torch::arena_stats_dict(cuvmm::ArenaStats{}); });
  m.def("trim", &trim, py::arg("device"));
  m.def("arena_options", &arena_options, py::arg("text"));
  m.def("_install_host_arena", &install_host_arena, py::arg("device"), py::arg("byte_limit"),
        py::arg("address_space_bytes"), py::arg("device_bytes"));
  m.def("_malloc", &malloc_hook, py::arg("size"), py::arg("device"));
  m.def("_free", &free_hook, py::arg("ptr"), py::arg("size"), py::arg("device"));
  cuvmm_torch::bind_growable_rows(m);
}
