// cuvmm/growable_storage.hpp: untyped memory that grows in place and never moves.
//
// Owns one AddressRange, reserved once at construction, and the physical chunks mapped side by
// side from its start. Growing maps more chunks behind the end: the base address never changes,
// nothing is copied. Invariants:
//  1. data() is fixed for the object's life; growth past max_capacity() throws CapacityExceeded.
//  2. Every operation completes or leaves the object as it was, leaking nothing: a growth step
//     builds its chunks and mappings in locals and commits them only when all succeeded.
//  3. Mapped bytes are a prefix [0, capacity()) of the range, granted the configured access.
//     Slack is bounded by the growth policy (growth_policy.hpp, DESIGN.md invariant 6), plus
//     the one step a storage that maps ahead may hold beyond capacity() (invariant 8).
//  4. Shrinking unmaps and releases whole tail chunks only. It does not wait for anything:
//     cuMemUnmap does not wait for kernels either, so the caller first makes sure no queued work
//     still uses the tail (GrowableBuffer waits for its stream, never for the whole device).
//  5. Chunks may live on several devices (GrowableOptions::devices, placed striped or balanced)
//     in the one range; access is granted per allocation to the devices in options().access,
//     which grant_access() changes for the mapped span and all later growth.
//  6. Compression follows GrowableOptions::compression per chunk: each new chunk's grant is read
//     back; under Compression::required a refused chunk fails its growth step (invariant 2).
//  7. The range is reserved by the storage itself, or is one slot leased from a ReservationPool
//     (GrowableOptions::reservation_pool); either way it is fixed for the storage's life and
//     max_capacity() is its size. A default-sized range holds a share of the process's budget
//     (DefaultReservationLimits) until it is freed. A default-constructed storage is unbound: no backend, no range.
//  8. Mapping ahead (GrowableOptions::map_ahead): from the second growth step on, while less than
//     the hide size is mapped, each step hands the next one, step_ahead_bytes(), to the process's
//     mapping thread, which creates and maps it right behind capacity() off the caller's thread.
//     The growth that needs it takes it (waiting at most for the thread's current driver call,
//     then finishing it itself); capacity(), data() and the strong guarantee are as without it, and
//     a preparation that failed is redone by that growth. Shrinking, grant_access(), moves and
//     destruction give the prepared step back.
//  9. Observers (growth_observer.hpp) attached with add_observer() are told of each chunk after it
//     is mapped and before the growth returns, and before it is unmapped; one that throws undoes
//     the growth (invariant 2). A step prepared ahead is reported when a growth takes it into
//     capacity(), never while it lies beyond capacity(). Observers are called on the caller's
//     thread only, and move with the storage.
// It knows nothing of element types, sizes in use or streams: GrowableBuffer<T> keeps those.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include <cuvmm/address_range.hpp>
#include <cuvmm/backend.hpp>
#include <cuvmm/growth_observer.hpp>
#include <cuvmm/growth_policy.hpp>
#include <cuvmm/mapping.hpp>
#include <cuvmm/physical_chunk.hpp>
#include <cuvmm/reservation_pool.hpp>

