// cuvmm-plan's recommendation on given measurements (exact choices), its percentiles, and the
// JSON/CSV writers' fields.
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <sstream>
#include <vector>
#include <string>

#include "report.hpp"

using Catch::Approx;
using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::StartsWith;
using namespace cuvmm::plan;
using cuvmm::GiB;
using cuvmm::MiB;

namespace {

/// A row whose five calls together take `total_us` (medians), spread unevenly over the calls.
DriverCallRow driver_row(std::size_t chunk_bytes, double total_us) {
  DriverCallRow row;
  row.chunk_bytes = chunk_bytes;
  row.create.median_us = 0.4 * total_us;
  row.map.median_us = 0.1 * total_us;
  row.set_access.median_us = 0.2 * total_us;
  row.unmap.median_us = 0.1 * total_us;
  row.release.median_us = 0.2 * total_us;
  return row;
}

GrowthRow growth_row(const char* strategy, std::size_t reached, std::size_t append, double seconds,
                     const char* status = "ok") {
  GrowthRow row;
  row.strategy = strategy;
  row.target_bytes = reached;
  row.reached_bytes = reached;
  row.append_bytes = append;
  row.total_seconds = seconds;
  row.status = status;
  return row;
}

}  // namespace

TEST_CASE("percentiles are nearest-rank, in microseconds", "[plan][report]") {
  std::vector<double> samples;
  for (int i = 100; i >= 1; --i) samples.push_back(i * 1e-6);  // 1..100 µs, unsorted
  CHECK(percentile_us(samples, 50) == Approx(50));
  CHECK(percentile_us(samples, 99) == Approx(99));
  CHECK(percentile_us(samples, 100) == Approx(100));
  CHECK(percentile_us({3e-6}, 99) == Approx(3));
  CHECK(percentile_us({}, 99) == 0);
  LatencyStats const s = latency_stats({2e-6, 1e-6, 4e-6, 3e-6});
  CHECK(s.median_us == Approx(2));
  CHECK(s.p99_us == Approx(4));
  CHECK(s.samples == 4);
}

TEST_CASE("driver cost per GiB adds the five medians and scales by the chunk size", "[plan][report]") {
  CHECK(driver_row(2 * MiB, 74).ms_per_gib() == Approx(74.0 / 1e3 * 512));
  CHECK(driver_row(1 * GiB, 500).ms_per_gib() == Approx(0.5));
  CHECK(driver_row(0, 500).ms_per_gib() == 0);
}

TEST_CASE("the chunk size is the smallest within the tolerance of the cheapest per GiB", "[plan][report]") {
  Measurements m;
  // ms per GiB: 2 MiB 37.9, 64 MiB 1.6, 512 MiB 0.56, 1 GiB 0.5, 2 GiB 0.47 (cheapest), 4 GiB 0.48.
  m.driver_calls = {driver_row(2 * MiB, 74), driver_row(64 * MiB, 100), driver_row(512 * MiB, 280),
                    driver_row(1 * GiB, 500), driver_row(2 * GiB, 940), driver_row(4 * GiB, 1920)};
  Recommendation r = recommend(m);
  CHECK(r.chunk_bytes == 512 * MiB);  // 0.56 <= 1.25 * 0.47; 64 MiB (1.6) is not
  CHECK(r.chunk_ms_per_gib == Approx(0.56));
  // Make 512 MiB a little dearer: 1 GiB is then the smallest within the tolerance.
  m.driver_calls[2] = driver_row(512 * MiB, 300);
  r = recommend(m);
  CHECK(r.chunk_bytes == 1 * GiB);
  m.driver_calls.clear();
  CHECK(recommend(m).chunk_bytes == 0);
}

TEST_CASE("the largest buffer is the reach run's, else the growable growth runs' largest", "[plan][report]") {
  Measurements m;
  m.growth = {growth_row(growable_policy_name, 4 * GiB, 64 * MiB, 1.0),
              growth_row(growable_fixed_name, 6 * GiB, 64 * MiB, 2.0, "out_of_memory"),
              growth_row(copy_grow_2x_name, 64 * GiB, 64 * MiB, 9.0)};
  Recommendation r = recommend(m);
  CHECK(r.largest_buffer_bytes == 6 * GiB);  // a growable strategy stopped by the device: as far as it went
  CHECK(r.largest_buffer_source == "growth runs");
  m.reach = Reach{140 * GiB, 139 * GiB, "out_of_memory", 0.2};
  r = recommend(m);
  CHECK(r.largest_buffer_bytes == 139 * GiB);
  CHECK(r.largest_buffer_source == "reach run");
}

