// PagePool: the Arena's slots and pages (see page_pool.hpp for what it owns and its invariants).
//
// Never does: wait for a stream, look at a cache, or keep a page created for a Span that failed.
// Cost: take_slots, unmap and retire are O(log n) in the free extents plus O(pages) touched;
// pooling and releasing are O(pages moved); unmap_stale() (when no free run is left) is O(pages).
#include "allocators/page_pool.hpp"

#include <algorithm>
#include <cassert>
#include <new>
#include <string>
#include <utility>

#include <cuvmm/error.hpp>

#include "support/announcement.hpp"
#include "support/node_ahead.hpp"
#include "support/room_for_one.hpp"

namespace cuvmm::detail {
namespace {

/// Passes `fence`, if there is one, before its stale mapping is unmapped. A device that cannot say
/// (a sticky error) leaves nothing more to know: the mapping is unmapped all the same.
void pass_before_unmap(const Fence& fence) noexcept {
  if (!fence) return;
  try {
    fence->pass();
  } catch (...) {
  }
}

}  // namespace

PagePool::PagePool(Backend& backend, PagePoolOptions options)
    : backend_(&backend), options_(std::move(options)) {
  if (options_.large_page != 0) slots_per_large_ = options_.large_page / options_.page;
  std::size_t const alignment = options_.large_page != 0 ? options_.large_page : options_.page;
  range_ = AddressRange(*backend_, options_.address_space, alignment);
  free_slots_.insert(0, options_.address_space / options_.page);
  room_slots_ = options_.growth_room / options_.page;
  kept_free_slots_ = (options_.kept_free + options_.page - 1) / options_.page;
}

PagePool::~PagePool() {
  for (const auto& [slot, mapped] : mapped_) withdraw(slot, mapped.page.chunk);
  mapped_.clear();  // unmaps, then releases
  small_pool_.clear();
  large_pool_.clear();
}

std::size_t PagePool::pooled_bytes() const noexcept {
  return small_pool_.size() * options_.page + large_pool_.size() * options_.large_page;
}

void PagePool::park(Page page) noexcept {
  std::size_t const bytes = page.chunk.size();
  if (bytes != options_.page && bytes != options_.large_page) return release(std::move(page));  // a whole chunk: never pooled
  try {
    pool(bytes == options_.page ? Size::small : Size::large).push_back(std::move(page));
  } catch (const std::bad_alloc&) {
    release(std::move(page));
  }
}

BackedRange PagePool::backed_range(std::size_t slot, const PhysicalChunk& chunk) const noexcept {
  return BackedRange{.address = slot_address(slot),
                     .bytes = chunk.size(),
                     .offset = slot * options_.page,
                     .device = chunk.device(),
                     .chunk = chunk.handle()};
}

void PagePool::withdraw(std::size_t slot, const PhysicalChunk& chunk) noexcept {
  if (!observers_.empty()) withdraw_from_all(observers_, backed_range(slot, chunk));
}

void PagePool::add_observer(std::shared_ptr<GrowthObserver> observer) {
  std::vector<BackedRange> ranges;
  ranges.reserve(mapped_.size());
  for (const auto& [slot, mapped] : mapped_) ranges.push_back(backed_range(slot, mapped.page.chunk));
  std::sort(ranges.begin(), ranges.end(), [](const BackedRange& a, const BackedRange& b) { return a.address < b.address; });
  attach_observer(observers_, std::move(observer), ranges, "Arena::add_observer");
}

bool PagePool::remove_observer(const GrowthObserver& observer) noexcept {
  std::shared_ptr<GrowthObserver> const detached = detach_observer(observers_, observer);
  if (!detached) return false;
  for (const auto& [slot, mapped] : mapped_) detached->on_unmapping(backed_range(slot, mapped.page.chunk));
  return true;
}

void PagePool::unmap_stale(Page& page) noexcept {
  for (auto& [stale, fence] : page.stale) {
    pass_before_unmap(fence);
    std::size_t const first = slot_of(stale.address());
    std::size_t const count = stale.size() / options_.page;
    stale_bytes_ -= stale.size();
    stale.reset();
    try {
      free_slots_.insert(first, count);
    } catch (const std::bad_alloc&) {  // the addresses are lost to this arena, nothing else
    }
  }
  page.stale.clear();
}

bool PagePool::fences_done(const Page& page) noexcept {
  try {
    return std::all_of(page.stale.begin(), page.stale.end(),
                       [](const StaleMapping& stale) { return !stale.fence || stale.fence->done(); });
  } catch (...) {
    return false;
  }
}

void PagePool::release(Page page) noexcept {
  unmap_stale(page);
  physical_bytes_ -= page.chunk.size();
  // `page` dies here: the chunk goes back to the backend.
}

void PagePool::unmap_stale() noexcept {
  for (Page& page : small_pool_) unmap_stale(page);
  for (Page& page : large_pool_) unmap_stale(page);
  for (auto& [slot, mapped] : mapped_) unmap_stale(mapped.page);
}

std::size_t PagePool::release_pooled(Size size, std::size_t bytes, bool may_wait) noexcept {
  auto& from = pool(size);
  std::size_t released = 0;
  // Pages whose fences are done first, so that a wait comes only for what they do not cover.
  for (bool const waiting : {false, true}) {
    if (waiting && !may_wait) break;
    for (std::size_t i = from.size(); i-- > 0 && released < bytes;) {
      if (!waiting && !fences_done(from[i])) continue;
      released += from[i].chunk.size();
      release(std::move(from[i]));
      from.erase(from.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  return released;
}

std::size_t PagePool::release_all_pooled() noexcept {
  std::size_t const bytes = pooled_bytes();
  release_pooled(Size::small, bytes, true);
  release_pooled(Size::large, bytes, true);
  return bytes;
}

std::optional<std::size_t> PagePool::take_free_run(std::size_t slots) {
  auto const take = [&] {
    std::size_t const alignment = large_layout(slots) ? slots_per_large_ : 1;
    if (slots > 1 && room_slots_ != 0) {  // (a run of one slot, a slab page or a one-page request, is packed)
      if (auto const spaced = free_slots_.take_spaced(slots, alignment, room_slots_, kept_free_slots_)) return spaced;
    }
    return alignment > 1 ? free_slots_.take_aligned(slots, alignment) : free_slots_.take(slots);
  };
  auto first = take();
  if (!first && stale_bytes_ != 0) {  // the stale mappings' addresses are needed now
    unmap_stale();
    first = take();
  }
  return first;
}

std::optional<PagePool::Span> PagePool::take_slots(std::size_t slots) {
  auto const first = take_free_run(slots);
  if (!first) return std::nullopt;
  return std::optional<Span>(std::in_place, *this, *first, slots);
}

std::optional<std::size_t> PagePool::map_whole(std::size_t slots) {
  std::size_t const bytes = slots * options_.page;
  if (options_.byte_limit != 0 && physical_bytes_ + bytes > options_.byte_limit) {
    throw_out_of_memory("Arena::allocate", "a chunk of " + std::to_string(bytes) + " bytes would pass the byte limit " +
                                               std::to_string(options_.byte_limit));
  }
  auto const first = take_free_run(slots);
  if (!first) return std::nullopt;
  struct FreeSlots {  // the transaction: the slots go back unless the chunk is committed
    PagePool& pool;
    std::size_t first, slots;
    bool committed = false;
    ~FreeSlots() {
      if (!committed) pool.free_slots_.insert(first, slots);
    }
  } taken{*this, *first, slots};
  PhysicalChunk chunk(*backend_, bytes, options_.props);
  check_compression(chunk, options_.compression);
  Mapping mapping(range_, *first * options_.page, chunk, options_.grants);
  BackedRange const told = backed_range(*first, chunk);
  Announcement announcement(observers_);  // after the mapping: withdraws before it unmaps
  if (!observers_.empty()) announcement.tell({&told, 1});
  auto node = node_ahead<decltype(mapped_)>(*first, MappedPage());  // the one step left that can fail
  node.mapped() = MappedPage(Page{std::move(chunk), {}}, std::move(mapping));
  mapped_.insert(std::move(node));
  announcement.commit();
  taken.committed = true;
  mapped_bytes_ += bytes;
  physical_bytes_ += bytes;
  return first;
}

void PagePool::release_whole(std::size_t first) noexcept {
  auto node = mapped_.extract(first);
  assert(!node.empty());
  withdraw(first, node.mapped().page.chunk);
  std::size_t const bytes = node.mapped().page.chunk.size();
  node.mapped().mapping.reset();
  mapped_bytes_ -= bytes;
  release(std::move(node.mapped().page));
  try {
    free_slots_.insert(first, bytes / options_.page);
  } catch (const std::bad_alloc&) {  // the addresses are lost to this arena, nothing else
  }
}

PagePool::Span PagePool::take_slots_at(std::size_t first, std::size_t slots) {
  assert(!large_layout(slots) || first % slots_per_large_ == 0);  // and [first, first + slots) is free (erase checks)
  free_slots_.erase(first, slots);
  return Span(*this, first, slots);
}

void PagePool::unmap(std::size_t first, std::size_t count) {
  park_mapped(first, count, false, nullptr);
  free_slots_.insert(first, count);
}

void PagePool::retire(std::size_t first, std::size_t count, Fence fence) { park_mapped(first, count, true, fence); }

void PagePool::park_mapped(std::size_t first, std::size_t count, bool keep_stale, const Fence& fence) {
  for (std::size_t slot = first; slot < first + count;) {
    auto node = mapped_.extract(slot);
    assert(!node.empty());
    Page& page = node.mapped().page;
    std::size_t const bytes = page.chunk.size();
    withdraw(slot, page.chunk);  // it leaves its slots: before the unmap, or before it goes stale
    if (keep_stale) {
      try {
        page.stale.push_back(StaleMapping{std::move(node.mapped().mapping), fence});
        stale_bytes_ += bytes;
      } catch (const std::bad_alloc&) {  // no room to remember it: unmapped below instead, after its fence
        pass_before_unmap(fence);
        free_slots_.insert(slot, bytes / options_.page);
      }
    }
    node.mapped().mapping.reset();  // (a no-op once kept as stale)
    mapped_bytes_ -= bytes;
    slot += bytes / options_.page;
    park(std::move(page));
  }
}

// Span -------------------------------------------------------------------------------------------

PagePool::Span::Span(PagePool& pool, std::size_t first, std::size_t slots) noexcept
    : pool_(&pool), first_(first), slots_(slots) {
  large_wanted_ = pool.large_layout(slots) ? slots / pool.slots_per_large_ : 0;
  small_wanted_ = slots - large_wanted_ * pool.slots_per_large_;
}

PagePool::Span::Span(Span&& other) noexcept
    : pool_(other.pool_), first_(other.first_), slots_(other.slots_), large_wanted_(other.large_wanted_),
      small_wanted_(other.small_wanted_), large_(std::move(other.large_)), small_(std::move(other.small_)),
      fences_(std::move(other.fences_)), committed_(std::exchange(other.committed_, true)) {}

PagePool::Span::~Span() {
  if (committed_) return;
  for (auto* pages : {&large_, &small_}) {
    for (Entry& p : *pages) {
      if (!p.page.chunk) continue;
      if (p.created) {
        pool_->release(std::move(p.page));
      } else {
        pool_->park(std::move(p.page));
      }
    }
  }
  pool_->free_slots_.insert(first_, slots_);
}

std::size_t PagePool::Span::missing_bytes() const noexcept {
  return large_missing() * pool_->options_.large_page + small_missing() * pool_->options_.page;
}

void PagePool::Span::take_pooled() {
  for (auto [size, pages, missing] : {std::tuple{Size::large, &large_, large_missing()},
                                      std::tuple{Size::small, &small_, small_missing()}}) {
    auto& from = pool_->pool(size);
    pages->reserve(pages->size() + std::min(missing, from.size()));
    for (; missing > 0 && !from.empty(); --missing) {
      for (StaleMapping const& stale : from.back().stale) {
        if (stale.fence && std::find(fences_.begin(), fences_.end(), stale.fence) == fences_.end()) fences_.push_back(stale.fence);
      }
      pages->push_back(Entry{std::move(from.back()), false});
      from.pop_back();
    }
  }
}

void PagePool::Span::release_idle_other_size(bool may_wait) noexcept {
  if (large_missing() > 0) pool_->release_pooled(Size::small, large_missing() * pool_->options_.large_page, may_wait);
  if (small_missing() > 0) pool_->release_pooled(Size::large, small_missing() * pool_->options_.page, may_wait);
}

bool PagePool::Span::create_one(Size size) {
  std::size_t const bytes = size == Size::small ? pool_->options_.page : pool_->options_.large_page;
  if (pool_->options_.byte_limit != 0 && pool_->physical_bytes_ + bytes > pool_->options_.byte_limit) return false;
  auto& pages = size == Size::small ? small_ : large_;
  room_for_one(pages);
  PhysicalChunk created;
  try {
    created = PhysicalChunk(*pool_->backend_, bytes, pool_->options_.props);
  } catch (const OutOfMemory&) {
    return false;
  }
  check_compression(created, pool_->options_.compression);  // Unsupported: released as it unwinds
  pool_->physical_bytes_ += bytes;
  pages.push_back(Entry{Page{std::move(created), {}}, true});  // capacity reserved above: cannot throw
  return true;
}

void PagePool::Span::create() {
  while (large_missing() > 0 && create_one(Size::large)) {
  }
  if (large_missing() > 0) {  // the device (or the limit) gives no more large pages: small ones instead
    small_wanted_ += large_missing() * pool_->slots_per_large_;
    large_wanted_ = large_.size();
  }
  while (small_missing() > 0 && create_one(Size::small)) {
  }
}

std::size_t PagePool::Span::map() {
  assert(complete());
  PagePool& pool = *pool_;
  std::vector<Mapping> mappings;
  mappings.reserve(large_.size() + small_.size());
  std::size_t offset = first_ * pool.options_.page;
  for (auto* pages : {&large_, &small_}) {
    for (Entry const& p : *pages) {
      mappings.emplace_back(pool.range_, offset, p.page.chunk);
      offset += p.page.chunk.size();
    }
  }
  set_access(mappings, pool.options_.grants);
  // Observers hear of the pages before the commit; one that throws fails the span (the
  // announcement withdraws, then the local mappings unmap and the destructor gives the pages back).
  std::vector<BackedRange> ranges;
  Announcement announcement(pool.observers_);  // after the mappings: withdraws before they unmap
  if (!pool.observers_.empty()) {
    ranges.reserve(mappings.size());
    std::size_t at = first_;
    for (auto* pages : {&large_, &small_}) {
      for (Entry const& p : *pages) {
        ranges.push_back(pool.backed_range(at, p.page.chunk));
        at += p.page.chunk.size() / pool.options_.page;
      }
    }
    announcement.tell(ranges);
  }
  // Commit: a node of the map is made for every page first (the only step that can fail; the
  // buckets are reserved too, so that no insertion rehashes), then each page and its mapping move
  // into a node and the node into the map, which cannot fail.
  std::vector<decltype(pool.mapped_)::node_type> nodes;
  nodes.reserve(mappings.size());
  {
    decltype(pool.mapped_) staging;  // one for all the nodes: node_ahead would make a table per node
    staging.reserve(mappings.size());
    for (std::size_t i = 0; i < mappings.size(); ++i) staging.try_emplace(i);
    for (std::size_t i = 0; i < mappings.size(); ++i) nodes.push_back(staging.extract(i));
  }
  pool.mapped_.reserve(pool.mapped_.size() + mappings.size());
  std::size_t slot = first_;
  std::size_t i = 0;
  for (auto* pages : {&large_, &small_}) {
    for (Entry& p : *pages) {
      auto& node = nodes[i];
      std::size_t const bytes = p.page.chunk.size();
      node.key() = slot;
      node.mapped().page = std::move(p.page);
      node.mapped().mapping = std::move(mappings[i]);
      pool.mapped_.insert(std::move(node));
      pool.mapped_bytes_ += bytes;
      slot += bytes / pool.options_.page;
      ++i;
    }
  }
  announcement.commit();
  committed_ = true;
  for (auto* pages : {&large_, &small_}) {
    pool.pages_moved_ += static_cast<std::size_t>(std::count_if(pages->begin(), pages->end(), [](const Entry& p) { return !p.created; }));
  }
  return first_;
}

}  // namespace cuvmm::detail
