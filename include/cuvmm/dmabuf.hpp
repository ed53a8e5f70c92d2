// cuvmm/dmabuf.hpp: device memory exported as dmabuf file descriptors, for RDMA stacks.
//
// A NIC registers GPU memory through a dmabuf fd (ibv_reg_dmabuf_mr, libfabric's FI_MR_DMABUF):
// the driver's cuMemGetHandleForAddressRange(CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD) turns a mapped
// device range into one. export_dmabuf() does that for one range; DmabufObserver, a GrowthObserver,
// does it for every chunk of a growable buffer as the buffer grows, and closes each fd before its
// chunk is unmapped, calling the user's hooks so that an RDMA stack registers and deregisters in
// step. cuvmm needs no RDMA library for this: the fd is all a verbs stack takes.
//
// Refusals are explicit: a device that does not report CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is
// refused with cuvmm::Unsupported before the driver is asked (DeviceCaps::dma_buf says which); a
// driver that refuses the range throws cuvmm::Error carrying its CUresult (call
// "cuMemGetHandleForAddressRange"). A dmabuf fd keeps no memory alive: the range must stay mapped
// while an importer uses it, which the observer's ordering (close before unmap) provides.
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <vector>

#include <cuvmm/growth_observer.hpp>
#include <cuvmm/types.hpp>
#include <cuvmm/unique_fd.hpp>

namespace cuvmm {

/// A dmabuf fd (close-on-exec) for the mapped device range [address, address + bytes) of `device`
/// (page-aligned: whole chunks are). cuvmm::Unsupported where the device has no dmabuf support;
/// cuvmm::Error with the driver's CUresult where the driver refuses the range.
[[nodiscard]] UniqueFd export_dmabuf(Address address, std::size_t bytes, int device);

/// Exports every chunk of the buffers it observes as a dmabuf fd (growth_observer.hpp).
class DmabufObserver final : public GrowthObserver {
 public:
  /// Called after a chunk's fd is made (e.g. ibv_reg_dmabuf_mr(pd, 0, range.bytes, range.address,
  /// fd, access)); throwing undoes the growth, and the fd is closed.
  using ExportHook = std::function<void(const BackedRange& range, int fd)>;
  /// Called before a chunk's fd is closed and the chunk unmapped (e.g. ibv_dereg_mr). Must not throw.
  using ReleaseHook = std::function<void(const BackedRange& range, int fd)>;

  explicit DmabufObserver(ExportHook on_export = {}, ReleaseHook on_release = {})
      : on_export_(std::move(on_export)), on_release_(std::move(on_release)) {}

  /// One exported chunk.
  struct Export {
    BackedRange range;
    int fd = -1;  ///< owned by the observer: valid until the chunk is withdrawn
  };
  /// The chunks exported now, in the order they were exported.
  [[nodiscard]] std::vector<Export> exports() const;

  void on_mapped(const BackedRange& range) override;
  void on_unmapping(const BackedRange& range) noexcept override;

 private:
  struct Held {
    BackedRange range;
    UniqueFd fd;
  };
  ExportHook on_export_;
  ReleaseHook on_release_;
  mutable std::mutex mutex_;  // one observer may serve several buffers on several threads
  std::vector<Held> held_;
};

}  // namespace cuvmm
