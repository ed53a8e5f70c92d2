// GrowableBuffer on the H200: random data through many growth steps, pointers that stay valid
// while a kernel keeps using them, Thrust algorithms on the buffer, growth until the device is
// full, and shrinking that really returns memory.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/growable_buffer.hpp>

#include "child_process.hpp"
#include "gpu.hpp"
#include "growable_kernels.hpp"

using namespace cuvmm;

namespace {

constexpr std::uint64_t poison = 0xDEADBEEFDEADBEEFull;

struct StreamOwner {
  cudaStream_t stream = nullptr;
  StreamOwner() { REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess); }
  ~StreamOwner() { cudaStreamDestroy(stream); }
};

std::size_t free_device_memory() {
  std::size_t free = 0;
  std::size_t total = 0;
  REQUIRE(cudaMemGetInfo(&free, &total) == cudaSuccess);
  return free;
}

GrowableOptions capped(std::size_t max_capacity) {
  GrowableOptions o;
  o.max_capacity_bytes = max_capacity;
  return o;
}

/// Launches once each kernel that the free-memory checks below run after their baseline (this
/// file's pattern kernels and the library's byte fill), on small buffers released again: modules
/// are loaded lazily at a kernel's first launch by default, and that memory is never given back.
void warm_kernels(cudaStream_t stream) {
  GrowableBuffer<std::uint64_t> words(capped(2 * MiB), stream);
  words.resize(1024);
  test::fill_pattern(words.data(), words.size(), 0, 1, stream);
  REQUIRE(test::count_pattern_mismatches(words.data(), words.size(), 0, 1, stream) == 0);
  GrowableBuffer<std::uint8_t> bytes(capped(2 * MiB), stream);
  bytes.resize(2 * MiB, 0x5C, stream);
  REQUIRE(bytes.element(2 * MiB - 1, stream) == 0x5C);
}

}  // namespace

TEST_CASE("random data survives many growth steps and is verified on the device", "[gpu][growable]") {
  test::require_gpu();
  StreamOwner s;
  GrowableOptions options = capped(16 * GiB);
  options.map_ahead = MapAhead::off;  // the replay below is of next_chunk_bytes alone
  GrowableBuffer<std::uint64_t> buffer(options, s.stream);
  std::uint64_t* const base = buffer.data();
  std::mt19937_64 rng(2026);
  std::uint64_t const seed = rng();
  GrowthShape const shape = buffer.storage().growth_shape();
  std::size_t steps = 0;
  std::size_t expected_growth_steps = 0;  // next_chunk_bytes replayed on the host over the same sizes
  std::size_t expected_mapped = 0;
  while (buffer.size_bytes() < 6 * GiB) {
    std::size_t const old_size = buffer.size();
    std::size_t const n = 1 + rng() % (96 * MiB / sizeof(std::uint64_t));
    buffer.resize(old_size + n, poison);  // poison first: an unwritten element cannot pass
    test::fill_pattern(buffer.data() + old_size, n, old_size, seed, s.stream);
    REQUIRE(buffer.data() == base);
    ++steps;
    std::size_t const needed = buffer.size_bytes();
    if (needed > expected_mapped) ++expected_growth_steps;
    while (needed > expected_mapped) expected_mapped += next_chunk_bytes(expected_mapped, needed, shape);
  }
  CHECK(steps > 50);
  CHECK(buffer.stats().growth_steps == expected_growth_steps);
  CHECK(buffer.storage().capacity() == expected_mapped);
  CHECK(test::count_pattern_mismatches(buffer.data(), buffer.size(), 0, seed, s.stream) == 0);
  // The check itself can fail: one poisoned element is found.
  buffer.set_element(buffer.size() / 2, poison, s.stream);
  CHECK(test::count_pattern_mismatches(buffer.data(), buffer.size(), 0, seed, s.stream) == 1);
  // The fast policy's bound (growth_policy.hpp), with this device's default hide size.
  std::size_t const slack = buffer.storage().capacity() - buffer.size_bytes();
  std::size_t const hide = buffer.storage().growth_shape().hide_bytes;
  INFO("hide size " << hide << ", slack " << slack);
  CHECK(hide == default_hide_bytes(cuda_backend(0).memory_info(0).total, buffer.storage().granularity()));
  CHECK(slack <= std::max(buffer.size_bytes() / 16, std::min(buffer.size_bytes(), hide)) + buffer.storage().granularity());
}

