// test/rmm/resource_contract.hpp: what RAPIDS code relies on from a memory resource, checked on
// cuvmm::RmmArenaResource. The checks follow the kinds RMM's own resource tests have (basic,
// allocation, multi-threaded); they are written here, against the resource's interface, because
// RMM's test sources are not packaged (the librmm-cu13 wheel has its headers and library only).
// The memory is reached through ContractMemory, so that the same checks run on the host backend
// (test/rmm/rmm_arena_resource_host.cpp, memset and memcmp) and on a GPU (test/rmm/rmm_consumer.cu,
// cudaMemsetAsync and copies back).
//
// check_resource_contract() prints one line per check ("  ok  " or "  FAIL", through report(),
// which the programs use for their own checks too) and returns `failures`, the tally of every
// report() so far. `limited` must allow at most `limit` bytes (its byte_limit) and hold nothing.
#pragma once

#include <cuvmm/arena.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/rmm_arena_resource.hpp>

#include <rmm/error.hpp>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

namespace contract {

/// Access to the memory a resource hands out, on the resource's side of the bus.
class ContractMemory {
 public:
  virtual ~ContractMemory() = default;
  /// Sets [p, p + bytes) to `value`, ordered on `stream`.
  virtual void fill(void* p, std::size_t bytes, unsigned char value, cuda::stream_ref stream) = 0;
  /// Whether the first and last (up to) 64 bytes of [p, p + bytes) all hold `value`, after the
  /// work queued on `stream` so far.
  virtual bool holds(const void* p, std::size_t bytes, unsigned char value, cuda::stream_ref stream) = 0;
  /// Stream `i` (0 to 7): distinct streams that outlive the checks.
  virtual cuda::stream_ref stream(int i) = 0;
};

inline int failures = 0;

inline void report(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "  ok  " : "  FAIL", what);
  if (!ok) ++failures;
}

struct Live {
  void* p = nullptr;
  std::size_t bytes = 0;
  unsigned char value = 0;
  int stream = 0;
};

/// A size between 1 byte and `largest`, log-uniform: most small, some large, as a program's are.
inline std::size_t random_size(std::mt19937_64& rng, std::size_t largest) {
  std::uniform_real_distribution<double> exponent(0.0, std::log2(static_cast<double>(largest)));
  return std::max<std::size_t>(1, static_cast<std::size_t>(std::exp2(exponent(rng))));
}

/// `rounds` random allocations and frees on `streams` streams (from `first_stream`), each block
/// filled with its own value; returns whether every block still held its value when it was freed.
inline bool churn(cuvmm::RmmArenaResource resource, ContractMemory& memory, std::uint64_t seed, int rounds,
                  int first_stream, int streams, std::size_t largest) {
  std::mt19937_64 rng(seed);
  std::vector<Live> live;
  bool intact = true;
  auto const release = [&](std::size_t i) {
    Live const b = live[i];
    intact = memory.holds(b.p, b.bytes, b.value, memory.stream(b.stream)) && intact;
    resource.deallocate(memory.stream(b.stream), b.p, b.bytes, 256);
    live[i] = live.back();
    live.pop_back();
  };
  for (int r = 0; r < rounds; ++r) {
    if (!live.empty() && rng() % 2 == 0) {
      release(rng() % live.size());
      continue;
    }
    Live b;
    b.bytes = random_size(rng, largest);
    b.value = static_cast<unsigned char>(1 + rng() % 254);
    b.stream = first_stream + static_cast<int>(rng() % static_cast<std::uint64_t>(streams));
    b.p = resource.allocate(memory.stream(b.stream), b.bytes, 256);
    memory.fill(b.p, b.bytes, b.value, memory.stream(b.stream));
    live.push_back(b);
  }
  while (!live.empty()) release(live.size() - 1);
  return intact;
}

