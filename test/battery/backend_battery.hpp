// The backend test battery: one set of Backend contract cases (backend_battery.cpp) that every
// backend must pass alike. The unit suite runs it on HostBackend (unit_host_backend) and on a
// FaultInjectingBackend over a HostBackend (unit_fault_injection), so CI does; the gpu suite runs it
// on CudaBackend (gpu_cuda_backend) on the H200. A program provides make_battery_backend(); a
// program whose backend is absent there (no GPU) SKIPs inside it.
//
// The cases pin what the shared ledger (src/backend/ledger.hpp) decides: exact live counts after
// every step, refused calls that name the driver call, are ErrorCode::invalid_argument and change
// nothing, and the driver's measured rules (a chunk across two adjacent ranges, unmap of sub-runs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <cuvmm/backend.hpp>

namespace cuvmm::test {

class BatteryBackend {
 public:
  virtual ~BatteryBackend() = default;
  /// The backend under test.
  virtual Backend& backend() = 0;
  /// Whose live_counts() are the real tally (the inner backend of a wrapper).
  virtual const Backend& tally() = 0;
  /// Writes `bytes` of `value` at `address` (mapped, read-write for device 0) and waits.
  virtual void fill(Address address, std::size_t bytes, std::uint8_t value) = 0;
  /// The bytes at `address` (mapped, readable for device 0).
  virtual std::vector<std::uint8_t> read(Address address, std::size_t bytes) = 0;
};

/// Defined once per test program.
std::unique_ptr<BatteryBackend> make_battery_backend();

}  // namespace cuvmm::test
