// Child processes of the ipc tests: the test program started again (posix_spawn of /proc/self/exe)
// to run one hidden test case in a given role, with what it needs passed in the environment. A
// child that exports prints "cuvmm-ipc-socket PATH" so its parent knows where to connect.
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include <cuvmm/error.hpp>

#include "child_process.hpp"

namespace cuvmm::test {

inline constexpr std::string_view role_variable = "CUVMM_IPC_ROLE";
inline constexpr std::string_view socket_variable = "CUVMM_IPC_SOCKET";
inline constexpr std::string_view seed_variable = "CUVMM_IPC_SEED";
inline constexpr std::string_view socket_marker = "cuvmm-ipc-socket ";

/// Starts this program again, running only the hidden test case `test_name` in `role`.
inline RunningProgram start_child(std::string_view test_name, std::string_view role,
                                  std::vector<std::string> environment = {}) {
  environment.push_back(std::string(role_variable) + "=" + std::string(role));
  return start_program({own_executable(), std::string(test_name), "--reporter", "compact"}, environment);
}

/// The role this process was started in; empty in the test program the user ran.
inline std::string child_role() {
  char const* const role = std::getenv(std::string(role_variable).c_str());
  return role == nullptr ? std::string() : std::string(role);
}

/// The value of an environment variable the parent set (REQUIREd to be there).
inline std::string child_setting(std::string_view name) {
  char const* const value = std::getenv(std::string(name).c_str());
  REQUIRE(value != nullptr);
  return value;
}

inline std::string setting(std::string_view name, const std::string& value) { return std::string(name) + "=" + value; }

/// Starts an importing child: it connects to `socket` and checks data made from `seed`.
inline RunningProgram start_importer_child(std::string_view test_name, std::string_view role,
                                           const std::filesystem::path& socket, std::uint64_t seed) {
  return start_child(test_name, role,
                     {setting(socket_variable, socket.string()), setting(seed_variable, std::to_string(seed))});
}

/// Starts an exporting child that writes data made from `seed` and prints its socket's path.
inline RunningProgram start_exporter_child(std::string_view test_name, std::string_view role, std::uint64_t seed) {
  return start_child(test_name, role, {setting(seed_variable, std::to_string(seed))});
}

/// While it lives, this process can open no further descriptor: RLIMIT_NOFILE's soft limit is
/// lowered to the lowest free descriptor number (the old limit comes back when it goes). For a
/// child process that checks what running out of descriptors does.
class NoFreeDescriptors {
 public:
  NoFreeDescriptors() {
    // UBSan checks the dynamic type of an object it has not seen before by copying its memory
    // through a pipe (two descriptors): an error made once before the limit is its cache's.
    try {
      throw_errno("NoFreeDescriptors", EMFILE, "warming up the sanitizers' type cache");
    } catch (const Error&) {
    }
    int const lowest_free = ::fcntl(STDIN_FILENO, F_DUPFD, 0);
    REQUIRE(lowest_free >= 0);
    ::close(lowest_free);
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved_) == 0);
    rlimit lowered = saved_;
    lowered.rlim_cur = static_cast<rlim_t>(lowest_free);
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &lowered) == 0);
    errno = 0;
    REQUIRE(::fcntl(STDIN_FILENO, F_DUPFD, 0) < 0);
    REQUIRE(errno == EMFILE);
  }
  NoFreeDescriptors(const NoFreeDescriptors&) = delete;
  NoFreeDescriptors& operator=(const NoFreeDescriptors&) = delete;
  ~NoFreeDescriptors() { ::setrlimit(RLIMIT_NOFILE, &saved_); }

 private:
  rlimit saved_{};
};

}  // namespace cuvmm::test