inline int check_resource_contract(cuvmm::Arena& arena, cuvmm::Arena& other_arena, cuvmm::Arena& limited,
                                   std::size_t limit, ContractMemory& memory) {
  constexpr std::size_t KiB = 1024;
  constexpr std::size_t MiB = 1024 * KiB;
  cuvmm::RmmArenaResource resource(arena);
  cuda::stream_ref const s0 = memory.stream(0);

  // --- basic ------------------------------------------------------------------------------------
  {
    void* const none = resource.allocate_sync(0, 256);
    resource.deallocate_sync(none, 0, 256);
    report(arena.stats().allocations.current == 0, "basic: 0 bytes allocate and free, nothing held");

    std::vector<Live> blocks;
    unsigned char value = 10;
    bool aligned = true;
    for (std::size_t bytes : {std::size_t{1}, std::size_t{255}, std::size_t{256}, 4 * KiB + 1, MiB, 3 * MiB + 7, 32 * MiB}) {
      void* const p = resource.allocate(s0, bytes, 256);
      aligned = aligned && p != nullptr && reinterpret_cast<std::uintptr_t>(p) % 256 == 0;
      memory.fill(p, bytes, ++value, s0);
      blocks.push_back({p, bytes, value, 0});
    }
    bool intact = true;
    for (Live const& b : blocks) intact = memory.holds(b.p, b.bytes, b.value, s0) && intact;
    report(aligned, "basic: sizes 1 B to 32 MiB, each pointer 256-byte aligned");
    report(intact, "basic: every block holds its own values (no two overlap)");
    for (Live const& b : blocks) resource.deallocate(s0, b.p, b.bytes, 256);
    report(arena.stats().allocations.current == 0, "basic: all freed");

    bool every_alignment = true;
    for (std::size_t alignment = 1; alignment <= 4096; alignment *= 2) {
      void* const p = resource.allocate_sync(3 * KiB, alignment);
      every_alignment = every_alignment && reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
      resource.deallocate_sync(p, 3 * KiB, alignment);
    }
    report(every_alignment, "basic: alignments 1 to 4096 honoured");

    cuvmm::RmmArenaResource const same(arena);
    cuvmm::RmmArenaResource const other(other_arena);
    report(resource == same && !(resource != same) && resource != other && !(resource == other),
           "basic: views of one arena compare equal, of two arenas unequal");
    cuda::mr::resource_ref<cuda::mr::device_accessible> ref{resource};
    void* const p = ref.allocate_sync(MiB, 256);
    memory.fill(p, MiB, 0x3C, s0);
    bool const through_ref = memory.holds(p, MiB, 0x3C, s0) && arena.stats().allocations.current == 1;
    ref.deallocate_sync(p, MiB, 256);
    report(through_ref, "basic: through cuda::mr::resource_ref, as RMM holds resources");
  }

  // --- allocation -------------------------------------------------------------------------------
  report(churn(resource, memory, 1, 4000, 0, 1, MiB), "allocation: 4000 random sizes (1 B to 1 MiB) on one stream");
  report(churn(resource, memory, 2, 4000, 0, 4, 8 * MiB),
         "allocation: 4000 random sizes (1 B to 8 MiB) on four streams");
  {
    // Allocated on one stream, freed on another (stream-ordered, as RMM's device_buffer may).
    std::vector<void*> blocks;
    for (int i = 0; i < 64; ++i) blocks.push_back(resource.allocate(memory.stream(i % 4), 64 * KiB, 256));
    for (int i = 0; i < 64; ++i) resource.deallocate(memory.stream((i + 1) % 4), blocks[static_cast<std::size_t>(i)], 64 * KiB, 256);
    report(arena.stats().allocations.current == 0, "allocation: freed on another stream than the one allocated on");
  }
  report(arena.stats().allocations.current == 0 && arena.stats().bytes_requested.current == 0,
         "allocation: nothing left allocated");

  // --- out of memory ----------------------------------------------------------------------------
  {
    cuvmm::RmmArenaResource small(limited);
    std::vector<void*> held;
    bool typed = false;
    for (std::size_t i = 0; i <= limit / (limit / 8) + 1; ++i) {
      try {
        held.push_back(small.allocate(s0, limit / 8, 256));
      } catch (const rmm::out_of_memory&) {
        typed = true;
        break;
      }
    }
    report(typed && !held.empty() && held.size() <= 8, "out of memory: blocks of limit/8 until rmm::out_of_memory");
    for (void* p : held) small.deallocate(s0, p, limit / 8, 256);
    bool again = false;
    try {
      void* const p = small.allocate(s0, limit / 2, 256);
      small.deallocate(s0, p, limit / 2, 256);
      again = true;
    } catch (...) {
    }
    report(again && limited.stats().allocations.current == 0, "out of memory: everything freed, half the limit fits again");
    bool base = false;
    try {
      (void)small.allocate_sync(2 * limit, 256);
    } catch (const rmm::bad_alloc&) {
      base = true;
    }
    report(base, "out of memory: caught as rmm::bad_alloc, its base");
  }

  // --- multi-threaded ---------------------------------------------------------------------------
  {
    std::atomic<int> intact{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        if (churn(resource, memory, 100 + static_cast<std::uint64_t>(t), 1500, t, 1, MiB)) intact.fetch_add(1);
      });
    }
    for (std::thread& th : threads) th.join();
    report(intact.load() == 8 && arena.stats().allocations.current == 0,
           "multi-threaded: 8 threads, each 1500 random allocations and frees on its own stream");
  }
  {
    // One thread allocates, another frees what it made (both on stream 0), through a queue.
    std::mutex lock;
    std::deque<Live> queue;
    std::atomic<bool> done{false};
    std::atomic<int> wrong{0};
    std::thread producer([&] {
      std::mt19937_64 rng(7);
      for (int i = 0; i < 2000; ++i) {
        Live b{nullptr, random_size(rng, 256 * KiB), static_cast<unsigned char>(1 + i % 250), 0};
        b.p = resource.allocate(s0, b.bytes, 256);
        memory.fill(b.p, b.bytes, b.value, s0);
        std::lock_guard const held(lock);
        queue.push_back(b);
      }
      done = true;
    });
    std::thread consumer([&] {
      for (;;) {
        Live b;
        {
          std::lock_guard const held(lock);
          if (queue.empty()) {
            if (done) break;
            continue;
          }
          b = queue.front();
          queue.pop_front();
        }
        if (!memory.holds(b.p, b.bytes, b.value, s0)) wrong.fetch_add(1);
        resource.deallocate(s0, b.p, b.bytes, 256);
      }
    });
    producer.join();
    consumer.join();
    report(wrong.load() == 0 && arena.stats().allocations.current == 0,
           "multi-threaded: 2000 blocks allocated on one thread, checked and freed on another");
  }
  {
    // Threads racing past the limit: each asks for 4 blocks of limit/16 and holds what it got until
    // every thread has asked (twice the limit in all), so at least 16 requests are refused each
    // round. Every refusal is rmm::out_of_memory, and nothing leaks.
    cuvmm::RmmArenaResource small(limited);
    constexpr int threads_n = 8;
    constexpr int rounds = 10;
    std::atomic<int> other_errors{0};
    std::atomic<int> refusals{0};
    std::barrier asked(threads_n);
    std::vector<std::thread> threads;
    for (int t = 0; t < threads_n; ++t) {
      threads.emplace_back([&] {
        for (int round = 0; round < rounds; ++round) {
          std::vector<void*> held;
          for (int i = 0; i < 4; ++i) {
            try {
              held.push_back(small.allocate_sync(limit / 16, 256));
            } catch (const rmm::out_of_memory&) {
              refusals.fetch_add(1);
            } catch (...) {
              other_errors.fetch_add(1);
            }
          }
          asked.arrive_and_wait();
          for (void* p : held) small.deallocate_sync(p, limit / 16, 256);
          asked.arrive_and_wait();
        }
      });
    }
    for (std::thread& th : threads) th.join();
    report(other_errors.load() == 0 && refusals.load() >= 16 * rounds && limited.stats().allocations.current == 0,
           "multi-threaded: 8 threads asking twice the limit: only rmm::out_of_memory, nothing left allocated");
    std::printf("        (%d of %d requests refused)\n", refusals.load(), threads_n * rounds * 4);
  }
  return failures;
}

}  // namespace contract
