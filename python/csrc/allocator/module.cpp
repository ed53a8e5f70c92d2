// module.cpp: cuvmm_torch._allocator, the Python side of cuvmm's CUDA allocator for PyTorch.
//
// allocator() is the one CuvmmAllocator as a torch._C._cuda_CUDAAllocator, which
// torch._C._cuda_changeCurrentAllocator installs (cuvmm_torch.enable() does it); stats() and trim()
// read and trim a device's Arena; arena_options() parses a $CUVMM_ARENA_CONF text.
#include <pybind11/pybind11.h>
#include <torch/csrc/Exceptions.h>

#include <string>

#include <cuvmm/arena.hpp>
#include <cuvmm/error.hpp>

#include "cuda_allocator.hpp"

namespace py = pybind11;

namespace {

py::dict counter(const cuvmm::ArenaCounter& c) {
  py::dict d;
  d["current"] = c.current;
  d["peak"] = c.peak;
  d["total"] = c.total;
  return d;
}

/// Every ArenaStats field; counters as {"current", "peak", "total"}. None: the device has no arena.
py::object stats(int device) {
  HANDLE_TH_ERRORS
  cuvmm::ArenaStats s;
  if (!cuvmm_torch::CuvmmAllocator::instance()->arena_stats(device, s)) return py::none();
  py::dict d;
  d["bytes_requested"] = counter(s.bytes_requested);
  d["allocations"] = counter(s.allocations);
  d["bytes_mapped"] = counter(s.bytes_mapped);
  d["bytes_physical"] = counter(s.bytes_physical);
  d["bytes_reserved"] = counter(s.bytes_reserved);
  d["chunks_created"] = s.chunks_created;
  d["chunks_released"] = s.chunks_released;
  d["maps"] = s.maps;
  d["unmaps"] = s.unmaps;
  d["access_calls"] = s.access_calls;
  d["cross_stream_reuses"] = s.cross_stream_reuses;
  d["reclaims"] = s.reclaims;
  d["fragmentation"] = s.fragmentation;
  return d;
  END_HANDLE_TH_ERRORS_PYBIND
}

std::size_t trim(int device) {
  HANDLE_TH_ERRORS
  return cuvmm_torch::CuvmmAllocator::instance()->trim(device);
  END_HANDLE_TH_ERRORS_PYBIND
}

py::dict arena_options(const std::string& text) {
  HANDLE_TH_ERRORS
  cuvmm::ArenaOptions o;
  try {
    o = cuvmm::parse_arena_options(text);
  } catch (const cuvmm::Error& e) {
    TORCH_CHECK_VALUE(false, "cuvmm_torch: ", cuvmm::arena_conf_variable, "=\"", text, "\": ", e.context());
  }
  py::dict d;
  d["address_space_bytes"] = o.address_space_bytes;
  d["page_bytes"] = o.page_bytes;
  d["large_page_bytes"] = o.large_page_bytes;
  d["share_large_page_tails"] = o.share_large_page_tails;
  d["byte_limit"] = o.byte_limit;
  d["compression"] = std::string(cuvmm::to_string(o.compression));
  return d;
  END_HANDLE_TH_ERRORS_PYBIND
}

std::shared_ptr<c10::cuda::CUDACachingAllocator::CUDAAllocator> allocator() {
  return cuvmm_torch::CuvmmAllocator::instance();
}

}  // namespace

PYBIND11_MODULE(_allocator, m) {
  m.doc() = "cuvmm's Arena as PyTorch's whole CUDA allocator (use the cuvmm_torch package, not this module)";
  // torch._C registers the CUDAAllocator type that the result is converted to.
  py::module_::import("torch._C");
  m.def("allocator", &allocator);
  m.def("stats", &stats, py::arg("device"));
  m.def("trim", &trim, py::arg("device"));
  m.def("arena_options", &arena_options, py::arg("text"));
}
