// cuvmm_torch._C.GrowableRows: the memory behind cuvmm_torch.GrowableTensor, a tensor that grows
// along its first dimension in place.
//
// Owns: a cuvmm::GrowableStorage (an address range reserved once, physical chunks mapped behind its
// end as the tensor grows) on the CUDA backend of one device, or on a HostBackend for CPU tensors
// (machines without a GPU, and the tests that run there), and the row count in use. Rows are
// `row_bytes` each; row i starts at data() + i * row_bytes.
//
// Views: view(begin, end) is an ordinary at::Tensor over rows [begin, end), made with
// at::from_blob. Its deleter holds the memory (a shared Memory) alive, so a view, or a tensor or
// DLPack capsule derived from it, never outlives the memory it reads. The Memory counts the live
// views by how far they reach; shrinking keeps mapped every byte a live view reaches, so no view
// ever points at unmapped memory.
//
// Invariants:
// - data() is fixed from construction to destruction (GrowableStorage invariant 1): growth maps
//   memory behind the end, nothing moves, every view stays valid.
// - size() <= capacity() <= max_rows(). Growth is all-or-nothing: CapacityExceeded and OutOfMemory
//   leave size, capacity and the views as they were.
// - Streams: growth needs none (mapping does not wait for kernels). Unmapping (shrink_to_fit, the
//   last reference going away) first waits, on the host, for every stream the tensor was used on:
//   each operation records PyTorch's current stream on the device (current_stream(), asked of
//   PyTorch's device guard, so the extension needs none of torch's CUDA libraries) and
//   record_stream() adds others, as Tensor.record_stream does for PyTorch's allocator. Nothing
//   else is waited for.
//
// Never does: copy data other than with Tensor::copy_ (append, on the current stream), call the
// CUDA driver itself, or use PyTorch's allocator (its memory is not in torch.cuda.memory_allocated).
#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/detail/device_ops.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/growable_storage.hpp>
#include <cuvmm/host_backend.hpp>

#include "growable_tensor.hpp"

namespace py = pybind11;

namespace {

c10::SourceLocation here(const char* function, std::uint32_t line) { return {function, __FILE__, line}; }

/// The storage, the streams it was used on and the extents of its live views; shared by the
/// GrowableRows and the deleters of its views.
class Memory {
 public:
  Memory(std::unique_ptr<cuvmm::Backend> own_backend, cuvmm::Backend& backend, cuvmm::GrowableOptions options)
      : own_backend_(std::move(own_backend)), storage_(backend, std::move(options)) {}
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;
  /// Waits for the streams the memory was used on, then the storage unmaps everything.
  ~Memory() { wait_streams_no_throw(); }

  cuvmm::GrowableStorage& storage() noexcept { return storage_; }
  bool on_device() const noexcept { return storage_.backend().space() == cuvmm::MemorySpace::device; }

  void record_stream(cuvmm::Stream stream) {
    if (!on_device()) return;
    std::lock_guard const lock(mutex_);
    if (std::find(streams_.begin(), streams_.end(), stream) == streams_.end()) streams_.push_back(stream);
  }
  std::size_t stream_count() {
    std::lock_guard const lock(mutex_);
    return streams_.size();
  }
  /// Blocks until the work queued on every recorded stream is done (before memory is unmapped).
  void wait_streams() {
    if (!on_device()) return;
    for (cuvmm::Stream s : streams_copy()) cuvmm::detail::device_wait(s);
  }

  void view_made(std::size_t extent_bytes) {
    std::lock_guard const lock(mutex_);
    ++view_extents_[extent_bytes];
  }
  /// A view's deleter: never throws.
  void view_released(std::size_t extent_bytes) noexcept {
    std::lock_guard const lock(mutex_);
    auto const it = view_extents_.find(extent_bytes);
    if (it != view_extents_.end() && --it->second == 0) view_extents_.erase(it);
  }
  /// How far the live views reach, in bytes from data() (0: none).
  std::size_t viewed_bytes() {
    std::lock_guard const lock(mutex_);
    return view_extents_.empty() ? 0 : view_extents_.rbegin()->first;
  }
  std::size_t live_views() {
    std::lock_guard const lock(mutex_);
    std::size_t n = 0;
    for (auto const& [extent, count] : view_extents_) n += count;
    return n;
  }

