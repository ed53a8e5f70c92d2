// UniqueFd: closing and duplicating. EINTR from close() is not retried (Linux closes the fd anyway).
#include <cuvmm/unique_fd.hpp>

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

#include <cuvmm/error.hpp>

namespace cuvmm {

void UniqueFd::reset(int fd) noexcept {
  int const old = std::exchange(fd_, fd);
  if (old >= 0 && old != fd) ::close(old);
}

UniqueFd UniqueFd::duplicate() const {
  if (fd_ < 0) throw_invalid_argument("UniqueFd::duplicate", "no descriptor is owned");
  int const copy = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) throw_errno("fcntl(F_DUPFD_CLOEXEC)", errno, "duplicating fd " + std::to_string(fd_));
  return UniqueFd(copy);
}

}  // namespace cuvmm
