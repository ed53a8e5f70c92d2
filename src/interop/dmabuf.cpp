// dmabuf export of mapped device ranges (see include/cuvmm/dmabuf.hpp).
//
// export_dmabuf checks the device's CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (read once per process by
// the caps layer) and makes the device's primary context current for the one driver call. The
// observer keeps one fd per chunk; it calls the user's export hook after the fd exists (an fd whose
// hook throws is closed by its UniqueFd) and the release hook before the fd is closed.
#include <cuvmm/dmabuf.hpp>

#include <fcntl.h>

#include <algorithm>
#include <string>
#include <utility>

#include <cuvmm/error.hpp>

#include "../caps/device_attributes.hpp"
#include "../driver/driver.hpp"
#include "../support/room_for_one.hpp"

namespace cuvmm {

UniqueFd export_dmabuf(Address address, std::size_t bytes, int device) {
  constexpr std::string_view call = "cuMemGetHandleForAddressRange";
  caps::DeviceAttributes const attributes = caps::device_attributes(device, call);
  if (!attributes.dma_buf) {
    throw_unsupported_capability("dmabuf export on device " + std::to_string(device) +
                                     " (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0)",
                                 "a Linux kernel with dmabuf support and a driver that reports it (the open GPU "
                                 "kernel modules); without it, register chunks through nvidia-peermem instead",
                                 call, {});
  }
  driver::PrimaryContext const context(attributes.handle);
  driver::CurrentContextScope const current(context.get());
  int fd = -1;
  CUresult const result = driver::mem_get_handle_for_address_range.no_throw(
      &fd, static_cast<CUdeviceptr>(address), bytes, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  if (result != CUDA_SUCCESS) {
    driver::mem_get_handle_for_address_range.throw_error(
        result, "exporting " + std::to_string(bytes) + " bytes of device " + std::to_string(device) + " as a dmabuf fd");
  }
  UniqueFd owned(fd);
  ::fcntl(owned.get(), F_SETFD, FD_CLOEXEC);  // as every fd cuvmm hands out
  return owned;
}

std::vector<DmabufObserver::Export> DmabufObserver::exports() const {
  std::lock_guard lock(mutex_);
  std::vector<Export> out;
  out.reserve(held_.size());
  for (const Held& h : held_) out.push_back({h.range, h.fd.get()});
  return out;
}

void DmabufObserver::on_mapped(const BackedRange& range) {
  UniqueFd fd = export_dmabuf(range.address, range.bytes, range.device);
  std::lock_guard lock(mutex_);
  detail::room_for_one(held_);  // before the hook: nothing after it may throw
  if (on_export_) on_export_(range, fd.get());
  held_.push_back({range, std::move(fd)});
}

void DmabufObserver::on_unmapping(const BackedRange& range) noexcept {
  std::lock_guard lock(mutex_);
  auto const found = std::find_if(held_.begin(), held_.end(), [&](const Held& h) { return h.range == range; });
  if (found == held_.end()) return;
  if (on_release_) on_release_(range, found->fd.get());
  held_.erase(found);  // closes the fd, before the chunk is unmapped
}

}  // namespace cuvmm
