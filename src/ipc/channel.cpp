// Channel and Listener: cuvmm messages and fds over a private SOCK_SEQPACKET Unix socket.
//
// Owns: a Channel its connected socket; a Listener its listening socket, the socket file and the
// private directory around it (removed in that order when it dies).
// Invariants: a Channel exists only once its peer's credentials passed the policy; every fd that
// arrives is owned by a UniqueFd before any check can throw; a message is exactly
// wire_message_bytes (SOCK_SEQPACKET delivers it whole: MSG_TRUNC reveals anything longer).
// Never does: block without a bound (receives poll with the policy's timeout first; sends are
// non-blocking and wait in poll up to send_timeout), raise SIGPIPE, or keep a connection whose
// peer was refused. Blames the peer (protocol_violation) only for what the peer did: when this
// process has no free descriptor for an fd that arrives (the kernel drops it and reports
// MSG_CTRUNC), the error is this process's own (errno EMFILE or ENFILE).
#include <cuvmm/ipc/channel.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include <cuvmm/error.hpp>

namespace cuvmm::ipc {
namespace {

/// More fds than a message may carry are still received (then refused), up to this many; past it
/// the kernel closes the rest itself (MSG_CTRUNC).
constexpr std::size_t max_received_fds = 8;

/// Why this process cannot open another descriptor now: EMFILE (its limit, RLIMIT_NOFILE) or
/// ENFILE (the system's), as a dup reports it; EMFILE if one has come free since.
int no_free_descriptor(int any_fd) noexcept {
  int const probe = ::fcntl(any_fd, F_DUPFD_CLOEXEC, 0);
  if (probe >= 0) {
    ::close(probe);
    return EMFILE;
  }
  return errno == ENFILE ? ENFILE : EMFILE;
}

std::string credentials_text(const PeerCredentials& peer) {
  return "uid " + std::to_string(peer.uid) + " (pid " + std::to_string(peer.pid) + ")";
}

std::string allowed_text(const PeerPolicy& policy) {
  if (policy.allowed_uids.empty()) return "only this process's uid " + std::to_string(::geteuid());
  std::string text = "the allow-list";
  for (uid_t uid : policy.allowed_uids) text += " " + std::to_string(uid);
  return text;
}

sockaddr_un socket_address(const std::filesystem::path& path, std::string_view call) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::string const text = path.string();
  if (text.empty() || text.size() >= sizeof address.sun_path)
    throw_invalid_argument(call, "socket path '" + text + "' is empty or longer than " +
                                     std::to_string(sizeof address.sun_path - 1) + " bytes");
  std::memcpy(address.sun_path, text.c_str(), text.size() + 1);
  return address;
}

int timeout_ms(const PeerPolicy& policy) {
  auto const count = policy.timeout.count();
  return count < 0 ? -1 : static_cast<int>(std::min<long long>(count, INT32_MAX));
}

/// Waits until `socket` is readable; false on timeout.
bool wait_readable(int socket, int timeout, std::string_view what) {
  pollfd entry{socket, POLLIN, 0};
  for (;;) {
    int const ready = ::poll(&entry, 1, timeout);
    if (ready > 0) return true;
    if (ready == 0) return false;
    if (errno != EINTR) throw_errno("poll", errno, std::string(what));
  }
}

/// Whether the peer of `socket` has closed its end (nothing more will arrive after what is queued).
bool peer_hung_up(int socket) {
  pollfd entry{socket, POLLRDHUP, 0};
  int ready = 0;
  do {
    ready = ::poll(&entry, 1, 0);
  } while (ready < 0 && errno == EINTR);
  return ready > 0 && (entry.revents & (POLLRDHUP | POLLHUP)) != 0;
}

std::filesystem::path default_parent() {
  if (char const* runtime = std::getenv("XDG_RUNTIME_DIR"); runtime != nullptr && *runtime == '/') {
    struct stat status {};
    if (::stat(runtime, &status) == 0 && S_ISDIR(status.st_mode) && status.st_uid == ::geteuid()) return runtime;
  }
  return std::filesystem::temp_directory_path();
}

}  // namespace

