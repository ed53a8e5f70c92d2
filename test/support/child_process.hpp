// Running a program in a child process and collecting what it prints: for tests of tools
// (cuvmm-info), of faults that poison a CUDA context, which must happen in another process, and of
// two processes that share memory while both run.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace cuvmm::test {

struct ProgramRun {
  int exit_status = -1;  ///< -1 unless the program exited normally
  int signal = 0;        ///< the signal that killed it, 0 if none did
  std::string output;    ///< its stdout and stderr, interleaved
};

/// A program started and still running: its output is read as it comes, and wait() collects the rest.
/// Destroying it without wait() kills the program (SIGKILL) and reaps it.
class RunningProgram {
 public:
  RunningProgram(pid_t pid, int output_fd) noexcept : pid_(pid), output_fd_(output_fd) {}
  RunningProgram(const RunningProgram&) = delete;
  RunningProgram& operator=(const RunningProgram&) = delete;
  ~RunningProgram();

  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  /// Reads output until a line starts with `prefix` and returns the rest of that line. Throws
  /// std::runtime_error if the program ends its output first or `timeout` passes.
  std::string read_line_starting(const std::string& prefix, std::chrono::milliseconds timeout);
  /// Reads the rest of the output and waits for the program to end.
  ProgramRun wait();

 private:
  pid_t pid_;
  int output_fd_;
  std::string output_;  // what was read so far
  std::size_t scanned_ = 0;
};

/// Starts `argv` (argv[0] is the program's path) with this process's environment plus
/// `extra_environment` ("NAME=value" entries, each replacing an inherited variable of that name). Throws std::runtime_error if it cannot be started.
RunningProgram start_program(const std::vector<std::string>& argv, const std::vector<std::string>& extra_environment = {});

/// Runs `argv` as start_program does and waits for it.
ProgramRun run_program(const std::vector<std::string>& argv, const std::vector<std::string>& extra_environment = {});

/// The path of the running program (/proc/self/exe).
std::string own_executable();

}  // namespace cuvmm::test
