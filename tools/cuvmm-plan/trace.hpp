// trace.hpp: allocation traces for cuvmm-plan's replay (and bench_arena, which includes it from
// here: the arrow runs bench -> tools), and their CSV form.
//
// CSV format (one header line, then one line per operation, in order):
//   op,id,bytes
//   a,0,4096        allocate `bytes` for allocation `id` (ids are unique per allocation)
//   f,0,4096        free allocation `id` (bytes repeated, as sized deallocation needs it)
// make_trace() draws sizes log-uniformly from 1 byte to 2^max_log2_bytes (1 GiB by default); before an allocation that would
// take the live bytes past `live_target`, random live allocations are freed until it fits, so the
// free order is random (what fragments caching allocators). Allocations live at the end stay live.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <istream>
#include <ostream>
#include <random>
#include <string>
#include <vector>

namespace cuvmm::plan {

struct TraceOp {
  bool allocate = true;
  std::size_t id = 0;
  std::size_t bytes = 0;
};

inline std::vector<TraceOp> make_trace(std::size_t allocations, std::size_t live_target, std::uint64_t seed,
                                       double max_log2_bytes = 30.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> log_size(0.0, max_log2_bytes);  // 2^0 .. 2^max bytes
  std::vector<TraceOp> ops;
  std::vector<TraceOp> live;
  std::size_t live_bytes = 0;
  for (std::size_t id = 0; id < allocations; ++id) {
    auto const bytes = static_cast<std::size_t>(std::exp2(log_size(rng)));
    while (!live.empty() && live_bytes + bytes > live_target) {
      std::size_t const victim = rng() % live.size();
      TraceOp const freed{false, live[victim].id, live[victim].bytes};
      live[victim] = live.back();
      live.pop_back();
      live_bytes -= freed.bytes;
      ops.push_back(freed);
    }
    ops.push_back({true, id, bytes});
    live.push_back({true, id, bytes});
    live_bytes += bytes;
  }
  return ops;
}

inline void write_trace_csv(std::ostream& out, const std::vector<TraceOp>& ops) {
  out << "op,id,bytes\n";
  for (auto const& op : ops) out << (op.allocate ? 'a' : 'f') << ',' << op.id << ',' << op.bytes << '\n';
}

}  // namespace cuvmm::plan
