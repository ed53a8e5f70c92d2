// NcclObserver (see include/cuvmm/nccl_observer.hpp): one ncclCommRegister (and, with windows,
// one ncclCommWindowRegister) per chunk, undone before the chunk is unmapped.
//
// A chunk's registration is built as a transaction: the handle and the window are held by local
// guards that deregister them if a later step (the window, or making room in the list) throws, and
// are moved into the list only when all succeeded. NCCL calls are not driver calls: this file calls
// no cu* function.
#include <cuvmm/nccl_observer.hpp>

#include <nccl.h>

#include <algorithm>
#include <string>
#include <utility>

#include <cuvmm/error.hpp>

#include "support/room_for_one.hpp"

#define CUVMM_NCCL_HAS_WINDOWS (NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0))

namespace cuvmm {
namespace {

void check_nccl(ncclResult_t result, std::string_view call, const BackedRange& range) {
  if (result == ncclSuccess) return;
  throw Error(foreign_error_details(ErrorDomain::nccl, static_cast<int>(result),
                                    "ncclResult_t " + std::to_string(static_cast<int>(result)),
                                    ncclGetErrorString(result), call,
                                    "registering the chunk of " + std::to_string(range.bytes) + " bytes at offset " +
                                        std::to_string(range.offset)));
}

/// A registration handle, deregistered unless released.
class PendingRegistration {
 public:
  PendingRegistration(ncclComm_t comm, void* handle) noexcept : comm_(comm), handle_(handle) {}
  PendingRegistration(const PendingRegistration&) = delete;
  PendingRegistration& operator=(const PendingRegistration&) = delete;
  ~PendingRegistration() {
    if (handle_ != nullptr) (void)ncclCommDeregister(comm_, handle_);
  }
  void* release() noexcept { return std::exchange(handle_, nullptr); }

 private:
  ncclComm_t comm_;
  void* handle_;
};

}  // namespace

NcclObserver::NcclObserver(ncclComm* comm, NcclObserverOptions options) : comm_(comm), options_(options) {
  if (comm_ == nullptr) throw_invalid_argument("NcclObserver", "the communicator is null");
  if (options_.windows && !has_windows()) {
    throw_unsupported_capability("NCCL windows (ncclCommWindowRegister, NCCL 2.27 or later; this library was built "
                                 "against NCCL " + std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + ")",
                                 "build cuvmm against a newer NCCL, or leave NcclObserverOptions::windows off",
                                 "NcclObserver", {});
  }
}

bool NcclObserver::has_windows() noexcept { return CUVMM_NCCL_HAS_WINDOWS; }

std::vector<NcclObserver::Registration> NcclObserver::registrations() const {
  std::lock_guard lock(mutex_);
  return held_;
}

std::size_t NcclObserver::registered_total() const noexcept {
  std::lock_guard lock(mutex_);
  return registered_;
}

std::size_t NcclObserver::deregistered_total() const noexcept {
  std::lock_guard lock(mutex_);
  return deregistered_;
}

void NcclObserver::on_mapped(const BackedRange& range) {
  auto* const buffer = reinterpret_cast<void*>(range.address);
  std::lock_guard lock(mutex_);
  detail::room_for_one(held_);  // first: nothing after the registrations may throw
  void* handle = nullptr;
  check_nccl(ncclCommRegister(comm_, buffer, range.bytes, &handle), "ncclCommRegister", range);
  PendingRegistration pending(comm_, handle);
  void* window = nullptr;
#if CUVMM_NCCL_HAS_WINDOWS
  if (options_.windows) {
    ncclWindow_t win = nullptr;
    check_nccl(ncclCommWindowRegister(comm_, buffer, range.bytes, &win, options_.window_flags),
               "ncclCommWindowRegister", range);
    window = win;
  }
#endif
  held_.push_back({range, pending.release(), window});
  ++registered_;
}

void NcclObserver::on_unmapping(const BackedRange& range) noexcept {
  std::lock_guard lock(mutex_);
  auto const found = std::find_if(held_.begin(), held_.end(), [&](const Registration& r) { return r.range == range; });
  if (found == held_.end()) return;
#if CUVMM_NCCL_HAS_WINDOWS
  if (found->window != nullptr) (void)ncclCommWindowDeregister(comm_, static_cast<ncclWindow_t>(found->window));
#endif
  (void)ncclCommDeregister(comm_, found->handle);
  ++deregistered_;
  held_.erase(found);
}

}  // namespace cuvmm
