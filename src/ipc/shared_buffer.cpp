// SharedBufferExporter and SharedBufferImporter: see the design note in cuvmm/ipc/shared_buffer.hpp.
//
// Exporter: owns the storage, the listener and one Channel per importer. A growth step is all or
// nothing: if exporting the new chunks' fds fails, the new chunks are given back (shrink_to the
// old capacity) and nothing is announced. Announcing goes to all importers at once and never blocks
// in the kernel (non-blocking sends, one poll over every importer that has no room): an importer
// whose send fails, or that takes no message for send_timeout, is closed, forgotten and recorded in
// dropped_; the others and the storage are untouched.
// Importer: owns its channel, its one range, and the imported chunks with their mappings. Each
// chunk is applied as a small transaction: checked, imported and mapped into locals, then moved
// (noexcept) into vectors whose room was made first; if anything throws, the locals unmap and
// release, the importer stops listening, and what was mapped before stays as it was.
#include <cuvmm/ipc/shared_buffer.hpp>

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include <cuvmm/error.hpp>

#include "support/room_for_one.hpp"

namespace cuvmm::ipc {
namespace {

GrowableOptions shareable_as_fd(GrowableOptions options) {
  options.shareable = options.shareable | HandleType::posix_fd;
  return options;
}

[[noreturn]] void refuse(std::string what) {
  throw_protocol_violation("cuvmm::ipc::SharedBufferImporter", "the exporter's message was refused: " + std::move(what) +
                                                                 "; no longer listening to it");
}

}  // namespace

SharedBufferExporter::SharedBufferExporter(Backend& backend, GrowableOptions options, PeerPolicy policy,
                                           const std::filesystem::path& socket_parent)
    : storage_(backend, shareable_as_fd(std::move(options))), listener_(std::move(policy), socket_parent) {}

std::vector<UniqueFd> SharedBufferExporter::export_chunks(std::size_t first) const {
  const std::vector<PhysicalChunk>& chunks = storage_.chunks();
  std::vector<UniqueFd> fds;
  fds.reserve(chunks.size() - first);
  for (std::size_t i = first; i < chunks.size(); ++i) fds.push_back(chunks[i].export_posix_fd());
  return fds;
}

std::vector<SharedBufferExporter::Outgoing> SharedBufferExporter::chunk_messages(std::size_t first,
                                                                                const std::vector<UniqueFd>& fds) const {
  const std::vector<PhysicalChunk>& chunks = storage_.chunks();
  std::size_t offset = 0;
  for (std::size_t i = 0; i < first; ++i) offset += chunks[i].size();
  std::vector<Outgoing> messages;
  messages.reserve(chunks.size() - first);
  for (std::size_t i = first; i < chunks.size(); ++i) {
    messages.push_back({chunk_message(HandleType::posix_fd, offset, chunks[i].size(), i), fds[i - first].get()});
    offset += chunks[i].size();
  }
  return messages;
}

namespace {

/// Why sending to one channel failed: what, and which kind of error (empty: it took every message).
struct SendFailure {
  std::string reason;
  ErrorCode code = ErrorCode::unspecified;  // timed_out, peer_closed, or the code of the error a send threw
};
using Failure = std::optional<SendFailure>;

/// Sends `messages`, in order, to every channel in `to` at once, never blocking in the kernel:
/// each channel takes what it has room for, then all that wait are polled together. A channel that
/// takes no message for its policy's send_timeout, or whose send throws, fails; the rest go on.
/// Returns one entry per channel.
template <class Outgoing>
std::vector<Failure> send_to_all(const std::vector<Channel*>& to, const std::vector<Outgoing>& messages) {
  using Clock = std::chrono::steady_clock;
  std::vector<std::size_t> next(to.size(), 0);                       // the first message to[i] has not taken
  std::vector<Clock::time_point> progress(to.size(), Clock::now());  // when to[i] last took one
  std::vector<Failure> failures(to.size());
  std::vector<pollfd> waiting;
  for (;;) {
    waiting.clear();
    int wait_ms = 10;  // a unix socket reports room late (POLLOUT once 3/4 is drained): look again soon
    for (std::size_t i = 0; i < to.size(); ++i) {
      if (failures[i] || next[i] == messages.size()) continue;
      Channel& channel = *to[i];
      try {
        while (next[i] < messages.size() && channel.try_send(messages[next[i]].message, messages[next[i]].fd)) {
          ++next[i];
          progress[i] = Clock::now();
        }
      } catch (const Error& error) {
        // A send that found the peer gone (EPIPE, ECONNRESET) closed the channel: the peer closed.
        ErrorCode const code = error.cuvmm_code() == ErrorCode::unspecified && !channel.connected()
                                   ? ErrorCode::peer_closed
                                   : error.cuvmm_code();
        failures[i] = SendFailure{error.what(), code};
        continue;
      } catch (const std::exception& error) {
        failures[i] = SendFailure{error.what()};
        continue;
      }
      if (next[i] == messages.size()) continue;
      auto const limit = channel.policy().send_timeout;
      auto const waited = Clock::now() - progress[i];
      if (waited >= limit) {
        failures[i] = SendFailure{"the importer (pid " + std::to_string(channel.peer().pid) + ", uid " +
                                      std::to_string(channel.peer().uid) + ") took no message within " +
                                      std::to_string(limit.count()) + " ms (PeerPolicy::send_timeout): it is not reading; it had taken " +
                                      std::to_string(next[i]) + " of " + std::to_string(messages.size()) + " messages",
                                  ErrorCode::timed_out};
        continue;
      }
      auto const left = std::chrono::ceil<std::chrono::milliseconds>(limit - waited).count();
      wait_ms = static_cast<int>(std::clamp<long long>(left, 1, wait_ms));
      waiting.push_back(pollfd{channel.native_handle(), POLLOUT, 0});
    }
    if (waiting.empty()) return failures;
    if (::poll(waiting.data(), waiting.size(), wait_ms) < 0 && errno != EINTR)
      throw_errno("poll", errno, "waiting for importers to make room for messages");
  }
}

}  // namespace

void SharedBufferExporter::announce(const std::vector<Outgoing>& messages) {
  std::vector<Channel*> to;
  to.reserve(importers_.size());
  for (Channel& importer : importers_) to.push_back(&importer);
  dropped_.reserve(dropped_.size() + importers_.size());  // so recording a drop cannot throw
  std::vector<Failure> const failures = send_to_all(to, messages);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < importers_.size(); ++i) {
    if (failures[i]) {
      dropped_.push_back(DroppedImporter{importers_[i].peer(), failures[i]->reason, failures[i]->code});
      importers_[i].close();  // it cannot follow any more: forget it
      continue;
    }
    if (kept != i) importers_[kept] = std::move(importers_[i]);
    ++kept;
  }
  while (importers_.size() > kept) importers_.pop_back();
}

