#include "child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string_view>

extern char** environ;

namespace cuvmm::test {
namespace {

[[noreturn]] void fail(const std::string& what, int error_number) {
  throw std::runtime_error(what + ": " + std::strerror(error_number));
}

/// posix_spawn file actions, destroyed on every path.
class SpawnActions {
 public:
  SpawnActions() {
    if (int const e = ::posix_spawn_file_actions_init(&actions_); e != 0) fail("posix_spawn_file_actions_init", e);
  }
  SpawnActions(const SpawnActions&) = delete;
  SpawnActions& operator=(const SpawnActions&) = delete;
  ~SpawnActions() { ::posix_spawn_file_actions_destroy(&actions_); }
  posix_spawn_file_actions_t* get() noexcept { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

}  // namespace

RunningProgram start_program(const std::vector<std::string>& argv, const std::vector<std::string>& extra_environment) {
  if (argv.empty()) throw std::invalid_argument("start_program: no program given");
  int pipe_fds[2] = {-1, -1};
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) fail("pipe2", errno);
  pid_t child = -1;
  int spawned = 0;
  {
    SpawnActions actions;
    ::posix_spawn_file_actions_adddup2(actions.get(), pipe_fds[1], STDOUT_FILENO);
    ::posix_spawn_file_actions_adddup2(actions.get(), pipe_fds[1], STDERR_FILENO);
    std::vector<std::string> arguments = argv;
    std::vector<char*> c_argv;
    for (std::string& arg : arguments) c_argv.push_back(arg.data());
    c_argv.push_back(nullptr);
    std::vector<std::string> settings = extra_environment;
    std::vector<char*> c_env;
    // A given setting replaces the inherited one of that name (with both present, getenv finds the
    // first: the inherited PYTHONPATH would win over the test's own).
    auto const is_given = [&settings](std::string_view variable) {
      std::string_view const name = variable.substr(0, variable.find('=') + 1);
      return std::any_of(settings.begin(), settings.end(),
                         [name](std::string const& setting) { return setting.starts_with(name); });
    };
    for (char** variable = environ; *variable != nullptr; ++variable) {
      if (!is_given(*variable)) c_env.push_back(*variable);
    }
    for (std::string& setting : settings) c_env.push_back(setting.data());
    c_env.push_back(nullptr);
    spawned = ::posix_spawn(&child, c_argv[0], actions.get(), nullptr, c_argv.data(), c_env.data());
  }
  ::close(pipe_fds[1]);
  if (spawned != 0) {
    ::close(pipe_fds[0]);
    fail("posix_spawn " + argv[0], spawned);
  }
  return RunningProgram(child, pipe_fds[0]);
}

RunningProgram::~RunningProgram() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  if (output_fd_ >= 0) ::close(output_fd_);
}

std::string RunningProgram::read_line_starting(const std::string& prefix, std::chrono::milliseconds timeout) {
  auto const deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    // Look at every complete line not yet scanned.
    for (std::size_t end = output_.find('\n', scanned_); end != std::string::npos; end = output_.find('\n', scanned_)) {
      std::string const line = output_.substr(scanned_, end - scanned_);
      scanned_ = end + 1;
      if (line.compare(0, prefix.size(), prefix) == 0) return line.substr(prefix.size());
    }
    auto const left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw std::runtime_error("no line starting with '" + prefix + "' in time; output:\n" + output_);
    pollfd entry{output_fd_, POLLIN, 0};
    int const ready = ::poll(&entry, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) fail("poll", errno);
    if (ready <= 0) continue;
    char buffer[4096];
    ssize_t const got = ::read(output_fd_, buffer, sizeof buffer);
    if (got == 0) throw std::runtime_error("the program ended its output before '" + prefix + "'; output:\n" + output_);
    if (got > 0) output_.append(buffer, static_cast<std::size_t>(got));
  }
}

ProgramRun RunningProgram::wait() {
  ProgramRun run;
  char buffer[4096];
  for (;;) {
    ssize_t const got = ::read(output_fd_, buffer, sizeof buffer);
    if (got > 0) {
      output_.append(buffer, static_cast<std::size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(output_fd_);
  output_fd_ = -1;
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  if (WIFEXITED(status)) run.exit_status = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) run.signal = WTERMSIG(status);
  run.output = std::move(output_);
  return run;
}

ProgramRun run_program(const std::vector<std::string>& argv, const std::vector<std::string>& extra_environment) {
  return start_program(argv, extra_environment).wait();
}

std::string own_executable() {
  char path[4096] = {};
  ssize_t const length = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (length <= 0) fail("readlink /proc/self/exe", errno);
  return std::string(path, static_cast<std::size_t>(length));
}

}  // namespace cuvmm::test
