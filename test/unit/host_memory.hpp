// Helpers for unit tests that look at real host virtual memory: what /proc/self/maps says about an
// address, random data and poisoned buffers, capturing a thrown cuvmm error, asking the kernel
// whether an access would fault, and running code in a forked child.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/catch_tostring.hpp>

#include <cuvmm/backend.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/fault_injecting_backend.hpp>
#include <cuvmm/host_backend.hpp>
#include <cuvmm/types.hpp>

template <>
struct Catch::StringMaker<cuvmm::LiveCounts> {
  static std::string convert(const cuvmm::LiveCounts& c) {
    return "{ranges " + std::to_string(c.ranges) + ", chunks " + std::to_string(c.chunks) + ", mappings " +
           std::to_string(c.mappings) + ", bytes reserved " + std::to_string(c.bytes_reserved) +
           ", physical " + std::to_string(c.bytes_physical) + ", mapped " + std::to_string(c.bytes_mapped) + "}";
  }
};

namespace cuvmm::test {

/// The granularity the unit tests give HostBackend: small, so tests stay light on memory.
inline constexpr std::size_t test_granularity = 64 * KiB;

/// HostBackend options with the test granularity.
inline HostBackend::Options small_host_options() {
  HostBackend::Options options;
  options.granularity = test_granularity;
  return options;
}

/// The protection column of /proc/self/maps for the mapping containing `address` (e.g. "rw-s",
/// "---p"), or "unmapped" when no mapping contains it.
inline std::string protection_at(Address address) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long long start = 0;
    unsigned long long end = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%llx-%llx %4s", &start, &end, perms) != 3) continue;
    if (address >= start && address < end) return perms;
  }
  return "unmapped";
}

/// `size` bytes of reproducible random data.
inline std::vector<std::byte> random_bytes(std::size_t size, std::uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::vector<std::byte> bytes(size);
  for (std::size_t i = 0; i < size; i += sizeof(std::uint64_t)) {
    std::uint64_t const word = generator();
    std::memcpy(bytes.data() + i, &word, std::min(sizeof word, size - i));
  }
  return bytes;
}

inline constexpr std::byte poison{0xCD};

inline void write_bytes(Address address, const std::vector<std::byte>& bytes) {
  std::memcpy(reinterpret_cast<void*>(address), bytes.data(), bytes.size());
}

/// Copies `size` bytes from `address` into a buffer that was poisoned first.
inline std::vector<std::byte> read_bytes(Address address, std::size_t size) {
  std::vector<std::byte> bytes(size, poison);
  std::memcpy(bytes.data(), reinterpret_cast<const void*>(address), size);
  return bytes;
}

/// Runs `body` and returns the exception of type E it throws; fails the test if it throws none.
template <class E, class Body>
E thrown_by(Body&& body) {
  try {
    body();
  } catch (const E& caught) {
    return caught;
  }
  FAIL("the call did not throw");
  throw std::logic_error("unreachable");
}

/// Runs `body` under an armed FaultInjectingBackend: true if it threw the injected failure
/// (cuvmm::Error or cuvmm::OutOfMemory with context "injected fault", checked), false if it
/// completed. Any other exception propagates and fails the test.
template <class Body>
bool injected_fault_thrown(Body&& body) {
  try {
    body();
  } catch (const Error& e) {
    CHECK(e.context() == "injected fault");
    return true;
  } catch (const OutOfMemory& e) {
    CHECK(e.context() == "injected fault");
    return true;
  }
  return false;
}

/// Invariant 2 at every k: runs `body` with the 1st, then the 2nd, ... call of `faulty` failing
/// (as `failure`), calling `after_each()` after every attempt (the leak checks), until `body`
/// completes without reaching the armed call. Returns that k: the number of calls body makes, plus 1.
template <class Body, class AfterEach>
std::size_t fail_each_call_in_turn(FaultInjectingBackend& faulty, FaultInjectingBackend::Failure failure, Body&& body,
                                   AfterEach&& after_each, std::size_t limit = 64) {
  for (std::size_t k = 1;; ++k) {
    CAPTURE(k);
    REQUIRE(k <= limit);
    faulty.fail_nth(k, {}, failure);
    bool const threw = injected_fault_thrown(body);
    faulty.disarm();
    CHECK(threw == faulty.fired());
    after_each();
    if (!threw) return k;
  }
}

/// How a child process ended.
struct ChildOutcome {
  bool signaled = false;  ///< killed by a signal
  int signal = 0;         ///< which, when signaled
  int exit_code = -1;     ///< its exit status, when it exited
};

/// Runs `body` in a forked child, with the default action of the fatal signals restored (so neither
/// Catch2's nor a sanitizer's handler turns a fault into something else, or reports in the child).
/// The child exits with 0 when `body` returns. With `quiet`, the child's stderr goes to /dev/null
/// (for a child that is expected to stop at a failed assertion).
template <class Body>
ChildOutcome run_in_child(Body&& body, bool quiet = false) {
  std::fflush(nullptr);
  pid_t const child = ::fork();
  if (child < 0) throw std::runtime_error("fork failed");
  if (child == 0) {
    for (int const fatal : {SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE}) std::signal(fatal, SIG_DFL);
    if (quiet) {
      int const null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
      if (null >= 0) ::dup2(null, STDERR_FILENO);
    }
    body();
    ::_exit(0);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error("waitpid failed");
  }
  ChildOutcome outcome;
  if (WIFSIGNALED(status)) {
    outcome.signaled = true;
    outcome.signal = WTERMSIG(status);
  } else if (WIFEXITED(status)) {
    outcome.exit_code = WEXITSTATUS(status);
  }
  return outcome;
}

/// Whether the memory at `address` refuses a read, asked of the kernel in this process: it
/// copies a byte from there into a pipe, which fails with EFAULT exactly where a load would fault.
/// (A forked child cannot be asked: host-backend mappings are not inherited across fork.)
inline bool read_refused(Address address) {
  int ends[2] = {-1, -1};
  if (::pipe2(ends, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  ssize_t const copied = ::write(ends[1], reinterpret_cast<const void*>(address), 1);
  int const error = errno;
  ::close(ends[0]);
  ::close(ends[1]);
  if (copied < 0 && error != EFAULT) throw std::runtime_error("write to a pipe failed");
  return copied != 1;
}

/// Whether the memory at `address` refuses a write, asked of the kernel in this process (a byte
/// read from a pipe into it: EFAULT exactly where a store would fault). Where it is allowed, the
/// byte 0x5A is written there.
inline bool write_refused(Address address) {
  int ends[2] = {-1, -1};
  if (::pipe2(ends, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  char const mark = 0x5A;
  if (::write(ends[1], &mark, 1) != 1) throw std::runtime_error("write to a pipe failed");
  ssize_t const copied = ::read(ends[0], reinterpret_cast<void*>(address), 1);
  int const error = errno;
  ::close(ends[0]);
  ::close(ends[1]);
  if (copied < 0 && error != EFAULT) throw std::runtime_error("read from a pipe failed");
  return copied != 1;
}

/// A read that the compiler cannot drop.
inline std::uint8_t touch_read(Address address) { return *reinterpret_cast<volatile std::uint8_t*>(address); }

/// A write that the compiler cannot drop.
inline void touch_write(Address address, std::uint8_t value) {
  *reinterpret_cast<volatile std::uint8_t*>(address) = value;
}

}  // namespace cuvmm::test
