// docs/nccl-rdma.md's example of NCCL registrations that follow growth: a communicator of one rank,
// an all-reduce on buffers whose chunks are registered as they grow. Built where NCCL is found
// (libcuvmm_nccl); needs a GPU.
#include <cuvmm/growable_buffer.hpp>
#include <cuvmm/nccl_observer.hpp>

#include <nccl.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "example_support.hpp"

int main() {
  if (!example::has_devices(1)) return example::skipped;
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) return 1;
  cudaStream_t stream = nullptr;
  example::check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  std::vector<float> const more(std::size_t{1} << 24, 1.0f);
  {
    cuvmm::GrowableBuffer<float> send(cuvmm::GrowableOptions{}, stream);
    cuvmm::GrowableBuffer<float> recv(cuvmm::GrowableOptions{}, stream);
    std::size_t const n = more.size();
    recv.resize(n);

    // [readme]
    auto nccl = std::make_shared<cuvmm::NcclObserver>(comm);
    send.add_observer(nccl);
    recv.add_observer(nccl);
    send.append(more);  // the new chunks are registered before append returns
    ncclAllReduce(send.data(), recv.data(), n, ncclFloat, ncclSum, comm, stream);
    // detach (remove_observer) or destroy the buffers before ncclCommDestroy(comm)
    // [readme]

    example::check(nccl->registrations().size() == send.storage().chunk_count() + recv.storage().chunk_count(),
                   "one registration per chunk");
    example::check(recv.element(n - 1) == 1.0f, "the all-reduce of one rank copies");
  }
  example::check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
  ncclCommDestroy(comm);
  return 0;
}
