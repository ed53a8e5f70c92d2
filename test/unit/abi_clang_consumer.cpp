// A consumer of the installed headers compiled with a different compiler than the library (clang++
// 14 with libstdc++ 12, which has no std::source_location, against the g++-built libcuvmm.so): it
// catches errors thrown inside the library and reads their source locations, and throws through
// a library function whose parameter is a cuvmm::source_location, and uses a container header
// (HostGrowableBuffer) whose inline code calls into the library. Run by scripts/abi-check.sh.
// Exit status 0: every field read back as the library wrote it.
#include <cstdio>
#include <cstring>
#include <string>

#include <cuvmm/error.hpp>
#include <cuvmm/growable_buffer.hpp>
#include <cuvmm/host_backend.hpp>

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  if (!ok) ++failures;
}

bool ends_with(const char* text, const char* suffix) {
  std::size_t const n = std::strlen(text);
  std::size_t const m = std::strlen(suffix);
  return n >= m && std::strcmp(text + n - m, suffix) == 0;
}

/// True if `text` is a short, printable C string (not garbage read through the wrong layout).
bool printable(const char* text) {
  if (text == nullptr) return false;
  for (std::size_t i = 0; i < 4096; ++i) {
    unsigned char const c = static_cast<unsigned char>(text[i]);
    if (c == 0) return i > 0;
    if (c < 0x20 || c > 0x7E) return false;
  }
  return false;
}

}  // namespace

int main() {
  std::printf("cuvmm ABI consumer: sizeof(cuvmm::source_location) = %zu, sizeof(cuvmm::ErrorDetails) = %zu\n",
              sizeof(cuvmm::source_location), sizeof(cuvmm::ErrorDetails));
  // 1. An error raised inside the library (host_backend.cpp, built by g++), read here.
  try {
    cuvmm::HostBackend::Options options;
    options.granularity = 1000;  // not a multiple of the page size: refused inside the library
    cuvmm::HostBackend backend(options);
    expect(false, "HostBackend with granularity 1000 threw");
  } catch (const cuvmm::Error& error) {
    cuvmm::source_location const& where = error.where();
    bool const file_ok = printable(where.file_name()) && ends_with(where.file_name(), "host_backend.cpp");
    expect(file_ok, std::string("an error from the library names its file: ") +
                        (printable(where.file_name()) ? where.file_name() : "(garbage)"));
    expect(where.line() > 0 && where.line() < 100000, "... and a plausible line: " + std::to_string(where.line()));
    expect(printable(where.function_name()), "... and a readable function name");
    expect(error.is(cuvmm::ErrorCode::invalid_argument), "... and its typed code");
    expect(std::strstr(error.what(), ("host_backend.cpp:" + std::to_string(where.line()) + "]").c_str()) != nullptr,
           "... and what() agrees with the line read here");
  }
  // 2. A location made here (by clang), passed by value into the library, thrown back.
#ifndef ABI_CHECK_LIBRARY_ONLY
  unsigned const line = __LINE__ + 2;
  try {
    cuvmm::throw_invalid_argument("abi_clang_consumer", "a location made by clang");
  } catch (const cuvmm::Error& error) {
    expect(ends_with(error.where().file_name(), "abi_clang_consumer.cpp"),
           std::string("a location passed into the library keeps its file: ") + error.where().file_name());
    expect(error.where().line() == line, "... and its line " + std::to_string(error.where().line()));
    expect(std::strstr(error.what(), ("abi_clang_consumer.cpp:" + std::to_string(line) + "]").c_str()) != nullptr,
           std::string("... and the library formats it: ") + error.what());
  }
  // 3. A container header: its inline code calls the library; growth past the range throws there.
  {
    cuvmm::HostBackend::Options options;
    options.granularity = 64 * 1024;
    cuvmm::HostBackend host(options);
    cuvmm::GrowableOptions growable;
    growable.max_capacity_bytes = 1 << 20;
    cuvmm::HostGrowableBuffer<int> buffer(host, growable);
    for (int i = 0; i < 1000; ++i) buffer.push_back(i);
    expect(buffer.size() == 1000 && buffer.data()[999] == 999, "a HostGrowableBuffer<int> grows and holds its data");
    try {
      buffer.reserve(std::size_t{1} << 30);
      expect(false, "reserve past the range threw");
    } catch (const cuvmm::CapacityExceeded& error) {
      expect(error.requested_bytes() == (std::size_t{1} << 30) * sizeof(int) && error.max_capacity_bytes() == (1u << 20),
             "CapacityExceeded carries both sizes");
      expect(ends_with(error.where().file_name(), "growable_storage.cpp"),
             std::string("... and the library's file: ") + error.where().file_name());
    }
  }
#endif
  std::printf("%s\n", failures == 0 ? "abi: every field read back" : "abi: FAILED");
  return failures == 0 ? 0 : 1;
}