namespace cuvmm {

/// Which device of GrowableOptions::devices holds the next chunk.
enum class Placement : std::uint8_t {
  striped,   ///< chunk i on devices[i % n]: simple, but chunks grow, so later devices get more
  balanced,  ///< each chunk on the device that holds the fewest of this buffer's bytes (ties: list order)
};

/// Whether a growable buffer prepares its next growth step ahead of need (GrowableOptions::map_ahead).
enum class MapAhead : std::uint8_t {
  automatic,  ///< on for device memory under the fast policy, off otherwise
  on,         ///< on under the fast policy, in any memory space (the compact policy never maps ahead)
  off,        ///< every growth step is made by the append that needs it
};

namespace detail {
class StepAhead;
struct TakenStep;
}  // namespace detail

/// How a growable buffer places, sizes and shares its memory.
struct GrowableOptions {
  /// Most bytes the buffer may ever hold (its address range). 0: as large as the memory of the
  /// devices it places chunks on while the process's default reservations stay within
  /// DefaultReservationLimits::budget_bytes, and fallback_bytes once they do not (so thousands of
  /// default buffers still work). If that much address space cannot be had, the reservation is
  /// retried at half the size down to `min_capacity_bytes`; max_capacity() reports what was obtained.
  std::size_t max_capacity_bytes = 0;
  /// The smallest reservation accepted when halving (0: one chunk of the granularity).
  std::size_t min_capacity_bytes = 0;
  /// Devices that hold the chunks (distinct, non-negative), in the order `placement` uses them.
  /// Empty: device 0. One address range holds the chunks of all of them.
  std::vector<int> devices{};
  /// How chunks are spread over `devices`.
  Placement placement = Placement::striped;
  /// Who may access the memory, per allocation (no peer access is enabled device-wide). Empty:
  /// read-write for every device in `devices`. Peers that hold no chunk may be listed too.
  std::vector<AccessGrant> access{};
  /// Cap on the size of one chunk (rounded to the granularity).
  std::size_t max_chunk_bytes = default_max_chunk_bytes;
  /// Handle types every chunk must be exportable as (for sharing between processes; NCCL's own
  /// VMM memory asks for posix_fd, and fabric where the device has it).
  HandleType shareable = HandleType::none;
  /// Chunks usable by GPUDirect RDMA (ChunkProperties::gpu_direct_rdma): for memory that a NIC
  /// registers (NCCL's network transports, ibv_reg_dmabuf_mr). Unsupported where the device does not
  /// report RDMA support for VMM memory.
  bool gpu_direct_rdma = false;
  /// Which of the backend's granularities sizes the chunks: minimum (the default), or the
  /// recommended one, which NCCL uses for its own VMM memory (larger on some devices).
  GranularityKind granularity = GranularityKind::minimum;
  /// Generic compression of every chunk: none, preferred (fall back to ordinary memory where the
  /// device does not grant it; GrowableStats says how many bytes fell back) or required (a growth
  /// step that gets an uncompressed chunk throws cuvmm::Unsupported and changes nothing).
  Compression compression = Compression::none;
  /// How chunk sizes grow (growth_policy.hpp): `fast` grows like std::vector below the hide size,
  /// then in chunks of at least the hide size, then of 1/16 of the size; `compact` takes 1/16 of
  /// the size at every size (least slack, more growth steps for small buffers).
  GrowthPolicy growth = GrowthPolicy::fast;
  /// The fast policy's hide size: bytes the device writes in about twice the time one growth step
  /// takes, so a chunk this large hides its step (and the appends issued meanwhile) behind the
  /// GPU's work (growth_policy.hpp). 0: default_hide_bytes() of the smallest placement device's
  /// memory (its memory / 256: ~556 MiB on an H200). `cuvmm-plan` measures it for a GPU and prints
  /// the value to set here. Rounded down to whole granules, within [one granule, the chunk cap].
  std::size_t hide_bytes = 0;
  /// Whether the next growth step is prepared ahead, off the caller's thread, so that its driver
  /// calls overlap the GPU's work (DESIGN.md invariant 6): at most one step, from the second growth
  /// step on while less than the hide size is mapped (step_ahead_bytes); its bytes are
  /// GrowableStats::bytes_prepared until a growth takes them.
  MapAhead map_ahead = MapAhead::automatic;
  /// Where the address range comes from. Null (the default): the buffer reserves its own range,
  /// sized by max_capacity_bytes (0: as large as its devices' memory, ~141 GB on an H200, within the
  /// process's DefaultReservationLimits). A pool (reservation_pool.hpp): the buffer takes one
  /// of the pool's fixed slots (same backend), so thousands of buffers cost a few reservations
  /// and slot_bytes of address space each; max_capacity_bytes then is 0 (the whole slot) or a smaller
  /// limit within it, and min_capacity_bytes is not used. The pool object must be alive when a buffer is
  /// constructed with it (copies of a pooled buffer included); leased slots keep its ranges alive.
  ReservationPool* reservation_pool = nullptr;
};

/// Process-wide limits on the address space that buffers reserve by default (GrowableOptions with
/// max_capacity_bytes 0 and no reservation_pool; DESIGN.md invariant 5). A process has ~128 TiB of
/// address space (H200: 125 reservations of 1 TiB, then cuMemAddressReserve fails; a Linux x86-64
/// process likewise), and a default reservation is as large as the device (~141 GB on an H200), so
/// without a budget ~900 default buffers would take all of it and every later one would fail.
/// Default-sized reservations are granted while the bytes they hold stay within budget_bytes; past
/// that, a default buffer reserves fallback_bytes instead (its max_capacity() says so). With the
/// defaults an H200 process gets 468 buffers that can each grow to the whole device, then
/// ~16,000 more of 4 GiB each. Buffers that set max_capacity_bytes or a pool are not counted.
struct DefaultReservationLimits {
  /// Address space that default-sized reservations may hold at once (half the process's).
  std::size_t budget_bytes = std::size_t{64} << 40;
  /// What a default buffer reserves once the budget is spent (rounded to the granularity).
  std::size_t fallback_bytes = std::size_t{4} << 30;
};

/// Replaces the process's limits (thread-safe); buffers reserved already keep their ranges.
void set_default_reservation_limits(const DefaultReservationLimits& limits) noexcept;
[[nodiscard]] DefaultReservationLimits default_reservation_limits() noexcept;
/// Address space held now by default-sized reservations: what counts against budget_bytes.
[[nodiscard]] std::size_t default_reserved_bytes() noexcept;

namespace detail {
/// A share of DefaultReservationLimits::budget_bytes, given back when destroyed. Move-only.
class ReservationBudgetShare {
 public:
  ReservationBudgetShare() noexcept = default;
  /// `bytes` of the budget, or an empty share when that would pass `budget` (nothing taken).
  static ReservationBudgetShare take(std::size_t bytes, std::size_t budget) noexcept;
  ReservationBudgetShare(ReservationBudgetShare&& other) noexcept : bytes_(std::exchange(other.bytes_, 0)) {}
  ReservationBudgetShare& operator=(ReservationBudgetShare&& other) noexcept {
    if (this != &other) {
      give_back();
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  ReservationBudgetShare(const ReservationBudgetShare&) = delete;
  ReservationBudgetShare& operator=(const ReservationBudgetShare&) = delete;
  ~ReservationBudgetShare() { give_back(); }
  /// Keeps only `bytes` (<= what is held): the reservation obtained was smaller.
  void shrink_to(std::size_t bytes) noexcept;
  explicit operator bool() const noexcept { return bytes_ != 0; }

 private:
  void give_back() noexcept;
  std::size_t bytes_ = 0;
};
}  // namespace detail

/// Counters of a growable buffer, for tests, benchmarks and capacity planning.
struct GrowableStats {
  std::size_t capacity_bytes = 0;      ///< mapped now
  std::size_t max_capacity_bytes = 0;  ///< reserved address space
  std::size_t chunk_count = 0;         ///< chunks mapped now
  std::size_t peak_capacity_bytes = 0; ///< most ever mapped at once
  std::size_t chunks_created = 0;      ///< cuMemCreate calls that succeeded, ever
  std::size_t chunks_released = 0;     ///< chunks given back by shrinking
  std::size_t access_calls = 0;        ///< set-access calls (each may cover many chunks)
  std::size_t growth_steps = 0;        ///< reserve() calls that mapped memory
  std::size_t oom_retries = 0;         ///< chunks retried at the exact size after OutOfMemory
  std::uint64_t growth_nanoseconds = 0;  ///< host time spent in growth steps (driver calls), ever
  Compression compression = Compression::none;  ///< the policy asked for (GrowableOptions::compression)
  std::size_t compressed_bytes = 0;             ///< mapped now in chunks granted compression
  std::size_t compression_fallback_bytes = 0;   ///< mapped now in chunks that asked for it and were refused
  // Mapping ahead (GrowableOptions::map_ahead). Every step handed to the mapping thread ends as
  // used, discarded or failed: prepared_steps = prepared_used + prepared_discarded + prepared_failed
  // (+ 1 while a step is pending).
  std::size_t bytes_prepared = 0;      ///< held now by the step prepared ahead (beyond capacity_bytes)
  std::size_t prepared_steps = 0;      ///< steps handed to the mapping thread, ever
  std::size_t prepared_used = 0;       ///< of those, taken by a growth step (finished by it where the thread had not)
  std::size_t prepared_discarded = 0;  ///< given back unused (shrinking, grant_access, moves, a failed growth)
  std::size_t prepared_failed = 0;     ///< failed on the mapping thread (the growth that needed the step made its own)
};

class GrowableStorage {
 public:
  /// An unbound storage: no backend, no range, nothing mapped (what a default-constructed
  /// GrowableBuffer holds until it first grows). Only assignment, destruction and the observers
  /// (all zero) may be used; bound() is false.
  GrowableStorage() noexcept = default;
  /// Reserves the address range (see GrowableOptions::max_capacity_bytes); maps nothing yet.
  explicit GrowableStorage(Backend& backend, GrowableOptions options = {});
  GrowableStorage(const GrowableStorage&) = delete;
  GrowableStorage& operator=(const GrowableStorage&) = delete;
  /// Moves leave `other` empty (no range, no chunks) but usable for destruction and assignment.
  GrowableStorage(GrowableStorage&& other) noexcept;
  GrowableStorage& operator=(GrowableStorage&& other) noexcept;
  /// Gives back a step prepared ahead (waiting at most for one driver call), then everything else.
  ~GrowableStorage();

