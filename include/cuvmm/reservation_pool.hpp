// cuvmm/reservation_pool.hpp: address space for many buffers from few reservations.
//
// Owns: large address ranges ("slabs", each slots_per_reservation slots) reserved on one backend,
// and the list of free slots in them. A growable buffer given a pool (GrowableOptions::
// reservation_pool) takes one fixed-size slot as its address range instead of reserving a range of
// its own: thousands of buffers cost a handful of reservations and slot_bytes of address space
// each, instead of one reservation as large as the device each (~900 of those would fill a
// process's 128 TiB on an H200; default buffers past DefaultReservationLimits::budget_bytes get
// fallback_bytes instead, growable_storage.hpp).
// Invariants:
//  1. A slot is a fixed sub-range of one slab: a buffer on it never moves its data (DESIGN
//     invariant 5); its max_capacity() is the slot's size (or the smaller max_capacity_bytes asked for).
//  2. A slab is freed only when the pool and every slot leased from it are gone (each lease shares
//     the pool's state), so a buffer may outlive its pool object.
//  3. Slots are given out under a mutex: pools may be shared between threads.
// Never does: map memory (buffers map into their slots), free a slab that has live slots.
#pragma once

#include <cstddef>
#include <memory>

#include <cuvmm/address_range.hpp>
#include <cuvmm/backend.hpp>

namespace cuvmm {

struct ReservationPoolOptions {
  /// Address space of each buffer (rounded up to the backend's granularity): the most one buffer
  /// on this pool can ever hold.
  std::size_t slot_bytes = std::size_t{1} << 30;
  /// Slots per reservation: a new slab of this many slots is reserved when all are in use.
  std::size_t slots_per_reservation = 256;
};

class ReservationPool {
  struct State;

 public:
  /// One leased slot: [range().base() + offset(), + bytes()). Returned to the pool when destroyed.
  class Slot {
   public:
    Slot() noexcept = default;
    Slot(Slot&& other) noexcept;
    Slot& operator=(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot();
    [[nodiscard]] AddressRange& range() const noexcept { return *range_; }
    [[nodiscard]] std::size_t offset() const noexcept { return offset_; }
    [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
    explicit operator bool() const noexcept { return range_ != nullptr; }

   private:
    friend class ReservationPool;
    void release() noexcept;
    std::shared_ptr<State> state_;
    AddressRange* range_ = nullptr;
    std::size_t offset_ = 0;
    std::size_t bytes_ = 0;
  };

  /// Reserves nothing yet: the first slab is reserved by the first acquire().
  explicit ReservationPool(Backend& backend, ReservationPoolOptions options = {});
  ReservationPool(const ReservationPool&) = delete;
  ReservationPool& operator=(const ReservationPool&) = delete;
  ~ReservationPool();

  [[nodiscard]] Backend& backend() const noexcept;
  /// The slot size after rounding to the backend's granularity.
  [[nodiscard]] std::size_t slot_bytes() const noexcept;
  /// Slabs reserved so far (each one backend reservation).
  [[nodiscard]] std::size_t reservations() const;
  [[nodiscard]] std::size_t slots_in_use() const;

  /// A free slot, reserving a new slab if none is free. Throws as AddressRange does (cuvmm::Error,
  /// OutOfMemory) when the backend refuses the slab; nothing changes then.
  [[nodiscard]] Slot acquire();

 private:
  std::shared_ptr<State> state_;
};

}  // namespace cuvmm
