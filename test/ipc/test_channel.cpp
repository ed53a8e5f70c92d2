// The IPC message format and the Unix-socket channel: exact round trips, a private socket, fds
// that arrive close-on-exec, peers refused by credentials, and hostile raw peers (truncated,
// oversized and forged messages, the wrong number of fds) refused with a clear error, the
// connection closed and no descriptor leaked (counted in /proc/self/fd).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cuvmm/error.hpp>
#include <cuvmm/ipc/channel.hpp>
#include <cuvmm/ipc/message.hpp>

#include "host_memory.hpp"
#include "ipc_children.hpp"
#include "observables.hpp"

using Catch::Matchers::ContainsSubstring;
using cuvmm::HandleType;
using cuvmm::UniqueFd;
using cuvmm::ipc::Channel;
using cuvmm::ipc::Listener;
using cuvmm::ipc::Message;
using cuvmm::ipc::MessageKind;
using cuvmm::ipc::PeerPolicy;
using cuvmm::ipc::WireBytes;
using cuvmm::test::open_fd_count;
using cuvmm::test::thrown_by;

namespace {

PeerPolicy quick_policy() {
  PeerPolicy policy;
  policy.timeout = std::chrono::milliseconds(2000);
  return policy;
}

Message fd_chunk(std::uint64_t offset, std::uint64_t size, std::uint64_t generation) {
  return cuvmm::ipc::chunk_message(HandleType::posix_fd, offset, size, generation);
}

UniqueFd make_memfd(std::size_t size) {
  UniqueFd fd(::memfd_create("channel-test", MFD_CLOEXEC));
  REQUIRE(fd.valid());
  REQUIRE(::ftruncate(fd.get(), static_cast<off_t>(size)) == 0);
  return fd;
}

/// A client socket connected to `path` that sends whatever bytes and fds a test wants.
UniqueFd raw_connect(const std::filesystem::path& path) {
  UniqueFd socket(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  REQUIRE(socket.valid());
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
  REQUIRE(::connect(socket.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
  return socket;
}

void send_raw(int socket, const void* bytes, std::size_t length, const std::vector<int>& fds) {
  REQUIRE(cuvmm::ipc::send_datagram(socket, {static_cast<const std::byte*>(bytes), length}, fds) ==
          static_cast<ssize_t>(length));
}

/// Sends `bytes` with `fds` from a raw peer and returns what the checked end's receive() threw.
std::string refusal_of(Listener& listener, const void* bytes, std::size_t length, const std::vector<int>& fds) {
  UniqueFd const raw = raw_connect(listener.socket_path());
  Channel channel = listener.accept();
  send_raw(raw.get(), bytes, length, fds);
  auto const error = thrown_by<cuvmm::Error>([&] { (void)channel.receive(); });
  CHECK(error.is(cuvmm::ErrorCode::protocol_violation));
  CHECK_FALSE(channel.connected());  // a peer that broke the protocol is cut off
  return error.what();
}

}  // namespace

TEST_CASE("every kind of message survives encode and decode with every field", "[ipc][message]") {
  Message const hello = cuvmm::ipc::hello_message(64ull << 30, 3);
  Message const chunk = fd_chunk(6ull << 20, 2ull << 20, 7);
  cuvmm::FabricHandle noise_handle;
  auto const noise = cuvmm::test::random_bytes(sizeof noise_handle.data, 11);
  std::memcpy(noise_handle.data, noise.data(), noise.size());
  Message const fabric = cuvmm::ipc::chunk_message(HandleType::fabric, 0, 4096, 0, noise_handle);
  Message const size = cuvmm::ipc::size_message(12345, 2);
  for (const Message& m : {hello, chunk, fabric, size}) {
    WireBytes const bytes = cuvmm::ipc::encode(m);
    CHECK(cuvmm::ipc::decode(bytes, "test") == m);
  }
  WireBytes const bytes = cuvmm::ipc::encode(chunk);
  CHECK(bytes[0] == std::byte{'C'});  // the magic reads "CUVM" in memory, little-endian
  CHECK(bytes[3] == std::byte{'M'});
  CHECK(bytes[4] == std::byte{1});    // version 1
  CHECK(bytes[6] == std::byte{2});    // chunk
  CHECK(bytes[7] == std::byte{1});    // posix_fd
  CHECK(bytes[10] == std::byte{0x60});  // offset 6 MiB = 0x600000, little-endian
  CHECK(bytes[24] == std::byte{7});   // generation
}

TEST_CASE("decode refuses truncated, oversized and forged bytes, naming what is wrong", "[ipc][message]") {
  WireBytes const good = cuvmm::ipc::encode(fd_chunk(0, 4096, 0));
  auto const refusal = [](std::span<const std::byte> bytes) {
    return std::string(thrown_by<cuvmm::Error>([&] { (void)cuvmm::ipc::decode(bytes, "a test"); }).what());
  };
  auto forged = [&](std::size_t at, std::byte value) {
    WireBytes bytes = good;
    bytes[at] = value;
    return refusal(bytes);
  };
  CHECK_THAT(refusal(std::span(good).first(95)), ContainsSubstring("truncated: 95 bytes, a message has 96"));
  std::vector<std::byte> longer(good.begin(), good.end());
  longer.push_back(std::byte{0});
  CHECK_THAT(refusal(longer), ContainsSubstring("oversized: 97 bytes"));
  CHECK_THAT(forged(0, std::byte{'X'}), ContainsSubstring("bad magic") && ContainsSubstring("from a test"));
  CHECK(thrown_by<cuvmm::Error>([&] { (void)cuvmm::ipc::decode(std::span(good).first(3), "a test"); })
            .is(cuvmm::ErrorCode::protocol_violation));
  CHECK_THAT(forged(4, std::byte{2}), ContainsSubstring("protocol version 2, this process speaks version 1"));
  CHECK_THAT(forged(6, std::byte{9}), ContainsSubstring("unknown message kind 9"));
  CHECK_THAT(forged(7, std::byte{4}), ContainsSubstring("unknown handle type 4"));
  CHECK_THAT(forged(7, std::byte{0}), ContainsSubstring("neither posix_fd nor fabric"));
  CHECK_THAT(forged(6, std::byte{1}), ContainsSubstring("a hello message carries a handle"));
  CHECK_THAT(forged(40, std::byte{1}), ContainsSubstring("handle bytes are set"));
  WireBytes empty_chunk = good;
  for (std::size_t i = 16; i < 24; ++i) empty_chunk[i] = std::byte{0};
  CHECK_THAT(refusal(empty_chunk), ContainsSubstring("a chunk of 0 bytes"));
  WireBytes overflowing = good;
  for (std::size_t i = 8; i < 16; ++i) overflowing[i] = std::byte{0xFF};
  CHECK_THAT(refusal(overflowing), ContainsSubstring("overflows"));
}

TEST_CASE("encode refuses a message its peer would refuse", "[ipc][message]") {
  Message hello_with_fd;
  hello_with_fd.handle_type = HandleType::posix_fd;
  CHECK_THAT(thrown_by<cuvmm::Error>([&] { (void)cuvmm::ipc::encode(hello_with_fd); }).what(),
             ContainsSubstring("a hello message carries a handle"));
  Message unknown;
  unknown.kind = static_cast<MessageKind>(42);
  CHECK_THAT(thrown_by<cuvmm::Error>([&] { (void)cuvmm::ipc::encode(unknown); }).what(),
             ContainsSubstring("unknown message kind 42"));
}

TEST_CASE("a listener's socket is private: mode 0600 in a 0700 directory, both removed when it goes",
          "[ipc][channel]") {
  std::filesystem::path socket_path;
  std::filesystem::path directory;
  {
    Listener const listener(quick_policy());
    socket_path = listener.socket_path();
    directory = socket_path.parent_path();
    struct stat socket_status {};
    struct stat directory_status {};
    REQUIRE(::lstat(socket_path.c_str(), &socket_status) == 0);
    REQUIRE(::lstat(directory.c_str(), &directory_status) == 0);
    CHECK(S_ISSOCK(socket_status.st_mode));
    CHECK((socket_status.st_mode & 07777) == 0600);
    CHECK(S_ISDIR(directory_status.st_mode));
    CHECK((directory_status.st_mode & 07777) == 0700);
    CHECK(directory_status.st_uid == ::geteuid());
    CHECK_THAT(directory.filename().string(), ContainsSubstring("cuvmm-"));
  }
  CHECK_FALSE(std::filesystem::exists(socket_path));
  CHECK_FALSE(std::filesystem::exists(directory));
}

TEST_CASE("an fd sent over a channel arrives close-on-exec as the same open file, with the message",
          "[ipc][channel]") {
  std::size_t const fd_baseline = open_fd_count();
  {
    Listener listener(quick_policy());
    Channel client = Channel::connect(listener.socket_path(), quick_policy());
    Channel server = listener.accept();
    CHECK(server.peer().pid == ::getpid());
    CHECK(server.peer().uid == ::geteuid());
    CHECK(client.peer().pid == ::getpid());

    UniqueFd const memfd = make_memfd(8192);
    Message const sent = fd_chunk(8192, 8192, 1);
    client.send(sent, memfd.get());
    cuvmm::ipc::Received const received = server.receive();
    CHECK(received.message == sent);
    REQUIRE(received.fd.valid());
    CHECK(received.fd.get() != memfd.get());
    CHECK((::fcntl(received.fd.get(), F_GETFD) & FD_CLOEXEC) == FD_CLOEXEC);
    struct stat a {};
    struct stat b {};
    REQUIRE(::fstat(memfd.get(), &a) == 0);
    REQUIRE(::fstat(received.fd.get(), &b) == 0);
    CHECK(a.st_ino == b.st_ino);

    Message const size = cuvmm::ipc::size_message(100, 1);
    server.send(size);
    cuvmm::ipc::Received const reply = client.receive();
    CHECK(reply.message == size);
    CHECK_FALSE(reply.fd.valid());
    CHECK_FALSE(client.try_receive().has_value());
  }
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("a peer whose uid the policy does not allow is refused at either end", "[ipc][channel]") {
  std::size_t const fd_baseline = open_fd_count();
  PeerPolicy others_only = quick_policy();
  others_only.allowed_uids = {::geteuid() + 1, ::geteuid() + 2};
  CHECK_FALSE(others_only.allows(::geteuid()));
  CHECK(others_only.allows(::geteuid() + 2));
  CHECK(quick_policy().allows(::geteuid()));
  CHECK_FALSE(quick_policy().allows(::geteuid() + 1));
  {
    SECTION("the listening end refuses the connecting peer") {
      Listener listener(others_only);
      Channel client = Channel::connect(listener.socket_path(), quick_policy());
      auto const error = thrown_by<cuvmm::Error>([&] { (void)listener.accept(); });
      CHECK(error.call() == "SO_PEERCRED");
      CHECK(error.is(cuvmm::ErrorCode::peer_refused));
      CHECK_THAT(error.what(), ContainsSubstring("the peer is uid " + std::to_string(::geteuid())) &&
                                   ContainsSubstring("the allow-list " + std::to_string(::geteuid() + 1)) &&
                                   ContainsSubstring("connection was closed"));
      // The refused peer finds the connection closed.
      auto const closed = thrown_by<cuvmm::Error>([&] { (void)client.receive(); });
      CHECK_THAT(closed.what(), ContainsSubstring("closed the connection"));
    }
    SECTION("the connecting end refuses the listener") {
      Listener const listener(quick_policy());
      auto const error = thrown_by<cuvmm::Error>([&] { (void)Channel::connect(listener.socket_path(), others_only); });
      CHECK(error.call() == "SO_PEERCRED");
    }
  }
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("hostile raw peers are refused with a clear error, cut off, and leak no descriptor", "[ipc][channel][hostile]") {
  Listener listener(quick_policy());
  UniqueFd const memfd = make_memfd(4096);
  std::size_t const fd_baseline = open_fd_count();
  WireBytes const chunk = cuvmm::ipc::encode(fd_chunk(0, 4096, 0));
  WireBytes const hello = cuvmm::ipc::encode(Message{});
  std::vector<std::byte> oversized(200, std::byte{0});
  std::memcpy(oversized.data(), chunk.data(), chunk.size());
  WireBytes forged = chunk;
  forged[4] = std::byte{7};

  CHECK_THAT(refusal_of(listener, chunk.data(), 40, {memfd.get()}), ContainsSubstring("truncated: 40 bytes"));
  CHECK_THAT(refusal_of(listener, chunk.data(), 0, {}), ContainsSubstring("refused: an empty message (0 bytes, 0 descriptors)"));
  CHECK_THAT(refusal_of(listener, chunk.data(), 0, {memfd.get()}), ContainsSubstring("an empty message (0 bytes, 1 descriptors)"));
  CHECK_THAT(refusal_of(listener, oversized.data(), oversized.size(), {memfd.get()}),
             ContainsSubstring("oversized: 200 bytes"));
  CHECK_THAT(refusal_of(listener, forged.data(), forged.size(), {memfd.get()}), ContainsSubstring("protocol version 7"));
  CHECK_THAT(refusal_of(listener, chunk.data(), chunk.size(), {}),
             ContainsSubstring("0 descriptors came with a chunk message"));
  CHECK_THAT(refusal_of(listener, hello.data(), hello.size(), {memfd.get()}),
             ContainsSubstring("1 descriptors came with a hello message"));
  CHECK_THAT(refusal_of(listener, chunk.data(), chunk.size(), {memfd.get(), memfd.get(), memfd.get()}),
             ContainsSubstring("3 descriptors came with a chunk message"));
  std::vector<int> const flood(20, memfd.get());
  CHECK_THAT(refusal_of(listener, chunk.data(), chunk.size(), flood), ContainsSubstring("more than 8 descriptors"));
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("receive reports a peer that closed the connection, and a peer that sends nothing in time",
          "[ipc][channel]") {
  std::size_t const fd_baseline = open_fd_count();
  {
    PeerPolicy impatient = quick_policy();
    impatient.timeout = std::chrono::milliseconds(50);
    Listener listener(impatient);
    Channel client = Channel::connect(listener.socket_path(), impatient);
    Channel server = listener.accept();
    auto const timeout = thrown_by<cuvmm::Error>([&] { (void)server.receive(); });
    CHECK(timeout.is(cuvmm::ErrorCode::timed_out));
    CHECK_THAT(timeout.what(), ContainsSubstring("within 50 ms"));
    CHECK(server.connected());  // waiting longer is allowed

    client.close();
    auto const closed = thrown_by<cuvmm::Error>([&] { (void)server.receive(); });
    CHECK(closed.is(cuvmm::ErrorCode::peer_closed));
    CHECK_FALSE(server.connected());
    // Sending to a peer that has gone throws (no SIGPIPE kills the process).
    Channel other = Channel::connect(listener.socket_path(), impatient);
    Channel other_server = listener.accept();
    other_server.close();
    auto const gone = thrown_by<cuvmm::Error>([&] {
      for (int i = 0; i < 4; ++i) other.send(Message{});
    });
    CHECK_THAT(gone.what(), ContainsSubstring("sendmsg"));

    auto const no_peer = thrown_by<cuvmm::Error>([&] { (void)listener.accept(); });
    CHECK(no_peer.is(cuvmm::ErrorCode::timed_out));
  }
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("send to a peer that never reads throws 'timed out' after send_timeout; try_send says no at once",
          "[ipc][channel]") {
  std::size_t const fd_baseline = open_fd_count();
  {
    PeerPolicy policy = quick_policy();
    policy.send_timeout = std::chrono::milliseconds(100);
    Listener listener(policy);
    Channel client = Channel::connect(listener.socket_path(), policy);
    Channel server = listener.accept();  // never reads
    std::size_t sent = 0;
    while (client.try_send(cuvmm::ipc::size_message(sent, 0))) ++sent;
    CHECK(sent > 10);  // the socket buffer took some, then had no room
    CHECK_FALSE(client.try_send(Message{}));
    auto const start = std::chrono::steady_clock::now();
    auto const error = thrown_by<cuvmm::Error>([&] { client.send(Message{}); });
    auto const waited = std::chrono::steady_clock::now() - start;
    CHECK(waited >= std::chrono::milliseconds(100));
    CHECK(waited < std::chrono::seconds(5));
    CHECK(error.is(cuvmm::ErrorCode::timed_out));
    CHECK_THAT(error.what(), ContainsSubstring("took no message within 100 ms (PeerPolicy::send_timeout)"));
    CHECK(client.connected());  // nothing was sent: the channel is still in step
    // The peer reads one message: there is room again, and what it reads is the first one sent.
    CHECK(server.receive().message == cuvmm::ipc::size_message(0, 0));
    client.send(cuvmm::ipc::size_message(sent, 0));
  }
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("send_datagram sends bytes and descriptors whole, refuses more than max_datagram_fds, never blocks",
          "[ipc][channel]") {
  int pair[2] = {-1, -1};
  REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == 0);
  UniqueFd const a(pair[0]), b(pair[1]);
  std::byte const bytes[3] = {std::byte{1}, std::byte{2}, std::byte{3}};
  std::vector<int> const too_many(cuvmm::ipc::max_datagram_fds + 1, a.get());
  errno = 0;
  CHECK(cuvmm::ipc::send_datagram(a.get(), bytes, too_many) == -1);
  CHECK(errno == EINVAL);
  int const one[] = {a.get()};
  REQUIRE(cuvmm::ipc::send_datagram(a.get(), bytes, one) == 3);
  std::byte got[8] = {};
  iovec part{got, sizeof got};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 2)] = {};
  msghdr header{};
  header.msg_iov = &part;
  header.msg_iovlen = 1;
  header.msg_control = control;
  header.msg_controllen = sizeof control;
  REQUIRE(::recvmsg(b.get(), &header, MSG_CMSG_CLOEXEC) == 3);  // the refused one never went
  CHECK(got[0] == std::byte{1});
  CHECK(got[2] == std::byte{3});
  cmsghdr* const rights = CMSG_FIRSTHDR(&header);
  REQUIRE(rights != nullptr);
  CHECK(rights->cmsg_len == CMSG_LEN(sizeof(int)));
  int received = -1;
  std::memcpy(&received, CMSG_DATA(rights), sizeof received);
  UniqueFd const owned(received);
  CHECK(owned.valid());
  // A full queue is EAGAIN at once, not a wait.
  ssize_t sent = 0;
  int sends = 0;
  while ((sent = cuvmm::ipc::send_datagram(a.get(), bytes)) == 3) ++sends;
  CHECK(sent == -1);
  CHECK(errno == EAGAIN);
  CHECK(sends > 0);
}

TEST_CASE("an importer with no free descriptor reports its own EMFILE, not a protocol violation by its peer",
          "[ipc][channel][limit]") {
  // Exit codes of the child: what receive() did.
  enum : int { own_error = 0, blamed_peer = 2, other_error = 3, received = 4, still_connected = 5 };
  auto const outcome = cuvmm::test::run_in_child([] {
    Listener listener(quick_policy());
    Channel client = Channel::connect(listener.socket_path(), quick_policy());
    Channel server = listener.accept();
    UniqueFd const memfd = make_memfd(8192);
    cuvmm::test::NoFreeDescriptors const none;
    client.send(fd_chunk(0, 8192, 1), memfd.get());  // sending takes no new descriptor
    try {
      (void)server.receive();
      ::_exit(received);
    } catch (const cuvmm::Error& e) {
      if (e.is(cuvmm::ErrorCode::protocol_violation)) ::_exit(blamed_peer);
      if (e.domain() != cuvmm::ErrorDomain::posix || e.code() != EMFILE || e.call() != "recvmsg" ||
          std::string(e.what()).find("could not take the descriptor") == std::string::npos)
        ::_exit(other_error);
      if (server.connected()) ::_exit(still_connected);
    }
    ::_exit(own_error);
  });
  CHECK_FALSE(outcome.signaled);
  CHECK(outcome.exit_code == own_error);
}