TEST_CASE("growth that maps ahead below the hide size while kernels fill the buffer keeps every element exact and counts each step ahead",
          "[gpu][growable][map-ahead]") {
  test::require_gpu();
  StreamOwner s;
  GrowableBuffer<std::uint64_t> buffer(capped(16 * GiB), s.stream);
  REQUIRE(buffer.storage().maps_ahead());  // the default for device memory under the fast policy
  std::uint64_t* const base = buffer.data();
  std::uint64_t const seed = 0x9E3779B97F4A7C15ull;
  GrowthShape const shape = buffer.storage().growth_shape();
  std::size_t const g = buffer.storage().granularity();
  constexpr std::size_t append = 16 * MiB / sizeof(std::uint64_t);  // fills shorter than a step
  std::size_t steps_seen = 0;
  std::size_t steps_ahead = 0;  // what the rule hands the mapping thread: from the second step on, below the hide size
  while (buffer.size_bytes() < 6 * GiB) {
    std::size_t const old_size = buffer.size();
    buffer.resize(old_size + append, poison);  // poison first: an unwritten element cannot pass
    test::fill_pattern(buffer.data() + old_size, append, old_size, seed, s.stream);
    REQUIRE(buffer.data() == base);
    std::size_t const size = buffer.size_bytes();
    std::size_t const capacity = buffer.storage().capacity();
    std::size_t const held = capacity + buffer.stats().bytes_prepared;
    if (buffer.stats().growth_steps != steps_seen) {  // this resize was a growth step
      steps_seen = buffer.stats().growth_steps;
      if (steps_seen >= 2 && capacity < hide_size_bytes(shape)) ++steps_ahead;
    }
    // Invariant 6's bound plus the one step ahead.
    std::size_t const bound = std::max(size / 16, std::min(size, shape.hide_bytes)) + g;
    REQUIRE(held - size <= bound + step_ahead_bytes(capacity, shape));
  }
  REQUIRE(test::count_pattern_mismatches(buffer.data(), buffer.size(), 0, seed, s.stream) == 0);
  buffer.set_element(buffer.size() / 3, poison, s.stream);  // the check itself can fail
  CHECK(test::count_pattern_mismatches(buffer.data(), buffer.size(), 0, seed, s.stream) == 1);
  buffer.storage().settle_step_ahead();
  GrowableStats const stats = buffer.stats();
  INFO("growth steps " << stats.growth_steps << ", prepared " << stats.prepared_steps << ", used "
                       << stats.prepared_used << ", discarded " << stats.prepared_discarded);
  CHECK(steps_ahead >= 3);  // the buffer passed the hide size by doubling from 16 MiB
  CHECK(stats.growth_steps > steps_ahead + 1);  // and went on growing past it
  CHECK(stats.prepared_steps == steps_ahead);
  CHECK(stats.prepared_used == steps_ahead);  // each taken by the next growth
  CHECK(stats.prepared_failed == 0);
  CHECK(stats.prepared_discarded == 0);
  CHECK(stats.bytes_prepared == 0);  // none past the hide size
  CHECK(step_ahead_bytes(buffer.storage().capacity(), shape) == 0);
  buffer.shrink_to_fit(s.stream);
  CHECK(buffer.stats().bytes_prepared == 0);
  CHECK(test::count_pattern_mismatches(buffer.data(), buffer.size(), 0, seed, s.stream) == 1);
}