bool PeerPolicy::allows(uid_t uid) const noexcept {
  if (allowed_uids.empty()) return uid == ::geteuid();
  return std::find(allowed_uids.begin(), allowed_uids.end(), uid) != allowed_uids.end();
}

Channel::Channel(UniqueFd socket, PeerPolicy policy) : policy_(std::move(policy)) {
  if (!socket) throw_invalid_argument("cuvmm::ipc::Channel", "no socket was given");
  ucred credentials{};
  socklen_t length = sizeof credentials;
  if (::getsockopt(socket.get(), SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0)
    throw_errno("getsockopt(SO_PEERCRED)", errno, "reading the peer's credentials");
  peer_ = PeerCredentials{credentials.pid, credentials.uid, credentials.gid};
  if (!policy_.allows(peer_.uid)) {
    throw_error(ErrorCode::peer_refused, "SO_PEERCRED",  // `socket` closes here
                "the peer is " + credentials_text(peer_) + ", but the policy allows " + allowed_text(policy_) +
                    "; the connection was closed");
  }
  socket_ = std::move(socket);
}

Channel Channel::connect(const std::filesystem::path& socket_path, PeerPolicy policy) {
  constexpr std::string_view call = "cuvmm::ipc::Channel::connect";
  sockaddr_un const address = socket_address(socket_path, call);
  UniqueFd socket(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!socket) throw_errno("socket(AF_UNIX, SOCK_SEQPACKET)", errno, "connecting to " + socket_path.string());
  int result = 0;
  do {
    result = ::connect(socket.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address);
  } while (result != 0 && errno == EINTR);
  if (result != 0) throw_errno("connect", errno, "connecting to " + socket_path.string());
  return Channel(std::move(socket), std::move(policy));
}

namespace {

/// Milliseconds left until `deadline` (0 when it passed), for poll().
int milliseconds_until(std::chrono::steady_clock::time_point deadline) {
  auto const left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, INT32_MAX));
}

}  // namespace

