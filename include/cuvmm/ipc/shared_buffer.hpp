// cuvmm/ipc/shared_buffer.hpp: a growable buffer that other processes map while it grows.
//
// The exporting process owns a GrowableStorage whose chunks are exportable as POSIX fds, and a
// Listener. Each importer that connects (same uid, or one on the policy's allow-list) is told the
// exporter's maximum capacity in a hello, then every chunk (offset, size, generation, and its fd)
// mapped so far, then the size in use; afterwards every growth step announces its new chunks, and
// publish() announces the size in use. An importer reserves ONE address range of the exporter's
// maximum capacity when it connects (never any other) and maps each chunk at the same offset as
// it learns of it, read-write or read-only. So offsets agree in every process; addresses do not
// (each process has its own range).
//
// Lifetime: an importer's memory is its own (imported chunks hold it), so it stays valid after the
// exporter exits, until the importer releases it. The exporter never shrinks a shared buffer.
// Ordering: publish(bytes) is the exporter's word that bytes [0, bytes) hold data; on a device,
// the exporter synchronizes the work that wrote them first.
// Errors: an importer checks everything it is told (hello first and once, chunks in order, each
// chunk exactly at the end of the mapped prefix and inside the range, its fd a real chunk of the
// announced size, sizes within the mapped bytes). Any violation is a cuvmm::Error, and the importer
// stops listening to that exporter: what it had mapped stays mapped, nothing leaks.
// Unreachable importers: the exporter never waits without a bound. It sends to all importers at
// once without blocking; an importer that takes no message for PeerPolicy::send_timeout (it stopped
// reading, or reads too slowly to ever make room), or whose connection failed, is dropped, and
// take_dropped_importers() says which and why. A slow importer that keeps reading gets every
// message, in order. So reserve() and publish() return within send_timeout after the last importer
// that still makes progress, however many importers have stopped; dropping one never fails the
// exporter's own growth. accept_importer() sends a newcomer every chunk so far: when that is more
// than its socket buffer holds (a few hundred chunks), the importer must read meanwhile (another
// thread or process), or accept_importer() throws after send_timeout and does not keep it.
// Threads: each object is used by one thread at a time (the backend underneath is thread-safe).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include <cuvmm/address_range.hpp>
#include <cuvmm/backend.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/growable_storage.hpp>
#include <cuvmm/ipc/channel.hpp>
#include <cuvmm/mapping.hpp>
#include <cuvmm/physical_chunk.hpp>

namespace cuvmm::ipc {

class SharedBufferExporter {
 public:
  /// Reserves the storage (its chunks are made shareable as POSIX fds whatever `options` says) and
  /// listens for importers in a private socket directory under `socket_parent` (see Listener).
  SharedBufferExporter(Backend& backend, GrowableOptions options = {}, PeerPolicy policy = {},
                       const std::filesystem::path& socket_parent = {});
  SharedBufferExporter(SharedBufferExporter&&) noexcept = default;
  SharedBufferExporter& operator=(SharedBufferExporter&&) noexcept = default;
  ~SharedBufferExporter() = default;

  /// Where importers connect.
  [[nodiscard]] const std::filesystem::path& socket_path() const noexcept { return listener_.socket_path(); }

  /// Waits (up to the policy's timeout) for one importer, checks its credentials, and sends it the
  /// hello, every chunk mapped so far and the published size (each message waiting at most the
  /// policy's send_timeout for room). Throws cuvmm::Error if any of it fails (the importer is then
  /// not kept).
  void accept_importer();

  /// Grows to at least `bytes` and announces the new chunks to every importer. All or nothing: on
  /// any failure (growth, or exporting the new chunks) nothing changed and nothing was announced.
  /// An importer that cannot be told within send_timeout is dropped (see take_dropped_importers()).
  void reserve(std::size_t bytes);

  /// Tells every importer that [0, bytes) holds data now (bytes <= capacity()). An importer that
  /// cannot be told within send_timeout is dropped (see take_dropped_importers()).
  void publish(std::size_t bytes);

  /// An importer this exporter dropped, and why.
  struct DroppedImporter {
    PeerCredentials peer;  ///< who it was
    std::string reason;    ///< the error that dropped it, e.g. a send that timed out
    ErrorCode code = ErrorCode::unspecified;  ///< timed_out, peer_closed, ...; unspecified: another system error
  };
  /// The importers dropped since the last call, oldest first; forgets them.
  [[nodiscard]] std::vector<DroppedImporter> take_dropped_importers();