TEST_CASE("pointers stay valid while a kernel launched earlier keeps using the prefix as the buffer grows",
          "[gpu][growable]") {
  test::require_gpu();
  StreamOwner busy;
  StreamOwner growth;
  GrowableBuffer<std::uint32_t> buffer(capped(32 * GiB), growth.stream);
  constexpr std::size_t prefix = 1 << 20;
  std::vector<std::uint32_t> initial(prefix);
  std::mt19937 rng(5);
  for (auto& x : initial) x = rng();
  buffer.append(initial, growth.stream);
  REQUIRE(cudaStreamSynchronize(growth.stream) == cudaSuccess);
  std::uint32_t* const base = buffer.data();

  constexpr int rounds = 300;  // long enough that growth happens while it runs
  test::increment_rounds(base, prefix, rounds, busy.stream);
  auto const start = std::chrono::steady_clock::now();
  std::size_t growth_steps = 0;
  while (buffer.size_bytes() < 8 * GiB) {
    buffer.resize(buffer.size() + 64 * MiB / sizeof(std::uint32_t), 0x01020304u, growth.stream);
    ++growth_steps;
  }
  bool const kernel_still_running = cudaStreamQuery(busy.stream) == cudaErrorNotReady;
  auto const grew_in = std::chrono::steady_clock::now() - start;
  REQUIRE(cudaStreamSynchronize(busy.stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(growth.stream) == cudaSuccess);
  double const grew_ms = std::chrono::duration<double, std::milli>(grew_in).count();
  INFO("grew in " << grew_ms << " ms");
  CHECK(kernel_still_running);  // growth did not wait for the kernel
  CHECK(buffer.data() == base);
  std::vector<std::uint32_t> back(prefix);
  REQUIRE(cudaMemcpy(back.data(), base, prefix * sizeof(std::uint32_t), cudaMemcpyDeviceToHost) == cudaSuccess);
  for (std::size_t i = 0; i < prefix; ++i) REQUIRE(back[i] == initial[i] + rounds);
  CHECK(buffer.element(buffer.size() - 1) == 0x01020304u);
  CHECK(growth_steps == (8 * GiB - prefix * sizeof(std::uint32_t) + 64 * MiB - 1) / (64 * MiB));
}

TEST_CASE("Thrust sort, reduce, transform and copy work on the buffer's iterators", "[gpu][growable][thrust]") {
  test::require_gpu();
  StreamOwner s;
  GrowableBuffer<std::uint32_t> keys(capped(4 * GiB), s.stream);
  keys.resize(3'000'001);
  test::fill_random_keys(keys, 99, s.stream);
  std::vector<std::uint32_t> host(keys.size());
  REQUIRE(cudaMemcpyAsync(host.data(), keys.data(), keys.size_bytes(), cudaMemcpyDeviceToHost, s.stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s.stream) == cudaSuccess);
  REQUIRE(std::adjacent_find(host.begin(), host.end(), std::not_equal_to<>()) != host.end());  // not constant

  std::uint64_t const expected_sum = std::accumulate(host.begin(), host.end(), std::uint64_t{0});
  CHECK(test::thrust_sum(keys, s.stream) == expected_sum);

  GrowableBuffer<std::uint32_t> affine(capped(4 * GiB), s.stream);
  test::thrust_affine(keys, affine, s.stream);
  GrowableBuffer<std::uint32_t> doubled(capped(4 * GiB), s.stream);
  doubled.push_back(7, s.stream);
  test::append_doubled(keys, doubled, s.stream);

  test::thrust_sort(keys, s.stream);
  std::vector<std::uint32_t> sorted = host;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::uint32_t> device_sorted(keys.size());
  std::vector<std::uint32_t> device_affine(affine.size());
  std::vector<std::uint32_t> device_doubled(doubled.size());
  REQUIRE(cudaMemcpyAsync(device_sorted.data(), keys.data(), keys.size_bytes(), cudaMemcpyDefault, s.stream) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(device_affine.data(), affine.data(), affine.size_bytes(), cudaMemcpyDefault, s.stream) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(device_doubled.data(), doubled.data(), doubled.size_bytes(), cudaMemcpyDefault, s.stream) ==
          cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s.stream) == cudaSuccess);
  CHECK(device_sorted == sorted);
  REQUIRE(device_affine.size() == host.size());
  REQUIRE(device_doubled.size() == host.size() + 1);
  CHECK(device_doubled[0] == 7);
  for (std::size_t i = 0; i < host.size(); ++i) {
    REQUIRE(device_affine[i] == 3 * host[i] + 1);
    REQUIRE(device_doubled[i + 1] == 2 * host[i]);
  }
}

