// MulticastObject and MulticastMapping over the driver's multicast entry points, behind the gate.
//
// Owns: one multicast handle (released last), the bindings made through it (each unbound before
// the release), and the primary context of the first device (current for every driver call here).
// MulticastMapping owns a reservation and the multicast handle mapped into it.
// Invariants: no cuMulticast* call happens before the gate passed (every one goes through
// `counted`, which the gate's tests read); a step that throws leaves nothing behind: the handle
// lives in a local owner until every device was added.
// Never does: create a multicast object the caller did not ask for, or touch the gate's answer.
//
// Not run on hardware yet: the H200 test machine has no multicast support (and must never get a
// cuMulticastCreate call); only the gate and its refusal run there.
#include <cuvmm/multicast.hpp>

#include <algorithm>
#include <atomic>
#include <set>
#include <string>
#include <utility>

#include <cuvmm/device_caps.hpp>
#include <cuvmm/error.hpp>

#include "driver/driver.hpp"
#include "multicast/multicast_gate.hpp"
#include "support/room_for_one.hpp"

namespace cuvmm {
namespace detail {
namespace {
std::atomic<std::size_t> multicast_calls{0};  // cuMulticast* calls made here, ever

/// Counts a multicast driver call, then returns its entry point (so the count precedes the call).
template <class EntryPoint>
const EntryPoint& counted(const EntryPoint& entry) noexcept {
  multicast_calls.fetch_add(1, std::memory_order_relaxed);
  return entry;
}
}  // namespace

std::size_t multicast_driver_calls() noexcept { return multicast_calls.load(std::memory_order_relaxed); }

MulticastSupport multicast_gate(std::span<const int> devices, int device_count, std::string_view no_device_reason,
                                const std::function<bool(int)>& device_supports_multicast) {
  std::set<int> seen;
  for (int device : devices) {
    if (device < 0) throw_invalid_argument("MulticastObject", "device " + std::to_string(device) + " is negative");
    if (!seen.insert(device).second) {
      throw_invalid_argument("MulticastObject", "device " + std::to_string(device) + " is listed twice");
    }
  }
  if (device_count < 2) {
    std::string reason = "multicast needs at least two CUDA devices; this machine has " + std::to_string(device_count);
    if (!no_device_reason.empty()) reason += " (" + std::string(no_device_reason) + ")";
    return {false, reason};
  }
  if (devices.size() < 2) {
    return {false, "multicast needs at least two devices; " + std::to_string(devices.size()) + " were given"};
  }
  for (int device : devices) {
    if (device >= device_count) {
      return {false, "device " + std::to_string(device) + " does not exist (this machine has " +
                         std::to_string(device_count) + " CUDA devices)"};
    }
  }
  for (int device : devices) {
    if (!device_supports_multicast(device)) {
      return {false, "device " + std::to_string(device) +
                         " does not support multicast (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED is 0)"};
    }
  }
  return {true, {}};
}

}  // namespace detail

namespace {

using Source = cuvmm::source_location;

/// Runs `release` (noexcept driver calls) with `context` current, then puts the previous one back.
template <class Release>
void in_context_no_throw(CUcontext context, Release&& release) noexcept {
  CUcontext previous = nullptr;
  bool const switched = context != nullptr && driver::ctx_get_current.no_throw(&previous) == CUDA_SUCCESS &&
                        driver::ctx_set_current.no_throw(context) == CUDA_SUCCESS;
  release();
  if (switched) (void)driver::ctx_set_current.no_throw(previous);
}

MulticastSupport machine_gate(std::span<const int> devices) {
  DriverStatus const status = driver_status();
  return detail::multicast_gate(devices, status.available ? status.device_count : 0, status.reason,
                                [](int device) { return device_caps(device).multicast; });
}

[[noreturn]] void throw_unsupported(const std::string& reason, Source where = Source::current()) {
  throw_unsupported_capability("multicast (" + reason + ")",
                               "use two or more devices that report multicast support (cuvmm-info lists it per "
                               "device; NVLink-connected GPUs such as NVSwitch systems)",
                               "MulticastObject", reason + "; no multicast object was created", where);
}

CUdevice device_handle(int ordinal) {
  CUdevice handle = 0;
  driver::device_get(&handle, ordinal);
  return handle;
}

}  // namespace

MulticastSupport multicast_support(std::span<const int> devices) noexcept {
  try {
    return machine_gate(devices);
  } catch (const std::exception& error) {
    return {false, error.what()};
  }
}

struct MulticastObject::State {
  struct Binding {
    int device;          // whose memory
    std::size_t offset;  // where in the multicast object
    std::size_t size;    // bytes bound
  };
  std::vector<int> devices;        // added to the object, in order
  std::size_t size = 0;            // bytes, a multiple of granularity
  std::size_t granularity = 0;     // the recommended multicast granularity
  driver::PrimaryContext context;  // of devices.front(): current for every call here
  CUmemGenericAllocationHandle handle = 0;  // released last
  std::vector<Binding> bindings;   // unbound before the release