std::vector<SharedBufferExporter::DroppedImporter> SharedBufferExporter::take_dropped_importers() {
  return std::exchange(dropped_, {});
}

void SharedBufferExporter::accept_importer() {
  detail::room_for_one(importers_);  // so keeping it cannot throw
  Channel importer = listener_.accept();
  std::vector<UniqueFd> const fds = export_chunks(0);
  std::vector<Outgoing> messages;
  messages.reserve(fds.size() + 2);
  messages.push_back({hello_message(storage_.max_capacity(), storage_.chunk_count())});
  for (const Outgoing& chunk : chunk_messages(0, fds)) messages.push_back(chunk);
  messages.push_back({size_message(published_, storage_.chunk_count())});
  std::vector<Failure> const failures = send_to_all(std::vector<Channel*>{&importer}, messages);
  if (const Failure& failure = failures.front()) {
    ErrorCode const code = failure->code == ErrorCode::unspecified ? ErrorCode::peer_closed : failure->code;
    throw_error(code, "cuvmm::ipc::SharedBufferExporter::accept_importer", failure->reason + "; the importer was not kept");
  }
  importers_.push_back(std::move(importer));
}

void SharedBufferExporter::reserve(std::size_t bytes) {
  std::size_t const before = storage_.chunk_count();
  std::size_t const capacity_before = storage_.capacity();
  storage_.reserve(bytes);
  if (storage_.chunk_count() == before) return;
  std::vector<UniqueFd> fds;
  try {
    fds = export_chunks(before);
  } catch (...) {
    storage_.shrink_to(capacity_before);  // all or nothing: the new chunks go again
    throw;
  }
  announce(chunk_messages(before, fds));
}

void SharedBufferExporter::publish(std::size_t bytes) {
  if (bytes > storage_.capacity())
    throw_invalid_argument("cuvmm::ipc::SharedBufferExporter::publish",
                           "size " + std::to_string(bytes) + " is beyond the " + std::to_string(storage_.capacity()) +
                               " bytes mapped");
  published_ = bytes;
  announce({Outgoing{size_message(bytes, storage_.chunk_count())}});
}

