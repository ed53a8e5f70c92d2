// arena_dicts.hpp: the Arena's statistics and options as Python dicts, one definition for both
// extensions (_C, the plug-in's; _allocator, the whole CUDA allocator's), so that
// cuvmm_torch.stats() and arena_options() name the same keys whichever is enabled. Every
// ArenaStats and ArenaOptions field that a user reads appears; test/torch/cpu_tests.py checks the keys.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include <cuvmm/arena.hpp>

namespace cuvmm_torch {

inline pybind11::dict arena_counter_dict(const cuvmm::ArenaCounter& c) {
  pybind11::dict d;
  d["current"] = c.current;
  d["peak"] = c.peak;
  d["total"] = c.total;
  return d;
}

/// Where the physical bytes were (ArenaStats::at_physical_peak), by kind.
inline pybind11::dict arena_held_dict(const cuvmm::ArenaHeld& h) {
  pybind11::dict d;
  d["bytes_requested"] = h.bytes_requested;
  d["bytes_live"] = h.bytes_live;
  d["bytes_pinned"] = h.bytes_pinned;
  d["bytes_lent"] = h.bytes_lent;
  d["bytes_cached"] = h.bytes_cached;
  d["bytes_pooled"] = h.bytes_pooled;
  return d;
}

/// Every ArenaStats field; counters as {"current", "peak", "total"}.
inline pybind11::dict arena_stats_dict(const cuvmm::ArenaStats& s) {
  pybind11::dict d;
  d["bytes_requested"] = arena_counter_dict(s.bytes_requested);
  d["allocations"] = arena_counter_dict(s.allocations);
  d["bytes_mapped"] = arena_counter_dict(s.bytes_mapped);
  d["bytes_physical"] = arena_counter_dict(s.bytes_physical);
  d["bytes_reserved"] = arena_counter_dict(s.bytes_reserved);
  d["chunks_created"] = s.chunks_created;
  d["chunks_released"] = s.chunks_released;
  d["maps"] = s.maps;
  d["unmaps"] = s.unmaps;
  d["access_calls"] = s.access_calls;
  d["create_seconds"] = s.create_seconds;
  d["release_seconds"] = s.release_seconds;
  d["map_seconds"] = s.map_seconds;
  d["unmap_seconds"] = s.unmap_seconds;
  d["access_seconds"] = s.access_seconds;
  d["cross_stream_reuses"] = s.cross_stream_reuses;
  d["host_waits"] = s.host_waits;
  d["host_wait_seconds"] = s.host_wait_seconds;
  d["front_allocations"] = s.front_allocations;
  d["front_frees"] = s.front_frees;
  d["reclaims"] = s.reclaims;
  d["pages_moved"] = s.pages_moved;
  d["bytes_stale"] = s.bytes_stale;
  d["streams"] = s.streams;
  d["bytes_live"] = s.bytes_live;
  d["bytes_pinned"] = s.bytes_pinned;
  d["bytes_lent"] = s.bytes_lent;
  d["bytes_cached"] = s.bytes_cached;
  d["bytes_pooled"] = s.bytes_pooled;
  d["at_physical_peak"] = arena_held_dict(s.at_physical_peak);
  d["bytes_whole_idle"] = s.bytes_whole_idle;
  d["whole_chunk_reuses"] = s.whole_chunk_reuses;
  d["whole_chunks_created"] = s.whole_chunks_created;
  d["whole_chunks_released"] = s.whole_chunks_released;
  d["fragmentation"] = s.fragmentation;
  return d;
}

/// The options an Arena is made with, as cuvmm::parse_arena_options names them.
inline pybind11::dict arena_options_dict(const cuvmm::ArenaOptions& o) {
  pybind11::dict d;
  d["address_space_bytes"] = o.address_space_bytes;
  d["page_bytes"] = o.page_bytes;
  d["large_page_bytes"] = o.large_page_bytes;
  d["max_lent_bytes"] = o.max_lent_bytes;
  d["max_lent_tail_bytes"] = o.max_lent_tail_bytes;
  d["share_large_page_tails"] = o.share_large_page_tails;
  d["byte_limit"] = o.byte_limit;
  d["compression"] = std::string(cuvmm::to_string(o.compression));
  d["stream_cache_run_bytes"] = o.stream_cache_run_bytes;
  d["max_idle_percent"] = o.max_idle_percent;
  d["whole_chunk_bytes"] = o.whole_chunk_bytes;
  d["wait_before_create"] = o.wait_before_create;
  return d;
}

}  // namespace cuvmm_torch
