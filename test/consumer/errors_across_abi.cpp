// Errors raised inside the installed library and read by the program, through the container headers.
// scripts/test.sh builds this with the library's compiler (g++) and with clang++-14 against the
// g++-built library: the error types and cuvmm::source_location must have one layout whatever the
// user's compiler is (issue 15, item 8). Host backend only.
#include <cuvmm/cuvmm.hpp>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("errors_across_abi: FAILED: %s\n", what.c_str());
    ++failures;
  }
}

// A location the library filled in: a file name that ends in .cpp or .hpp, and a line.
bool plausible(const cuvmm::source_location& where) {
  const char* file = where.file_name();
  std::size_t const n = file == nullptr ? 0 : std::strlen(file);
  return n > 4 && n < 4096 && (std::strcmp(file + n - 4, ".cpp") == 0 || std::strcmp(file + n - 4, ".hpp") == 0) &&
         where.line() > 0 && where.line() < 100000;
}

}  // namespace

int main() {
  constexpr std::size_t page = 64 * cuvmm::KiB;
  cuvmm::HostBackend host({.granularity = page});

  // A container header's template, instantiated here, calling into the library.
  cuvmm::GrowableOptions growable;
  growable.max_capacity_bytes = 2 * page;
  cuvmm::HostGrowableBuffer<int> buffer(host, growable);
  buffer.resize(1000, 7);
  check(buffer.size() == 1000 && buffer.element(999) == 7 && buffer.element(0) == 7, "HostGrowableBuffer: resize(1000, 7) holds 1000 sevens");
  try {
    buffer.resize(page);  // 4 bytes each: twice the capacity
    check(false, "HostGrowableBuffer: growing past max_capacity throws CapacityExceeded");
  } catch (const cuvmm::CapacityExceeded& e) {
    check(plausible(e.where()), std::string("CapacityExceeded: a plausible location, got ") + e.what());
    check(buffer.size() == 1000, "HostGrowableBuffer: a refused growth changes nothing");
  }

  // An error raised by the library's own code.
  cuvmm::ArenaOptions options;
  options.address_space_bytes = 16 * page;
  options.large_page_bytes = 0;
  cuvmm::Arena arena(host, options);
  int not_from_the_arena = 0;
  try {
    arena.deallocate(&not_from_the_arena, sizeof(int));
    check(false, "Arena::deallocate of a foreign pointer throws cuvmm::Error");
  } catch (const cuvmm::Error& e) {
    check(plausible(e.where()), std::string("Arena error: a plausible location, got ") + e.what());
    check(!e.context().empty() || !e.call().empty(), "Arena error: says what failed");
  }
  if (failures != 0) return 1;
  std::printf("errors_across_abi: library errors carry their locations into this program\n");
  return 0;
}
