// cuvmm/ipc/channel.hpp: a private, checked Unix-domain socket that carries cuvmm messages and fds.
//
// A Listener binds a SOCK_SEQPACKET socket (message boundaries kept, so a message arrives whole or
// not at all) at mode 0600 inside a fresh private directory (mode 0700, made with mkdtemp under
// $XDG_RUNTIME_DIR or the temp directory); it removes both when it dies. Both ends check the other's
// credentials (SO_PEERCRED) against a PeerPolicy: by default only the same effective uid, otherwise
// an explicit allow-list of uids. A refused peer is disconnected and reported as cuvmm::Error.
//
// Every message is one cuvmm::ipc::Message (message.hpp) plus at most one fd, passed with
// SCM_RIGHTS and received close-on-exec (MSG_CMSG_CLOEXEC). receive() takes ownership of every fd
// that arrived before it checks anything, so a refused message (truncated, oversized, forged, with
// the wrong number of fds) leaks no descriptor. Waiting is bounded: accept, connect and receive by
// PeerPolicy::timeout; a send by PeerPolicy::send_timeout (sends never block in the kernel: a peer
// that does not read makes send() throw after that long, and try_send() return false at once).
// Never does: reuse an existing directory for its socket (mkdtemp makes a fresh one), raise SIGPIPE
// (sends use MSG_NOSIGNAL), or accept a message from a peer whose credentials were not checked.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <vector>

#include <cuvmm/ipc/message.hpp>
#include <cuvmm/unique_fd.hpp>

namespace cuvmm::ipc {

/// Who may be on the other end of a channel, and how long to wait for it.
struct PeerPolicy {
  /// Uids allowed as peers. Empty: only this process's effective uid.
  std::vector<uid_t> allowed_uids;
  /// The longest any one accept, connect or receive waits.
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
  /// The longest one send waits for the peer to make room (its socket buffer holds a few hundred
  /// messages). An exporter drops an importer that takes no message for this long.
  std::chrono::milliseconds send_timeout{std::chrono::seconds(5)};

  [[nodiscard]] bool allows(uid_t uid) const noexcept;
};

/// The peer as the kernel saw it when the connection was made (SO_PEERCRED).
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

/// A message and the fd that came with it (empty when none did).
struct Received {
  Message message;
  UniqueFd fd;
};

/// Most descriptors send_datagram() attaches to one datagram.
inline constexpr std::size_t max_datagram_fds = 64;

/// Sends `bytes` as one datagram on the SOCK_SEQPACKET socket `socket`, with `fds` attached
/// (SCM_RIGHTS), without blocking and without SIGPIPE; retried on EINTR. Returns what sendmsg
/// returned: the bytes sent, or -1 with errno set (EAGAIN: the peer's queue is full; EINVAL: more
/// than max_datagram_fds descriptors). Channel sends through it; tests and fuzzers use it to play a
/// peer that breaks the protocol, which a Channel would refuse to encode.
ssize_t send_datagram(int socket, std::span<const std::byte> bytes, std::span<const int> fds = {}) noexcept;

class Channel {
 public:
  Channel() noexcept = default;
  /// Connects to the Listener at `socket_path` and checks its credentials against `policy`.
  [[nodiscard]] static Channel connect(const std::filesystem::path& socket_path, PeerPolicy policy = {});
  /// Adopts a connected socket and checks the peer's credentials (throws, closing it, if refused).
  Channel(UniqueFd socket, PeerPolicy policy);
  Channel(Channel&&) noexcept = default;
  Channel& operator=(Channel&&) noexcept = default;
  ~Channel() = default;

  /// Sends `message`, and `fd` (borrowed, not closed) with it: an fd is required exactly when the
  /// message's handle type is posix_fd. Waits up to the policy's send_timeout for the peer to make
  /// room; throws cuvmm::Error on timeout (nothing was sent, the channel stays usable) and when the
  /// peer has gone (the channel is then closed).
  void send(const Message& message, int fd = -1);
  /// Sends `message` (and `fd`) if the peer has room for it now: true if it went, false if it would
  /// have had to wait (nothing was sent). Throws as send() does for everything else.
  [[nodiscard]] bool try_send(const Message& message, int fd = -1);
  /// Waits up to the policy's timeout for the next message. Throws cuvmm::Error when the peer closed
  /// the connection, on timeout, and for any message that fails the checks.
  [[nodiscard]] Received receive();
  /// The next message if one is already waiting (or the peer closed: then it throws), else nothing.
  [[nodiscard]] std::optional<Received> try_receive();

  [[nodiscard]] const PeerCredentials& peer() const noexcept { return peer_; }
  [[nodiscard]] const PeerPolicy& policy() const noexcept { return policy_; }
  [[nodiscard]] bool connected() const noexcept { return socket_.valid(); }
  /// The socket, for poll(): POLLOUT means try_send() may succeed. Still owned by the channel.
  [[nodiscard]] int native_handle() const noexcept { return socket_.get(); }
  explicit operator bool() const noexcept { return connected(); }
  /// Closes the connection now.
  void close() noexcept { socket_.reset(); }

 private:
  [[nodiscard]] std::optional<Received> receive_within(int timeout_ms);

  UniqueFd socket_;
  PeerPolicy policy_;
  PeerCredentials peer_;
};

class Listener {
 public:
  /// Makes a private directory under `parent` (empty: $XDG_RUNTIME_DIR, else the temp directory)
  /// and listens on a socket in it. Throws cuvmm::Error.
  explicit Listener(PeerPolicy policy = {}, const std::filesystem::path& parent = {});
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  Listener(Listener&& other) noexcept;
  Listener& operator=(Listener&& other) noexcept;
  /// Stops listening and removes the socket and its directory.
  ~Listener();

  /// Where peers connect.
  [[nodiscard]] const std::filesystem::path& socket_path() const noexcept { return socket_path_; }
  [[nodiscard]] const PeerPolicy& policy() const noexcept { return policy_; }

  /// Waits up to the policy's timeout for a peer and checks its credentials. A refused peer is
  /// disconnected and reported as cuvmm::Error; the listener stays usable.
  [[nodiscard]] Channel accept();

 private:
  void remove() noexcept;

  UniqueFd socket_;
  PeerPolicy policy_;
  std::filesystem::path directory_;
  std::filesystem::path socket_path_;
};

}  // namespace cuvmm::ipc
