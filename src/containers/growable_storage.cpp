// GrowableStorage: reservation, growth steps and shrinking. See the design note in the header.
//
// A growth step is a transaction built from locals: the new chunks and their mappings live in
// vectors on the stack until every driver call succeeded; then they are moved (noexcept) into the
// members, whose capacity was reserved beforehand. If anything throws, the locals unmap and release
// what they hold, in that order (mappings are declared after chunks), and the object is unchanged.
// A step prepared ahead (mapping_worker.hpp) joins those locals first: a growth that fails gives it
// back with the rest, one that succeeds commits it with the rest.
// Observers (growth_observer.hpp) are told of the new chunks by one more local, an Announcement,
// declared after the mappings: if an observer throws, or anything after it, the Announcement
// withdraws what it told (before the mappings unmap); once the step commits, it withdraws nothing.
#include <cuvmm/growable_storage.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include <cuvmm/error.hpp>

#include "mapping_worker.hpp"
#include "support/announcement.hpp"

namespace cuvmm {
namespace {

// The process's default-reservation budget (DefaultReservationLimits): the limits, and the bytes
// that default-sized reservations hold now.
std::atomic<std::size_t> budget_bytes{DefaultReservationLimits{}.budget_bytes};
std::atomic<std::size_t> fallback_bytes{DefaultReservationLimits{}.fallback_bytes};
std::atomic<std::size_t> budget_used{0};

/// Devices must be distinct and non-negative: a clear error here, not a driver error later.
void check_devices(const GrowableOptions& options) {
  for (std::size_t i = 0; i < options.devices.size(); ++i) {
    int const device = options.devices[i];
    if (device < 0) throw_invalid_argument("GrowableStorage", "device " + std::to_string(device) + " is negative");
    if (std::find(options.devices.begin(), options.devices.begin() + static_cast<std::ptrdiff_t>(i), device) !=
        options.devices.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw_invalid_argument("GrowableStorage",
                             "device " + std::to_string(device) + " is listed twice in GrowableOptions::devices");
    }
  }
}

/// `grants` over `base`: an entry per device, the later one winning.
std::vector<AccessGrant> merged_access(std::vector<AccessGrant> base, std::span<const AccessGrant> grants) {
  for (const AccessGrant& grant : grants) {
    auto const same = std::find_if(base.begin(), base.end(), [&](const AccessGrant& g) { return g.device == grant.device; });
    if (same == base.end()) {
      base.push_back(grant);
    } else {
      same->access = grant.access;
    }
  }
  return base;
}

std::vector<int> placement_devices(const GrowableOptions& options) {
  return options.devices.empty() ? std::vector<int>{0} : options.devices;
}

std::vector<AccessGrant> access_grants(const GrowableOptions& options) {
  if (!options.access.empty()) return options.access;
  std::vector<AccessGrant> grants;
  for (int device : placement_devices(options)) grants.push_back({device, Access::read_write});
  return grants;
}

ChunkProperties chunk_properties(const GrowableOptions& options, int device) {
  return ChunkProperties{
      .device = device,
      .shareable = options.shareable,
      .compression = options.compression != Compression::none,
      .gpu_direct_rdma = options.gpu_direct_rdma};
}

/// The granularity that suits every device the buffer places chunks on.
std::size_t common_granularity(Backend& backend, const GrowableOptions& options) {
  std::size_t granularity = 0;
  for (int device : placement_devices(options)) {
    std::size_t const g = backend.granularity(chunk_properties(options, device), options.granularity);
    granularity = granularity == 0 ? g : std::max(granularity, g);
  }
  return granularity;
}

/// The fast policy's hide size when none is given: default_hide_bytes() of the smallest placement
/// device's memory (chunks go to each of them in turn).
std::size_t default_hide_for(Backend& backend, const GrowableOptions& options, std::size_t granularity) {
  std::size_t smallest = 0;
  for (int device : placement_devices(options)) {
    std::size_t const total = backend.memory_info(device).total;
    smallest = smallest == 0 ? total : std::min(smallest, total);
  }
  return default_hide_bytes(smallest, granularity);
}

/// Invariant 5: as large as the placement devices' memory unless told otherwise (within the
/// process's budget for such reservations, else DefaultReservationLimits::fallback_bytes); halve on
/// refusal. `share` receives the budget a default-sized range holds.
AddressRange reserve_range(Backend& backend, const GrowableOptions& options, std::size_t granularity,
                           detail::ReservationBudgetShare& share) {
  std::size_t wanted = options.max_capacity_bytes;
  if (wanted == 0) {
    std::vector<int> devices = placement_devices(options);
    std::sort(devices.begin(), devices.end());
    devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
    for (int device : devices) wanted += backend.memory_info(device).total;
  }
  wanted = round_up(wanted, granularity);
  if (options.min_capacity_bytes > SIZE_MAX - (granularity - 1)) {
    throw_invalid_argument("GrowableStorage", "min_capacity_bytes " + std::to_string(options.min_capacity_bytes) +
                                                  " cannot be rounded to the granularity " + std::to_string(granularity));
  }
  std::size_t const floor = std::max(round_up(options.min_capacity_bytes, granularity), granularity);
  if (wanted == 0) {
    throw_invalid_argument("GrowableStorage", "max_capacity_bytes " + std::to_string(options.max_capacity_bytes) +
                                                        " cannot be rounded to the granularity " +
                                                        std::to_string(granularity));
  }
  if (wanted < floor) wanted = floor;
  if (options.max_capacity_bytes == 0) {  // a default-sized range: within the budget, or the fallback
    share = detail::ReservationBudgetShare::take(wanted, budget_bytes.load(std::memory_order_relaxed));
    if (!share) {
      std::size_t const fallback = round_up(fallback_bytes.load(std::memory_order_relaxed), granularity);
      wanted = std::min(wanted, std::max(fallback, floor));
    }
  }
  for (;;) {
    try {
      AddressRange range(backend, wanted);
      if (share) share.shrink_to(range.size());
      return range;
    } catch (const Error&) {
      if (wanted <= floor) throw;
    } catch (const OutOfMemory&) {
      if (wanted <= floor) throw;
    }
    wanted = std::max(round_up(wanted / 2, granularity), floor);
  }
}

}  // namespace

GrowableStorage::GrowableStorage(Backend& backend, GrowableOptions options)
    : backend_(&backend), options_(std::move(options)) {
  check_devices(options_);
  if (options_.access.empty()) options_.access = access_grants(options_);
  if (options_.devices.empty()) options_.devices = placement_devices(options_);
  granularity_ = common_granularity(backend, options_);
  std::size_t hide = options_.hide_bytes;
  if (options_.growth == GrowthPolicy::fast && hide == 0) hide = default_hide_for(backend, options_, granularity_);
  shape_ = GrowthShape{granularity_, options_.max_chunk_bytes, hide, options_.growth};
  map_ahead_ = options_.growth == GrowthPolicy::fast &&
               (options_.map_ahead == MapAhead::on ||
                (options_.map_ahead == MapAhead::automatic && backend.space() == MemorySpace::device));
  if (options_.reservation_pool != nullptr) {
    take_slot();
  } else {
    range_ = reserve_range(backend, options_, granularity_, budget_share_);
  }
  counters_.max_capacity_bytes = max_capacity();
}

void GrowableStorage::take_slot() {
  ReservationPool& pool = *options_.reservation_pool;
  if (&pool.backend() != backend_) {
    throw_invalid_argument("GrowableStorage", "the reservation pool serves backend '" +
                                                  std::string(pool.backend().name()) + "', the buffer '" +
                                                  std::string(backend_->name()) + "'");
  }
  if (pool.slot_bytes() % granularity_ != 0) {
    throw_invalid_argument("GrowableStorage", "the pool's slots of " + std::to_string(pool.slot_bytes()) +
                                                  " bytes are not whole granules of " + std::to_string(granularity_));
  }
  std::size_t limit = pool.slot_bytes();
  if (options_.max_capacity_bytes != 0) {
    std::size_t const wanted = round_up(options_.max_capacity_bytes, granularity_);
    if (wanted == 0 || wanted > limit) {
      throw_invalid_argument("GrowableStorage", "max_capacity_bytes " + std::to_string(options_.max_capacity_bytes) +
                                                          " does not fit in the pool's slots of " + std::to_string(limit) +
                                                          " bytes");
    }
    limit = wanted;
  }
  ReservationPool::Slot slot = pool.acquire();
  if ((slot.range().base() + slot.offset()) % granularity_ != 0) {
    // The slab is aligned to the backend's minimum granularity; this buffer's chunks need more
    // (e.g. compressible or multi-device chunks): the slot goes back to the pool.
    throw_invalid_argument("GrowableStorage", "the pool's slots are not aligned to this buffer's granularity " +
                                                  std::to_string(granularity_));
  }
  slot_ = std::move(slot);
  limit_ = limit;
}

GrowableStorage::GrowableStorage(GrowableStorage&& other) noexcept : GrowableStorage() { *this = std::move(other); }

GrowableStorage& GrowableStorage::operator=(GrowableStorage&& other) noexcept {
  if (this != &other) {
    // Steps prepared ahead map into the ranges that move or go: both are given back first.
    give_back_step_ahead();
    other.give_back_step_ahead();
    // Our own mappings go before our range and chunks, as in the destructor; our observers hear
    // of it first and leave with them.
    withdraw_all();
    observers_ = std::move(other.observers_);
    other.observers_.clear();
    mappings_.clear();
    chunks_.clear();
    range_ = std::move(other.range_);
    budget_share_ = std::move(other.budget_share_);  // after our range is freed
    slot_ = std::move(other.slot_);
    limit_ = std::exchange(other.limit_, 0);
    chunks_ = std::move(other.chunks_);
    mappings_ = std::move(other.mappings_);
    other.chunks_.clear();
    other.mappings_.clear();
    backend_ = other.backend_;
    options_ = std::move(other.options_);
    granularity_ = other.granularity_;
    shape_ = other.shape_;
    capacity_ = std::exchange(other.capacity_, 0);
    counters_ = std::exchange(other.counters_, {});
    map_ahead_ = other.map_ahead_;
  }
  return *this;
}

GrowableStorage::~GrowableStorage() {
  give_back_step_ahead();
  withdraw_all();
}

void set_default_reservation_limits(const DefaultReservationLimits& limits) noexcept {
  budget_bytes.store(limits.budget_bytes, std::memory_order_relaxed);
  fallback_bytes.store(limits.fallback_bytes, std::memory_order_relaxed);
}

DefaultReservationLimits default_reservation_limits() noexcept {
  return {budget_bytes.load(std::memory_order_relaxed), fallback_bytes.load(std::memory_order_relaxed)};
}

std::size_t default_reserved_bytes() noexcept { return budget_used.load(std::memory_order_relaxed); }

namespace detail {

ReservationBudgetShare ReservationBudgetShare::take(std::size_t bytes, std::size_t budget) noexcept {
  ReservationBudgetShare share;
  std::size_t used = budget_used.load(std::memory_order_relaxed);
  do {
    if (bytes == 0 || bytes > budget || used > budget - bytes) return share;
  } while (!budget_used.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  share.bytes_ = bytes;
  return share;
}

void ReservationBudgetShare::shrink_to(std::size_t bytes) noexcept {
  if (bytes >= bytes_) return;
  budget_used.fetch_sub(bytes_ - bytes, std::memory_order_relaxed);
  bytes_ = bytes;
}

void ReservationBudgetShare::give_back() noexcept {
  if (bytes_ != 0) budget_used.fetch_sub(std::exchange(bytes_, 0), std::memory_order_relaxed);
}

}  // namespace detail

GrowableStats GrowableStorage::stats() const noexcept {
  GrowableStats s = counters_;
  s.capacity_bytes = capacity_;
  s.max_capacity_bytes = max_capacity();
  s.chunk_count = chunks_.size();
  s.compression = options_.compression;
  if (step_ahead_) {  // the pending step's costs count from when they were paid
    detail::StepAhead::Counts const pending = step_ahead_->counts();
    s.bytes_prepared = pending.bytes_held;
    s.chunks_created += pending.chunks_created;
    s.access_calls += pending.access_calls;
    s.prepared_failed += pending.failed ? 1 : 0;
  }
  for (const PhysicalChunk& chunk : chunks_) {
    if (chunk.compression_granted()) {
      s.compressed_bytes += chunk.size();
    } else if (chunk.compression_requested()) {
      s.compression_fallback_bytes += chunk.size();
    }
  }
  return s;
}

std::size_t GrowableStorage::bytes_on_device(int device) const noexcept {
  std::size_t bytes = 0;
  for (const PhysicalChunk& chunk : chunks_) bytes += chunk.device() == device ? chunk.size() : 0;
  return bytes;
}

int GrowableStorage::next_device(const std::vector<PhysicalChunk>& pending) const noexcept {
  const std::vector<int>& devices = options_.devices;
  if (options_.placement == Placement::striped) return devices[(chunks_.size() + pending.size()) % devices.size()];
  int best = devices.front();
  std::size_t best_bytes = SIZE_MAX;
  for (int device : devices) {
    std::size_t held = bytes_on_device(device);
    for (const PhysicalChunk& chunk : pending) held += chunk.device() == device ? chunk.size() : 0;
    if (held < best_bytes) {
      best = device;
      best_bytes = held;
    }
  }
  return best;
}

void GrowableStorage::grant_access(std::span<const AccessGrant> grants) {
  if (grants.empty()) return;
  std::vector<AccessGrant> merged = merged_access(options_.access, grants);
  give_back_step_ahead();  // prepared with the access of before
  // The whole list goes to the backend: the host backend applies the most permissive grant, and
  // the driver sets every listed device (unchanged ones to what they had).
  if (!mappings_.empty()) set_access(mappings_, merged);
  options_.access.swap(merged);  // noexcept: the commit
}

PhysicalChunk GrowableStorage::create_chunk(int device, std::size_t bytes, std::size_t fallback_bytes) {
  ChunkProperties const props = chunk_properties(options_, device);
  PhysicalChunk chunk;
  try {
    chunk = PhysicalChunk(*backend_, bytes, props);
  } catch (const OutOfMemory&) {
    if (fallback_bytes >= bytes) throw;
    // The device cannot hold a whole policy-sized chunk, but may hold what is really needed.
    chunk = PhysicalChunk(*backend_, fallback_bytes, props);
    ++counters_.oom_retries;
  }
  check_compression(chunk, options_.compression);  // required but refused: the local chunk is released
  return chunk;
}

void GrowableStorage::reserve(std::size_t bytes) {
  if (bytes <= capacity_) return;
  if (max_capacity() == 0) throw_invalid_argument("GrowableStorage::reserve", "the storage was moved from");
  if (bytes > max_capacity()) throw CapacityExceeded(bytes, max_capacity());
  auto const started = std::chrono::steady_clock::now();

  std::vector<PhysicalChunk> new_chunks;  // declared before the mappings: released after them
  std::vector<Mapping> new_mappings;
  std::size_t const cap = chunk_cap_bytes(granularity_, options_.max_chunk_bytes);
  std::size_t const estimate = (bytes - capacity_) / cap + 2;
  new_chunks.reserve(estimate);
  new_mappings.reserve(estimate);

  // The step prepared ahead, if any, is this step's first chunk, right behind capacity_: made,
  // mapped and granted ahead, or finished here if the mapping thread had not got that far. (One
  // that failed there is not redone as planned: this step is made as if none had been prepared.)
  std::size_t mapped = capacity_;
  std::size_t granted = 0;  // new_mappings[0, granted) have their access already
  std::size_t made_ahead = 0;  // new_chunks[0, made_ahead) were made by the mapping thread
  {
    detail::TakenStep ahead = take_step_ahead();
    if (!ahead.failed && ahead.planned_bytes != 0) {
      made_ahead = ahead.step.chunk ? 1 : 0;
      if (!ahead.step.chunk) {
        std::size_t const needed = round_up(bytes - mapped, granularity_);
        ahead.step.chunk = create_chunk(ahead.device, ahead.planned_bytes, std::min(needed, ahead.planned_bytes));
      }
      new_chunks.push_back(std::move(ahead.step.chunk));
      if (ahead.step.mapping) {
        new_mappings.push_back(std::move(ahead.step.mapping));
      } else {
        new_mappings.emplace_back(active_range(), range_offset() + mapped, new_chunks.back());
      }
      granted = ahead.step.accessible ? 1 : 0;
      mapped += new_chunks.back().size();
    }
  }
  bool const uses_prepared = !new_chunks.empty();
  while (mapped < bytes) {
    std::size_t const room = max_capacity() - mapped;
    std::size_t const needed = round_up(bytes - mapped, granularity_);
    std::size_t const size = std::min(next_chunk_bytes(mapped, bytes, shape_), room);
    PhysicalChunk chunk = create_chunk(next_device(new_chunks), size, std::min(needed, size));
    new_mappings.emplace_back(active_range(), range_offset() + mapped, chunk);
    mapped += chunk.size();
    new_chunks.push_back(std::move(chunk));
  }
  // One access call for the whole new span (the expensive driver call), less what was granted ahead.
  bool const grants_now = granted < new_mappings.size();
  if (grants_now) set_access(std::span<Mapping>(new_mappings).subspan(granted), options_.access);

  // Commit: make room first (may throw, nothing changed yet), tell the observers (may throw:
  // the announcement withdraws what it told, then the locals unmap), then only noexcept moves.
  chunks_.reserve(chunks_.size() + new_chunks.size());
  mappings_.reserve(mappings_.size() + new_mappings.size());
  std::vector<BackedRange> new_ranges;
  detail::Announcement announcement(observers_);  // after the mappings: withdraws before they unmap
  if (!observers_.empty()) {
    new_ranges.reserve(new_chunks.size());
    for (std::size_t i = 0; i < new_chunks.size(); ++i) {
      new_ranges.push_back(BackedRange{.address = new_mappings[i].address(),
                                       .bytes = new_chunks[i].size(),
                                       .offset = new_mappings[i].address() - data(),
                                       .device = new_chunks[i].device(),
                                       .chunk = new_chunks[i].handle()});
    }
    announcement.tell(new_ranges);
  }
  announcement.commit();
  counters_.chunks_created += new_chunks.size() - made_ahead;  // the mapping thread's counted when taken
  counters_.access_calls += grants_now ? 1 : 0;
  ++counters_.growth_steps;
  if (uses_prepared) {
    ++counters_.prepared_used;
    --counters_.prepared_discarded;  // take_step_ahead() counted it discarded until now
  }
  for (PhysicalChunk& chunk : new_chunks) chunks_.push_back(std::move(chunk));
  for (Mapping& mapping : new_mappings) mappings_.push_back(std::move(mapping));
  capacity_ = mapped;
  counters_.peak_capacity_bytes = std::max(counters_.peak_capacity_bytes, capacity_);
  counters_.growth_nanoseconds += static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started).count());
  if (map_ahead_ && counters_.growth_steps >= 2) prepare_step_ahead();
}

