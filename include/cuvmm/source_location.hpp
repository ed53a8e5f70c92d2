// cuvmm/source_location.hpp: where an error was raised.
//
// cuvmm::source_location is cuvmm's own type with ONE layout whatever compiler includes this
// header: two pointers (file, function) and two 32-bit numbers (line, column), 24 bytes on LP64.
// It is part of the library's ABI (ErrorDetails holds one; the throw helpers and the exceptions'
// constructors take one by value), so it must not change with the user's compiler: an alias of
// std::source_location would be one pointer under g++ 12 and absent under clang 14 with
// libstdc++ 12, and a program built with one against a library built with the other would read
// garbage or fail to link. current() is filled from std::source_location where the standard
// library has it, else from the compiler's __builtin_FILE/FUNCTION/LINE/COLUMN; a
// std::source_location converts implicitly.
#pragma once

#include <cstdint>

#if __has_include(<source_location>)
#include <source_location>
#endif

namespace cuvmm {

class source_location {
 public:
  constexpr source_location() noexcept = default;
  constexpr source_location(const char* file, const char* function, std::uint_least32_t line,
                            std::uint_least32_t column = 0) noexcept
      : file_(file != nullptr ? file : ""), function_(function != nullptr ? function : ""), line_(line), column_(column) {}

#if defined(__cpp_lib_source_location)
  // NOLINTNEXTLINE(google-explicit-constructor): a std::source_location is one, with the same fields
  constexpr source_location(const std::source_location& where) noexcept
      : source_location(where.file_name(), where.function_name(), where.line(), where.column()) {}

  /// The caller's location (as a default argument: the location of the call).
  static constexpr source_location current(std::source_location where = std::source_location::current()) noexcept {
    return source_location(where);
  }
#else
  /// The caller's location (as a default argument: the location of the call).
  static constexpr source_location current(const char* file = __builtin_FILE(),
                                           const char* function = __builtin_FUNCTION(),
                                           std::uint_least32_t line = __builtin_LINE(),
                                           std::uint_least32_t column = __builtin_COLUMN()) noexcept {
    return source_location(file, function, line, column);
  }
#endif

  constexpr const char* file_name() const noexcept { return file_; }
  constexpr const char* function_name() const noexcept { return function_; }
  constexpr std::uint_least32_t line() const noexcept { return line_; }
  constexpr std::uint_least32_t column() const noexcept { return column_; }

 private:
  const char* file_ = "";      // never null
  const char* function_ = "";  // never null
  std::uint_least32_t line_ = 0;
  std::uint_least32_t column_ = 0;
};

}  // namespace cuvmm
