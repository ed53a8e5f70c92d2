// The README's example of sharing a growing buffer between processes. This program is the exporter;
// it starts itself again (with --import PATH) as the importer. Needs a GPU.
// [readme]
#include <cuvmm/ipc/shared_buffer.hpp>
// [readme]

#include <spawn.h>
#include <sys/wait.h>

#include <cstring>
#include <filesystem>
#include <string>

#include <cuvmm/cuda_backend.hpp>

#include "example_support.hpp"

extern char** environ;

namespace {

char* program = nullptr;
pid_t importer_pid = -1;

/// Starts the importing process, telling it where the socket is.
void send_path_to_peer(const std::filesystem::path& path) {
  std::string const where = path.string();
  char import_flag[] = "--import";
  char* const args[] = {program, import_flag, const_cast<char*>(where.c_str()), nullptr};
  example::check(posix_spawn(&importer_pid, program, nullptr, nullptr, args, environ) == 0, "posix_spawn");
}

int export_side() {
  // [readme]
  // Exporting process: a growable buffer whose chunks are POSIX fds, and a private socket.
  cuvmm::ipc::SharedBufferExporter exporter(cuvmm::cuda_backend(0), {.max_capacity_bytes = 8 * cuvmm::GiB});
  send_path_to_peer(exporter.socket_path());  // a 0600 socket in a fresh 0700 directory
  exporter.accept_importer();                 // same uid only, unless PeerPolicy::allowed_uids says more
  exporter.reserve(1 * cuvmm::GiB);           // maps chunks and announces them to every importer
  /* ... write, cudaStreamSynchronize ... */
  exporter.publish(1 * cuvmm::GiB);           // importers may read [0, 1 GiB) now
  // [readme]

  int status = 0;
  example::check(waitpid(importer_pid, &status, 0) == importer_pid, "waitpid");
  example::check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the importer failed");
  return 0;
}

int import_side(const std::filesystem::path& path) {
  // [readme]
  // Importing process: one address range of the exporter's max capacity, chunks mapped as they come.
  cuvmm::ipc::SharedBufferImporter importer(cuvmm::cuda_backend(0), path, cuvmm::Access::read);
  importer.wait_for_size(1 * cuvmm::GiB);     // importer.data() + offset is the exporter's offset
  // [readme]

  example::check(importer.max_capacity() == 8 * cuvmm::GiB, "the importer's range");
  example::check(importer.capacity() >= 1 * cuvmm::GiB, "the importer mapped what was published");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  program = argv[0];
  if (argc == 3 && std::strcmp(argv[1], "--import") == 0) return import_side(argv[2]);
  if (!example::has_devices(1)) return example::skipped;
  return export_side();
}