ssize_t send_datagram(int socket, std::span<const std::byte> bytes, std::span<const int> fds) noexcept {
  if (fds.size() > max_datagram_fds) {
    errno = EINVAL;
    return -1;
  }
  iovec part{const_cast<std::byte*>(bytes.data()), bytes.size()};
  msghdr header{};
  header.msg_iov = &part;
  header.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * max_datagram_fds)] = {};
  if (!fds.empty()) {
    header.msg_control = control;
    header.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* const rights = CMSG_FIRSTHDR(&header);
    rights->cmsg_level = SOL_SOCKET;
    rights->cmsg_type = SCM_RIGHTS;
    rights->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(rights), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t sent = 0;
  do {
    sent = ::sendmsg(socket, &header, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (sent < 0 && errno == EINTR);
  return sent;
}

bool Channel::try_send(const Message& message, int fd) {
  constexpr std::string_view call = "cuvmm::ipc::Channel::send";
  if (!socket_) throw_error(ErrorCode::not_connected, call, "the channel is closed");
  bool const needs_fd = message.handle_type == HandleType::posix_fd;
  if (needs_fd != (fd >= 0))
    throw_invalid_argument(call, needs_fd ? "a posix_fd chunk message needs its fd" : "an fd was given with a message that carries none");
  WireBytes const bytes = encode(message);
  int const fds[] = {fd};
  ssize_t const sent = send_datagram(socket_.get(), std::as_bytes(std::span(bytes)),
                                     needs_fd ? std::span<const int>(fds) : std::span<const int>());
  if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;  // the peer's queue is full
  if (sent < 0) {
    int const error = errno;
    std::string const what = "sending a " + std::string(to_string(message.kind)) + " message to " + credentials_text(peer_);
    if (error == EPIPE || error == ECONNRESET) {
      socket_.reset();
      throw_errno("sendmsg", error, what + ": the peer closed the connection");
    }
    throw_errno("sendmsg", error, what);
  }
  if (static_cast<std::size_t>(sent) != bytes.size())  // SOCK_SEQPACKET sends a message whole or not at all
    throw_invalid_argument(call, "only " + std::to_string(sent) + " bytes of a message were sent");
  return true;
}

void Channel::send(const Message& message, int fd) {
  auto const deadline = std::chrono::steady_clock::now() + policy_.send_timeout;
  while (!try_send(message, fd)) {
    // POLLOUT comes once the peer has read some of its queue; poll again at least every 10 ms,
    // since a unix socket reports room later than a send could use it.
    pollfd entry{socket_.get(), POLLOUT, 0};
    int const wait = std::min(milliseconds_until(deadline), 10);
    if (wait == 0) {
      throw_timed_out("cuvmm::ipc::Channel::send", "the peer " + credentials_text(peer_) + " took no message within " +
                                                       std::to_string(policy_.send_timeout.count()) +
                                                       " ms (PeerPolicy::send_timeout): it is not reading; nothing was sent");
    }
    if (::poll(&entry, 1, wait) < 0 && errno != EINTR) throw_errno("poll", errno, "waiting to send to " + credentials_text(peer_));
  }
}

Received Channel::receive() {
  std::optional<Received> received = receive_within(timeout_ms(policy_));
  if (!received) {
    throw_timed_out("cuvmm::ipc::Channel::receive", "no message from " + credentials_text(peer_) + " within " +
                                                        std::to_string(policy_.timeout.count()) +
                                                        " ms (PeerPolicy::timeout)");
  }
  return std::move(*received);
}

std::optional<Received> Channel::try_receive() { return receive_within(0); }

std::optional<Received> Channel::receive_within(int timeout) {
  constexpr std::string_view call = "cuvmm::ipc::Channel::receive";
  if (!socket_) throw_error(ErrorCode::not_connected, call, "the channel is closed");
  std::string const source = "socket peer " + credentials_text(peer_);
  if (!wait_readable(socket_.get(), timeout, "waiting for a message from " + source)) return std::nullopt;

  WireBytes bytes{};
  iovec part{bytes.data(), bytes.size()};
  msghdr header{};
  header.msg_iov = &part;
  header.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * max_received_fds)] = {};
  header.msg_control = control;
  header.msg_controllen = sizeof control;
  ssize_t length = 0;
  do {
    length = ::recvmsg(socket_.get(), &header, MSG_CMSG_CLOEXEC | MSG_TRUNC);
  } while (length < 0 && errno == EINTR);
  if (length < 0 && errno == ECONNRESET) length = 0;
  if (length < 0) throw_errno("recvmsg", errno, "receiving a message from " + source);

  // Own every descriptor that arrived before anything can throw.
  std::vector<UniqueFd> fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&header); c != nullptr; c = CMSG_NXTHDR(&header, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    std::size_t const count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      fds.emplace_back(fd);
    }
  }
  auto const refuse = [&](std::string what) {
    socket_.reset();  // a peer that breaks the protocol is not listened to again
    throw_protocol_violation(call, "message from " + source + " refused: " + what + "; the connection was closed");
  };
  if (length == 0 && fds.empty() && peer_hung_up(socket_.get())) {
    // recvmsg returns 0 both at the end of the connection and for an empty message; the end is
    // when nothing arrived and the peer has hung up. (An empty message sent just before hanging up
    // reads as the end too: the peer is gone either way.)
    socket_.reset();
    throw_peer_closed(call, "the peer " + credentials_text(peer_) + " closed the connection (it exited or was killed)");
  }
  if (length == 0) refuse("an empty message (0 bytes, " + std::to_string(fds.size()) + " descriptors)");
  if ((header.msg_flags & MSG_CTRUNC) != 0 && fds.size() < max_received_fds) {
    // The kernel stops passing descriptors when this process cannot take one more (EMFILE,
    // ENFILE): with room for all of them in `control`, truncation is ours, not the peer's doing.
    int const error = no_free_descriptor(socket_.get());
    socket_.reset();  // the message's descriptor is lost: the stream cannot go on
    throw_errno("recvmsg", error,
                "receiving a message from " + source + ": this process could not take the descriptor that came with it (" +
                    std::to_string(fds.size()) + " of them arrived); the message was lost and the connection was closed");
  }
  if ((header.msg_flags & MSG_CTRUNC) != 0)
    refuse("more than " + std::to_string(max_received_fds) + " descriptors came with it");
  if (static_cast<std::size_t>(length) > bytes.size())  // MSG_TRUNC: the length it really had
    refuse("oversized: " + std::to_string(length) + " bytes, a message has " + std::to_string(bytes.size()));
  Message message;
  try {
    message = decode(std::span<const std::byte>(bytes.data(), static_cast<std::size_t>(length)), source);
  } catch (const Error&) {
    socket_.reset();
    throw;
  }
  std::size_t const expected_fds = message.handle_type == HandleType::posix_fd ? 1 : 0;
  if (fds.size() != expected_fds)
    refuse(std::to_string(fds.size()) + " descriptors came with a " + std::string(to_string(message.kind)) +
           " message of handle type " + std::to_string(static_cast<int>(message.handle_type)) + ", which carries " +
           std::to_string(expected_fds));
  Received received;
  received.message = message;
  if (!fds.empty()) received.fd = std::move(fds.front());
  return received;
}

