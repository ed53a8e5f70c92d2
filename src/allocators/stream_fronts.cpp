// StreamFronts: the registry of per-stream fronts and the per-thread memory of the last one met.
// The design is in stream_fronts.hpp.
#include "allocators/stream_fronts.hpp"

#include <atomic>

#include "support/room_for_one.hpp"

namespace cuvmm::detail {
namespace {

std::atomic<std::uint64_t> next_serial{1};

/// The front a thread looked up last, with the registry (by serial, never reused, so that a
/// registry made where a destroyed one lay is never mistaken for it) and the stream it was for.
struct LastFront {
  std::uint64_t serial = 0;
  Stream stream = nullptr;
  StreamFront* front = nullptr;
};
thread_local LastFront last_front;

}  // namespace

StreamFronts::StreamFronts(std::size_t keys) : serial_(next_serial.fetch_add(1, std::memory_order_relaxed)), keys_(keys) {}

StreamFront* StreamFronts::find(Stream stream) {
  if (last_front.serial == serial_ && last_front.stream == stream) return last_front.front;
  std::lock_guard const held(registry_);
  auto const it = by_stream_.find(stream);
  if (it == by_stream_.end()) return nullptr;
  last_front = {serial_, stream, it->second};
  return it->second;
}

StreamFront* StreamFronts::registered(Stream stream) {
  std::lock_guard const held(registry_);
  auto const it = by_stream_.find(stream);
  return it == by_stream_.end() ? nullptr : it->second;
}

void StreamFronts::forget_last() noexcept { last_front = {}; }

StreamFront& StreamFronts::get(Stream stream) {
  std::lock_guard const held(registry_);
  if (auto const it = by_stream_.find(stream); it != by_stream_.end()) return *it->second;
  if (spare_.empty()) {
    auto front = std::make_unique<StreamFront>();
    front->parked.resize(keys_);
    room_for_one(all_);
    spare_.reserve(all_.capacity());  // spare_ never holds more than all_
    spare_.push_back(front.get());
    all_.push_back(std::move(front));  // capacity reserved
  }
  StreamFront& front = *spare_.back();
  by_stream_.emplace(stream, &front);  // (std::bad_alloc: the front stays spare)
  spare_.pop_back();
  std::lock_guard const front_held(front.lock);
  front.stream = stream;
  front.active = true;
  return front;
}

void StreamFronts::retire(StreamFront& front) noexcept {
  std::lock_guard const held(registry_);
  std::lock_guard const front_held(front.lock);
  by_stream_.erase(front.stream);
  front.active = false;
  spare_.push_back(&front);  // (capacity: spare_ was reserved for every front there is)
}

}  // namespace cuvmm::detail
