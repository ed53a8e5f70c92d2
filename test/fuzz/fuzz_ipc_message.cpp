// libFuzzer target: the IPC message decoder and an importer fed by a hostile exporter. Built and run
// by scripts/fuzz.sh (clang, ASan + UBSan, host backend).
//
// Input: byte 0 is a mode, the rest is read as 96-byte messages.
//  1. decode() of the whole input, and of every 96-byte slice: it never crashes; what it accepts
//     re-encodes to exactly the same bytes, and a chunk it accepts has size > 0 and an offset + size
//     that does not overflow.
//  2. A SharedBufferImporter (host backend, limit 64 granules) connected to a fake exporter that
//     sends the slices raw, as they are (mode bit 0 set: with a valid magic and version patched in,
//     so the fuzzer reaches the importer's own checks). A chunk message (handle type byte 1) goes
//     with a sealed memfd of the announced size (mode bit 1 set: of one granule more, or unsealed
//     with bit 2). After every message, whatever the importer accepted or refused:
//       - it never mapped outside its reservation: capacity() <= max_capacity(), and the backend's
//         mapped bytes are exactly capacity() (chunks side by side from offset 0);
//       - size() <= capacity() and its reservation is at most the limit;
//       - a refusal is a cuvmm::Error (never another exception), after which it is disconnected.
//     When it is gone, the backend holds nothing and no descriptor is left open.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <thread>

#include <cuvmm/error.hpp>
#include <cuvmm/host_backend.hpp>
#include <cuvmm/ipc/channel.hpp>
#include <cuvmm/ipc/message.hpp>
#include <cuvmm/ipc/shared_buffer.hpp>

#include "fuzz_check.hpp"

namespace {

constexpr std::size_t granule = 64 * 1024;
constexpr std::size_t limit = 64 * granule;
constexpr std::size_t message_bytes = cuvmm::ipc::wire_message_bytes;
constexpr std::size_t max_messages = 24;


std::size_t open_fds() {
  std::size_t count = 0;
  if (DIR* const dir = ::opendir("/proc/self/fd")) {
    while (dirent* entry = ::readdir(dir))
      if (entry->d_name[0] != '.') ++count;
    ::closedir(dir);
  }
  return count;
}

std::uint64_t read_u64(const std::byte* bytes) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | std::to_integer<std::uint64_t>(bytes[i]);
  return value;
}

/// decode() never crashes; what it accepts is exactly what encode() makes of it.
void check_decoder(std::span<const std::byte> bytes) {
  cuvmm::ipc::Message message;
  try {
    message = cuvmm::ipc::decode(bytes, "fuzz");
  } catch (const cuvmm::Error& error) {
    FUZZ_CHECK(error.is(cuvmm::ErrorCode::protocol_violation));
    return;
  }
  FUZZ_CHECK(bytes.size() == message_bytes);
  cuvmm::ipc::WireBytes const again = cuvmm::ipc::encode(message);
  FUZZ_CHECK(std::equal(again.begin(), again.end(), bytes.begin()));
  if (message.kind == cuvmm::ipc::MessageKind::chunk) {
    FUZZ_CHECK(message.size > 0);
    FUZZ_CHECK(message.offset <= UINT64_MAX - message.size);
  }
}

