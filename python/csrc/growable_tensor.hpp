// growable_tensor.hpp: binds cuvmm_torch._C.GrowableRows (growable_tensor.cpp), the memory behind
// cuvmm_torch.GrowableTensor, into the _C module.
#pragma once

#include <pybind11/pybind11.h>

namespace cuvmm_torch {

void bind_growable_rows(pybind11::module_& m);

}  // namespace cuvmm_torch