TEST_CASE("growth cost per GiB comes from the largest completed growable run, with copy-and-grow beside it",
          "[plan][report]") {
  Measurements m;
  m.growth = {growth_row(growable_policy_name, 1 * GiB, 1 * MiB, 0.5),
              growth_row(growable_policy_name, 8 * GiB, 1 * MiB, 2.0),
              growth_row(growable_policy_name, 8 * GiB, 64 * MiB, 1.6),
              growth_row(growable_policy_name, 120 * GiB, 64 * MiB, 1.0, "out_of_memory"),
              growth_row(copy_grow_2x_name, 8 * GiB, 64 * MiB, 4.0)};
  Recommendation const r = recommend(m);
  REQUIRE(r.growth_ms_per_gib.has_value());
  CHECK(*r.growth_ms_per_gib == Approx(200));  // 8 GiB in 64 MiB appends, 1.6 s
  REQUIRE(r.copy_grow_ms_per_gib.has_value());
  CHECK(*r.copy_grow_ms_per_gib == Approx(500));
  std::string const text = format_recommendation(r, m);
  CHECK_THAT(text, ContainsSubstring("growth cost:       200 ms per GiB"));
  CHECK_THAT(text, ContainsSubstring("cudaMalloc copy-and-grow 2x: 500 ms per GiB"));
  CHECK_THAT(text, ContainsSubstring("chunk size:        not measured"));
  m.growth[2].total_seconds = 12.0;  // 1.5 s per GiB: written in seconds
  CHECK_THAT(format_recommendation(recommend(m), m), ContainsSubstring("growth cost:       1.5 s per GiB"));
  Measurements empty;
  Recommendation const none = recommend(empty);
  CHECK_FALSE(none.growth_ms_per_gib.has_value());
  CHECK_THAT(format_recommendation(none, empty), ContainsSubstring("growth cost:       not measured"));
}

TEST_CASE("thread scaling compares the most threads with one, at the smallest chunk size measured",
          "[plan][report]") {
  auto row = [](std::size_t threads, std::size_t chunk, double rate) {
    DriverThreadsRow r;
    r.threads = threads;
    r.chunk_bytes = chunk;
    r.cycles_per_second = rate;
    return r;
  };
  Measurements m;
  m.driver_threads = {row(1, 64 * MiB, 100), row(8, 64 * MiB, 900), row(1, 2 * MiB, 1000), row(2, 2 * MiB, 1800),
                      row(8, 2 * MiB, 2500)};
  Recommendation const r = recommend(m);
  REQUIRE(r.thread_scaling.has_value());
  CHECK(*r.thread_scaling == Approx(2.5));
  CHECK(r.thread_scaling_threads == 8);
  CHECK(r.thread_scaling_chunk_bytes == 2 * MiB);
  CHECK(r.thread_scaling_repeats == 1);
  CHECK_THAT(format_recommendation(r, m),
             ContainsSubstring("threads:           8 threads make 2.50x the driver-call cycles per second of one "
                               "(2 MiB chunks; one run, spread not measured)\n"));
  m.driver_threads = {row(8, 2 * MiB, 2500)};  // no one-thread row to compare with
  CHECK_FALSE(recommend(m).thread_scaling.has_value());
  CHECK_THAT(format_recommendation(recommend(m), m), !ContainsSubstring("threads:"));
}

