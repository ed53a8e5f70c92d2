// ReservationPool: slabs of address space cut into fixed slots. See the design note in the header.
#include <cuvmm/reservation_pool.hpp>

#include <deque>
#include <limits>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <cuvmm/error.hpp>

namespace cuvmm {

struct ReservationPool::State {
  Backend* backend = nullptr;
  std::size_t slot_bytes = 0;
  std::size_t slots_per_slab = 0;
  mutable std::mutex mutex;
  std::deque<AddressRange> slabs;  // a deque: slabs stay put as more are added
  struct FreeSlot {
    AddressRange* range;
    std::size_t offset;
  };
  std::vector<FreeSlot> free;  // taken from the back: the lowest offsets first within a new slab
  std::size_t in_use = 0;
};

ReservationPool::Slot::Slot(Slot&& other) noexcept
    : state_(std::move(other.state_)),
      range_(std::exchange(other.range_, nullptr)),
      offset_(std::exchange(other.offset_, 0)),
      bytes_(std::exchange(other.bytes_, 0)) {}

ReservationPool::Slot& ReservationPool::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    release();
    state_ = std::move(other.state_);
    range_ = std::exchange(other.range_, nullptr);
    offset_ = std::exchange(other.offset_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

ReservationPool::Slot::~Slot() { release(); }

void ReservationPool::Slot::release() noexcept {
  if (range_ == nullptr) return;
  {
    std::lock_guard lock(state_->mutex);
    try {
      state_->free.push_back({range_, offset_});  // capacity reserved when the slab was added
    } catch (...) {
      // Unreachable (see acquire); the slot is then simply not reused.
    }
    --state_->in_use;
  }
  range_ = nullptr;
  state_.reset();  // the last lease of a dead pool frees the slabs here
}

ReservationPool::ReservationPool(Backend& backend, ReservationPoolOptions options)
    : state_(std::make_shared<State>()) {
  std::size_t const granularity = backend.granularity(ChunkProperties{});
  if (options.slot_bytes == 0 || options.slots_per_reservation == 0) {
    throw_invalid_argument("ReservationPool", "slot_bytes and slots_per_reservation must be positive");
  }
  std::size_t const slot = round_up(options.slot_bytes, granularity);
  if (slot == 0 || options.slots_per_reservation > std::numeric_limits<std::size_t>::max() / slot) {
    throw_invalid_argument("ReservationPool", "a slab of " + std::to_string(options.slots_per_reservation) +
                                                  " slots of " + std::to_string(options.slot_bytes) +
                                                  " bytes does not fit in the address space");
  }
  state_->backend = &backend;
  state_->slot_bytes = slot;
  state_->slots_per_slab = options.slots_per_reservation;
}

ReservationPool::~ReservationPool() = default;

Backend& ReservationPool::backend() const noexcept { return *state_->backend; }
std::size_t ReservationPool::slot_bytes() const noexcept { return state_->slot_bytes; }

std::size_t ReservationPool::reservations() const {
  std::lock_guard lock(state_->mutex);
  return state_->slabs.size();
}

std::size_t ReservationPool::slots_in_use() const {
  std::lock_guard lock(state_->mutex);
  return state_->in_use;
}

ReservationPool::Slot ReservationPool::acquire() {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  if (s.free.empty()) {
    // Room for every slot of every slab in the free list, so that Slot::release never allocates.
    s.free.reserve((s.slabs.size() + 1) * s.slots_per_slab);
    AddressRange slab(*s.backend, s.slot_bytes * s.slots_per_slab);  // throws: nothing changed
    s.slabs.push_back(std::move(slab));
    AddressRange* const range = &s.slabs.back();
    for (std::size_t i = s.slots_per_slab; i-- > 0;) s.free.push_back({range, i * s.slot_bytes});
  }
  State::FreeSlot const free = s.free.back();
  s.free.pop_back();
  ++s.in_use;
  Slot slot;
  slot.state_ = state_;
  slot.range_ = free.range;
  slot.offset_ = free.offset;
  slot.bytes_ = s.slot_bytes;
  return slot;
}

}  // namespace cuvmm