 private:
  std::vector<cuvmm::Stream> streams_copy() {
    std::lock_guard const lock(mutex_);
    return streams_;
  }
  void wait_streams_no_throw() noexcept {
    if (!storage_.bound() || !on_device()) return;
    for (cuvmm::Stream s : streams_) cuvmm::detail::device_wait_no_throw(s);
  }

  std::unique_ptr<cuvmm::Backend> own_backend_;  // a host backend with a memory limit (tests); outlives storage_
  cuvmm::GrowableStorage storage_;
  std::mutex mutex_;                              // guards streams_ and view_extents_ (deleters run on any thread)
  std::vector<cuvmm::Stream> streams_;            // every stream the memory was used on
  std::map<std::size_t, std::size_t> view_extents_;  // bytes a live view reaches -> how many views
};

/// Throws `message` as a Python ValueError.
[[noreturn]] void value_error(std::uint32_t line, const std::string& message) {
  throw c10::ValueError(here("GrowableRows", line), "cuvmm_torch.GrowableTensor: " + message);
}

class GrowableRows {
 public:
  /// `device` < 0: CPU tensors over a HostBackend (with `host_memory_limit` bytes of physical memory
  /// at most when non-zero: a test hook). `max_rows` 0: GrowableStorage's default reservation.
  GrowableRows(at::ScalarType dtype, std::vector<std::int64_t> row_shape, int device, std::size_t max_rows,
               const std::string& growth, const std::string& map_ahead, std::size_t host_memory_limit)
      : dtype_(dtype), row_shape_(std::move(row_shape)), device_(device) {
    std::size_t row_elements = 1;
    for (std::int64_t d : row_shape_) {
      if (d < 0) value_error(__LINE__, "a row dimension is negative (" + std::to_string(d) + ")");
      row_elements = checked_product(row_elements, static_cast<std::size_t>(d), "the row's size");
    }
    row_bytes_ = checked_product(row_elements, c10::elementSize(dtype_), "the row's size");
    if (row_bytes_ == 0) value_error(__LINE__, "a row has no bytes (a dimension of the row shape is 0)");

    cuvmm::GrowableOptions options;
    if (max_rows != 0) options.max_capacity_bytes = checked_product(max_rows, row_bytes_, "max_rows");
    if (growth == "fast") {
      options.growth = cuvmm::GrowthPolicy::fast;
    } else if (growth == "compact") {
      options.growth = cuvmm::GrowthPolicy::compact;
    } else {
      value_error(__LINE__, "growth must be \"fast\" or \"compact\", got \"" + growth + "\"");
    }
    if (map_ahead == "auto") {
      options.map_ahead = cuvmm::MapAhead::automatic;
    } else if (map_ahead == "on") {
      options.map_ahead = cuvmm::MapAhead::on;
    } else if (map_ahead == "off") {
      options.map_ahead = cuvmm::MapAhead::off;
    } else {
      value_error(__LINE__, "map_ahead must be \"auto\", \"on\" or \"off\", got \"" + map_ahead + "\"");
    }

    std::unique_ptr<cuvmm::Backend> own_backend;
    cuvmm::Backend* backend = nullptr;
    if (device_ < 0) {
      cuvmm::HostBackend::Options host;
      host.physical_limit = host_memory_limit;
      own_backend = std::make_unique<cuvmm::HostBackend>(host);
      backend = own_backend.get();
    } else {
      options.devices = {device_};
      backend = &cuvmm::cuda_backend(device_);
    }
    memory_ = std::make_shared<Memory>(std::move(own_backend), *backend, std::move(options));
  }

  std::size_t size() const noexcept { return size_; }
  std::size_t row_bytes() const noexcept { return row_bytes_; }
  std::size_t capacity() const noexcept { return memory_->storage().capacity() / row_bytes_; }
  std::size_t max_rows() const noexcept { return memory_->storage().max_capacity() / row_bytes_; }
  std::uintptr_t data_ptr() const noexcept { return memory_->storage().data(); }
  std::size_t granularity() const noexcept { return memory_->storage().granularity(); }