  [[nodiscard]] Address data() const noexcept { return slot_ ? slot_.range().base() + slot_.offset() : range_.base(); }
  /// Bytes mapped and accessible from data().
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  /// Bytes of the address range: the most capacity() can ever be.
  [[nodiscard]] std::size_t max_capacity() const noexcept { return slot_ ? limit_ : range_.size(); }
  /// Whether the range is a slot of a ReservationPool rather than a reservation of its own.
  [[nodiscard]] bool pooled() const noexcept { return static_cast<bool>(slot_); }
  [[nodiscard]] std::size_t granularity() const noexcept { return granularity_; }
  [[nodiscard]] std::size_t chunk_count() const noexcept { return chunks_.size(); }
  /// Precondition: bound().
  [[nodiscard]] Backend& backend() const noexcept { return *backend_; }
  /// Whether a backend was given (false only for the default-constructed storage).
  [[nodiscard]] bool bound() const noexcept { return backend_ != nullptr; }
  [[nodiscard]] const GrowableOptions& options() const noexcept { return options_; }
  /// What sizes the chunks: granularity, cap, hide size (the default resolved) and policy.
  [[nodiscard]] const GrowthShape& growth_shape() const noexcept { return shape_; }
  [[nodiscard]] GrowableStats stats() const noexcept;
  /// The chunks mapped now, in address order.
  [[nodiscard]] const std::vector<PhysicalChunk>& chunks() const noexcept { return chunks_; }