TEST_CASE("thread scaling is the median of the repeats' ratios, with their lowest and highest as the spread",
          "[plan][report]") {
  auto row = [](std::size_t threads, double rate, std::size_t repeat) {
    DriverThreadsRow r;
    r.threads = threads;
    r.chunk_bytes = 2 * MiB;
    r.cycles_per_second = rate;
    r.repeat = repeat;
    return r;
  };
  Measurements m;
  // Ratios 8 threads / 1 thread per repeat: 2.89, 1.01, 1.50 (a spread as wide as a busy machine gives).
  m.driver_threads = {row(1, 1000, 1), row(8, 2890, 1), row(1, 2000, 2), row(8, 2020, 2),
                      row(1, 1000, 3), row(4, 1200, 3), row(8, 1500, 3)};
  Recommendation const r = recommend(m);
  REQUIRE(r.thread_scaling.has_value());
  CHECK(*r.thread_scaling == Approx(1.5));
  CHECK(r.thread_scaling_min == Approx(1.01));
  CHECK(r.thread_scaling_max == Approx(2.89));
  CHECK(r.thread_scaling_repeats == 3);
  CHECK_THAT(format_recommendation(r, m),
             ContainsSubstring("threads:           8 threads make 1.50x the driver-call cycles per second of one "
                               "(2 MiB chunks; median of 3 repeats, spread 1.01x..2.89x)\n"));
  std::ostringstream json;
  write_json(json, m, r);
  CHECK_THAT(json.str(), ContainsSubstring("\"thread_scaling\": 1.5, \"thread_scaling_min\": 1.01, "
                                           "\"thread_scaling_max\": 2.89, \"thread_scaling_repeats\": 3, "
                                           "\"thread_scaling_threads\": 8"));
  CHECK_THAT(json.str(), ContainsSubstring("\"cycles_per_second\": 1500, \"repeat\": 3}"));
}

TEST_CASE("a p99 is reported only from 100 samples or more; below that, the maximum of N", "[plan][report]") {
  std::vector<double> five{5e-6, 1e-6, 4e-6, 2e-6, 3e-6};
  LatencyStats const few = latency_stats(five);
  CHECK(few.samples == 5);
  CHECK(few.max_us == Approx(5));
  CHECK_FALSE(few.has_p99());
  CHECK(tail_text(few) == "max of 5: 5 us");
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i * 1e-6);
  hundred.back() = 1e-3;  // one outlier: the p99 is the 99th sample, the max the outlier
  LatencyStats const many = latency_stats(hundred);
  CHECK(many.has_p99());
  CHECK(many.p99_us == Approx(99));
  CHECK(many.max_us == Approx(1000));
  CHECK(tail_text(many) == "p99 99 us");
  CHECK(tail_text(latency_stats(std::vector<double>(99, 7e-6))) == "max of 99: 7 us");

  Measurements m;
  DriverCallRow row = driver_row(2 * MiB, 100);
  row.create = few;
  row.map = many;
  m.driver_calls = {row};
  std::ostringstream json, csv;
  write_json(json, m, recommend(m));
  write_driver_calls_csv(csv, m);
  CHECK_THAT(json.str(), ContainsSubstring("\"create\": {\"median_us\": 3, \"p99_us\": null, \"max_us\": 5, "
                                           "\"samples\": 5}"));
  CHECK_THAT(json.str(), ContainsSubstring("\"map\": {\"median_us\": 50, \"p99_us\": 99, \"max_us\": 1000, "
                                           "\"samples\": 100}"));
  CHECK_THAT(csv.str(), StartsWith("chunk_bytes,call,median_us,p99_us,samples,max_us\n2097152,create,3,,5,5\n"
                                   "2097152,map,50,99,100,1000\n"));
  GrowthRow few_appends = growth_row(growable_policy_name, 1 * GiB, 128 * MiB, 0.5);
  few_appends.appends = 8;
  few_appends.p99_append_us = 40;
  m.growth = {few_appends};
  std::ostringstream growth_json;
  write_json(growth_json, m, recommend(m));
  CHECK_THAT(growth_json.str(), ContainsSubstring("\"appends\": 8, \"total_seconds\": 0.5, \"p99_append_us\": null,"));
}