Listener::Listener(PeerPolicy policy, const std::filesystem::path& parent) : policy_(std::move(policy)) {
  constexpr std::string_view call = "cuvmm::ipc::Listener";
  std::filesystem::path const base = parent.empty() ? default_parent() : parent;
  std::string pattern = (base / "cuvmm-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr)
    throw_errno("mkdtemp", errno, "making a private socket directory under " + base.string());
  directory_ = pattern;  // mode 0700, ours: removed by remove() from here on
  try {
    socket_path_ = directory_ / "socket";
    sockaddr_un const address = socket_address(socket_path_, call);
    socket_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (!socket_) throw_errno("socket(AF_UNIX, SOCK_SEQPACKET)", errno, "listening at " + socket_path_.string());
    if (::bind(socket_.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0)
      throw_errno("bind", errno, "binding " + socket_path_.string());
    if (::chmod(socket_path_.c_str(), 0600) != 0) throw_errno("chmod", errno, "making " + socket_path_.string() + " private");
    if (::listen(socket_.get(), 16) != 0) throw_errno("listen", errno, "listening at " + socket_path_.string());
  } catch (...) {
    remove();
    throw;
  }
}

Listener::Listener(Listener&& other) noexcept
    : socket_(std::move(other.socket_)),
      policy_(std::move(other.policy_)),
      directory_(std::exchange(other.directory_, {})),
      socket_path_(std::exchange(other.socket_path_, {})) {}

Listener& Listener::operator=(Listener&& other) noexcept {
  if (this != &other) {
    remove();
    socket_ = std::move(other.socket_);
    policy_ = std::move(other.policy_);
    directory_ = std::exchange(other.directory_, {});
    socket_path_ = std::exchange(other.socket_path_, {});
  }
  return *this;
}

Listener::~Listener() { remove(); }

void Listener::remove() noexcept {
  socket_.reset();
  if (!socket_path_.empty()) ::unlink(socket_path_.c_str());
  if (!directory_.empty()) ::rmdir(directory_.c_str());
  socket_path_.clear();
  directory_.clear();
}

Channel Listener::accept() {
  if (!socket_) throw_invalid_argument("cuvmm::ipc::Listener::accept", "the listener was moved from");
  if (!wait_readable(socket_.get(), timeout_ms(policy_), "waiting for a peer at " + socket_path_.string())) {
    throw_timed_out("cuvmm::ipc::Listener::accept", "no peer connected to " + socket_path_.string() + " within " +
                                                        std::to_string(policy_.timeout.count()) +
                                                        " ms (PeerPolicy::timeout)");
  }
  int fd = -1;
  do {
    fd = ::accept4(socket_.get(), nullptr, nullptr, SOCK_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw_errno("accept4", errno, "accepting a peer at " + socket_path_.string());
  return Channel(UniqueFd(fd), policy_);
}

}  // namespace cuvmm::ipc