  /// Makes capacity() >= bytes by mapping more chunks. Strong guarantee: on any failure
  /// (CapacityExceeded, OutOfMemory, a driver error) nothing changed and nothing leaked.
  void reserve(std::size_t bytes);

  /// Whether growth steps are prepared ahead (GrowableOptions::map_ahead, resolved).
  [[nodiscard]] bool maps_ahead() const noexcept { return map_ahead_; }
  /// Waits until the step being prepared ahead, if any, is ready or has failed: for tests and
  /// benchmarks that need settled statistics. Growth never needs it.
  void settle_step_ahead() const noexcept;
  /// Gives back the step prepared ahead, if any (no device work can use it: nothing to wait for).
  void give_back_step_ahead() noexcept;

  /// Bytes of this storage's chunks that live on `device`.
  [[nodiscard]] std::size_t bytes_on_device(int device) const noexcept;

  /// Grants, changes or (Access::none) revokes the access of the devices in `grants` on all the
  /// memory mapped now, with one backend call, and on every later growth step; devices not named
  /// keep theirs. options().access shows the result. Strong guarantee.
  void grant_access(std::span<const AccessGrant> grants);

  /// Whether shrink_to(bytes) would release anything (the last chunk is not needed for `bytes`).
  [[nodiscard]] bool can_shrink_to(std::size_t bytes) const noexcept;