TEST_CASE("the recommendation names the option each figure maps to", "[plan][report]") {
  Measurements m;
  m.device_name = "a GPU";
  m.backend = "cuda";
  m.profile = "quick";
  m.total_bytes = 128 * GiB;
  m.granularity = 2 * MiB;
  DriverCallRow small = driver_row(2 * MiB, 100);   // 51.2 ms per GiB
  DriverCallRow large = driver_row(32 * MiB, 400);  // 12.8 ms per GiB
  small.create.samples = 5;
  large.create.samples = 5;
  m.driver_calls = {small, large};
  Recommendation const r = recommend(m);
  CHECK(r.chunk_bytes == 32 * MiB);
  CHECK(r.arena_page_bytes == 2 * MiB);
  CHECK(r.arena_large_page_bytes == 32 * MiB);
  REQUIRE(r.arena_page_ms_per_gib.has_value());
  CHECK(*r.arena_page_ms_per_gib == Approx(51.2));
  REQUIRE(r.arena_large_page_ms_per_gib.has_value());
  CHECK(*r.arena_large_page_ms_per_gib == Approx(12.8));
  std::string const text = format_recommendation(r, m);
  CHECK_THAT(text, ContainsSubstring("  chunk size:        32 MiB (driver calls 12.8 ms per GiB, medians of 5 calls "
                                     "each; the smallest size within 1.25x of the cheapest measured): keep "
                                     "GrowableOptions::max_chunk_bytes at or above it\n"));
  CHECK_THAT(text, ContainsSubstring("  hide size:         not measured (needs the driver calls and the preallocated "
                                     "baseline); GrowableOptions::hide_bytes defaults to"));
  CHECK_THAT(text, ContainsSubstring("  arena pages:       ArenaOptions::page_bytes 2 MiB (default): driver calls "
                                     "51.2 ms per GiB; ArenaOptions::large_page_bytes 32 MiB (default): driver calls "
                                     "12.8 ms per GiB\n"));
  m.driver_calls = {small};
  CHECK_THAT(format_recommendation(recommend(m), m),
             ContainsSubstring("ArenaOptions::large_page_bytes 32 MiB (default): not measured at this size\n"));
  std::ostringstream json;
  write_json(json, m, recommend(m));
  CHECK_THAT(json.str(), ContainsSubstring("\"chunk_bytes_option\": \"GrowableOptions::max_chunk_bytes\""));
  CHECK_THAT(json.str(), ContainsSubstring("\"arena_page_bytes\": 2097152, \"arena_page_ms_per_gib\": 51.2, "
                                           "\"arena_large_page_bytes\": 33554432, \"arena_large_page_ms_per_gib\": null"));
}

TEST_CASE("growth ratios put each completed growth against the baselines of the same case", "[plan][report]") {
  Measurements m;
  m.growth = {growth_row(growable_policy_name, 64 * GiB, 64 * MiB, 0.022),
              growth_row(copy_grow_2x_name, 64 * GiB, 64 * MiB, 0.110),
              growth_row(preallocated_name, 64 * GiB, 64 * MiB, 0.020),
              growth_row(growable_policy_name, 120 * GiB, 64 * MiB, 0.042),
              growth_row(copy_grow_2x_name, 120 * GiB, 64 * MiB, 0.2, "out_of_memory"),
              growth_row(preallocated_name, 120 * GiB, 64 * MiB, 0.035),
              growth_row(growable_policy_name, 8 * GiB, 1 * GiB, 0.5)};  // no baseline measured
  auto const ratios = growth_ratios(m);
  REQUIRE(ratios.size() == 6);  // the copy-and-grow that ran out of memory has none
  CHECK(ratios[0].strategy == growable_policy_name);
  CHECK(*ratios[0].over_preallocated == Approx(1.1));
  CHECK(*ratios[0].over_copy_grow_2x == Approx(0.2));
  CHECK(*ratios[1].over_copy_grow_2x == Approx(1.0));
  CHECK(*ratios[3].over_preallocated == Approx(1.2));
  CHECK_FALSE(ratios[3].over_copy_grow_2x.has_value());  // its copy-and-grow did not complete
  CHECK_FALSE(ratios[5].over_preallocated.has_value());
  CHECK(format_growth_ratios(m) ==
        "GrowableBuffer's growth time against the baselines (same size and appends):\n"
        "  size      appends   / preallocated  / cudaMalloc copy-and-grow 2x\n"
        "  64 GiB    64 MiB    1.100           0.200\n"
        "  120 GiB   64 MiB    1.200           -\n");
  std::ostringstream json;
  write_json(json, m, recommend(m));
  CHECK_THAT(json.str(), ContainsSubstring("{\"strategy\": \"growable\", \"target_bytes\": 68719476736, "
                                           "\"append_bytes\": 67108864, \"over_preallocated\": 1.1, "
                                           "\"over_copy_grow_2x\": 0.2}"));
  CHECK(format_growth_ratios(Measurements{}).empty());
}

