// The multicast gate, without a multi-GPU machine: its decision on faked device facts, and on this
// machine (no driver, or fewer than two multicast devices) a MulticastObject that refuses with
// cuvmm::Unsupported before any multicast driver call (counted by the driver-call counter that
// every cuMulticast* call in src/multicast passes through).
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cuvmm/device_caps.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/multicast.hpp>

#include "host_memory.hpp"
#include "multicast/multicast_gate.hpp"

using namespace cuvmm;
using Catch::Matchers::ContainsSubstring;

namespace {

/// Fake facts: devices in `with_multicast` support it; every query is recorded.
struct FakeDevices {
  std::vector<int> with_multicast;
  std::vector<int> asked;
  std::function<bool(int)> query() {
    return [this](int device) {
      asked.push_back(device);
      return std::find(with_multicast.begin(), with_multicast.end(), device) != with_multicast.end();
    };
  }
};

}  // namespace

TEST_CASE("the gate passes two or more distinct devices that all support multicast", "[multicast][gate]") {
  FakeDevices fake{{0, 1, 2, 3}, {}};
  std::vector<int> const devices{2, 0, 3};
  MulticastSupport const support = detail::multicast_gate(devices, 4, {}, fake.query());
  CHECK(support.supported);
  CHECK(support.reason.empty());
  CHECK(fake.asked == devices);
}

TEST_CASE("the gate refuses a machine with fewer than two devices, saying how many and why", "[multicast][gate]") {
  FakeDevices fake{{0}, {}};
  std::vector<int> const devices{0, 1};
  MulticastSupport const one = detail::multicast_gate(devices, 1, {}, fake.query());
  CHECK_FALSE(one.supported);
  CHECK(one.reason == "multicast needs at least two CUDA devices; this machine has 1");
  MulticastSupport const none = detail::multicast_gate(devices, 0, "no CUDA driver found: test", fake.query());
  CHECK(none.reason == "multicast needs at least two CUDA devices; this machine has 0 (no CUDA driver found: test)");
  CHECK(fake.asked.empty());  // no device was even asked
}

TEST_CASE("the gate refuses fewer than two devices asked for, and devices that do not exist", "[multicast][gate]") {
  FakeDevices fake{{0, 1}, {}};
  std::vector<int> const single{1};
  CHECK(detail::multicast_gate(single, 8, {}, fake.query()).reason ==
        "multicast needs at least two devices; 1 were given");
  CHECK(detail::multicast_gate(std::span<const int>{}, 8, {}, fake.query()).reason ==
        "multicast needs at least two devices; 0 were given");
  std::vector<int> const missing{0, 5};
  CHECK(detail::multicast_gate(missing, 2, {}, fake.query()).reason ==
        "device 5 does not exist (this machine has 2 CUDA devices)");
  CHECK(fake.asked.empty());
}

TEST_CASE("the gate names the first device without multicast support", "[multicast][gate]") {
  FakeDevices fake{{0, 2}, {}};
  std::vector<int> const devices{0, 1, 2};
  MulticastSupport const support = detail::multicast_gate(devices, 3, {}, fake.query());
  CHECK_FALSE(support.supported);
  CHECK(support.reason == "device 1 does not support multicast (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED is 0)");
  CHECK(fake.asked == std::vector<int>{0, 1});
}

TEST_CASE("duplicate or negative device ids are bad input, not a missing capability", "[multicast][gate]") {
  FakeDevices fake{{0, 1}, {}};
  std::vector<int> const twice{1, 0, 1};
  auto const duplicate = test::thrown_by<Error>([&] { (void)detail::multicast_gate(twice, 2, {}, fake.query()); });
  CHECK(duplicate.context() == "device 1 is listed twice");
  bool unsupported = false;  // an Error, not the Unsupported a missing capability would be
  try {
    (void)detail::multicast_gate(twice, 2, {}, fake.query());
  } catch (const Unsupported&) {
    unsupported = true;
  } catch (const Error&) {
  }
  CHECK_FALSE(unsupported);
  std::vector<int> const negative{0, -1};
  auto const below = test::thrown_by<Error>([&] { (void)detail::multicast_gate(negative, 2, {}, fake.query()); });
  CHECK(below.context() == "device -1 is negative");
}

TEST_CASE("on this machine a MulticastObject is refused with Unsupported before any multicast driver call",
          "[multicast][gate]") {
  DriverStatus const status = driver_status();
  std::vector<int> devices;
  for (int d = 0; d < std::max(2, status.device_count); ++d) devices.push_back(d);
  MulticastSupport const support = multicast_support(devices);
  if (support.supported) SKIP("this machine's devices support multicast: the unit suite never creates one");
  INFO(support.reason);
  std::size_t const calls_before = detail::multicast_driver_calls();
  auto const refused = test::thrown_by<Unsupported>([&] { MulticastObject const object(devices, 2 * MiB); });
  CHECK(refused.capability() == "multicast (" + support.reason + ")");
  CHECK_THAT(refused.context(), ContainsSubstring("no multicast object was created"));
  CHECK_THAT(refused.remedy(), ContainsSubstring("two or more devices"));
  CHECK(detail::multicast_driver_calls() == calls_before);
  CHECK(detail::multicast_driver_calls() == 0);
}