  /// PyTorch's current stream on this tensor's device (its cudaStream_t), the stream every
  /// operation runs on and records; 0 for CPU tensors. What torch.cuda.current_stream(device)
  /// gives, asked of PyTorch's device guard for CUDA (which torch's CUDA library registers).
  std::uintptr_t current_stream() const {
    if (device_ < 0) return 0;
    c10::impl::VirtualGuardImpl const cuda(c10::DeviceType::CUDA);
    c10::Device const device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device_));
    c10::Stream const stream = cuda.getStream(device);
    return reinterpret_cast<std::uintptr_t>(cuda.getStreamNativeHandle(stream));
  }

  /// Makes capacity() >= rows; `stream` is recorded (it will use the memory). Strong guarantee.
  void reserve(std::size_t rows, std::uintptr_t stream) {
    std::size_t const bytes = checked_product(rows, row_bytes_, "the rows asked for");
    memory_->record_stream(to_stream(stream));
    memory_->storage().reserve(bytes);
  }
  /// size() becomes `rows`; new rows are uninitialized. Strong guarantee.
  void resize(std::size_t rows, std::uintptr_t stream) {
    reserve(rows, stream);
    size_ = rows;
  }
  /// Gives back the memory neither the rows in use nor a live view reach, once the recorded
  /// streams and `stream` have finished their work. The bytes given back.
  std::size_t shrink_to_fit(std::uintptr_t stream) {
    cuvmm::GrowableStorage& storage = memory_->storage();
    std::size_t const before = storage.capacity() + storage.stats().bytes_prepared;
    storage.give_back_step_ahead();  // never used by device work: nothing to wait for
    std::size_t const keep = std::max(size_ * row_bytes_, memory_->viewed_bytes());
    if (storage.can_shrink_to(keep)) {
      memory_->record_stream(to_stream(stream));
      memory_->wait_streams();
      storage.shrink_to(keep);
    }
    return before - storage.capacity();
  }
  void record_stream(std::uintptr_t stream) { memory_->record_stream(to_stream(stream)); }

  /// Appends `rows` (shape (k, *row_shape), this dtype, any device), copied with Tensor::copy_ on
  /// PyTorch's current stream (`stream` is that stream, recorded), and returns view(0, size()): all
  /// rows. The copy's target is borrowed_rows() over the new rows, not a slice of the view: cheaper
  /// (no trip through the dispatcher), and the view stays a fresh tensor, as view() makes it, even
  /// when `rows` requires grad. Strong guarantee: on any error (a wrong dtype or shape, growth,
  /// the view, the copy) the size is as before.
  at::Tensor append(const at::Tensor& rows, std::uintptr_t stream) {
    if (rows.scalar_type() != dtype_) {
      // A TypeError naming the dtypes as Python does (torch.float64).
      throw py::type_error("GrowableTensor.append: rows have dtype " + dtype_name(rows.scalar_type()) +
                           ", the tensor " + dtype_name(dtype_));
    }
    auto const shape = rows.sizes();
    if (shape.size() != row_shape_.size() + 1 || !std::equal(row_shape_.begin(), row_shape_.end(), shape.begin() + 1)) {
      throw c10::ValueError(here("GrowableRows", __LINE__), "cuvmm_torch.GrowableTensor.append: rows must have shape (k,) + " +
                                                                shape_text(row_shape_) + ", got " + shape_text(shape));
    }
    std::size_t const k = static_cast<std::size_t>(shape[0]);
    std::size_t const old = size_;
    if (k == 0) return view(0, old, stream);
    resize(checked_sum(old, k), stream);
    try {
      at::Tensor all = view(0, old + k, stream);
      borrowed_rows(old, old + k).copy_(rows);  // `all` holds the memory meanwhile
      return all;
    } catch (...) {
      size_ = old;  // within capacity: nothing to unmap
      throw;
    }
  }

  /// Rows [begin, end) as a tensor of shape (end - begin, *row_shape); end <= size().
  at::Tensor view(std::size_t begin, std::size_t end, std::uintptr_t stream) {
    if (begin > end || end > size_) {
      value_error(__LINE__, "rows [" + std::to_string(begin) + ", " + std::to_string(end) +
                                ") are not within the tensor's " + std::to_string(size_) + " rows");
    }
    memory_->record_stream(to_stream(stream));
    std::size_t const extent = end * row_bytes_;
    memory_->view_made(extent);
    try {
      // The device is given, not asked of the driver: an empty view may point at the end of the
      // mapped rows (or at an empty tensor's unmapped start), which cudaPointerGetAttributes refuses.
      return at::from_blob(
          row_address(begin), row_sizes(end - begin),
          [memory = memory_, extent](void*) { memory->view_released(extent); }, tensor_options(), device());
    } catch (...) {
      memory_->view_released(extent);
      throw;
    }
  }

  py::dict stats() {
    cuvmm::GrowableStats const s = memory_->storage().stats();
    py::dict d;
    d["rows"] = size_;
    d["row_bytes"] = row_bytes_;
    d["capacity_bytes"] = s.capacity_bytes;
    d["max_capacity_bytes"] = s.max_capacity_bytes;
    d["peak_capacity_bytes"] = s.peak_capacity_bytes;
    d["bytes_prepared"] = s.bytes_prepared;
    d["chunk_count"] = s.chunk_count;
    d["chunks_created"] = s.chunks_created;
    d["chunks_released"] = s.chunks_released;
    d["growth_steps"] = s.growth_steps;
    d["growth_nanoseconds"] = s.growth_nanoseconds;
    d["prepared_steps"] = s.prepared_steps;
    d["prepared_used"] = s.prepared_used;
    d["maps_ahead"] = memory_->storage().maps_ahead();
    d["live_views"] = memory_->live_views();
    d["viewed_bytes"] = memory_->viewed_bytes();
    d["streams"] = memory_->stream_count();
    return d;
  }
  /// Waits until a step prepared ahead is ready (settled statistics for tests and benchmarks).
  void settle() { memory_->storage().settle_step_ahead(); }

 private:
  /// Python's name of a dtype ("torch.float32"); the GIL is held (every caller comes from Python).
  static std::string dtype_name(at::ScalarType t) { return py::str(py::cast(t)); }
  static std::string shape_text(c10::IntArrayRef shape) {
    std::string text = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
    return text + (shape.size() == 1 ? ",)" : ")");
  }
  c10::Device device() const noexcept {
    return device_ < 0 ? c10::Device(c10::kCPU) : c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device_));
  }
  at::TensorOptions tensor_options() const { return at::TensorOptions().dtype(dtype_).device(device()); }
  void* row_address(std::size_t row) const noexcept {
    return reinterpret_cast<std::byte*>(memory_->storage().data()) + row * row_bytes_;
  }
  /// (rows, *row_shape)
  std::vector<std::int64_t> row_sizes(std::size_t rows) const {
    std::vector<std::int64_t> sizes{static_cast<std::int64_t>(rows)};
    sizes.insert(sizes.end(), row_shape_.begin(), row_shape_.end());
    return sizes;
  }
  /// Rows [begin, end) (within size()) as a tensor that holds nothing alive and counts as no view:
  /// only for a copy while a view over those rows, which holds the memory, lives.
  at::Tensor borrowed_rows(std::size_t begin, std::size_t end) const {
    return at::for_blob(row_address(begin), row_sizes(end - begin))
        .options(tensor_options())
        .target_device(device())
        .make_tensor();
  }
  static std::size_t checked_sum(std::size_t a, std::size_t b) {
    if (a > std::numeric_limits<std::size_t>::max() - b) value_error(__LINE__, "the row count overflows");
    return a + b;
  }
  static cuvmm::Stream to_stream(std::uintptr_t stream) noexcept { return reinterpret_cast<cuvmm::Stream>(stream); }
  static std::size_t checked_product(std::size_t a, std::size_t b, const char* what) {
    if (b != 0 && a > std::numeric_limits<std::size_t>::max() / b) {
      value_error(__LINE__, std::string(what) + " overflows: " + std::to_string(a) + " x " + std::to_string(b) +
                                " bytes");
    }
    return a * b;
  }

  at::ScalarType dtype_;
  std::vector<std::int64_t> row_shape_;
  int device_;                  // CUDA device index; -1: CPU over a HostBackend
  std::size_t row_bytes_ = 0;
  std::size_t size_ = 0;        // rows in use
  std::shared_ptr<Memory> memory_;
};

