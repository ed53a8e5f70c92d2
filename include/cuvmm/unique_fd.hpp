// cuvmm/unique_fd.hpp: sole owner of one POSIX file descriptor.
//
// Move-only; the destructor closes. Constructed explicitly from an int it takes over;
// `release()` hands the descriptor back to the caller and must not be ignored.
#pragma once

#include <utility>

namespace cuvmm {

class UniqueFd {
 public:
  UniqueFd() noexcept = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    reset(other.release());
    return *this;
  }
  ~UniqueFd() { reset(); }

  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }

  /// Gives up ownership: the caller now closes the returned descriptor.
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }

  /// Closes the owned descriptor (if any) and takes `fd`.
  void reset(int fd = -1) noexcept;

  /// A new descriptor for the same open file (close-on-exec). Throws cuvmm::Error.
  [[nodiscard]] UniqueFd duplicate() const;

 private:
  int fd_ = -1;
};

}  // namespace cuvmm
