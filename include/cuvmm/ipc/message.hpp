// cuvmm/ipc/message.hpp: the one message format cuvmm's processes exchange about shared memory.
//
// Every message, over a Unix socket or over MPI, is exactly wire_message_bytes long, with a fixed
// little-endian layout (no struct is sent as it lies in memory):
//
//   offset  size  field
//        0     4  magic       wire_magic ("CUVM")
//        4     2  version     wire_version
//        6     1  kind        MessageKind
//        7     1  handle type HandleType: none, posix_fd (the fd rides along) or fabric (bytes below)
//        8     8  offset      chunk: where it goes in the range
//       16     8  size        hello: the range's bytes; chunk: the chunk's bytes; size: bytes in use
//       24     8  generation  chunk: its index (0, 1, 2, ...); hello and size: chunks announced so far
//       32    64  handle      fabric handle bytes; zero for every other message
//
// decode() trusts nothing: a wrong length, magic, version, kind or handle type, a field that the
// kind does not use but is set, a zero-sized chunk or an offset + size that overflows is a
// cuvmm::Error that says which. Bounds against a particular range are checked by the receiver,
// which knows the range.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include <cuvmm/types.hpp>

namespace cuvmm::ipc {

inline constexpr std::uint32_t wire_magic = 0x4D565543;  // the bytes "CUVM"
inline constexpr std::uint16_t wire_version = 1;
inline constexpr std::size_t wire_message_bytes = 96;

/// What a message says.
enum class MessageKind : std::uint8_t {
  hello = 1,  ///< first message of an exporter: size = its range's bytes (its max capacity)
  chunk = 2,  ///< a chunk at `offset` of `size` bytes, number `generation`, with its handle
  size = 3,   ///< the exporter's bytes in use are now `size` (data written up to there)
};

std::string_view to_string(MessageKind) noexcept;

struct Message {
  MessageKind kind = MessageKind::hello;
  HandleType handle_type = HandleType::none;  ///< chunk: posix_fd or fabric; none otherwise
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint64_t generation = 0;
  FabricHandle handle{};  ///< the handle's bytes when handle_type is fabric

  friend bool operator==(const Message& a, const Message& b) noexcept;
};

/// An exporter's first message: its range holds `range_bytes`; `chunks` chunk messages follow.
constexpr Message hello_message(std::uint64_t range_bytes, std::uint64_t chunks = 0) noexcept {
  Message m;
  m.kind = MessageKind::hello;
  m.size = range_bytes;
  m.generation = chunks;
  return m;
}

/// Chunk number `generation`, of `size` bytes at `offset`, whose handle is of `type` (the fd, or
/// the fabric bytes in `handle`, go with it).
constexpr Message chunk_message(HandleType type, std::uint64_t offset, std::uint64_t size, std::uint64_t generation,
                                const FabricHandle& handle = {}) noexcept {
  Message m;
  m.kind = MessageKind::chunk;
  m.handle_type = type;
  m.offset = offset;
  m.size = size;
  m.generation = generation;
  m.handle = handle;
  return m;
}

/// `bytes` from the start hold data now, after `chunks` chunks were announced.
constexpr Message size_message(std::uint64_t bytes, std::uint64_t chunks) noexcept {
  Message m;
  m.kind = MessageKind::size;
  m.size = bytes;
  m.generation = chunks;
  return m;
}

using WireBytes = std::array<std::byte, wire_message_bytes>;

/// The message's bytes on the wire. Throws cuvmm::Error for a message decode() would refuse.
WireBytes encode(const Message& message);

/// The message in `bytes`, checked as described above; `source` names where the bytes came from in
/// error messages (e.g. "socket from pid 1234").
Message decode(std::span<const std::byte> bytes, std::string_view source);

}  // namespace cuvmm::ipc
