// cuvmm-info: prints every VMM capability of every CUDA device, as an aligned table or as JSON.
//
// Built on the public API only (cuvmm/device_caps.hpp). Each device's report is one list of rows
// (label, JSON key, text value, JSON value), rendered twice, so the table and the JSON never
// disagree. With no driver or no device it says so, and why, and exits 0: that is an answer, not a
// failure. It exits 1 only when a device that exists cannot be read, 2 on a bad command line.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <cuvmm/device_caps.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/types.hpp>
#include <cuvmm/version.hpp>

#include "command_line.hpp"
#include "text_format.hpp"

namespace {

using cuvmm::format_bytes;
using cuvmm::tools::json_string;

constexpr std::string_view usage =
    "usage: cuvmm-info [--json] [--help] [--version]\n"
    "\n"
    "Prints the CUDA driver version and, for every device, the virtual memory management (VMM)\n"
    "capabilities cuvmm relies on: POSIX fd and fabric handles, multicast, compression, GPUDirect\n"
    "RDMA with VMM, whether an IMEX channel exists, allocation granularities and memory.\n"
    "\n"
    "  --json     print the same report as JSON\n"
    "  --help     print this help\n"
    "  --version  print cuvmm-info's version\n"
    "\n"
    "Exit status: 0 when the report was printed (also with no driver or no device), 1 when a device\n"
    "could not be read, 2 on a bad command line.\n";

std::string version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

struct Row {
  std::string label;  // the table's label
  std::string key;    // the JSON key
  std::string text;   // the table's value
  std::string json;   // the JSON value (already encoded)
};

Row yes_no(std::string label, std::string key, bool value) {
  return {std::move(label), std::move(key), value ? "yes" : "no", value ? "true" : "false"};
}

Row bytes_row(std::string label, std::string key, std::size_t bytes) {
  return {std::move(label), std::move(key), format_bytes(bytes), std::to_string(bytes)};
}

Row granularity_row(std::string label, std::string key, cuvmm::Granularity granularity) {
  std::string const text = granularity.minimum == 0
                               ? std::string("unsupported")
                               : format_bytes(granularity.minimum) + " minimum, " +
                                     format_bytes(granularity.recommended) + " recommended";
  std::string const json = "{\"minimum\": " + std::to_string(granularity.minimum) +
                           ", \"recommended\": " + std::to_string(granularity.recommended) + "}";
  return {std::move(label), std::move(key), text, json};
}

struct DeviceReport {
  int device = 0;
  std::string name;
  std::vector<Row> rows;
  std::vector<std::string> hints;
};

DeviceReport report(const cuvmm::DeviceCaps& caps) {
  DeviceReport out;
  out.device = caps.device;
  out.name = caps.name;
  std::string const cc =
      std::to_string(caps.compute_capability_major) + "." + std::to_string(caps.compute_capability_minor);
  out.rows = {
      {"compute capability", "compute_capability", cc, json_string(cc)},
      bytes_row("total memory", "total_memory", caps.total_memory),
      bytes_row("free memory", "free_memory", caps.free_memory),
      yes_no("virtual memory management", "vmm", caps.vmm),
      yes_no("POSIX fd handles", "posix_fd_handles", caps.posix_fd_handles),
      yes_no("fabric handles", "fabric_handles", caps.fabric_handles),
      yes_no("multicast", "multicast", caps.multicast),
      yes_no("generic compression", "generic_compression", caps.generic_compression),
      yes_no("GPUDirect RDMA with VMM", "gpu_direct_rdma_with_vmm", caps.gpu_direct_rdma_with_vmm),
      yes_no("dmabuf export", "dma_buf", caps.dma_buf),
      yes_no("IMEX channel present", "imex_channel_present", caps.imex_channel_present),
      granularity_row("granularity", "granularity", caps.granularity),
      granularity_row("POSIX fd granularity", "posix_fd_granularity", caps.posix_fd_granularity),
      granularity_row("fabric granularity", "fabric_granularity", caps.fabric_granularity),
      granularity_row("compression granularity", "compression_granularity", caps.compression_granularity),
      granularity_row("multicast granularity", "multicast_granularity", caps.multicast_granularity),
  };
  if (caps.fabric_handles && !caps.imex_channel_present) {
    out.hints.push_back("the device reports fabric handles, but no IMEX channel exists under " +
                        std::string(cuvmm::imex_channel_directory) + ", so creating fabric-shareable memory fails. Remedy: " +
                        std::string(cuvmm::imex_channel_remedy));
  }
  return out;
}

void print_table(const cuvmm::DriverStatus& status, const std::vector<DeviceReport>& devices) {
  std::printf("cuvmm-info %s\n\n", cuvmm::version_string);
  if (!status.available) {
    std::printf("CUDA driver: not available (%s)\n", status.reason.c_str());
    std::printf("devices:     none\n");
    return;
  }
  std::printf("CUDA driver: %s (%d)\n", version_text(status.driver_version).c_str(), status.driver_version);
  std::printf("devices:     %d\n", status.device_count);
  if (status.device_count == 0) std::printf("\nno CUDA device found\n");
  for (DeviceReport const& device : devices) {
    std::size_t width = 0;
    for (Row const& row : device.rows) width = std::max(width, row.label.size());
    std::printf("\ndevice %d: %s\n", device.device, device.name.c_str());
    for (Row const& row : device.rows)
      std::printf("  %-*s  %s\n", static_cast<int>(width), row.label.c_str(), row.text.c_str());
    for (std::string const& hint : device.hints) std::printf("  hint: %s\n", hint.c_str());
  }
}

void print_json(const cuvmm::DriverStatus& status, const std::vector<DeviceReport>& devices) {
  std::string out = "{\n  \"cuvmm_version\": " + json_string(cuvmm::version_string) + ",\n  \"driver\": {";
  if (status.available) {
    out += "\"available\": true, \"version\": " + std::to_string(status.driver_version) +
           ", \"version_text\": " + json_string(version_text(status.driver_version)) +
           ", \"device_count\": " + std::to_string(status.device_count) + "}";
  } else {
    out += "\"available\": false, \"reason\": " + json_string(status.reason) + "}";
  }
  out += ",\n  \"devices\": [";
  for (std::size_t i = 0; i < devices.size(); ++i) {
    DeviceReport const& device = devices[i];
    out += i == 0 ? "\n" : ",\n";
    out += "    {\n      \"index\": " + std::to_string(device.device);
    out += ",\n      \"name\": " + json_string(device.name);
    for (Row const& row : device.rows) out += ",\n      " + json_string(row.key) + ": " + row.json;
    out += ",\n      \"hints\": [";
    for (std::size_t h = 0; h < device.hints.size(); ++h) out += (h == 0 ? "" : ", ") + json_string(device.hints[h]);
    out += "]\n    }";
  }
  out += devices.empty() ? "]\n}\n" : "\n  ]\n}\n";
  std::fputs(out.c_str(), stdout);
}

}  // namespace

int main(int argc, char* argv[]) {
  bool json = false;
  CLI::App app("", "cuvmm-info");
  app.add_flag("--json", json);
  cuvmm::tools::parse_command_line(app, argc, argv, usage);

  cuvmm::DriverStatus const status = cuvmm::driver_status();
  std::vector<DeviceReport> devices;
  int exit_status = 0;
  for (int device = 0; device < status.device_count; ++device) {
    try {
      devices.push_back(report(cuvmm::device_caps(device)));
    } catch (const std::exception& error) {
      std::fprintf(stderr, "cuvmm-info: cannot read device %d: %s\n", device, error.what());
      exit_status = 1;
    }
  }
  if (json)
    print_json(status, devices);
  else
    print_table(status, devices);
  return exit_status;
}