TEST_CASE("fills and copies of every element size land exactly", "[gpu][growable]") {
  test::require_gpu();
  StreamOwner s;
  struct Odd {
    std::uint8_t bytes[12];
  };
  GrowableBuffer<Odd> odd(capped(1 * GiB), s.stream);
  Odd value{};
  for (std::uint8_t i = 0; i < 12; ++i) value.bytes[i] = static_cast<std::uint8_t>(0x10 + i);
  odd.resize(1001, value);
  Odd last = odd.element(1000);
  CHECK(std::equal(std::begin(last.bytes), std::end(last.bytes), std::begin(value.bytes)));

  GrowableBuffer<std::uint16_t> shorts(capped(1 * GiB), s.stream);
  shorts.push_back(1, s.stream);  // misaligns the fill that follows by two bytes
  shorts.resize(100'003, 0xABCD, s.stream);
  std::vector<std::uint16_t> back(shorts.size());
  REQUIRE(cudaMemcpy(back.data(), shorts.data(), shorts.size_bytes(), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back[0] == 1);
  CHECK(std::all_of(back.begin() + 1, back.end(), [](std::uint16_t v) { return v == 0xABCD; }));

  struct Big {
    std::uint32_t words[100];  // 400 bytes: filled by doubling copies
  };
  GrowableBuffer<Big> big(capped(1 * GiB), s.stream);
  Big b{};
  for (std::uint32_t i = 0; i < 100; ++i) b.words[i] = i * 7 + 1;
  big.resize(777, b);
  Big got = big.element(776);
  CHECK(std::equal(std::begin(got.words), std::end(got.words), std::begin(b.words)));
  got = big.element(0);
  CHECK(std::equal(std::begin(got.words), std::end(got.words), std::begin(b.words)));
}

TEST_CASE("append from a single-pass input iterator past max_capacity changes nothing on the device",
          "[gpu][growable][strong]") {
  test::require_gpu();
  StreamOwner s;
  GrowableBuffer<std::uint32_t> buffer(capped(2 * MiB), s.stream);  // one H200 granule
  std::vector<std::uint32_t> const first{7, 0xDEADBEEF, 9};
  buffer.append(first);
  std::uint32_t* const base = buffer.data();
  std::size_t const capacity_before = buffer.capacity();
  GrowableStats const stats_before = buffer.stats();
  std::size_t const room = buffer.max_capacity() - buffer.size();

  std::ostringstream text;
  for (std::size_t i = 0; i < room + 1; ++i) text << i << ' ';  // one element too many
  std::istringstream in(text.str());
  CHECK_THROWS_AS(buffer.append(std::istream_iterator<std::uint32_t>(in), std::istream_iterator<std::uint32_t>()),
                  CapacityExceeded);
  CHECK(buffer.size() == first.size());
  CHECK(buffer.data() == base);
  CHECK(buffer.capacity() == capacity_before);
  CHECK(buffer.stats().chunks_created == stats_before.chunks_created);
  std::vector<std::uint32_t> back(buffer.size(), 0);
  REQUIRE(cudaMemcpy(back.data(), base, buffer.size_bytes(), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back == first);

  // What fits arrives in order, read once, copied to the device in one step.
  std::ostringstream exact;
  for (std::size_t i = 0; i < room; ++i) exact << i * 3 << ' ';
  std::istringstream in_exact(exact.str());
  buffer.append(std::istream_iterator<std::uint32_t>(in_exact), std::istream_iterator<std::uint32_t>(), s.stream);
  REQUIRE(buffer.size() == buffer.max_capacity());
  back.assign(buffer.size(), 0);
  REQUIRE(cudaMemcpyAsync(back.data(), base, buffer.size_bytes(), cudaMemcpyDeviceToHost, s.stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s.stream) == cudaSuccess);
  CHECK(std::equal(first.begin(), first.end(), back.begin()));
  for (std::size_t i = 0; i < room; ++i) REQUIRE(back[first.size() + i] == i * 3);
}

TEST_CASE("growing until the device is full throws OutOfMemory and keeps the buffer intact",
          "[gpu][growable][oom]") {
  test::require_gpu();
  StreamOwner s;
  (void)test::count_pattern_mismatches(nullptr, 0, 0, 0, s.stream);  // its counter is allocated once, now
  warm_kernels(s.stream);
  std::size_t const free_before = free_device_memory();
  LiveCounts const held_before = cuda_backend(0).live_counts();  // what cuvmm holds
  {
    GrowableBuffer<std::uint64_t> buffer(GrowableOptions{}, s.stream);  // reserves the whole device
    REQUIRE(&buffer.storage().backend() == &cuda_backend(0));
    CHECK(buffer.max_capacity() * sizeof(std::uint64_t) >= free_before);
    // Steps well below the gap between free and total memory, so the device runs out before the
    // address range (as large as total memory) does.
    constexpr std::size_t step = 256 * MiB / sizeof(std::uint64_t);
    buffer.resize(step);
    test::fill_pattern(buffer.data(), step, 0, 77, s.stream);
    REQUIRE(test::count_pattern_mismatches(buffer.data(), step, 0, 77, s.stream) == 0);
    std::uint64_t* const base = buffer.data();
    std::size_t size_before_oom = 0;
    bool out_of_memory = false;
    try {
      for (;;) {
        size_before_oom = buffer.size();
        buffer.resize(buffer.size() + step);
      }
    } catch (const OutOfMemory& e) {
      out_of_memory = true;
      INFO(e.what());
    }
    REQUIRE(out_of_memory);
    CHECK(buffer.size() == size_before_oom);
    CHECK(buffer.data() == base);
    double const reached = static_cast<double>(buffer.storage().capacity()) / static_cast<double>(free_before);
    INFO("reached " << reached << " of the free memory");
    CHECK(reached >= 0.97);
    CHECK(test::count_pattern_mismatches(buffer.data(), step, 0, 77, s.stream) == 0);
  }
  // Everything went back: counted in the backend's books, not in the device's free memory (which
  // another process on the GPU moves).
  CHECK(cuda_backend(0).live_counts() == held_before);
}

TEST_CASE("shrink_to_fit returns the released chunks to the device", "[gpu][growable]") {
  test::require_gpu();
  StreamOwner s;
  warm_kernels(s.stream);
  // What cuvmm holds, in the backend's books: the device's free memory would move with any other
  // process on the GPU.
  Backend& cuda = cuda_backend(0);
  std::size_t const physical_before = cuda.live_counts().bytes_physical;
  std::size_t const chunks_before = cuda.live_counts().chunks;
  GrowableBuffer<std::uint8_t> buffer(capped(64 * GiB), s.stream);
  REQUIRE(&buffer.storage().backend() == &cuda);
  buffer.resize(8 * GiB, 0x5C, s.stream);
  std::size_t const mapped = buffer.storage().capacity();
  CHECK(mapped >= 8 * GiB);
  CHECK(cuda.live_counts().bytes_physical - physical_before == mapped);
  CHECK(cuda.live_counts().chunks - chunks_before == buffer.storage().chunk_count());

  buffer.resize(1 * GiB);
  buffer.shrink_to_fit(s.stream);
  std::size_t const kept = buffer.storage().capacity();
  REQUIRE(kept >= 1 * GiB);
  REQUIRE(kept < mapped);
  CHECK(cuda.live_counts().bytes_physical - physical_before == kept);
  CHECK(cuda.live_counts().chunks - chunks_before == buffer.storage().chunk_count());
  CHECK(buffer.element(1 * GiB - 1, s.stream) == 0x5C);

  buffer.clear();
  buffer.shrink_to_fit(s.stream);
  CHECK(cuda.live_counts().bytes_physical == physical_before);
  CHECK(cuda.live_counts().chunks == chunks_before);
}

TEST_CASE("a buffer striped over two devices holds one contiguous range", "[gpu][growable][multi-device]") {
  test::require_gpu(2);
  StreamOwner s;
  GrowableOptions options = capped(16 * GiB);
  options.devices = {0, 1};
  options.max_chunk_bytes = 256 * MiB;  // eight chunks for the 2 GiB below
  GrowableBuffer<std::uint64_t> buffer(options, s.stream);
  buffer.resize(2 * GiB / sizeof(std::uint64_t), poison, s.stream);
  test::fill_pattern(buffer.data(), buffer.size(), 0, 3, s.stream);
  const auto& chunks = buffer.storage().chunks();
  REQUIRE(chunks.size() == 8);
  for (std::size_t i = 0; i < chunks.size(); ++i) CHECK(chunks[i].device() == static_cast<int>(i % 2));
  CHECK(test::count_pattern_mismatches(buffer.data(), buffer.size(), 0, 3, s.stream) == 0);
}

TEST_CASE("an explicit copy on a stream is an independent device copy; moves and swaps keep addresses",
          "[gpu][growable]") {
  test::require_gpu();
  StreamOwner s;
  GrowableBuffer<std::uint64_t> original(capped(4 * GiB), s.stream);
  std::size_t const n = 3 * MiB + 17;  // elements: a few chunks, not a whole number of them
  original.resize(n, poison, s.stream);
  test::fill_pattern(original.data(), n, 0, 41, s.stream);

  GrowableBuffer<std::uint64_t> copy(original, s.stream);  // device-to-device, ordered on the stream
  REQUIRE(copy.size() == n);
  CHECK(copy.data() != original.data());
  CHECK(test::count_pattern_mismatches(copy.data(), n, 0, 41, s.stream) == 0);
  copy.set_element(5, poison, s.stream);  // the copy is independent of the original
  CHECK(test::count_pattern_mismatches(original.data(), n, 0, 41, s.stream) == 0);
  CHECK(test::count_pattern_mismatches(copy.data(), n, 0, 41, s.stream) == 1);

  std::uint64_t* const original_address = original.data();
  GrowableBuffer<std::uint64_t> moved(std::move(original));
  CHECK(moved.data() == original_address);
  CHECK(original.data() == nullptr);
  CHECK(original.size() == 0);
  moved.swap(copy);
  CHECK(copy.data() == original_address);
  CHECK(test::count_pattern_mismatches(copy.data(), n, 0, 41, s.stream) == 0);
  CHECK(test::count_pattern_mismatches(moved.data(), n, 0, 41, s.stream) == 1);

  // Appending a buffer's own elements to itself: growth never moves the source.
  copy.append(std::span<const std::uint64_t>(copy.data(), n), s.stream);
  REQUIRE(copy.size() == 2 * n);
  CHECK(copy.data() == original_address);
  CHECK(test::count_pattern_mismatches(copy.data() + n, n, 0, 41, s.stream) == 0);
}

// Destroying or move-assigning a buffer unmaps its memory, and cuMemUnmap does not wait for kernels
// that still use it (H200.md): a kernel queued on the buffer's stream then faults with an illegal
// address. The buffer must wait for its stream first. A fault poisons the CUDA context, so the
// unmapping runs in a child process, which reports what the stream said afterwards.
namespace {

constexpr std::string_view unmap_child_test = "child process unmaps a buffer while a kernel on its stream runs";
constexpr std::string_view unmap_child_variable = "CUVMM_TEST_UNMAP_CHILD";
constexpr std::string_view unmap_marker = "cuvmm-unmap-result ";

/// Runs the child case with `role` ("destroy" or "move_assign"); returns {query, sync} it reported.
std::pair<int, int> run_unmap_child(std::string_view role) {
  test::ProgramRun const run =
      test::run_program({test::own_executable(), std::string(unmap_child_test), "--reporter", "compact"},
                        {std::string(unmap_child_variable) + "=" + std::string(role)});
  INFO("child output:\n" << run.output);
  REQUIRE(run.exit_status == 0);
  std::size_t const marker = run.output.find(unmap_marker);
  REQUIRE(marker != std::string::npos);
  std::istringstream fields(run.output.substr(marker + unmap_marker.size()));
  int query = -1;
  int sync = -1;
  fields >> query >> sync;
  return {query, sync};
}

}  // namespace

TEST_CASE("destroying a buffer waits for the kernel still running on its stream (in a child process)",
          "[gpu][growable][stream]") {
  test::require_gpu();
  auto const [query, sync] = run_unmap_child("destroy");
  CHECK(query == cudaSuccess);  // the stream's work was done when the destructor returned
  CHECK(sync == cudaSuccess);   // and it did not fault on unmapped memory
}

TEST_CASE("move-assigning over a buffer waits for the kernel still running on its stream (in a child process)",
          "[gpu][growable][stream]") {
  test::require_gpu();
  auto const [query, sync] = run_unmap_child("move_assign");
  CHECK(query == cudaSuccess);
  CHECK(sync == cudaSuccess);
}

TEST_CASE("child process unmaps a buffer while a kernel on its stream runs", "[.][child]") {
  test::require_gpu();
  char const* const role = std::getenv(std::string(unmap_child_variable).c_str());
  if (role == nullptr) SKIP("runs only in the child process started by the unmap-ordering tests");
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  StreamOwner const owner;
  GrowableOptions options;
  options.max_capacity_bytes = 1 * GiB;
  std::size_t const count = std::size_t{1} << 20;  // 4 MiB that one block walks for many rounds
  {
    GrowableBuffer<std::uint32_t> buffer(cuda_backend(0), options, owner.stream);
    buffer.resize(count, 0u);
    test::increment_rounds(buffer.data(), count, 400, owner.stream);  // tens of milliseconds
    if (std::string_view(role) == "move_assign") buffer = GrowableBuffer<std::uint32_t>(cuda_backend(0), options);
  }  // "destroy": the destructor unmaps here
  int const query = static_cast<int>(cudaStreamQuery(owner.stream));
  int const sync = static_cast<int>(cudaStreamSynchronize(owner.stream));
  std::printf("%.*s%d %d\n", static_cast<int>(unmap_marker.size()), unmap_marker.data(), query, sync);
  std::fflush(stdout);
}

// --- the std::vector / rmm surface on the device -----------------------------------------------

TEST_CASE("a default-constructed device buffer reserves nothing until it grows, then holds data",
          "[gpu][growable][api]") {
  test::require_gpu();
  static_assert(std::is_nothrow_default_constructible_v<GrowableBuffer<int>>);
  GrowableBuffer<std::uint32_t> buffer;
  CHECK(buffer.reserved_bytes() == 0);
  CHECK(buffer.data() == nullptr);
  buffer.push_back(17);
  std::size_t const g = buffer.storage().granularity();
  CHECK(buffer.reserved_bytes() == (cuda_backend(0).memory_info(0).total + g - 1) / g * g);  // the device's memory
  CHECK(buffer.front_element() == 17);
}

TEST_CASE("device constructors: (n, stream), (n, value, stream), iterator range and list", "[gpu][growable][api]") {
  test::require_gpu();
  StreamOwner s;
  GrowableBuffer<std::uint64_t> uninitialized(1000, s.stream);
  CHECK(uninitialized.size() == 1000);
  CHECK(uninitialized.stream() == s.stream);
  GrowableBuffer<std::uint64_t> filled(3 * MiB + 5, poison, s.stream);
  std::vector<std::uint64_t> out(filled.size() + 1, 0);
  filled.copy_to(std::span<std::uint64_t>(out), s.stream);
  CHECK(std::count(out.begin(), out.end(), poison) == static_cast<std::ptrdiff_t>(filled.size()));
  CHECK(out.back() == 0);
  std::vector<std::uint32_t> const host{5, 6, 7, 8};
  GrowableBuffer<std::uint32_t> from_range(host.begin(), host.end(), s.stream);
  CHECK(from_range.to_vector(s.stream) == host);
  GrowableBuffer<std::uint32_t> from_device(from_range.begin(), from_range.end(), s.stream);  // device_ptr
  CHECK(from_device.to_vector(s.stream) == host);
  GrowableBuffer<std::uint32_t> listed({1, 2, 3}, s.stream);
  CHECK(listed.to_vector(s.stream) == std::vector<std::uint32_t>{1, 2, 3});
}

TEST_CASE("rmm's element access set on the device: element_ptr, front/back_element, set_element_async",
          "[gpu][growable][api]") {
  test::require_gpu();
  StreamOwner s;
  GrowableBuffer<std::uint64_t> buffer({10, 20, 30}, s.stream);
  CHECK(buffer.element_ptr(1) == buffer.data() + 1);
  CHECK_THROWS_AS(buffer.element_ptr(3), Error);
  std::uint64_t const value = 99;
  buffer.set_element_async(1, value, s.stream);
  CHECK(buffer.element(1, s.stream) == 99);
  CHECK(buffer.front_element(s.stream) == 10);
  CHECK(buffer.back_element(s.stream) == 30);
  GrowableBuffer<std::uint64_t> empty(capped(2 * MiB), s.stream);
  CHECK_THROWS_AS((void)empty.front_element(), Error);
  CHECK_THROWS_AS((void)empty.back_element(), Error);
}

TEST_CASE("reverse iterators of a device buffer work with Thrust", "[gpu][growable][api][thrust]") {
  test::require_gpu();
  StreamOwner s;
  GrowableBuffer<std::uint32_t> in({1, 2, 3, 4, 5}, s.stream);
  GrowableBuffer<std::uint32_t> out(capped(2 * MiB), s.stream);
  test::thrust_reverse_copy(in, out, s.stream);
  CHECK(out.to_vector(s.stream) == std::vector<std::uint32_t>{5, 4, 3, 2, 1});
}

TEST_CASE("device assign, append_range, insert and erase at the end match std::vector", "[gpu][growable][api][model]") {
  test::require_gpu();
  StreamOwner s;
  GrowableBuffer<std::uint32_t> buffer(capped(64 * MiB), s.stream);
  std::vector<std::uint32_t> model;
  std::mt19937 rng(16);
  for (int step = 0; step < 200; ++step) {
    switch (rng() % 7) {
      case 0: {
        std::vector<std::uint32_t> block(rng() % 5000);
        for (auto& x : block) x = rng();
        buffer.append_range(block, s.stream);
        model.insert(model.end(), block.begin(), block.end());
        break;
      }
      case 1: {
        std::uint32_t const v = rng();
        buffer.insert(buffer.end(), v);
        model.push_back(v);
        break;
      }
      case 2: {
        std::size_t const n = rng() % 3000;
        std::uint32_t const v = rng();
        buffer.insert(buffer.cend(), n, v);
        model.insert(model.end(), n, v);
        break;
      }
      case 3:
        if (!model.empty()) {
          std::size_t const keep = rng() % (model.size() + 1);
          buffer.erase(buffer.begin() + static_cast<std::ptrdiff_t>(keep), buffer.end());
          model.resize(keep);
        }
        break;
      case 4:
        if (rng() % 4 == 0) {
          std::size_t const n = rng() % 20000;
          std::uint32_t const v = rng();
          buffer.assign(n, v, s.stream);
          model.assign(n, v);
        }
        break;
      case 5: {
        std::uint32_t const a = rng();
        buffer.append({a, a + 1}, s.stream);
        model.insert(model.end(), {a, a + 1});
        break;
      }
      case 6:
        if (model.size() >= 2) {  // begin() is then neither end() nor the last element
          CHECK_THROWS_AS(buffer.insert(buffer.begin(), 1u), Error);
          CHECK_THROWS_AS(buffer.erase(buffer.begin()), Error);
        }
        break;
    }
    REQUIRE(buffer.size() == model.size());
    if (step % 10 == 0) REQUIRE(buffer.to_vector(s.stream) == model);
  }
  CHECK(buffer.to_vector(s.stream) == model);
}

TEST_CASE("device growth past the range is a std::length_error and changes nothing", "[gpu][growable][api][errors]") {
  test::require_gpu();
  StreamOwner s;
  GrowableBuffer<std::uint8_t> buffer(capped(2 * MiB), s.stream);
  buffer.resize(2 * MiB, 0x7E, s.stream);
  CHECK_THROWS_AS(buffer.push_back(1), std::length_error);
  CHECK(buffer.size() == 2 * MiB);
  CHECK(buffer.back_element(s.stream) == 0x7E);
}

TEST_CASE("2000 device buffers on a reservation pool share 8 reservations and keep their data",
          "[gpu][growable][api][pool]") {
  test::require_gpu();
  StreamOwner s;
  ReservationPool pool(cuda_backend(0), {.slot_bytes = 64 * MiB, .slots_per_reservation = 256});
  GrowableOptions options;
  options.reservation_pool = &pool;
  std::vector<GrowableBuffer<std::uint64_t>> buffers;
  buffers.reserve(2000);
  for (std::uint64_t i = 0; i < 2000; ++i) {
    buffers.emplace_back(options, s.stream);
    buffers.back().append({i, i * 3 + 1}, s.stream);
  }
  CHECK(pool.reservations() == 8);
  CHECK(buffers[0].reserved_bytes() == 64 * MiB);
  buffers[7].resize(buffers[7].max_capacity(), poison, s.stream);  // fills its whole slot
  CHECK_THROWS_AS(buffers[7].push_back(1, s.stream), CapacityExceeded);
  for (std::uint64_t i = 0; i < 2000; ++i) {
    if (i == 7) continue;
    REQUIRE(buffers[i].to_vector(s.stream) == std::vector<std::uint64_t>{i, i * 3 + 1});
  }
  CHECK(buffers[7].back_element(s.stream) == poison);
}

TEST_CASE("1200 default device buffers all get a range: the device's size within the budget, then 4 GiB",
          "[gpu][growable][api][budget]") {
  // Without the budget (DefaultReservationLimits) ~900 device-sized reservations fill the
  // process's ~128 TiB and every later buffer fails (docs/H200.md).
  test::require_gpu();
  StreamOwner s;
  REQUIRE(default_reserved_bytes() == 0);
  DefaultReservationLimits const limits = default_reservation_limits();
  std::vector<GrowableBuffer<std::uint64_t>> buffers;
  buffers.reserve(1200);
  for (std::uint64_t i = 0; i < 1200; ++i) {
    buffers.emplace_back(GrowableOptions{}, s.stream);
    buffers.back().append({poison, poison}, s.stream);
    buffers.back().set_element_async(0, i, s.stream);
    buffers.back().set_element_async(1, ~i, s.stream);
  }
  std::size_t const granularity = buffers[0].storage().granularity();
  std::size_t const full = (cuda_backend(0).memory_info(0).total + granularity - 1) / granularity * granularity;
  std::size_t const full_sized = limits.budget_bytes / full;
  CHECK(default_reserved_bytes() == full_sized * full);
  for (std::uint64_t i = 0; i < 1200; ++i) {
    INFO("buffer " << i);
    REQUIRE(buffers[i].reserved_bytes() == (i < full_sized ? full : limits.fallback_bytes));
    REQUIRE(buffers[i].to_vector(s.stream) == std::vector<std::uint64_t>{i, ~i});
  }
  std::printf("1200 default buffers: %zu of %zu bytes, %zu of %zu bytes\n", full_sized, full, 1200 - full_sized,
              limits.fallback_bytes);
  // A fallback buffer can be filled to its 4 GiB and no further.
  GrowableBuffer<std::uint64_t>& last = buffers.back();
  last.resize(last.max_capacity(), poison, s.stream);
  CHECK_THROWS_AS(last.push_back(1, s.stream), CapacityExceeded);
  CHECK(last.front_element(s.stream) == 1199);
  CHECK(last.back_element(s.stream) == poison);
  buffers.clear();
  CHECK(default_reserved_bytes() == 0);
}
