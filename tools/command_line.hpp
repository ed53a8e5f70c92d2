// command_line.hpp: how cuvmm's tools read their command line, on top of CLI11 (a well-kept
// parser: `--opt value` and `--opt=value`, unknown and missing arguments found for us).
//
// Owns: the conventions both tools share. `--help`/`-h` prints the tool's own usage text (written
// by hand: it explains, which a generated option list cannot) and exits 0; `--version` prints
// "NAME VERSION" and exits 0; a bad command line prints one short line and a hint on stderr
// ("NAME: WHAT" then "Try 'NAME --help' for more information.") and exits 2.
// Invariants: options the usage text does not list (internal ones) are in no help output.
// Never does: print the whole usage on an error; measure or touch a device.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include <cuvmm/version.hpp>

namespace cuvmm::tools {

/// A bad command line: "NAME: WHAT" and the hint on stderr, exit status 2.
[[noreturn]] inline void refuse_command_line(const std::string& name, const std::string& what) {
  std::fprintf(stderr, "%s: %s\nTry '%s --help' for more information.\n", name.c_str(), what.c_str(), name.c_str());
  std::exit(2);
}

/// Adds --help and --version to `app`, parses argv into it, and exits as described above for
/// --help, --version and a bad command line. Returns only when the tool should run.
inline void parse_command_line(CLI::App& app, int argc, char** argv, std::string_view usage) {
  std::string const name = app.get_name();
  bool help = false;
  bool version = false;
  app.set_help_flag();  // CLI11's generated help is replaced by `usage`
  app.add_flag("-h,--help", help);
  app.add_flag("--version", version);
  auto const refuse = [&](const std::string& what) { refuse_command_line(name, what); };
  app.allow_extras();  // reported below, one at a time, in the tools' own words
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    refuse(error.what());
  }
  if (!app.remaining().empty()) refuse("unknown argument '" + app.remaining().front() + "'");
  if (help) {
    std::fwrite(usage.data(), 1, usage.size(), stdout);
    std::exit(0);
  }
  if (version) {
    std::printf("%s %s\n", name.c_str(), cuvmm::version_string);
    std::exit(0);
  }
}

/// A CLI11 check that accepts only `choices`; its message: "unknown KIND 'VALUE' (CHOICES)".
inline CLI::Validator one_of(std::string kind, std::initializer_list<std::string> choices) {
  std::string listed;
  for (auto const& c : choices) listed += (listed.empty() ? "" : ", ") + c;
  std::vector<std::string> allowed(choices);
  return CLI::Validator(
      [kind, listed, allowed](std::string& value) -> std::string {
        for (auto const& c : allowed) {
          if (value == c) return {};
        }
        return "unknown " + kind + " '" + value + "' (" + listed + ")";
      },
      "");
}

}  // namespace cuvmm::tools
