// docs/nccl-rdma.md's example of dmabuf export for RDMA: every chunk of a growing buffer is exported
// as a dmabuf fd and handed to hooks where an RDMA stack registers it (ibv_reg_dmabuf_mr) and
// deregisters it. No RDMA library is needed here: the hooks keep the fds' sizes. Needs a GPU whose
// driver reports dmabuf support (skipped otherwise).
#include <cuvmm/device_caps.hpp>
#include <cuvmm/dmabuf.hpp>
#include <cuvmm/growable_buffer.hpp>

#include <unistd.h>

#include <cstddef>
#include <map>
#include <memory>

#include "example_support.hpp"

int main() {
  if (!example::has_devices(1)) return example::skipped;
  if (!cuvmm::device_caps(0).dma_buf) {
    std::printf("skipped: device 0 does not report CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED\n");
    return example::skipped;
  }
  std::map<cuvmm::Address, off_t> regions;  // what ibv_reg_dmabuf_mr would return, per chunk

  // [readme]
  auto rdma = std::make_shared<cuvmm::DmabufObserver>(
      [&](const cuvmm::BackedRange& r, int fd) {  // here: ibv_reg_dmabuf_mr(pd, 0, r.bytes, r.address, fd, flags)
        regions[r.address] = ::lseek(fd, 0, SEEK_END);
      },
      [&](const cuvmm::BackedRange& r, int) { regions.erase(r.address); });  // here: ibv_dereg_mr
  cuvmm::GrowableBuffer<float> buffer;
  buffer.add_observer(rdma);
  buffer.resize(std::size_t{1} << 26, 0.0f);  // each new chunk exported before resize returns
  // [readme]

  std::size_t bytes = 0;
  for (const auto& [address, size] : regions) bytes += static_cast<std::size_t>(size);
  example::check(bytes == buffer.capacity() * sizeof(float), "one dmabuf fd of the chunk's size per chunk");
  return 0;
}