void GrowableStorage::prepare_step_ahead() noexcept {
  std::size_t const bytes = std::min(step_ahead_bytes(capacity_, shape_), max_capacity() - capacity_);
  if (bytes == 0) return;
  try {
    auto step = std::make_shared<detail::StepAhead>(detail::StepPlan{
        .backend = backend_,
        .range = &active_range(),
        .offset = range_offset() + capacity_,
        .bytes = bytes,
        .props = chunk_properties(options_, next_device({})),
        .compression = options_.compression,
        .access = options_.access,
    });
    if (!detail::MappingWorker::submit(step)) return;
    step_ahead_ = std::move(step);
    ++counters_.prepared_steps;
  } catch (...) {  // no memory for the plan: this growth simply maps on demand
  }
}

detail::TakenStep GrowableStorage::take_step_ahead() noexcept {
  if (!step_ahead_) return {};
  detail::TakenStep taken = step_ahead_->take();
  step_ahead_.reset();
  counters_.chunks_created += taken.chunks_created;
  counters_.access_calls += taken.step.access_calls;
  if (taken.failed) {
    ++counters_.prepared_failed;
  } else {
    ++counters_.prepared_discarded;  // until a growth step commits it (reserve)
  }
  return taken;
}

void GrowableStorage::settle_step_ahead() const noexcept {
  if (step_ahead_) step_ahead_->settle();
}

