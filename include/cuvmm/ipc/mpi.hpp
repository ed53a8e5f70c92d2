// cuvmm/ipc/mpi.hpp: exchanging chunks between MPI ranks as fabric handles (libcuvmm_mpi, built
// when Meson finds MPI: option `mpi`).
//
// A message is the same 96-byte cuvmm::ipc::Message as over a socket, sent as MPI_BYTEs; the
// receiver learns its length with MPI_Probe first, receives it whole, and decodes it with every
// check (length, magic, version, kind, handle type). A chunk travels as its fabric handle, so it
// must have been created shareable as HandleType::fabric: on a GPU that needs an IMEX channel (its
// absence is cuvmm::Unsupported naming the channel device and the remedy); on the host backend the
// handle is bytes a rank of the same machine opens (see host_backend.hpp).
// Lifetime: the sender keeps the chunk until the receiver has imported it (e.g. until a reply or
// a barrier): an imported chunk then lives on its own.
#pragma once

#include <mpi.h>

#include <cstdint>

#include <cuvmm/backend.hpp>
#include <cuvmm/ipc/message.hpp>
#include <cuvmm/physical_chunk.hpp>

namespace cuvmm::ipc {

/// Sends `message` to rank `destination`. Throws cuvmm::Error (the message is checked as encode()).
void mpi_send(const Message& message, int destination, int tag, MPI_Comm comm);

/// Receives one message from `source` (or MPI_ANY_SOURCE) with `tag`, and checks it as decode()
/// does. `sender`, when given, is set to the rank it came from.
[[nodiscard]] Message mpi_receive(int source, int tag, MPI_Comm comm, int* sender = nullptr);

/// Sends `chunk`'s fabric handle as a chunk message saying where it goes (`offset`) and its
/// `generation`.
void mpi_send_chunk(const PhysicalChunk& chunk, std::uint64_t offset, std::uint64_t generation, int destination,
                    int tag, MPI_Comm comm);

/// A chunk received from another rank, imported into this rank's backend.
struct MpiChunk {
  PhysicalChunk chunk;
  std::uint64_t offset = 0;
  std::uint64_t generation = 0;
  int sender = -1;
};

/// Receives a chunk message and imports its fabric handle into `backend`. Any other message, a
/// handle that is not fabric, or a handle the backend refuses is a cuvmm::Error; nothing leaks.
[[nodiscard]] MpiChunk mpi_receive_chunk(Backend& backend, int source, int tag, MPI_Comm comm);

}  // namespace cuvmm::ipc