  /// Unmaps and releases the tail chunks not needed to hold `bytes`, telling the observers of each
  /// first. Precondition: no queued device work still uses them.
  void shrink_to(std::size_t bytes) noexcept;

  /// Attaches `observer` (not null, not attached already: cuvmm::Error otherwise) and tells it of
  /// every chunk mapped now, in address order. If it throws, those it was told of are withdrawn,
  /// it is not attached, and the exception propagates (strong guarantee).
  void add_observer(std::shared_ptr<GrowthObserver> observer);
  /// Withdraws every chunk mapped now from `observer` (reverse order) and detaches it. False if it
  /// was not attached (then nothing is called).
  bool remove_observer(const GrowthObserver& observer) noexcept;
  /// The observers attached, in the order they are told of a new chunk.
  [[nodiscard]] std::size_t observer_count() const noexcept { return observers_.size(); }
  /// Chunk `index` of chunks() as observers see it. Precondition: index < chunk_count().
  [[nodiscard]] BackedRange backed_range(std::size_t index) const noexcept;

 private:
  /// The device of the next chunk, after the chunks mapped now and those of the step so far.
  int next_device(const std::vector<PhysicalChunk>& pending) const noexcept;
  /// Takes the range from options_.reservation_pool (constructor helper).
  void take_slot();
  /// Creates one chunk of `bytes` on `device`; on OutOfMemory retries once with `fallback_bytes`
  /// (the least that still satisfies the request) when that is smaller.
  PhysicalChunk create_chunk(int device, std::size_t bytes, std::size_t fallback_bytes);
  /// Hands the next step to the mapping thread (after a growth step; never throws: not preparing
  /// a step only costs time).
  void prepare_step_ahead() noexcept;
  /// Takes the step prepared ahead (see StepAhead::take), counting how it ended unless it is used.
  detail::TakenStep take_step_ahead() noexcept;
  /// Tells every observer that every chunk mapped now is about to go (before the unmap of all).
  void withdraw_all() noexcept;

  Backend* backend_ = nullptr;
  GrowableOptions options_;
  std::size_t granularity_ = 0;
  GrowthShape shape_;
  /// The range mappings go into, and where this storage's bytes start in it.
  AddressRange& active_range() noexcept { return slot_ ? slot_.range() : range_; }
  std::size_t range_offset() const noexcept { return slot_ ? slot_.offset() : 0; }

  ReservationPool::Slot slot_;          // a pooled range (or empty); like range_, outlives the mappings
  std::size_t limit_ = 0;               // bytes of the slot this storage may use
  detail::ReservationBudgetShare budget_share_;  // given back after range_ is freed
  AddressRange range_;                  // declared before the chunks and mappings: freed last
  std::vector<PhysicalChunk> chunks_;   // released after the mappings
  std::vector<Mapping> mappings_;       // mappings_[i] maps chunks_[i]; unmapped first
  std::size_t capacity_ = 0;
  GrowableStats counters_;              // the cumulative counters (the rest is derived)
  bool map_ahead_ = false;              // GrowableOptions::map_ahead resolved
  std::shared_ptr<detail::StepAhead> step_ahead_;  // the step prepared ahead, shared with the mapping thread
  std::vector<std::shared_ptr<GrowthObserver>> observers_;  // told of chunks_ in this order
};

}  // namespace cuvmm