TEST_CASE("the CSV writers put one row per measurement under a fixed header", "[plan][report]") {
  Measurements m;
  m.driver_calls = {driver_row(2 * MiB, 100)};
  m.growth = {growth_row(growable_policy_name, 1 * GiB, 1 * MiB, 0.25)};
  ReplayResult replay;
  replay.allocator = "cuvmm_arena";
  replay.timeline = {{0, 10, 2 * MiB}, {5, 0, 2 * MiB}};
  m.replays = {replay};
  DriverThreadsRow threads;
  threads.threads = 4;
  threads.chunk_bytes = 2 * MiB;
  threads.create = {30, 50, 800, 60};
  threads.cycles_per_second = 1500;
  m.driver_threads = {threads};
  std::ostringstream driver, driver_threads, growth, trace;
  write_driver_calls_csv(driver, m);
  write_driver_threads_csv(driver_threads, m);
  write_growth_csv(growth, m);
  write_trace_memory_csv(trace, m);
  CHECK(driver.str() ==
        "chunk_bytes,call,median_us,p99_us,samples,max_us\n"
        "2097152,create,40,,0,0\n2097152,map,10,,0,0\n2097152,set_access,20,,0,0\n2097152,unmap,10,,0,0\n"
        "2097152,release,20,,0,0\n");
  CHECK(driver_threads.str() ==
        "threads,chunk_bytes,call,median_us,p99_us,samples,cycles_per_second,repeat,max_us\n"
        "4,2097152,create,30,50,800,1500,1,60\n4,2097152,map,0,,0,1500,1,0\n4,2097152,set_access,0,,0,1500,1,0\n"
        "4,2097152,unmap,0,,0,1500,1,0\n4,2097152,release,0,,0,1500,1,0\n");
  CHECK(growth.str() ==
        "strategy,target_bytes,append_bytes,status,reached_bytes,appends,total_seconds,p99_append_us,peak_bytes,"
        "bytes_copied,chunks,growth_seconds,peak_in_use_bytes,runs,min_total_seconds,max_total_seconds\n"
        "growable,1073741824,1048576,ok,1073741824,0,0.25,,0,0,0,0,0,1,0,0\n");  // 0 appends: no p99
  CHECK(trace.str() == "allocator,op_index,requested_bytes,held_bytes\ncuvmm_arena,0,10,2097152\ncuvmm_arena,5,0,2097152\n");
}

TEST_CASE("trace_memory.csv quotes an allocator name with a comma or a quote", "[plan][report]") {
  Measurements m;
  ReplayResult plugin;
  plugin.allocator = "pytorch_cuvmm_plugin:page_bytes:4MiB,byte_limit:1GiB";
  plugin.timeline = {{3, 10, 2097152}};
  ReplayResult odd;
  odd.allocator = "a\"b";
  odd.timeline = {{4, 0, 0}};
  m.replays = {plugin, odd};
  std::ostringstream trace;
  write_trace_memory_csv(trace, m);
  CHECK(trace.str() == "allocator,op_index,requested_bytes,held_bytes\n"
                       "\"pytorch_cuvmm_plugin:page_bytes:4MiB,byte_limit:1GiB\",3,10,2097152\n"
                       "\"a\"\"b\",4,0,0\n");
}