SharedBufferImporter::SharedBufferImporter(Backend& backend, const std::filesystem::path& socket_path, Access access,
                                           PeerPolicy policy, int device, std::size_t max_reservation_bytes)
    : backend_(&backend), grant_{device, access}, channel_(Channel::connect(socket_path, std::move(policy))) {
  constexpr std::string_view call = "cuvmm::ipc::SharedBufferImporter";
  Received hello = channel_.receive();
  try {
    if (hello.message.kind != MessageKind::hello)
      refuse("the first message is a " + std::string(to_string(hello.message.kind)) + ", not a hello");
    if (hello.message.size == 0) refuse("the hello announces a range of 0 bytes");
    if (hello.message.size > max_reservation_bytes)
      throw_limit_exceeded(call, "the exporter's range is " + std::to_string(hello.message.size) +
                                     " bytes, more than this importer's limit of " + std::to_string(max_reservation_bytes) +
                                     " bytes (max_reservation_bytes); nothing was reserved");
    try {
      range_ = AddressRange(backend, hello.message.size);
    } catch (const OutOfMemory& no_room) {  // address space, not memory: a cuvmm::Error like every refusal here
      ErrorDetails details = no_room.details();
      details.context += "; reserving the exporter's range of " + std::to_string(hello.message.size) +
                         " bytes (address space exhausted)";
      throw Error(std::move(details));
    }
  } catch (...) {
    channel_.close();
    throw;
  }
}

std::size_t SharedBufferImporter::update() {
  std::size_t applied = 0;
  while (channel_.connected()) {
    std::optional<Received> received;
    try {
      received = channel_.try_receive();
    } catch (const Error& error) {
      if (error.is(ErrorCode::peer_closed)) break;  // the exporter exited: what we have stays
      throw;
    }
    if (!received) break;
    apply(std::move(*received));
    ++applied;
  }
  return applied;
}

void SharedBufferImporter::wait_for_size(std::size_t bytes) {
  if (bytes > range_.size())
    throw_invalid_argument("cuvmm::ipc::SharedBufferImporter::wait_for_size",
                           "size " + std::to_string(bytes) + " is beyond the exporter's maximum capacity " +
                               std::to_string(range_.size()));
  while (size_ < bytes) {
    if (!channel_.connected())
      throw_error(ErrorCode::not_connected, "cuvmm::ipc::SharedBufferImporter::wait_for_size",
                  "the exporter is no longer connected; its size stayed " + std::to_string(size_));
    apply(channel_.receive());
  }
}

void SharedBufferImporter::apply(Received received) {
  try {
    const Message& m = received.message;
    switch (m.kind) {
      case MessageKind::hello:
        refuse("a second hello");
      case MessageKind::chunk:
        apply_chunk(m, std::move(received.fd));
        return;
      case MessageKind::size:
        if (m.size > capacity_)
          refuse("size " + std::to_string(m.size) + " is beyond the " + std::to_string(capacity_) + " bytes mapped");
        if (m.generation != chunks_.size())
          refuse("the size message follows chunk generation " + std::to_string(m.generation) + ", but " +
                 std::to_string(chunks_.size()) + " chunks arrived");
        size_ = m.size;
        return;
    }
    refuse("an unknown message kind");
  } catch (...) {
    channel_.close();
    throw;
  }
}

void SharedBufferImporter::apply_chunk(const Message& m, UniqueFd fd) {
  if (m.handle_type != HandleType::posix_fd)
    refuse("a chunk with a fabric handle: over a socket chunks come as POSIX fds (fabric handles travel over MPI)");
  if (m.generation != chunks_.size())
    refuse("chunk generation " + std::to_string(m.generation) + ", expected " + std::to_string(chunks_.size()));
  if (m.offset >= range_.size() || m.size > range_.size() - m.offset)
    refuse("chunk [" + std::to_string(m.offset) + ", +" + std::to_string(m.size) + ") is outside the exporter's range of " +
           std::to_string(range_.size()) + " bytes");
  if (m.offset != capacity_)
    refuse("chunk at offset " + std::to_string(m.offset) + ", expected " + std::to_string(capacity_) +
           " (the end of the mapped prefix)");
  detail::room_for_one(chunks_);
  detail::room_for_one(mappings_);
  PhysicalChunk chunk = PhysicalChunk::import_posix_fd(*backend_, fd.get(), m.size);
  Mapping mapping(range_, m.offset, chunk, std::span<const AccessGrant>(&grant_, 1));
  chunks_.push_back(std::move(chunk));
  mappings_.push_back(std::move(mapping));
  capacity_ += m.size;
}

}  // namespace cuvmm::ipc
