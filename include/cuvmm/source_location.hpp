// cuvmm/source_location.hpp: where an error was raised.
// cuvmm::source_location is cuvmm::source_location wherever the standard library provides it; with
// compilers whose library lacks it (clang 14 with libstdc++ 12, used for fuzzing), a stand-in with
// the same members, filled from the compiler's __builtin_FILE/LINE/FUNCTION.
#pragma once

#if __has_include(<source_location>)
#include <source_location>
#endif

namespace cuvmm {

#if defined(__cpp_lib_source_location)
using source_location = std::source_location;
#else
class source_location {
 public:
  static constexpr source_location current(const char* file = __builtin_FILE(), const char* function = __builtin_FUNCTION(),
                                           unsigned line = __builtin_LINE()) noexcept {
    source_location where;
    where.file_ = file;
    where.function_ = function;
    where.line_ = line;
    return where;
  }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr const char* function_name() const noexcept { return function_; }
  constexpr unsigned line() const noexcept { return line_; }
  constexpr unsigned column() const noexcept { return 0; }

 private:
  const char* file_ = "";
  const char* function_ = "";
  unsigned line_ = 0;
};
#endif

}  // namespace cuvmm
