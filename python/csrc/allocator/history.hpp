// history.hpp: the allocator's history, as torch.cuda.memory._record_memory_history records it.
//
// Each DeviceState owns one History: the settings of the last recordHistory call and a ring buffer
// of PyTorch's TraceEntry (alloc_trace_max_entries of them, the newest kept). A TraceEntry's time is
// c10::getApproximateTime() (a TSC read where there is one); CuvmmAllocator::snapshot converts it to
// microseconds since the Unix epoch, as PyTorch's allocator does. Which context (Python and C++
// frames, gathered by PyTorch's recorder before the allocator's lock is taken) an entry keeps
// follows RecordContext: STATE keeps it on live blocks only, ALLOC and ALL in the trace too (ALL also
// gathers one at frees and empty_cache). The compile context and the user metadata are per thread,
// as in PyTorch (pushCompileContext, setUserMetadata).
//
// Not thread-safe: the allocator's lock guards every call (the thread-local parts need none).
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>

#include <cstddef>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace cuvmm_torch {

using TraceEntry = c10::CachingDeviceAllocator::TraceEntry;
using RecordContext = c10::CachingDeviceAllocator::RecordContext;
using GatheredContext = c10::GatheredContext;
using MempoolId_t = c10::MempoolId_t;

/// A fixed number of TraceEntry, the oldest overwritten first. Grows one entry at a time up to its
/// capacity, so that a capacity of SIZE_MAX (PyTorch's default) reserves nothing.
class TraceRing {
 public:
  /// At least 1. A capacity below the count keeps the newest entries.
  void set_capacity(std::size_t capacity);
  void push(TraceEntry entry);
  void clear();
  /// Oldest first.
  [[nodiscard]] std::vector<TraceEntry> entries() const;
  [[nodiscard]] std::size_t capacity() const { return capacity_; }

 private:
  /// Makes entries_[0] the oldest entry.
  void unwrap();

  std::vector<TraceEntry> entries_;  // invariant: size <= capacity_; oldest_ == 0 unless full
  std::size_t oldest_ = 0;
  std::size_t capacity_ = 1;
};

/// What recordHistory asked for; the same for every device.
struct HistorySettings {
  bool enabled = false;
  RecordContext when = RecordContext::NEVER;
  std::size_t max_entries = 1;
  std::set<TraceEntry::Action> skipped;
};

/// Parses recordHistory's skip_actions ("alloc", "free_requested", ...); an unknown name raises.
std::set<TraceEntry::Action> parse_skip_actions(const std::vector<std::string>& names);

class History {
 public:
  /// Applies a recordHistory call; the buffer is emptied when recording stops or `clear`.
  void configure(const HistorySettings& settings, bool clear);
  [[nodiscard]] bool enabled() const { return settings_.enabled; }
  /// Appends an entry unless recording is off or its action is skipped; its context is kept only
  /// when the settings ask for contexts in the trace (ALLOC or ALL).
  void record(TraceEntry::Action action, int device, std::size_t addr, std::size_t size, void* stream,
              MempoolId_t pool, std::shared_ptr<GatheredContext> context);
  /// Oldest first, times as approximate clock readings.
  [[nodiscard]] std::vector<TraceEntry> entries() const { return ring_.entries(); }

 private:
  HistorySettings settings_;
  TraceRing ring_;
};

/// The calling thread's compile context (pushCompileContext) and user metadata (setUserMetadata).
void push_compile_context(const std::string& context);
void pop_compile_context();
void set_user_metadata(const std::string& metadata);
const std::string& user_metadata();

}  // namespace cuvmm_torch
