// cuvmm/multimem.hpp: kernels that work through a multicast address (sm_90 and newer).
//
// Built into the library from src/multicast/multimem.cu (inline PTX, compiled for sm_90).
// Each function launches one kernel on `stream` and returns at once; it throws cuvmm::Error if the
// launch fails. Every participating device runs the same call on its own stream, with its `rank`
// among `ranks` devices. Ordering rules between multicast and unicast accesses to the same memory:
// they are different virtual aliases, so a thread fences (PTX fence.proxy.alias) between a
// multicast access and a unicast access of the same data; across kernels, stream order suffices.
#pragma once

#include <cstddef>

#include <cuvmm/types.hpp>

namespace cuvmm {

/// Sum all-reduce of `count` floats in place: every device's bound copy ends up holding the sum of
/// all copies. Rank r reduces its slice of the elements with multimem.ld_reduce (a load that sums
/// every device's copy) and writes the sum to every copy with multimem.st. Call on every rank,
/// then use the result after an arrival barrier (launch_multimem_barrier) or a host-side join.
void launch_multimem_all_reduce_sum(float* multicast, std::size_t count, int rank, int ranks, Stream stream);

/// An arrival barrier across devices: one thread adds 1 to the counter through the multicast
/// address (multimem.red.release, so every device's copy counts the arrival), fences multicast
/// against unicast access (fence.proxy.alias), and waits until its own unicast copy of the counter
/// reaches `expected` (acquire loads). The counter starts at 0 on every device; the n-th use of it
/// with `ranks` devices waits for n * ranks.
void launch_multimem_barrier(unsigned* multicast_counter, unsigned* unicast_counter, unsigned expected, Stream stream);

}  // namespace cuvmm
