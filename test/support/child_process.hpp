// Running a program in a child process and collecting what it prints: for tests of tools
// (cuvmm-info) and of faults that poison a CUDA context, which must happen in another process.
#pragma once

#include <string>
#include <vector>

namespace cuvmm::test {

struct ProgramRun {
  int exit_status = -1;  ///< -1 unless the program exited normally
  std::string output;    ///< its stdout and stderr, interleaved
};

/// Runs `argv` (argv[0] is the program's path) with this process's environment plus
/// `extra_environment` ("NAME=value" entries) and waits for it. Throws std::runtime_error if it
/// cannot be started.
ProgramRun run_program(const std::vector<std::string>& argv, const std::vector<std::string>& extra_environment = {});

/// The path of the running program (/proc/self/exe).
std::string own_executable();

}  // namespace cuvmm::test