  [[nodiscard]] Address data() const noexcept { return storage_.data(); }
  [[nodiscard]] std::size_t capacity() const noexcept { return storage_.capacity(); }
  [[nodiscard]] std::size_t max_capacity() const noexcept { return storage_.max_capacity(); }
  [[nodiscard]] std::size_t published_size() const noexcept { return published_; }
  [[nodiscard]] std::size_t importer_count() const noexcept { return importers_.size(); }
  [[nodiscard]] const GrowableStorage& storage() const noexcept { return storage_; }

 private:
  /// New descriptors for chunks [first, chunk_count).
  [[nodiscard]] std::vector<UniqueFd> export_chunks(std::size_t first) const;
  /// A message to send, and the fd (borrowed) that goes with it, or -1.
  struct Outgoing {
    Message message;
    int fd = -1;
  };
  /// Messages announcing chunks [first, chunk_count), with `fds` from export_chunks(first).
  [[nodiscard]] std::vector<Outgoing> chunk_messages(std::size_t first, const std::vector<UniqueFd>& fds) const;
  /// Sends `messages`, in order, to every importer at once; drops (and records) those that fail.
  void announce(const std::vector<Outgoing>& messages);

  GrowableStorage storage_;
  Listener listener_;
  std::vector<Channel> importers_;
  std::vector<DroppedImporter> dropped_;  // not yet taken by take_dropped_importers()
  std::size_t published_ = 0;  // bytes the importers were told hold data
};

/// The most address space an importer reserves for one exporter unless told otherwise: 1 TiB. A
/// process has about 128 TiB (an H200's whole memory is 141 GB), so a few importers cannot be made
/// to exhaust it by an exporter's claim.
inline constexpr std::size_t default_max_import_bytes = std::size_t{1} << 40;

class SharedBufferImporter {
 public:
  /// Connects to the exporter at `socket_path`, checks its credentials, reads its hello and reserves
  /// one address range of the exporter's maximum capacity. Chunks are mapped with `access` for
  /// `device` (the host backend ignores the device). Chunks are mapped by update() and wait_for_size().
  /// Throws cuvmm::Error: ErrorCode::limit_exceeded (naming both sizes) when the exporter's range is
  /// larger than `max_reservation_bytes`, protocol_violation for a bad hello, and an Error with the
  /// system's code when the address space cannot be had; nothing is then reserved or kept.
  SharedBufferImporter(Backend& backend, const std::filesystem::path& socket_path, Access access = Access::read_write,
                       PeerPolicy policy = {}, int device = 0,
                       std::size_t max_reservation_bytes = default_max_import_bytes);
  SharedBufferImporter(SharedBufferImporter&&) noexcept = default;
  SharedBufferImporter& operator=(SharedBufferImporter&&) noexcept = default;
  /// Unmaps and releases everything (in that order), then frees the range.
  ~SharedBufferImporter() = default;

  [[nodiscard]] Address data() const noexcept { return range_.base(); }
  /// Bytes mapped from data(), a prefix of the exporter's.
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  /// The exporter's maximum capacity: this importer's one address range.
  [[nodiscard]] std::size_t max_capacity() const noexcept { return range_.size(); }
  /// Bytes the exporter last said hold data.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t chunk_count() const noexcept { return chunks_.size(); }
  [[nodiscard]] Access access() const noexcept { return grant_.access; }
  /// Whether the exporter is still heard from (false once it closed, or broke the protocol).
  [[nodiscard]] bool connected() const noexcept { return channel_.connected(); }

  /// Applies every message already waiting, without waiting; returns how many. An exporter that has
  /// exited is not an error here: connected() turns false. A bad message (an empty one included)
  /// throws cuvmm::Error with ErrorCode::protocol_violation, and the importer stops listening.
  std::size_t update();

  /// Applies messages until size() >= bytes. Throws cuvmm::Error if the exporter closes, breaks the
  /// protocol, or is silent longer than the policy's timeout first.
  void wait_for_size(std::size_t bytes);

 private:
  /// Applies one message; on any failure stops listening to the exporter and rethrows.
  void apply(Received received);
  void apply_chunk(const Message& message, UniqueFd fd);

  Backend* backend_;
  AccessGrant grant_;
  Channel channel_;
  AddressRange range_;                  // declared before the chunks and mappings: freed last
  std::vector<PhysicalChunk> chunks_;   // released after the mappings
  std::vector<Mapping> mappings_;       // mappings_[i] maps chunks_[i]; unmapped first
  std::size_t capacity_ = 0;
  std::size_t size_ = 0;
};

}  // namespace cuvmm::ipc
