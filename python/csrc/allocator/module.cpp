// module.cpp: cuvmm_torch._allocator, the Python side of cuvmm's CUDA allocator for PyTorch.
//
// allocator() is the one CuvmmAllocator as a torch._C._cuda_CUDAAllocator, which
// torch._C._cuda_changeCurrentAllocator installs (cuvmm_torch.enable() does it); stats() and trim()
// read and trim a device's Arena; arena_options() parses a $CUVMM_ARENA_CONF text.
#include <c10/core/Allocator.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/Exceptions.h>

#include <string>

#include <cuvmm/arena.hpp>
#include <cuvmm/error.hpp>

#include "../arena_dicts.hpp"

#include "cuda_allocator.hpp"

namespace py = pybind11;

namespace {

/// Every ArenaStats field; counters as {"current", "peak", "total"}. None: the device has no arena.
py::object stats(int device) {
  HANDLE_TH_ERRORS
  cuvmm::ArenaStats s;
  if (!cuvmm_torch::CuvmmAllocator::instance()->arena_stats(device, s)) return py::none();
  return cuvmm_torch::arena_stats_dict(s);
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
  return cuvmm_torch::arena_options_dict(o);
  END_HANDLE_TH_ERRORS_PYBIND
}

std::shared_ptr<c10::cuda::CUDACachingAllocator::CUDAAllocator> allocator() {
  return cuvmm_torch::CuvmmAllocator::instance();
}

/// Makes the allocator c10's allocator for CUDA too, where the device-generic API
/// (torch.accelerator.memory_stats, ...) finds it: torch._C._cuda_changeCurrentAllocator changes
/// only the one that CUDA tensors use.
void register_device_allocator() { c10::SetAllocator(c10::DeviceType::CUDA, cuvmm_torch::CuvmmAllocator::instance().get()); }

}  // namespace

PYBIND11_MODULE(_allocator, m) {
  m.doc() = "cuvmm's Arena as PyTorch's whole CUDA allocator (use the cuvmm_torch package, not this module)";
  // torch._C registers the CUDAAllocator type that the result is converted to.
  py::module_::import("torch._C");
  m.def("allocator", &allocator);
  m.def("register_device_allocator", &register_device_allocator);
  m.def("stats", &stats, py::arg("device"));
  m.def("trim", &trim, py::arg("device"));
  m.def("arena_options", &arena_options, py::arg("text"));
}
