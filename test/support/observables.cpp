#include "observables.hpp"

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace cuvmm::test {
namespace {

template <class Visit>
void for_each_fd(Visit visit) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) throw std::runtime_error("cannot open /proc/self/fd");
  int const own = ::dirfd(dir);
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    int const fd = std::atoi(entry->d_name);
    if (fd != own) visit(fd);
  }
  ::closedir(dir);
}

}  // namespace

std::size_t open_fd_count() {
  std::size_t count = 0;
  for_each_fd([&](int) { ++count; });
  return count;
}

std::string describe_open_fds() {
  std::string out;
  for_each_fd([&](int fd) {
    char target[512] = {};
    std::string const link = "/proc/self/fd/" + std::to_string(fd);
    ssize_t const n = ::readlink(link.c_str(), target, sizeof target - 1);
    out += std::to_string(fd) + " -> " + (n > 0 ? std::string(target, static_cast<std::size_t>(n)) : "?") + "\n";
  });
  return out;
}

}  // namespace cuvmm::test