TEST_CASE("the JSON escapes strings and writes null for what was not measured", "[plan][report]") {
  Measurements m;
  m.profile = "quick";
  m.backend = "host";
  m.device_name = "a \"quoted\"\tname\x01";
  std::ostringstream out;
  write_json(out, m, recommend(m));
  std::string const json = out.str();
  CHECK_THAT(json, StartsWith("{\n  \"tool\": \"cuvmm-plan\""));
  CHECK_THAT(json, ContainsSubstring("\"name\": \"a \\\"quoted\\\"\\tname\\u0001\""));
  CHECK_THAT(json, ContainsSubstring("\"reach\": null"));
  CHECK_THAT(json, ContainsSubstring("\"growth_ms_per_gib\": null"));
  CHECK_THAT(json, ContainsSubstring("\"thread_scaling\": null"));
  CHECK_THAT(json, ContainsSubstring("\"driver_threads\": [\n  ]"));
}

TEST_CASE("the hide size is twice fill bandwidth times the step time of the first chunk size that hides its own step",
          "[plan][report][hide]") {
  Measurements m;
  m.total_bytes = 128 * GiB;
  m.granularity = 2 * MiB;
  // Steps (create + map + set access = 0.7 of each total): 44.1, 60.2, 81.2 and 140 µs.
  m.driver_calls = {driver_row(1 * GiB, 200), driver_row(2 * MiB, 63), driver_row(64 * MiB, 86),
                    driver_row(256 * MiB, 116)};
  Recommendation r = recommend(m);
  CHECK_FALSE(r.hide_bytes.has_value());  // no fill bandwidth without the preallocated baseline
  CHECK(r.default_hide_bytes == 512 * MiB);
  CHECK_THAT(format_recommendation(r, m),
             ContainsSubstring("hide size:         not measured (needs the driver calls and the preallocated "
                               "baseline); GrowableOptions::hide_bytes defaults to memory / 256 = 512 MiB"));

  // Fills at 8 GiB in 2.9 ms (2.96 TB/s): 2 MiB fills in 0.7 µs, 64 MiB in 22.7 µs (both shorter
  // than their steps), 256 MiB in 90.6 µs >= 81.2 µs. So 2 x 2.96e12 B/s x 81.2 µs = 481.1 MB,
  // rounded up to the granularity: 460 MiB.
  m.growth = {growth_row(preallocated_name, 8 * GiB, 64 * MiB, 2.9e-3), growth_row(preallocated_name, 1 * GiB, 64 * MiB, 1.0),
              growth_row(growable_policy_name, 8 * GiB, 64 * MiB, 3.5e-3)};
  r = recommend(m);
  REQUIRE(r.hide_bytes.has_value());
  CHECK(*r.hide_bytes == 460 * MiB);
  CHECK(r.hide_step_chunk_bytes == 256 * MiB);
  CHECK(r.hide_step_us == Approx(81.2));
  CHECK(r.hide_fill_bytes_per_second == Approx(8.0 * GiB / 2.9e-3));
  std::string const text = format_recommendation(r, m);
  CHECK_THAT(text, ContainsSubstring("hide size:         460 MiB ("));
  CHECK_THAT(text, ContainsSubstring("set GrowableOptions::hide_bytes = 482344960 (default here: memory / 256 = 512 MiB)"));
  std::ostringstream json;
  write_json(json, m, r);
  CHECK_THAT(json.str(), ContainsSubstring("\"hide_bytes\": 482344960, \"hide_bytes_option\": \"GrowableOptions::hide_bytes\""));
  CHECK_THAT(json.str(), ContainsSubstring("\"default_hide_bytes\": 536870912"));

  // A slow device (1 GiB/s): 2 MiB already fills in 2 ms, longer than its 44.1 µs step; the hide
  // size (47 KB) is one granule.
  m.growth = {growth_row(preallocated_name, 1 * GiB, 64 * MiB, 1.0)};
  r = recommend(m);
  REQUIRE(r.hide_bytes.has_value());
  CHECK(r.hide_step_chunk_bytes == 2 * MiB);
  CHECK(*r.hide_bytes == 2 * MiB);
  // So fast a device that no measured chunk hides its step: the largest chunk's step is taken.
  m.growth = {growth_row(preallocated_name, 1 * GiB, 64 * MiB, 1e-9)};  // absurdly fast: none hides
  r = recommend(m);
  REQUIRE(r.hide_bytes.has_value());
  CHECK(r.hide_step_chunk_bytes == 1 * GiB);
  CHECK(r.hide_step_us == Approx(140));
}
