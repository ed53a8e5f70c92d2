// The wire format of cuvmm's IPC messages (see cuvmm/ipc/message.hpp for the layout).
//
// Owns nothing. encode() and decode() are exact inverses on every message decode() accepts, and
// encode() refuses what decode() would refuse, so a well-behaved peer can never send a message its
// partner rejects. Integers are written byte by byte, little-endian, whatever the host's order.
#include <cuvmm/ipc/message.hpp>

#include <algorithm>
#include <cstring>
#include <string>

#include <cuvmm/error.hpp>

#include "support/little_endian.hpp"

namespace cuvmm::ipc {
namespace {

constexpr std::size_t magic_at = 0;
constexpr std::size_t version_at = 4;
constexpr std::size_t kind_at = 6;
constexpr std::size_t handle_type_at = 7;
constexpr std::size_t offset_at = 8;
constexpr std::size_t size_at = 16;
constexpr std::size_t generation_at = 24;
constexpr std::size_t handle_at = 32;
static_assert(handle_at + sizeof(FabricHandle::data) == wire_message_bytes);

template <class Int>
void put(WireBytes& bytes, std::size_t at, Int value) {
  detail::put_little_endian(bytes.data(), at, value);
}

template <class Int>
Int get(std::span<const std::byte> bytes, std::size_t at) {
  return detail::get_little_endian<Int>(bytes.data(), at);
}

bool known_kind(std::uint8_t kind) noexcept {
  return kind == static_cast<std::uint8_t>(MessageKind::hello) || kind == static_cast<std::uint8_t>(MessageKind::chunk) ||
         kind == static_cast<std::uint8_t>(MessageKind::size);
}

bool known_handle_type(std::uint8_t type) noexcept {
  return type == static_cast<std::uint8_t>(HandleType::none) ||
         type == static_cast<std::uint8_t>(HandleType::posix_fd) ||
         type == static_cast<std::uint8_t>(HandleType::fabric);
}

bool all_zero(const FabricHandle& handle) noexcept {
  return std::all_of(std::begin(handle.data), std::end(handle.data), [](std::byte b) { return b == std::byte{0}; });
}

/// The checks a message must pass whichever way it travels; `refuse` throws.
template <class Refuse>
void check_fields(const Message& m, Refuse&& refuse) {
  bool const chunk = m.kind == MessageKind::chunk;
  if (chunk && m.handle_type != HandleType::posix_fd && m.handle_type != HandleType::fabric)
    refuse("a chunk message carries handle type " + std::to_string(static_cast<int>(m.handle_type)) +
           ", neither posix_fd nor fabric");
  if (!chunk && m.handle_type != HandleType::none)
    refuse("a " + std::string(to_string(m.kind)) + " message carries a handle");
  if (m.handle_type != HandleType::fabric && !all_zero(m.handle))
    refuse("handle bytes are set in a message whose handle type is not fabric");
  if (chunk && m.size == 0) refuse("a chunk message announces a chunk of 0 bytes");
  if (chunk && m.offset > UINT64_MAX - m.size)
    refuse("chunk offset " + std::to_string(m.offset) + " + size " + std::to_string(m.size) + " overflows");
  if (!chunk && m.offset != 0) refuse("a " + std::string(to_string(m.kind)) + " message has a non-zero offset");
}

}  // namespace

std::string_view to_string(MessageKind kind) noexcept {
  switch (kind) {
    case MessageKind::hello: return "hello";
    case MessageKind::chunk: return "chunk";
    case MessageKind::size: return "size";
  }
  return "unknown";
}

bool operator==(const Message& a, const Message& b) noexcept {
  return a.kind == b.kind && a.handle_type == b.handle_type && a.offset == b.offset && a.size == b.size &&
         a.generation == b.generation && std::memcmp(a.handle.data, b.handle.data, sizeof a.handle.data) == 0;
}

WireBytes encode(const Message& message) {
  if (!known_kind(static_cast<std::uint8_t>(message.kind)))
    throw_invalid_argument("cuvmm::ipc::encode", "unknown message kind " + std::to_string(static_cast<int>(message.kind)));
  check_fields(message, [](std::string what) { throw_invalid_argument("cuvmm::ipc::encode", std::move(what)); });
  WireBytes bytes{};
  put(bytes, magic_at, wire_magic);
  put(bytes, version_at, wire_version);
  put(bytes, kind_at, static_cast<std::uint8_t>(message.kind));
  put(bytes, handle_type_at, static_cast<std::uint8_t>(message.handle_type));
  put(bytes, offset_at, message.offset);
  put(bytes, size_at, message.size);
  put(bytes, generation_at, message.generation);
  std::memcpy(bytes.data() + handle_at, message.handle.data, sizeof message.handle.data);
  return bytes;
}

Message decode(std::span<const std::byte> bytes, std::string_view source) {
  auto const refuse = [&](std::string what) {
    throw_protocol_violation("cuvmm::ipc::decode", "message from " + std::string(source) + " refused: " + what);
  };
  if (bytes.size() < wire_message_bytes)
    refuse("truncated: " + std::to_string(bytes.size()) + " bytes, a message has " + std::to_string(wire_message_bytes));
  if (bytes.size() > wire_message_bytes)
    refuse("oversized: " + std::to_string(bytes.size()) + " bytes, a message has " + std::to_string(wire_message_bytes));
  auto const magic = get<std::uint32_t>(bytes, magic_at);
  if (magic != wire_magic) refuse("bad magic " + std::to_string(magic) + " (not a cuvmm message)");
  auto const version = get<std::uint16_t>(bytes, version_at);
  if (version != wire_version)
    refuse("protocol version " + std::to_string(version) + ", this process speaks version " + std::to_string(wire_version));
  auto const kind = get<std::uint8_t>(bytes, kind_at);
  if (!known_kind(kind)) refuse("unknown message kind " + std::to_string(kind));
  auto const type = get<std::uint8_t>(bytes, handle_type_at);
  if (!known_handle_type(type)) refuse("unknown handle type " + std::to_string(type));
  Message message;
  message.kind = static_cast<MessageKind>(kind);
  message.handle_type = static_cast<HandleType>(type);
  message.offset = get<std::uint64_t>(bytes, offset_at);
  message.size = get<std::uint64_t>(bytes, size_at);
  message.generation = get<std::uint64_t>(bytes, generation_at);
  std::memcpy(message.handle.data, bytes.data() + handle_at, sizeof message.handle.data);
  check_fields(message, refuse);
  return message;
}

}  // namespace cuvmm::ipc