void GrowableStorage::give_back_step_ahead() noexcept {
  detail::TakenStep const unused = take_step_ahead();
}  // unmapped, then released

bool GrowableStorage::can_shrink_to(std::size_t bytes) const noexcept {
  return !chunks_.empty() && capacity_ - chunks_.back().size() >= bytes;
}

void GrowableStorage::shrink_to(std::size_t bytes) noexcept {
  give_back_step_ahead();  // it lies behind the tail that goes
  std::size_t keep = chunks_.size();
  std::size_t kept_capacity = capacity_;
  while (keep > 0 && kept_capacity - chunks_[keep - 1].size() >= bytes) {
    kept_capacity -= chunks_[keep - 1].size();
    --keep;
  }
  std::size_t const released = chunks_.size() - keep;
  if (released == 0) return;
  for (std::size_t i = chunks_.size(); i-- > keep;) {  // reverse order, each observer in reverse
    detail::withdraw_from_all(observers_, backed_range(i));
  }
  auto const first_gone = static_cast<std::ptrdiff_t>(keep);
  mappings_.erase(mappings_.begin() + first_gone, mappings_.end());  // unmap first
  chunks_.erase(chunks_.begin() + first_gone, chunks_.end());        // then release
  capacity_ = kept_capacity;
  counters_.chunks_released += released;
}

BackedRange GrowableStorage::backed_range(std::size_t index) const noexcept {
  Address const address = mappings_[index].address();
  return BackedRange{.address = address,
                     .bytes = chunks_[index].size(),
                     .offset = address - data(),
                     .device = chunks_[index].device(),
                     .chunk = chunks_[index].handle()};
}

void GrowableStorage::add_observer(std::shared_ptr<GrowthObserver> observer) {
  std::vector<BackedRange> ranges;
  ranges.reserve(chunks_.size());
  for (std::size_t i = 0; i < chunks_.size(); ++i) ranges.push_back(backed_range(i));
  detail::attach_observer(observers_, std::move(observer), ranges, "GrowableStorage::add_observer");
}

bool GrowableStorage::remove_observer(const GrowthObserver& observer) noexcept {
  std::shared_ptr<GrowthObserver> const detached = detail::detach_observer(observers_, observer);
  if (!detached) return false;
  for (std::size_t i = chunks_.size(); i-- > 0;) detached->on_unmapping(backed_range(i));
  return true;
}

void GrowableStorage::withdraw_all() noexcept {
  for (std::size_t i = chunks_.size(); i-- > 0;) detail::withdraw_from_all(observers_, backed_range(i));
}

}  // namespace cuvmm
