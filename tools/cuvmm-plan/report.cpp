// report.cpp: recommendation and output files of cuvmm-plan (see report.hpp). The JSON is written
// by hand; every string goes through json_string() (nlohmann::json, valid for any bytes).
#include "report.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include <cuvmm/growth_policy.hpp>
#include <cuvmm/version.hpp>

namespace cuvmm::plan {
namespace {

using tools::json_string;

std::string number(double value) {
  if (!(value == value) || value == std::numeric_limits<double>::infinity()) return "null";
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

/// "200 ms" below a second, "1.29 s" from a second on.
std::string milliseconds(double ms) {
  char text[32];
  if (ms < 1000) {
    std::snprintf(text, sizeof text, "%.3g ms", ms);
  } else {
    std::snprintf(text, sizeof text, "%.3g s", ms / 1000);
  }
  return text;
}

double gib(std::size_t bytes) { return static_cast<double>(bytes) / static_cast<double>(GiB); }

/// The completed growth run of `strategy` with the most bytes; nullptr if none.
const GrowthRow* largest_completed(const Measurements& m, std::string_view strategy) {
  const GrowthRow* best = nullptr;
  for (auto const& row : m.growth) {
    if (row.strategy != strategy || row.status != "ok" || row.reached_bytes == 0) continue;
    // Prefer the largest size; among equal sizes, the largest appends (the fewest per-append costs).
    if (best == nullptr || row.reached_bytes > best->reached_bytes ||
        (row.reached_bytes == best->reached_bytes && row.append_bytes > best->append_bytes)) {
      best = &row;
    }
  }
  return best;
}

/// The hide size (see report.hpp) into `r`, when the driver calls and the preallocated baseline
/// were both measured.
void recommend_hide_size(const Measurements& m, Recommendation& r) {
  const GrowthRow* fills = largest_completed(m, preallocated_name);
  if (fills == nullptr || fills->total_seconds <= 0 || m.driver_calls.empty()) return;
  double const bandwidth = static_cast<double>(fills->reached_bytes) / fills->total_seconds;
  std::vector<const DriverCallRow*> rows;
  for (auto const& row : m.driver_calls) rows.push_back(&row);
  std::sort(rows.begin(), rows.end(), [](auto* a, auto* b) { return a->chunk_bytes < b->chunk_bytes; });
  auto step_us = [](const DriverCallRow& row) { return row.create.median_us + row.map.median_us + row.set_access.median_us; };
  const DriverCallRow* chosen = rows.back();
  for (const DriverCallRow* row : rows) {
    if (static_cast<double>(row->chunk_bytes) / bandwidth * 1e6 >= step_us(*row)) {
      chosen = row;
      break;
    }
  }
  double const bytes = 2 * bandwidth * step_us(*chosen) * 1e-6;  // two steps' fill: growth_policy.hpp
  std::size_t hide = static_cast<std::size_t>(std::ceil(bytes));
  if (m.granularity != 0) hide = (hide + m.granularity - 1) / m.granularity * m.granularity;
  r.hide_bytes = hide;
  r.hide_fill_bytes_per_second = bandwidth;
  r.hide_step_us = step_us(*chosen);
  r.hide_step_chunk_bytes = chosen->chunk_bytes;
}

/// Thread scaling at the smallest chunk size measured by thread count: the most threads over one,
/// in each repeat that has both; the median ratio and the spread.
void recommend_thread_scaling(const Measurements& m, Recommendation& r) {
  if (m.driver_threads.empty()) return;
  std::size_t chunk = m.driver_threads.front().chunk_bytes;
  std::size_t most_threads = 0;
  for (auto const& row : m.driver_threads) chunk = std::min(chunk, row.chunk_bytes);
  for (auto const& row : m.driver_threads) {
    if (row.chunk_bytes == chunk) most_threads = std::max(most_threads, row.threads);
  }
  if (most_threads <= 1) return;
  std::vector<double> ratios;
  std::size_t repeats = 0;
  for (auto const& row : m.driver_threads) repeats = std::max(repeats, row.repeat);
  for (std::size_t repeat = 1; repeat <= repeats; ++repeat) {
    const DriverThreadsRow* one = nullptr;
    const DriverThreadsRow* most = nullptr;
    for (auto const& row : m.driver_threads) {
      if (row.chunk_bytes != chunk || row.repeat != repeat) continue;
      if (row.threads == 1) one = &row;
      if (row.threads == most_threads) most = &row;
    }
    if (one != nullptr && most != nullptr && one->cycles_per_second > 0) {
      ratios.push_back(most->cycles_per_second / one->cycles_per_second);
    }
  }
  if (ratios.empty()) return;
  std::sort(ratios.begin(), ratios.end());
  r.thread_scaling = ratios[(ratios.size() - 1) / 2];  // the lower middle one for an even count
  r.thread_scaling_min = ratios.front();
  r.thread_scaling_max = ratios.back();
  r.thread_scaling_repeats = ratios.size();
  r.thread_scaling_threads = most_threads;
  r.thread_scaling_chunk_bytes = chunk;
}

/// A p99 in a CSV cell: empty without enough samples.
std::string csv_p99(const LatencyStats& s) { return s.has_p99() ? number(s.p99_us) : std::string(); }

/// A p99 only where there are enough samples to have one; null otherwise (max_us says the rest).
std::string p99_number(const LatencyStats& s) { return s.has_p99() ? number(s.p99_us) : "null"; }

void write_latency(std::ostream& out, const char* name, const LatencyStats& s) {
  out << json_string(name) << ": {\"median_us\": " << number(s.median_us) << ", \"p99_us\": " << p99_number(s)
      << ", \"max_us\": " << number(s.max_us) << ", \"samples\": " << s.samples << "}";
}

/// The five driver calls of a row (DriverCallRow or DriverThreadsRow), by name.
template <class Row>
std::array<std::pair<const char*, const LatencyStats*>, 5> calls_of(const Row& row) {
  return {{{"create", &row.create},
           {"map", &row.map},
           {"set_access", &row.set_access},
           {"unmap", &row.unmap},
           {"release", &row.release}}};
}

/// The five calls' latencies as JSON members, separated by commas.
template <class Row>
void write_latencies(std::ostream& out, const Row& row) {
  char const* separator = "";
  for (auto const& [name, stats] : calls_of(row)) {
    out << separator;
    write_latency(out, name, *stats);
    separator = ", ";
  }
}

}  // namespace

std::string cuda_version_text(int version) {
  if (version <= 0) return "none";
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

Recommendation recommend(const Measurements& m) {
  Recommendation r;
  double cheapest = std::numeric_limits<double>::infinity();
  for (auto const& row : m.driver_calls) cheapest = std::min(cheapest, row.ms_per_gib());
  for (auto const& row : m.driver_calls) {  // the smallest size within the tolerance
    if (row.ms_per_gib() <= chunk_cost_tolerance * cheapest && (r.chunk_bytes == 0 || row.chunk_bytes < r.chunk_bytes)) {
      r.chunk_bytes = row.chunk_bytes;
      r.chunk_ms_per_gib = row.ms_per_gib();
    }
  }
  if (m.reach && m.reach->reached_bytes != 0) {
    r.largest_buffer_bytes = m.reach->reached_bytes;
    r.largest_buffer_source = "reach run";
  } else {
    for (auto const& row : m.growth) {
      if (row.strategy == growable_policy_name || row.strategy == growable_fixed_name) {
        if (row.reached_bytes > r.largest_buffer_bytes) {
          r.largest_buffer_bytes = row.reached_bytes;
          r.largest_buffer_source = "growth runs";
        }
      }
    }
  }
  if (const GrowthRow* row = largest_completed(m, growable_policy_name)) {
    r.growth_ms_per_gib = 1e3 * row->total_seconds / gib(row->reached_bytes);
  }
  if (const GrowthRow* row = largest_completed(m, copy_grow_2x_name)) {
    r.copy_grow_ms_per_gib = 1e3 * row->total_seconds / gib(row->reached_bytes);
  }
  r.default_hide_bytes = default_hide_bytes(m.total_bytes, m.granularity);
  recommend_hide_size(m, r);
  recommend_thread_scaling(m, r);
  r.arena_page_bytes = m.granularity;
  r.arena_large_page_bytes = ArenaOptions{}.large_page_bytes;
  for (auto const& row : m.driver_calls) {
    if (row.chunk_bytes == r.arena_page_bytes && r.arena_page_bytes != 0) r.arena_page_ms_per_gib = row.ms_per_gib();
    if (row.chunk_bytes == r.arena_large_page_bytes && r.arena_large_page_bytes != 0) {
      r.arena_large_page_ms_per_gib = row.ms_per_gib();
    }
  }
  return r;
}

std::vector<ArenaStatField> arena_stats_fields(const ArenaStats& s) {
  using Kind = ArenaStatField::Kind;
  auto counter = [](const char* name, const ArenaCounter& c, const char* meaning) {
    return ArenaStatField{name, Kind::counter, c, 0, 0, 0, meaning};
  };
  auto count = [](const char* name, std::size_t n, const char* meaning) {
    return ArenaStatField{name, Kind::count, {}, n, 0, 0, meaning};
  };
  auto seconds = [](const char* name, double t, const char* meaning) {
    return ArenaStatField{name, Kind::seconds, {}, 0, 0, t, meaning};
  };
  return {
      counter("bytes_requested", s.bytes_requested, "live allocations, in the bytes asked for"),
      counter("allocations", s.allocations, "live allocations, counted"),
      counter("bytes_mapped", s.bytes_mapped, "pages mapped: live allocations, slabs and cached free memory"),
      counter("bytes_physical", s.bytes_physical, "pages held: mapped plus pooled"),
      counter("bytes_reserved", s.bytes_reserved, "address space"),
      count("chunks_created", s.chunks_created, "physical chunks created (driver calls)"),
      count("chunks_released", s.chunks_released, "physical chunks released"),
      count("maps", s.maps, "map calls"),
      count("unmaps", s.unmaps, "unmap calls"),
      count("access_calls", s.access_calls, "access grants"),
      seconds("create_seconds", s.create_seconds, "time in the create calls"),
      seconds("release_seconds", s.release_seconds, "time in the release calls"),
      seconds("map_seconds", s.map_seconds, "time in the map calls"),
      seconds("unmap_seconds", s.unmap_seconds, "time in the unmap calls"),
      seconds("access_seconds", s.access_seconds, "time in the access grants"),
      count("cross_stream_reuses", s.cross_stream_reuses, "memory freed on one stream handed to another"),
      count("host_waits", s.host_waits, "host waits for a stream's queued work before unmapping what it freed"),
      seconds("host_wait_seconds", s.host_wait_seconds, "time blocked in those waits"),
      count("front_allocations", s.front_allocations, "allocations served by a stream's front, without the arena's lock"),
      count("front_frees", s.front_frees, "frees parked in their stream's front, without the arena's lock"),
      count("reclaims", s.reclaims, "cached extents unmapped to back another request"),
      count("pages_moved", s.pages_moved, "pages mapped again at another address"),
      count("bytes_stale", s.bytes_stale, "address space still mapped to pages that no longer back it"),
      count("streams", s.streams, "streams the arena keeps state for"),
      count("bytes_live", s.bytes_live, "pages backing live allocations"),
      count("bytes_pinned", s.bytes_pinned, "free blocks in slab pages that still hold a live block"),
      count("bytes_lent", s.bytes_lent, "free slots of large pages that live allocations still use"),
      count("bytes_cached", s.bytes_cached, "mapped and free, given back on demand"),
      count("bytes_pooled", s.bytes_pooled, "unmapped pages kept for reuse, given back on demand"),
      count("at_physical_peak.bytes_requested", s.at_physical_peak.bytes_requested,
            "when bytes_physical reached its peak: live allocations, in the bytes asked for"),
      count("at_physical_peak.bytes_live", s.at_physical_peak.bytes_live, "then: pages and blocks backing them"),
      count("at_physical_peak.bytes_pinned", s.at_physical_peak.bytes_pinned, "then: bytes_pinned"),
      count("at_physical_peak.bytes_lent", s.at_physical_peak.bytes_lent, "then: bytes_lent"),
      count("at_physical_peak.bytes_cached", s.at_physical_peak.bytes_cached, "then: bytes_cached"),
      count("at_physical_peak.bytes_pooled", s.at_physical_peak.bytes_pooled, "then: bytes_pooled"),
      count("bytes_whole_idle", s.bytes_whole_idle, "of bytes_cached, idle whole chunks (whole_chunk_bytes)"),
      count("whole_chunk_reuses", s.whole_chunk_reuses, "requests an idle whole chunk served as it lay"),
      count("whole_chunks_created", s.whole_chunks_created, "whole chunks created"),
      count("whole_chunks_released", s.whole_chunks_released, "whole chunks given back"),
      ArenaStatField{"fragmentation", Kind::ratio, {}, 0, s.fragmentation, 0,
                     "1 - largest free extent / all free pages in extents"},
  };
}

std::vector<GrowthRatio> growth_ratios(const Measurements& m) {
  auto baseline = [&](const GrowthRow& row, const char* strategy) -> const GrowthRow* {
    for (auto const& other : m.growth) {
      if (other.strategy == strategy && other.target_bytes == row.target_bytes &&
          other.append_bytes == row.append_bytes && other.status == "ok" && other.total_seconds > 0) {
        return &other;
      }
    }
    return nullptr;
  };
  std::vector<GrowthRatio> ratios;
  for (auto const& row : m.growth) {
    if (row.status != "ok") continue;
    GrowthRatio ratio;
    ratio.strategy = row.strategy;
    ratio.target_bytes = row.target_bytes;
    ratio.append_bytes = row.append_bytes;
    if (const GrowthRow* limit = baseline(row, preallocated_name)) ratio.over_preallocated = row.total_seconds / limit->total_seconds;
    if (const GrowthRow* copy = baseline(row, copy_grow_2x_name)) ratio.over_copy_grow_2x = row.total_seconds / copy->total_seconds;
    ratios.push_back(ratio);
  }
  return ratios;
}

std::string format_growth_ratios(const Measurements& m) {
  std::ostringstream out;
  auto ratio_text = [](std::optional<double> value) {
    char text[32] = "-";
    if (value) std::snprintf(text, sizeof text, "%.3f", *value);
    return std::string(text);
  };
  for (auto const& ratio : growth_ratios(m)) {
    if (ratio.strategy != growable_policy_name || (!ratio.over_preallocated && !ratio.over_copy_grow_2x)) continue;
    if (out.tellp() == 0) {
      out << "GrowableBuffer's growth time against the baselines (same size and appends):\n"
             "  size      appends   / preallocated  / cudaMalloc copy-and-grow 2x\n";
    }
    char line[160];
    std::snprintf(line, sizeof line, "  %-9s %-9s %-15s %s\n", format_bytes(ratio.target_bytes).c_str(),
                  format_bytes(ratio.append_bytes).c_str(), ratio_text(ratio.over_preallocated).c_str(),
                  ratio_text(ratio.over_copy_grow_2x).c_str());
    out << line;
  }
  return out.str();
}

std::string format_recommendation(const Recommendation& r, const Measurements& m) {
  std::ostringstream out;
  char line[256];
  out << "Recommendation for " << m.device_name << " (" << m.backend << " backend, " << m.profile << " profile):\n";
  if (r.chunk_bytes != 0) {
    std::size_t samples = 0;
    for (auto const& row : m.driver_calls) {
      if (row.chunk_bytes == r.chunk_bytes) samples = row.create.samples;
    }
    std::snprintf(line, sizeof line,
                  "  chunk size:        %s (driver calls %s per GiB, medians of %zu calls each; the smallest size "
                  "within %.3gx of the cheapest measured): keep %s at or above it\n",
                  format_bytes(r.chunk_bytes).c_str(), milliseconds(r.chunk_ms_per_gib).c_str(), samples,
                  chunk_cost_tolerance, chunk_bytes_option);
    out << line;
  } else {
    out << "  chunk size:        not measured\n";
  }
  if (r.largest_buffer_bytes != 0) {
    std::snprintf(line, sizeof line, "  largest buffer:    %s (%s; %s free at the start)\n",
                  format_bytes(r.largest_buffer_bytes).c_str(), r.largest_buffer_source.c_str(),
                  format_bytes(m.free_bytes).c_str());
    out << line;
  } else {
    out << "  largest buffer:    not measured\n";
  }
  if (r.growth_ms_per_gib) {
    std::snprintf(line, sizeof line, "  growth cost:       %s per GiB (GrowableBuffer, appends and fills)",
                  milliseconds(*r.growth_ms_per_gib).c_str());
    out << line;
    if (r.copy_grow_ms_per_gib) {
      std::snprintf(line, sizeof line, "; cudaMalloc copy-and-grow 2x: %s per GiB",
                    milliseconds(*r.copy_grow_ms_per_gib).c_str());
      out << line;
    }
    out << "\n";
  } else {
    out << "  growth cost:       not measured\n";
  }
  if (r.hide_bytes) {
    std::snprintf(line, sizeof line,
                  "  hide size:         %s (2 x fills at %.3g GB/s x a %.3g us growth step of %s chunks): set %s = %zu"
                  " (default here: memory / 256 = %s)\n",
                  format_bytes(*r.hide_bytes).c_str(), r.hide_fill_bytes_per_second / 1e9, r.hide_step_us,
                  format_bytes(r.hide_step_chunk_bytes).c_str(), hide_bytes_option, *r.hide_bytes,
                  format_bytes(r.default_hide_bytes).c_str());
    out << line;
  } else {
    out << "  hide size:         not measured (needs the driver calls and the preallocated baseline); "
        << hide_bytes_option << " defaults to memory / 256 = " << format_bytes(r.default_hide_bytes) << "\n";
  }
  auto const page_cost = [](std::optional<double> ms) {
    return ms ? "driver calls " + milliseconds(*ms) + " per GiB" : std::string("not measured at this size");
  };
  if (r.arena_page_bytes != 0) {
    out << "  arena pages:       " << arena_page_option << " " << format_bytes(r.arena_page_bytes) << " (default): "
        << page_cost(r.arena_page_ms_per_gib) << "; " << arena_large_page_option << " "
        << format_bytes(r.arena_large_page_bytes) << " (default): " << page_cost(r.arena_large_page_ms_per_gib) << "\n";
  }
  if (r.thread_scaling) {
    std::snprintf(line, sizeof line,
                  "  threads:           %zu threads make %.2fx the driver-call cycles per second of one (%s chunks",
                  r.thread_scaling_threads, *r.thread_scaling, format_bytes(r.thread_scaling_chunk_bytes).c_str());
    out << line;
    if (r.thread_scaling_repeats > 1) {
      std::snprintf(line, sizeof line, "; median of %zu repeats, spread %.2fx..%.2fx)\n", r.thread_scaling_repeats,
                    r.thread_scaling_min, r.thread_scaling_max);
    } else {
      std::snprintf(line, sizeof line, "; one run, spread not measured)\n");
    }
    out << line;
  }
  return out.str();
}

void write_json(std::ostream& out, const Measurements& m, const Recommendation& r) {
  out << "{\n  \"tool\": \"cuvmm-plan\",\n  \"cuvmm_version\": " << json_string(version_string) << ",\n  \"profile\": " << json_string(m.profile)
      << ",\n  \"backend\": " << json_string(m.backend) << ",\n  \"device\": {\"name\": " << json_string(m.device_name)
      << ", \"total_bytes\": " << m.total_bytes << ", \"free_bytes\": " << m.free_bytes
      << ", \"granularity\": " << m.granularity << "},\n  \"cuda_driver_version\": " << m.machine.cuda_driver_version
      << ",\n  \"cuda_runtime_version\": " << m.machine.cuda_runtime_version
      << ",\n  \"host\": {\"os\": " << json_string(m.machine.os) << ", \"cpu\": " << json_string(m.machine.cpu)
      << ", \"cpus\": " << m.machine.cpus << ", \"compiler\": " << json_string(m.machine.compiler)
      << "},\n  \"seconds\": " << number(m.seconds) << ",\n";
  out << "  \"driver_calls\": [";
  for (std::size_t i = 0; i < m.driver_calls.size(); ++i) {
    auto const& row = m.driver_calls[i];
    out << (i ? ",\n" : "\n") << "    {\"chunk_bytes\": " << row.chunk_bytes << ", ";
    write_latencies(out, row);
    out << ", \"ms_per_gib\": " << number(row.ms_per_gib()) << "}";
  }
  out << "\n  ],\n  \"driver_threads\": [";
  for (std::size_t i = 0; i < m.driver_threads.size(); ++i) {
    auto const& row = m.driver_threads[i];
    out << (i ? ",\n" : "\n") << "    {\"threads\": " << row.threads << ", \"chunk_bytes\": " << row.chunk_bytes << ", ";
    write_latencies(out, row);
    out << ", \"cycles_per_second\": " << number(row.cycles_per_second) << ", \"repeat\": " << row.repeat << "}";
  }
  out << "\n  ],\n  \"growth\": [";
  for (std::size_t i = 0; i < m.growth.size(); ++i) {
    auto const& row = m.growth[i];
    out << (i ? ",\n" : "\n") << "    {\"strategy\": " << json_string(row.strategy)
        << ", \"target_bytes\": " << row.target_bytes << ", \"append_bytes\": " << row.append_bytes
        << ", \"status\": " << json_string(row.status) << ", \"reached_bytes\": " << row.reached_bytes
        << ", \"appends\": " << row.appends << ", \"total_seconds\": " << number(row.total_seconds)
        << ", \"p99_append_us\": " << (row.appends >= min_samples_for_p99 ? number(row.p99_append_us) : "null")
        << ", \"peak_bytes\": " << row.peak_bytes
        << ", \"bytes_copied\": " << row.bytes_copied << ", \"chunks\": " << row.chunks
        << ", \"growth_seconds\": " << number(row.growth_seconds)
        << ", \"peak_in_use_bytes\": " << row.peak_in_use_bytes << ", \"runs\": " << row.runs
        << ", \"min_total_seconds\": " << number(row.min_total_seconds)
        << ", \"max_total_seconds\": " << number(row.max_total_seconds) << "}";
  }
  out << "\n  ],\n  \"growth_ratios\": [";
  auto const ratios = growth_ratios(m);
  for (std::size_t i = 0; i < ratios.size(); ++i) {
    auto const& ratio = ratios[i];
    out << (i ? ",\n" : "\n") << "    {\"strategy\": " << json_string(ratio.strategy)
        << ", \"target_bytes\": " << ratio.target_bytes << ", \"append_bytes\": " << ratio.append_bytes
        << ", \"over_preallocated\": " << (ratio.over_preallocated ? number(*ratio.over_preallocated) : "null")
        << ", \"over_copy_grow_2x\": " << (ratio.over_copy_grow_2x ? number(*ratio.over_copy_grow_2x) : "null") << "}";
  }
  out << "\n  ],\n  \"reach\": ";
  if (m.reach) {
    out << "{\"free_at_start\": " << m.reach->free_at_start << ", \"reached_bytes\": " << m.reach->reached_bytes
        << ", \"stopped_by\": " << json_string(m.reach->stopped_by) << ", \"seconds\": " << number(m.reach->seconds)
        << "}";
  } else {
    out << "null";
  }
  out << ",\n  \"trace\": {\"source\": " << json_string(m.trace_source) << ", \"ops\": " << m.trace_ops
      << ", \"replays\": [";
  for (std::size_t i = 0; i < m.replays.size(); ++i) {
    auto const& replay = m.replays[i];
    out << (i ? ",\n" : "\n") << "    {\"allocator\": " << json_string(replay.allocator) << ", \"ops\": " << replay.ops
        << ", \"failed_allocations\": " << replay.failed_allocations << ", \"seconds\": " << number(replay.seconds)
        << ", \"peak_requested_bytes\": " << replay.peak_requested_bytes
        << ", \"peak_held_bytes\": " << replay.peak_held_bytes
        << ", \"mean_utilization\": " << number(replay.mean_utilization)
        << ", \"timeline_points\": " << replay.timeline.size();
    if (replay.arena_stats) {
      out << ", \"arena_stats\": {";
      char const* separator = "";
      for (auto const& field : arena_stats_fields(*replay.arena_stats)) {
        out << separator << json_string(field.name) << ": ";
        separator = ", ";
        if (field.kind == ArenaStatField::Kind::counter) {
          out << "{\"current\": " << field.counter.current << ", \"peak\": " << field.counter.peak
              << ", \"total\": " << field.counter.total << "}";
        } else if (field.kind == ArenaStatField::Kind::count) {
          out << field.count;
        } else if (field.kind == ArenaStatField::Kind::seconds) {
          out << number(field.seconds);
        } else {
          out << number(field.ratio);
        }
      }
      out << "}";
    }
    out << "}";
  }
  out << "\n  ]},\n  \"recommendation\": {\"chunk_bytes\": " << r.chunk_bytes
      << ", \"chunk_ms_per_gib\": " << number(r.chunk_ms_per_gib)
      << ", \"chunk_cost_tolerance\": " << number(chunk_cost_tolerance)
      << ", \"chunk_bytes_option\": " << json_string(chunk_bytes_option)
      << ", \"largest_buffer_bytes\": " << r.largest_buffer_bytes
      << ", \"largest_buffer_source\": " << json_string(r.largest_buffer_source)
      << ", \"growth_ms_per_gib\": " << (r.growth_ms_per_gib ? number(*r.growth_ms_per_gib) : "null")
      << ", \"copy_grow_ms_per_gib\": " << (r.copy_grow_ms_per_gib ? number(*r.copy_grow_ms_per_gib) : "null")
      << ", \"thread_scaling\": " << (r.thread_scaling ? number(*r.thread_scaling) : "null")
      << ", \"thread_scaling_min\": " << (r.thread_scaling ? number(r.thread_scaling_min) : "null")
      << ", \"thread_scaling_max\": " << (r.thread_scaling ? number(r.thread_scaling_max) : "null")
      << ", \"thread_scaling_repeats\": " << r.thread_scaling_repeats
      << ", \"thread_scaling_threads\": " << r.thread_scaling_threads
      << ", \"thread_scaling_chunk_bytes\": " << r.thread_scaling_chunk_bytes
      << ", \"hide_bytes\": " << (r.hide_bytes ? std::to_string(*r.hide_bytes) : "null")
      << ", \"hide_bytes_option\": " << json_string(hide_bytes_option)
      << ", \"hide_fill_bytes_per_second\": " << number(r.hide_fill_bytes_per_second)
      << ", \"hide_step_us\": " << number(r.hide_step_us)
      << ", \"hide_step_chunk_bytes\": " << r.hide_step_chunk_bytes
      << ", \"default_hide_bytes\": " << r.default_hide_bytes
      << ", \"arena_page_bytes\": " << r.arena_page_bytes
      << ", \"arena_page_ms_per_gib\": " << (r.arena_page_ms_per_gib ? number(*r.arena_page_ms_per_gib) : "null")
      << ", \"arena_large_page_bytes\": " << r.arena_large_page_bytes << ", \"arena_large_page_ms_per_gib\": "
      << (r.arena_large_page_ms_per_gib ? number(*r.arena_large_page_ms_per_gib) : "null") << "},\n  \"notes\": [";
  for (std::size_t i = 0; i < m.notes.size(); ++i) out << (i ? ", " : "") << json_string(m.notes[i]);
  out << "]\n}\n";
}

void write_driver_calls_csv(std::ostream& out, const Measurements& m) {
  out << "chunk_bytes,call,median_us,p99_us,samples,max_us\n";
  for (auto const& row : m.driver_calls) {
    for (auto const& [name, stats] : calls_of(row)) {
      out << row.chunk_bytes << ',' << name << ',' << number(stats->median_us) << ',' << csv_p99(*stats) << ','
          << stats->samples << ',' << number(stats->max_us) << '\n';
    }
  }
}

void write_driver_threads_csv(std::ostream& out, const Measurements& m) {
  out << "threads,chunk_bytes,call,median_us,p99_us,samples,cycles_per_second,repeat,max_us\n";
  for (auto const& row : m.driver_threads) {
    for (auto const& [name, stats] : calls_of(row)) {
      out << row.threads << ',' << row.chunk_bytes << ',' << name << ',' << number(stats->median_us) << ','
          << csv_p99(*stats) << ',' << stats->samples << ',' << number(row.cycles_per_second) << ',' << row.repeat
          << ',' << number(stats->max_us) << '\n';
    }
  }
}

void write_growth_csv(std::ostream& out, const Measurements& m) {
  out << "strategy,target_bytes,append_bytes,status,reached_bytes,appends,total_seconds,p99_append_us,peak_bytes,"
         "bytes_copied,chunks,growth_seconds,peak_in_use_bytes,runs,min_total_seconds,max_total_seconds\n";
  for (auto const& row : m.growth) {
    out << row.strategy << ',' << row.target_bytes << ',' << row.append_bytes << ',' << row.status << ','
        << row.reached_bytes << ',' << row.appends << ',' << number(row.total_seconds) << ','
        << (row.appends >= min_samples_for_p99 ? number(row.p99_append_us) : std::string()) << ',' << row.peak_bytes
        << ',' << row.bytes_copied << ',' << row.chunks << ','
        << number(row.growth_seconds) << ',' << row.peak_in_use_bytes << ',' << row.runs << ','
        << number(row.min_total_seconds) << ',' << number(row.max_total_seconds) << '\n';
  }
}

void write_trace_memory_csv(std::ostream& out, const Measurements& m) {
  out << "allocator,op_index,requested_bytes,held_bytes\n";
  for (auto const& replay : m.replays) {
    // A name with a comma or a quote (a plug-in replay named by its CUVMM_ARENA_CONF) is quoted,
    // its quotes doubled (RFC 4180).
    std::string name = replay.allocator;
    if (name.find_first_of(",\"\n") != std::string::npos) {
      std::string quoted = "\"";
      for (char const c : name) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
      name = quoted + "\"";
    }
    for (auto const& point : replay.timeline) {
      out << name << ',' << point.op_index << ',' << point.requested_bytes << ',' << point.held_bytes
          << '\n';
    }
  }
}

}  // namespace cuvmm::plan
