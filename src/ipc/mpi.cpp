// MPI exchange of cuvmm messages and chunks (libcuvmm_mpi). See cuvmm/ipc/mpi.hpp.
//
// Owns nothing between calls. Every MPI call's result is checked (a communicator set to
// MPI_ERRORS_RETURN reports them; with the default handler MPI aborts first). A received message
// is drained whole whatever its length, so a malformed one never leaves bytes behind for the next
// receive. Never imports before the message passed decode().
#include <cuvmm/ipc/mpi.hpp>

#include <string>
#include <vector>

#include <cuvmm/error.hpp>

namespace cuvmm::ipc {
namespace {

void check_mpi(int result, std::string_view call, std::string context) {
  if (result == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(result, text, &length);
  int error_class = result;
  if (MPI_Error_class(result, &error_class) != MPI_SUCCESS) error_class = result;
  throw Error(foreign_error_details(ErrorDomain::mpi, result, "MPI error class " + std::to_string(error_class),
                                    std::string(text, static_cast<std::size_t>(length)), call, std::move(context)));
}

}  // namespace

void mpi_send(const Message& message, int destination, int tag, MPI_Comm comm) {
  WireBytes const bytes = encode(message);
  check_mpi(MPI_Send(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, destination, tag, comm), "MPI_Send",
            "sending a " + std::string(to_string(message.kind)) + " message to rank " + std::to_string(destination));
}

Message mpi_receive(int source, int tag, MPI_Comm comm, int* sender) {
  MPI_Status status{};
  check_mpi(MPI_Probe(source, tag, comm, &status), "MPI_Probe", "waiting for a message");
  int count = 0;
  check_mpi(MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count", "reading a message's length");
  if (count == MPI_UNDEFINED || count < 0) count = 0;
  std::vector<std::byte> bytes(static_cast<std::size_t>(count));
  check_mpi(MPI_Recv(bytes.data(), count, MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG, comm, MPI_STATUS_IGNORE),
            "MPI_Recv", "receiving a message of " + std::to_string(count) + " bytes");
  if (sender != nullptr) *sender = status.MPI_SOURCE;
  return decode(bytes, "MPI rank " + std::to_string(status.MPI_SOURCE));
}

void mpi_send_chunk(const PhysicalChunk& chunk, std::uint64_t offset, std::uint64_t generation, int destination,
                    int tag, MPI_Comm comm) {
  mpi_send(chunk_message(HandleType::fabric, offset, chunk.size(), generation, chunk.export_fabric()), destination, tag,
           comm);
}

MpiChunk mpi_receive_chunk(Backend& backend, int source, int tag, MPI_Comm comm) {
  MpiChunk received;
  Message const message = mpi_receive(source, tag, comm, &received.sender);
  std::string const from = "MPI rank " + std::to_string(received.sender);
  if (message.kind != MessageKind::chunk)
    throw_protocol_violation("cuvmm::ipc::mpi_receive_chunk",
                             "a " + std::string(to_string(message.kind)) + " message from " + from + ", not a chunk");
  if (message.handle_type != HandleType::fabric)
    throw_protocol_violation("cuvmm::ipc::mpi_receive_chunk",
                             "a chunk from " + from + " without a fabric handle (over MPI chunks travel as fabric handles)");
  received.chunk = PhysicalChunk::import_fabric(backend, message.handle, message.size);
  received.offset = message.offset;
  received.generation = message.generation;
  return received;
}

}  // namespace cuvmm::ipc
