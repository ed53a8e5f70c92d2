// Real observables for leak checks: open file descriptors, the backend's live objects.
// Leak checks never rely on a fault injector's own tally.
#pragma once

#include <cstddef>
#include <string>

namespace cuvmm::test {

/// Number of entries in /proc/self/fd (the descriptor used to read it excluded).
std::size_t open_fd_count();

/// Human-readable list of open descriptors and their targets, for failure messages.
std::string describe_open_fds();

}  // namespace cuvmm::test
