// cuvmm/host_growable_buffer.hpp: HostGrowableBuffer<T>, the growable vector in host memory.
//
// The same container as GrowableBuffer<T> (see growable_buffer.hpp for the whole description) over
// the HostBackend: T* iterators, host element access (operator[], at, front, back) and == besides
// the common members. This header includes no Thrust and no CUDA header: a program that needs only
// the host container compiles it with any C++20 compiler.
#pragma once

#include <cuvmm/detail/basic_growable_buffer.hpp>
#include <cuvmm/detail/host_space.hpp>

namespace cuvmm {

/// A vector in host memory (HostBackend) that grows in place, e.g. for machines without a GPU.
template <class T>
using HostGrowableBuffer = BasicGrowableBuffer<T, detail::HostSpace>;

}  // namespace cuvmm