cuvmm::UniqueFd chunk_fd(std::size_t size, bool sealed) {
  cuvmm::UniqueFd fd(::memfd_create("fuzz-chunk", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  FUZZ_CHECK(fd.valid());
  FUZZ_CHECK(::ftruncate(fd.get(), static_cast<off_t>(size)) == 0);
  if (sealed) FUZZ_CHECK(::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0);
  return fd;
}

/// Sends `bytes` as one datagram, with `fd` when it is valid; the importer may have hung up.
void send_raw(int socket, const std::byte* bytes, std::size_t length, int fd) {
  int const fds[] = {fd};
  (void)cuvmm::ipc::send_datagram(socket, {bytes, length}, fd >= 0 ? std::span<const int>(fds) : std::span<const int>());
}

void check_importer(cuvmm::HostBackend& host, std::uint8_t mode, std::span<const std::byte> rest) {
  std::size_t const count = std::min(rest.size() / message_bytes, max_messages);
  if (count == 0) return;
  std::vector<cuvmm::ipc::WireBytes> messages(count);
  for (std::size_t i = 0; i < count; ++i) {
    std::memcpy(messages[i].data(), rest.data() + i * message_bytes, message_bytes);
    if ((mode & 1) != 0) {  // a valid magic and version: go past the decoder's first checks
      cuvmm::ipc::WireBytes const valid = cuvmm::ipc::encode(cuvmm::ipc::Message{});
      std::memcpy(messages[i].data(), valid.data(), 6);
    }
  }
  cuvmm::ipc::PeerPolicy policy;
  policy.timeout = std::chrono::seconds(5);
  cuvmm::ipc::Listener listener(policy);
  std::optional<cuvmm::ipc::SharedBufferImporter> importer;
  bool refused_at_hello = false;
  std::thread connecting([&] {
    try {
      importer.emplace(host, listener.socket_path(), cuvmm::Access::read_write, policy, 0, limit);
    } catch (const cuvmm::Error&) {
      refused_at_hello = true;
    }
  });
  cuvmm::ipc::Channel exporter = listener.accept();
  send_raw(exporter.native_handle(), messages[0].data(), message_bytes, -1);
  connecting.join();
  if (refused_at_hello) {
    FUZZ_CHECK(host.live_counts() == cuvmm::LiveCounts{});
    return;
  }
  FUZZ_CHECK(importer.has_value());
  FUZZ_CHECK(importer->max_capacity() <= limit);
  for (std::size_t i = 1; i < count && importer->connected(); ++i) {
    cuvmm::UniqueFd fd;
    if (std::to_integer<std::uint8_t>(messages[i][7]) == 1) {  // a posix_fd chunk: an fd goes with it
      std::uint64_t const announced = read_u64(messages[i].data() + 16);
      std::size_t size = announced > 0 && announced <= limit ? static_cast<std::size_t>(announced) : granule;
      if ((mode & 2) != 0) size += granule;
      fd = chunk_fd(size, (mode & 4) == 0);
    }
    send_raw(exporter.native_handle(), messages[i].data(), message_bytes, fd.get());
    try {
      (void)importer->update();
    } catch (const cuvmm::Error&) {
      FUZZ_CHECK(!importer->connected());  // a refusal stops listening
    }
    cuvmm::LiveCounts const live = host.live_counts();
    FUZZ_CHECK(importer->capacity() <= importer->max_capacity());
    FUZZ_CHECK(live.bytes_mapped == importer->capacity());
    FUZZ_CHECK(live.mappings == importer->chunk_count());
    FUZZ_CHECK(live.ranges == 1 && live.bytes_reserved == importer->max_capacity());
    FUZZ_CHECK(importer->size() <= importer->capacity());
  }
  importer.reset();
  FUZZ_CHECK(host.live_counts() == cuvmm::LiveCounts{});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static cuvmm::HostBackend host = [] {
    cuvmm::HostBackend::Options options;
    options.granularity = granule;
    return cuvmm::HostBackend(options);
  }();
  std::span<const std::byte> const bytes(reinterpret_cast<const std::byte*>(data), size);
  check_decoder(bytes);
  if (size == 0) return 0;
  std::span<const std::byte> const rest = bytes.subspan(1);
  for (std::size_t at = 0; at + message_bytes <= rest.size(); at += message_bytes)
    check_decoder(rest.subspan(at, message_bytes));
  std::size_t const fds_before = open_fds();
  check_importer(host, std::to_integer<std::uint8_t>(bytes[0]), rest);
  FUZZ_CHECK(open_fds() == fds_before);
  return 0;
}