  ~State() {
    if (context.get() == nullptr) return;
    in_context_no_throw(context.get(), [&]() noexcept {
      for (const Binding& binding : bindings) {
        (void)detail::counted(driver::multicast_unbind)
            .no_throw(handle, device_handle_no_throw(binding.device), binding.offset, binding.size);
      }
      if (handle != 0) (void)driver::mem_release.no_throw(handle);
    });
  }

  static CUdevice device_handle_no_throw(int ordinal) noexcept {
    CUdevice handle = 0;
    (void)driver::device_get.no_throw(&handle, ordinal);
    return handle;
  }
};

MulticastObject::MulticastObject(std::span<const int> devices, std::size_t size) {
  MulticastSupport const support = machine_gate(devices);  // before any multicast driver call
  if (!support.supported) throw_unsupported(support.reason);
  if (size == 0) throw_invalid_argument("MulticastObject", "the size must be positive");

  auto state = std::make_unique<State>();
  state->devices.assign(devices.begin(), devices.end());
  state->context = driver::PrimaryContext(device_handle(devices.front()));
  driver::CurrentContextScope const scope(state->context.get());

  CUmulticastObjectProp prop{};
  prop.numDevices = static_cast<unsigned>(devices.size());
  prop.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  prop.size = size;
  detail::counted(driver::multicast_get_granularity)(&state->granularity, &prop,
                                                     CU_MULTICAST_GRANULARITY_RECOMMENDED);
  prop.size = round_up(size, state->granularity);
  if (prop.size == 0) throw CapacityExceeded(size, SIZE_MAX);

  CUmemGenericAllocationHandle handle = 0;
  detail::counted(driver::multicast_create)(&handle, &prop);
  driver::PendingAllocation pending(handle);
  for (int device : devices) detail::counted(driver::multicast_add_device)(pending.get(), device_handle(device));
  state->size = prop.size;
  state->handle = pending.adopt();
  state_ = std::move(state);
}

MulticastObject::MulticastObject(MulticastObject&& other) noexcept = default;
MulticastObject& MulticastObject::operator=(MulticastObject&& other) noexcept = default;
MulticastObject::~MulticastObject() = default;

std::size_t MulticastObject::size() const noexcept { return state_ ? state_->size : 0; }
std::size_t MulticastObject::granularity() const noexcept { return state_ ? state_->granularity : 0; }
const std::vector<int>& MulticastObject::devices() const noexcept {
  static const std::vector<int> none;
  return state_ ? state_->devices : none;
}

void MulticastObject::bind(const PhysicalChunk& chunk, std::size_t offset) {
  if (!state_) throw_invalid_argument("MulticastObject::bind", "the object is empty (moved from)");
  State& s = *state_;
  if (chunk.empty() || chunk.backend()->space() != MemorySpace::device) {
    throw_invalid_argument("MulticastObject::bind", "the chunk must be live device memory");
  }
  if (std::find(s.devices.begin(), s.devices.end(), chunk.device()) == s.devices.end()) {
    throw_invalid_argument("MulticastObject::bind",
                           "the chunk lives on device " + std::to_string(chunk.device()) + ", not one of the object's");
  }
  if (offset % s.granularity != 0 || offset > s.size || chunk.size() > s.size - offset) {
    throw_invalid_argument("MulticastObject::bind", "a chunk of " + std::to_string(chunk.size()) + " bytes at offset " +
                                                        std::to_string(offset) + " does not fit the object's " +
                                                        std::to_string(s.size) + " bytes in granularity steps");
  }
  detail::room_for_one(s.bindings);  // so recording cannot throw after the bind
  driver::CurrentContextScope const scope(s.context.get());
  detail::counted(driver::multicast_bind_mem)(s.handle, offset, chunk.handle().value, 0, chunk.size(), 0);
  s.bindings.push_back({chunk.device(), offset, chunk.size()});
}

void MulticastObject::unbind(int device) noexcept {
  if (!state_) return;
  State& s = *state_;
  in_context_no_throw(s.context.get(), [&]() noexcept {
    std::erase_if(s.bindings, [&](const State::Binding& binding) {
      if (binding.device != device) return false;
      (void)detail::counted(driver::multicast_unbind)
          .no_throw(s.handle, State::device_handle_no_throw(device), binding.offset, binding.size);
      return true;
    });
  });
}

MulticastMapping MulticastObject::map() const {
  if (!state_) throw_invalid_argument("MulticastObject::map", "the object is empty (moved from)");
  const State& s = *state_;
  driver::CurrentContextScope const scope(s.context.get());
  driver::PendingReservation reservation(s.size, s.granularity, "reserving address space for a multicast mapping");
  driver::mem_map(reservation.get(), s.size, 0, s.handle, 0);
  std::vector<CUmemAccessDesc> access;
  for (int device : s.devices) {
    CUmemAccessDesc descriptor{};
    descriptor.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    descriptor.location.id = device;
    descriptor.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    access.push_back(descriptor);
  }
  if (CUresult const result = driver::mem_set_access.no_throw(reservation.get(), s.size, access.data(), access.size());
      result != CUDA_SUCCESS) {
    (void)driver::mem_unmap.no_throw(reservation.get(), s.size);
    driver::mem_set_access.throw_error(result, "granting every device access to a multicast mapping");
  }
  return MulticastMapping(reservation.adopt(), s.size, s.devices.front());
}

MulticastMapping::MulticastMapping(MulticastMapping&& other) noexcept
    : address_(std::exchange(other.address_, 0)),
      size_(std::exchange(other.size_, 0)),
      device_(std::exchange(other.device_, 0)) {}

MulticastMapping& MulticastMapping::operator=(MulticastMapping&& other) noexcept {
  if (this != &other) {
    reset();
    address_ = std::exchange(other.address_, 0);
    size_ = std::exchange(other.size_, 0);
    device_ = std::exchange(other.device_, 0);
  }
  return *this;
}

MulticastMapping::~MulticastMapping() { reset(); }

void MulticastMapping::reset() noexcept {
  if (size_ == 0) return;
  // The device's primary context, retained for the calls (its object still holds it too).
  CUdevice device = 0;
  CUcontext context = nullptr;
  bool const retained = driver::device_get.no_throw(&device, device_) == CUDA_SUCCESS &&
                        driver::device_primary_ctx_retain.no_throw(&context, device) == CUDA_SUCCESS;
  in_context_no_throw(retained ? context : nullptr, [&]() noexcept {
    (void)driver::mem_unmap.no_throw(address_, size_);
    (void)driver::mem_address_free.no_throw(address_, size_);
  });
  if (retained) (void)driver::device_primary_ctx_release.no_throw(device);
  address_ = 0;
  size_ = 0;
}

}  // namespace cuvmm