/// Runs `f` with cuvmm's growth errors as Python's: OutOfMemory as torch.OutOfMemoryError,
/// CapacityExceeded as a ValueError naming the most rows the tensor can hold.
template <class F>
auto translated(GrowableRows& rows, F&& f) {
  try {
    return f();
  } catch (const cuvmm::OutOfMemory& e) {
    throw c10::OutOfMemoryError(here(__func__, __LINE__),
                                "cuvmm_torch.GrowableTensor: out of memory growing to more rows (" +
                                    std::to_string(rows.capacity()) + " rows mapped, " +
                                    std::to_string(rows.row_bytes()) + " bytes each): " + e.what());
  } catch (const cuvmm::CapacityExceeded& e) {
    value_error(__LINE__, "the tensor can hold at most " + std::to_string(rows.max_rows()) +
                              " rows (its address range; set max_rows to reserve more): " + e.what());
  }
}

}  // namespace

namespace cuvmm_torch {

void bind_growable_rows(py::module_& m) {
  py::class_<GrowableRows>(m, "GrowableRows",
                           "The memory behind cuvmm_torch.GrowableTensor (use that class, not this one)")
      .def(py::init([](at::ScalarType dtype, std::vector<std::int64_t> row_shape, int device, std::size_t max_rows,
                       const std::string& growth, const std::string& map_ahead, std::size_t host_memory_limit) {
             HANDLE_TH_ERRORS
             try {
               return std::make_unique<GrowableRows>(dtype, std::move(row_shape), device, max_rows, growth, map_ahead,
                                                     host_memory_limit);
             } catch (const cuvmm::CapacityExceeded& e) {
               value_error(__LINE__, std::string("no address range of that size could be reserved: ") + e.what());
             }
             END_HANDLE_TH_ERRORS_PYBIND
           }),
           py::arg("dtype"), py::arg("row_shape"), py::arg("device"), py::arg("max_rows"), py::arg("growth"),
           py::arg("map_ahead"), py::arg("host_memory_limit"))
      .def_property_readonly("size", &GrowableRows::size)
      .def_property_readonly("row_bytes", &GrowableRows::row_bytes)
      .def_property_readonly("capacity", &GrowableRows::capacity)
      .def_property_readonly("max_rows", &GrowableRows::max_rows)
      .def_property_readonly("data_ptr", &GrowableRows::data_ptr)
      .def_property_readonly("granularity", &GrowableRows::granularity)
      // Each operation below runs on (and records) PyTorch's current stream: current_stream().
      .def("current_stream", &GrowableRows::current_stream)
      .def(
          "reserve",
          [](GrowableRows& self, std::size_t rows) {
            HANDLE_TH_ERRORS
            translated(self, [&] { self.reserve(rows, self.current_stream()); });
            END_HANDLE_TH_ERRORS_PYBIND
          },
          py::arg("rows"))
      .def(
          "resize",
          [](GrowableRows& self, std::size_t rows) {
            HANDLE_TH_ERRORS
            translated(self, [&] { self.resize(rows, self.current_stream()); });
            END_HANDLE_TH_ERRORS_PYBIND
          },
          py::arg("rows"))
      .def(
          "append",
          // Any object: what is not a tensor is a TypeError here, without a Python-side check.
          [](GrowableRows& self, py::handle rows) {
            HANDLE_TH_ERRORS
            if (!THPVariable_Check(rows.ptr())) {
              throw py::type_error("GrowableTensor.append: rows must be a torch.Tensor, got " +
                                   py::str(py::type::handle_of(rows).attr("__name__")).cast<std::string>());
            }
            at::Tensor const& tensor = THPVariable_Unpack(rows.ptr());
            return translated(self, [&] { return self.append(tensor, self.current_stream()); });
            END_HANDLE_TH_ERRORS_PYBIND
          },
          py::arg("rows"))
      .def(
          "shrink_to_fit",
          [](GrowableRows& self) {
            HANDLE_TH_ERRORS
            return self.shrink_to_fit(self.current_stream());
            END_HANDLE_TH_ERRORS_PYBIND
          })
      .def("record_stream", &GrowableRows::record_stream, py::arg("stream"))
      .def(
          "view",
          [](GrowableRows& self, std::size_t begin, std::size_t end) {
            HANDLE_TH_ERRORS
            return self.view(begin, end, self.current_stream());
            END_HANDLE_TH_ERRORS_PYBIND
          },
          py::arg("begin"), py::arg("end"))
      .def(
          "view_all",
          [](GrowableRows& self) {
            HANDLE_TH_ERRORS
            return self.view(0, self.size(), self.current_stream());
            END_HANDLE_TH_ERRORS_PYBIND
          })
      .def("stats", &GrowableRows::stats)
      .def("settle", &GrowableRows::settle);
}

}  // namespace cuvmm_torch
