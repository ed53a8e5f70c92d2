// history.cpp: see history.hpp.
#include "history.hpp"

#include <c10/util/ApproximateClock.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <iterator>
#include <stack>
#include <utility>

namespace cuvmm_torch {

namespace {

/// PyTorch's compile_context when none was pushed.
constexpr const char* no_compile_context = "N/A";

thread_local std::stack<std::string> compile_contexts;
thread_local std::string thread_user_metadata;

}  // namespace

void TraceRing::unwrap() {
  std::rotate(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(oldest_), entries_.end());
  oldest_ = 0;
}

void TraceRing::set_capacity(std::size_t capacity) {
  capacity = std::max<std::size_t>(capacity, 1);
  unwrap();  // entries pushed next go after the newest
  if (entries_.size() > capacity) {
    entries_.erase(entries_.begin(), entries_.end() - static_cast<std::ptrdiff_t>(capacity));
  }
  capacity_ = capacity;
}

void TraceRing::push(TraceEntry entry) {
  if (entries_.size() < capacity_) {
    entries_.push_back(std::move(entry));
    return;
  }
  entries_[oldest_] = std::move(entry);
  oldest_ = (oldest_ + 1) % capacity_;
}

void TraceRing::clear() {
  entries_.clear();
  oldest_ = 0;
}

std::vector<TraceEntry> TraceRing::entries() const {
  std::vector<TraceEntry> oldest_first;
  oldest_first.reserve(entries_.size());
  auto const split = entries_.begin() + static_cast<std::ptrdiff_t>(oldest_);
  oldest_first.insert(oldest_first.end(), split, entries_.end());
  oldest_first.insert(oldest_first.end(), entries_.begin(), split);
  return oldest_first;
}

std::set<TraceEntry::Action> parse_skip_actions(const std::vector<std::string>& names) {
  std::set<TraceEntry::Action> actions;
  for (std::string const& name : names) {
    try {
      actions.insert(c10::CachingDeviceAllocator::parseTraceEntryAction(name));
    } catch (const c10::Error&) {
      TORCH_CHECK_VALUE(false, "cuvmm_torch: recordHistory: skip_actions names \"", name,
                        "\", which is not an action of the allocator's trace");
    }
  }
  return actions;
}

void History::configure(const HistorySettings& settings, bool clear) {
  settings_ = settings;
  ring_.set_capacity(settings.max_entries);
  if (!settings.enabled || clear) ring_.clear();
}

void History::record(TraceEntry::Action action, int device, std::size_t addr, std::size_t size, void* stream,
                     MempoolId_t pool, std::shared_ptr<GatheredContext> context) {
  if (!settings_.enabled || settings_.skipped.count(action) != 0) return;
  bool const keep_context = settings_.when >= RecordContext::ALLOC;
  ring_.push(TraceEntry(action, static_cast<c10::DeviceIndex>(device), addr, size, stream, pool,
                        c10::getApproximateTime(), keep_context ? std::move(context) : nullptr,
                        compile_contexts.empty() ? no_compile_context : compile_contexts.top(), thread_user_metadata));
}

void push_compile_context(const std::string& context) { compile_contexts.push(context); }

void pop_compile_context() {
  if (!compile_contexts.empty()) compile_contexts.pop();
}

void set_user_metadata(const std::string& metadata) { thread_user_metadata = metadata; }

const std::string& user_metadata() { return thread_user_metadata; }

}  // namespace cuvmm_torch
