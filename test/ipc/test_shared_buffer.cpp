// A shared growable buffer on the host backend, between real processes (this program started
// again for the other side): an importer follows the exporter's growth and reads its random data,
// a read-only importer's write faults, memory outlives the exporter, an exporter killed
// mid-transfer leaves a clear error; and fake exporters (in this process) that lie about offsets,
// sizes, generations or send the wrong kind of fd are refused, leaking nothing.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cuvmm/error.hpp>
#include <cuvmm/fault_injecting_backend.hpp>
#include <cuvmm/host_backend.hpp>
#include <cuvmm/ipc/shared_buffer.hpp>

#include "host_memory.hpp"
#include "ipc_children.hpp"
#include "observables.hpp"

using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::StartsWith;
using cuvmm::Access;
using cuvmm::HandleType;
using cuvmm::HostBackend;
using cuvmm::LiveCounts;
using cuvmm::UniqueFd;
using cuvmm::ipc::Channel;
using cuvmm::ipc::Listener;
using cuvmm::ipc::Message;
using cuvmm::ipc::MessageKind;
using cuvmm::ipc::PeerPolicy;
using cuvmm::ipc::SharedBufferExporter;
using cuvmm::ipc::SharedBufferImporter;
using cuvmm::test::open_fd_count;
using cuvmm::test::random_bytes;
using cuvmm::test::read_bytes;
using cuvmm::test::thrown_by;

namespace {

constexpr std::size_t G = cuvmm::test::test_granularity;
constexpr std::size_t max_bytes = 64 * G;
/// The sizes the exporter grows to and publishes, one after the other.
constexpr std::size_t steps[] = {3 * G + 123, 9 * G, 20 * G + 7, 40 * G};
constexpr std::size_t final_size = 40 * G;
constexpr std::string_view importer_case = "importer process";
constexpr std::string_view exporter_case = "exporter process";

cuvmm::GrowableOptions growable() {
  cuvmm::GrowableOptions options;
  options.max_capacity_bytes = max_bytes;
  return options;
}

PeerPolicy quick_policy() {
  PeerPolicy policy;
  policy.timeout = std::chrono::seconds(20);
  return policy;
}

std::uint64_t test_seed() { return 0xC0FFEE00ull + static_cast<std::uint64_t>(::getpid()); }

/// Grows through every step, writing the step's new bytes of `data` before publishing them.
void grow_and_publish(SharedBufferExporter& exporter, const std::vector<std::byte>& data, std::size_t step_count) {
  std::size_t written = 0;
  for (std::size_t i = 0; i < step_count; ++i) {
    exporter.reserve(steps[i]);
    std::memcpy(reinterpret_cast<void*>(exporter.data() + written), data.data() + written, steps[i] - written);
    written = steps[i];
    exporter.publish(written);
  }
}

bool same_bytes(cuvmm::Address address, const std::vector<std::byte>& data, std::size_t size) {
  return std::memcmp(reinterpret_cast<const void*>(address), data.data(), size) == 0;
}

}  // namespace

// ---- two processes -------------------------------------------------------------------------

TEST_CASE("an importer process follows the exporter's growth, reads its random data and writes back",
          "[ipc][shared][process]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend host(cuvmm::test::small_host_options());
  {
    SharedBufferExporter exporter(host, growable(), quick_policy());
    std::uint64_t const seed = test_seed();
    auto child = cuvmm::test::start_importer_child(importer_case, "read_write", exporter.socket_path(), seed);
    exporter.accept_importer();
    CHECK(exporter.importer_count() == 1);
    auto const data = random_bytes(final_size, seed);
    grow_and_publish(exporter, data, std::size(steps));
    cuvmm::test::ProgramRun const run = child.wait();
    INFO("importer output:\n" << run.output);
    REQUIRE(run.exit_status == 0);
    // The importer's reply, written through its own mapping of the same chunks.
    CHECK(read_bytes(exporter.data() + final_size - G, G) == random_bytes(G, seed + 1));
    CHECK(same_bytes(exporter.data(), data, final_size - G));
  }
  CHECK(host.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("a read-only importer process reads the data, and its write faults", "[ipc][shared][process][faults]") {
  HostBackend host(cuvmm::test::small_host_options());
  SharedBufferExporter exporter(host, growable(), quick_policy());
  std::uint64_t const seed = test_seed() + 7;
  auto child = cuvmm::test::start_importer_child(importer_case, "read_only", exporter.socket_path(), seed);
  exporter.accept_importer();
  auto const data = random_bytes(final_size, seed);
  grow_and_publish(exporter, data, std::size(steps));
  cuvmm::test::ProgramRun const run = child.wait();
  INFO("importer output:\n" << run.output);
  CHECK(run.exit_status == 0);
  CHECK(same_bytes(exporter.data(), data, final_size));  // nothing was changed
}

TEST_CASE("importer process", "[.][child]") {
  std::string const role = cuvmm::test::child_role();
  if (role.empty()) SKIP("runs only in a child process started by a shared-buffer test");
  HostBackend host(cuvmm::test::small_host_options());
  std::uint64_t const seed = std::stoull(cuvmm::test::child_setting(cuvmm::test::seed_variable));
  Access const access = role == "read_only" ? Access::read : Access::read_write;
  SharedBufferImporter importer(host, cuvmm::test::child_setting(cuvmm::test::socket_variable), access, quick_policy());
  CHECK(importer.max_capacity() == max_bytes);
  if (role == "no_free_descriptor") {
    std::optional<cuvmm::Error> refused;
    {
      cuvmm::test::NoFreeDescriptors const none;
      try {
        importer.wait_for_size(steps[0]);
      } catch (const cuvmm::Error& e) {
        refused = e;
      }
    }
    REQUIRE(refused);
    INFO(refused->what());
    CHECK_FALSE(refused->is(cuvmm::ErrorCode::protocol_violation));
    CHECK(refused->domain() == cuvmm::ErrorDomain::posix);
    CHECK(refused->code_name() == "EMFILE");
    CHECK(refused->call() == "recvmsg");
    CHECK(importer.size() == 0);  // nothing was applied
    CHECK(host.live_counts().mappings == 0);
    std::printf("cuvmm-child-result %s\n", refused->code_name().c_str());
    std::fflush(stdout);
    return;
  }
  CHECK(importer.access() == access);
  auto const data = random_bytes(final_size, seed);
  for (std::size_t const size : steps) {
    importer.wait_for_size(size);
    CHECK(importer.size() == size);
    CHECK(importer.capacity() >= size);
    // One range, of the exporter's maximum capacity, whatever was mapped into it.
    CHECK(host.live_counts().ranges == 1);
    CHECK(host.live_counts().bytes_reserved == max_bytes);
    CHECK(host.live_counts().bytes_mapped == importer.capacity());
    CHECK(same_bytes(importer.data(), data, size));
  }
  if (role == "read_only") {
    CHECK(cuvmm::test::protection_at(importer.data()) == "r--s");
    cuvmm::Address const target = importer.data() + G;
    CHECK(cuvmm::test::write_refused(target));
    CHECK_FALSE(cuvmm::test::read_refused(target));
  } else {
    cuvmm::test::write_bytes(importer.data() + final_size - G, random_bytes(G, seed + 1));
  }
}

TEST_CASE("an importer process with no free descriptor reports its own EMFILE; the exporter drops it and goes on",
          "[ipc][shared][process][limit]") {
  HostBackend host(cuvmm::test::small_host_options());
  SharedBufferExporter exporter(host, growable(), quick_policy());
  std::uint64_t const seed = test_seed() + 9;
  auto child = cuvmm::test::start_importer_child(importer_case, "no_free_descriptor", exporter.socket_path(), seed);
  exporter.accept_importer();
  auto const data = random_bytes(final_size, seed);
  grow_and_publish(exporter, data, 1);
  cuvmm::test::ProgramRun const run = child.wait();
  INFO("importer output:\n" << run.output);
  CHECK(run.exit_status == 0);
  CHECK_THAT(run.output, ContainsSubstring("cuvmm-child-result EMFILE"));
  // The importer hung up: the next announcement finds it gone and drops it; the exporter goes on.
  grow_and_publish(exporter, data, std::size(steps));
  CHECK(exporter.importer_count() == 0);
  CHECK(exporter.take_dropped_importers().size() == 1);
  CHECK(same_bytes(exporter.data(), data, final_size));
}

TEST_CASE("imported memory stays valid after the exporter process exits, until the importer releases it",
          "[ipc][shared][process]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend host(cuvmm::test::small_host_options());
  std::uint64_t const seed = test_seed() + 11;
  auto child = cuvmm::test::start_exporter_child(exporter_case, "export_and_exit", seed);
  std::string const path = child.read_line_starting(std::string(cuvmm::test::socket_marker), std::chrono::seconds(20));
  {
    SharedBufferImporter importer(host, path, Access::read_write, quick_policy());
    cuvmm::test::ProgramRun const run = child.wait();  // the exporter is gone before we even look
    INFO("exporter output:\n" << run.output);
    REQUIRE(run.exit_status == 0);
    importer.wait_for_size(final_size);  // the messages and fds it left in the socket arrive
    CHECK(importer.update() == 0);
    CHECK_FALSE(importer.connected());
    auto const data = random_bytes(final_size, seed);
    CHECK(same_bytes(importer.data(), data, final_size));
    auto const more = random_bytes(G, seed + 2);
    cuvmm::test::write_bytes(importer.data(), more);  // still ordinary read-write memory
    CHECK(read_bytes(importer.data(), G) == more);
    CHECK(host.live_counts().chunks == importer.chunk_count());
    CHECK(open_fd_count() == fd_baseline + importer.chunk_count());  // one memfd per imported chunk
  }
  CHECK(host.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("an exporter killed mid-transfer leaves the importer a clear error, the chunks it got, and no leak",
          "[ipc][shared][process]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend host(cuvmm::test::small_host_options());
  std::uint64_t const seed = test_seed() + 13;
  auto child = cuvmm::test::start_exporter_child(exporter_case, "killed_mid_transfer", seed);
  std::string const path = child.read_line_starting(std::string(cuvmm::test::socket_marker), std::chrono::seconds(20));
  {
    SharedBufferImporter importer(host, path, Access::read_write, quick_policy());
    importer.wait_for_size(steps[0]);
    cuvmm::test::ProgramRun const run = child.wait();
    INFO("exporter output:\n" << run.output);
    CHECK(run.signal == SIGKILL);
    auto const error = thrown_by<cuvmm::Error>([&] { importer.wait_for_size(steps[1]); });
    CHECK(error.is(cuvmm::ErrorCode::peer_closed));
    CHECK_THAT(error.what(), ContainsSubstring("closed the connection (it exited or was killed)"));
    CHECK_FALSE(importer.connected());
    CHECK(importer.size() == steps[0]);
    CHECK(importer.capacity() >= steps[1]);  // the second step's chunks arrived before the kill
    CHECK(same_bytes(importer.data(), random_bytes(final_size, seed), steps[0]));
    auto const again = thrown_by<cuvmm::Error>([&] { importer.wait_for_size(steps[1]); });
    CHECK_THAT(again.what(), ContainsSubstring("no longer connected"));
  }
  CHECK(host.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("exporter process", "[.][child]") {
  std::string const role = cuvmm::test::child_role();
  if (role.empty()) SKIP("runs only in a child process started by a shared-buffer test");
  HostBackend host(cuvmm::test::small_host_options());
  std::uint64_t const seed = std::stoull(cuvmm::test::child_setting(cuvmm::test::seed_variable));
  SharedBufferExporter exporter(host, growable(), quick_policy());
  std::printf("%s%s\n", cuvmm::test::socket_marker.data(), exporter.socket_path().c_str());
  std::fflush(stdout);
  exporter.accept_importer();
  auto const data = random_bytes(final_size, seed);
  if (role == "killed_mid_transfer") {
    grow_and_publish(exporter, data, 1);
    exporter.reserve(steps[1]);  // announced, never published: the process dies here
    ::raise(SIGKILL);
  }
  grow_and_publish(exporter, data, std::size(steps));
}

// ---- fake exporters in this process -----------------------------------------------------------

namespace {

using Script = std::function<void(Channel&)>;

Message hello_of(std::size_t bytes) { return cuvmm::ipc::hello_message(bytes); }

Message chunk_at(std::size_t offset, std::size_t size, std::size_t generation) {
  return cuvmm::ipc::chunk_message(HandleType::posix_fd, offset, size, generation);
}

/// A memfd of `size` bytes sealed against shrinking, as a real chunk's is (unless `sealed` is false).
UniqueFd memfd_of(std::size_t size, bool sealed = true) {
  UniqueFd fd(::memfd_create("fake-chunk", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (fd.valid() && ::ftruncate(fd.get(), static_cast<off_t>(size)) == 0 && sealed)
    (void)::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
  return fd;
}

/// Plays `script` as the exporter (on a thread) and returns what the importer threw.
std::string refusal_by(HostBackend& host, const Script& script) {
  Listener listener(quick_policy());
  std::jthread exporter([&] {
    try {
      Channel channel = listener.accept();
      script(channel);
    } catch (const std::exception&) {  // the importer may hang up first: the script just stops
    }
  });
  std::string what = "(nothing was refused)";
  try {
    SharedBufferImporter importer(host, listener.socket_path(), Access::read_write, quick_policy());
    importer.wait_for_size(importer.max_capacity());
  } catch (const cuvmm::Error& error) {
    what = error.what();
  }
  exporter.join();
  return what;
}

}  // namespace

TEST_CASE("an importer refuses a lying exporter: offsets, sizes, generations, fds and order", "[ipc][shared][hostile]") {
  HostBackend host(cuvmm::test::small_host_options());
  std::size_t const fd_baseline = open_fd_count();
  auto const with_fd = [](Message hello, Message chunk, UniqueFd fd) -> Script {
    auto shared_fd = std::make_shared<UniqueFd>(std::move(fd));
    return [hello, chunk, shared_fd](Channel& c) {
      c.send(hello);
      c.send(chunk, shared_fd->get());
    };
  };
  CHECK_THAT(refusal_by(host, with_fd(hello_of(max_bytes), chunk_at(max_bytes, G, 0), memfd_of(G))),
             ContainsSubstring("is outside the exporter's range of 4194304 bytes"));
  CHECK_THAT(refusal_by(host, with_fd(hello_of(max_bytes), chunk_at(max_bytes - G, 2 * G, 0), memfd_of(2 * G))),
             ContainsSubstring("outside the exporter's range"));
  CHECK_THAT(refusal_by(host, with_fd(hello_of(max_bytes), chunk_at(G, G, 0), memfd_of(G))),
             ContainsSubstring("chunk at offset 65536, expected 0"));
  CHECK_THAT(refusal_by(host, with_fd(hello_of(max_bytes), chunk_at(0, G, 5), memfd_of(G))),
             ContainsSubstring("chunk generation 5, expected 0"));
  CHECK_THAT(refusal_by(host, with_fd(hello_of(max_bytes), chunk_at(0, G, 0), memfd_of(2 * G))),
             ContainsSubstring("the chunk is 131072 bytes, not the 65536 announced"));
  CHECK_THAT(refusal_by(host, with_fd(hello_of(max_bytes), chunk_at(0, G, 0), memfd_of(G, false))),
             ContainsSubstring("not sealed against shrinking"));
  int pipe_ends[2] = {-1, -1};
  REQUIRE(::pipe2(pipe_ends, O_CLOEXEC) == 0);
  UniqueFd const pipe_write(pipe_ends[1]);
  CHECK_THAT(refusal_by(host, with_fd(hello_of(max_bytes), chunk_at(0, G, 0), UniqueFd(pipe_ends[0]))),
             ContainsSubstring("not a memfd (not even a regular file)"));
  {
    std::string file_name = (std::filesystem::current_path() / "cuvmm-regular-file-XXXXXX").string();
    UniqueFd file(::mkstemp(file_name.data()));
    REQUIRE(file.valid());
    ::unlink(file_name.c_str());
    REQUIRE(::ftruncate(file.get(), static_cast<off_t>(G)) == 0);
    // A file on disk is no memfd; on a tmpfs it is shared memory that was never sealed.
    CHECK_THAT(refusal_by(host, with_fd(hello_of(max_bytes), chunk_at(0, G, 0), std::move(file))),
               ContainsSubstring("a regular file, not a memfd") || ContainsSubstring("not sealed against shrinking"));
  }
  cuvmm::FabricHandle some_bytes;
  some_bytes.data[0] = std::byte{1};
  Message const fabric = cuvmm::ipc::chunk_message(HandleType::fabric, 0, G, 0, some_bytes);
  CHECK_THAT(refusal_by(host, [&](Channel& c) { c.send(hello_of(max_bytes)); c.send(fabric); }),
             ContainsSubstring("fabric handles travel over MPI"));
  Message const too_big = cuvmm::ipc::size_message(G, 0);
  CHECK_THAT(refusal_by(host, [&](Channel& c) { c.send(hello_of(max_bytes)); c.send(too_big); }),
             ContainsSubstring("size 65536 is beyond the 0 bytes mapped"));
  CHECK_THAT(refusal_by(host, [&](Channel& c) { c.send(hello_of(max_bytes)); c.send(hello_of(max_bytes)); }),
             ContainsSubstring("a second hello"));
  CHECK_THAT(refusal_by(host, [&](Channel& c) { c.send(too_big); }), ContainsSubstring("is a size, not a hello"));
  CHECK_THAT(refusal_by(host, [&](Channel& c) { c.send(hello_of(G + 4096)); }),
             ContainsSubstring("not a positive multiple of the granularity"));
  CHECK_THAT(refusal_by(host, [&](Channel& c) { c.send(hello_of(0)); }), ContainsSubstring("a range of 0 bytes"));
  CHECK(host.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline + 1);  // the pipe's write end, closed below
}

TEST_CASE("after a refused chunk the importer keeps what it had mapped, and stops listening", "[ipc][shared][hostile]") {
  HostBackend host(cuvmm::test::small_host_options());
  std::size_t const fd_baseline = open_fd_count();
  {
    Listener listener(quick_policy());
    auto const data = random_bytes(G, 21);
    std::jthread exporter([&] {
      try {
        Channel c = listener.accept();
        UniqueFd const good = memfd_of(G);
        (void)::pwrite(good.get(), data.data(), G, 0);
        c.send(hello_of(max_bytes));
        c.send(chunk_at(0, G, 0), good.get());
        c.send(cuvmm::ipc::size_message(G, 1));
        c.send(chunk_at(5 * G, G, 1), good.get());  // a gap: refused
      } catch (const std::exception&) {
      }
    });
    SharedBufferImporter importer(host, listener.socket_path(), Access::read_write, quick_policy());
    importer.wait_for_size(G);
    auto const error = thrown_by<cuvmm::Error>([&] { importer.wait_for_size(2 * G); });
    exporter.join();
    CHECK_THAT(error.what(), ContainsSubstring("chunk at offset 327680, expected 65536"));
    CHECK_FALSE(importer.connected());
    CHECK(importer.capacity() == G);
    CHECK(importer.chunk_count() == 1);
    CHECK(read_bytes(importer.data(), G) == data);
    CHECK(host.live_counts() == LiveCounts{1, 1, 1, max_bytes, G, G});
  }
  CHECK(host.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
}

// ---- one process, several importers ----------------------------------------------------------

TEST_CASE("importers that join late get every chunk so far; one that leaves is dropped, the rest follow",
          "[ipc][shared]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend host(cuvmm::test::small_host_options());
  {
    SharedBufferExporter exporter(host, growable(), quick_policy());
    auto const data = random_bytes(final_size, 31);
    auto const join = [&] {
      std::optional<SharedBufferImporter> importer;
      std::jthread connect([&] { importer.emplace(host, exporter.socket_path(), Access::read_write, quick_policy()); });
      exporter.accept_importer();
      connect.join();
      return std::move(*importer);
    };
    SharedBufferImporter early = join();
    grow_and_publish(exporter, data, 2);
    std::optional<SharedBufferImporter> late = join();
    late->update();
    CHECK(late->size() == steps[1]);
    CHECK(late->chunk_count() == exporter.storage().chunk_count());
    CHECK(same_bytes(late->data(), data, steps[1]));
    CHECK(exporter.importer_count() == 2);

    late.reset();  // leaves: the exporter finds out when it next announces
    exporter.reserve(steps[3]);
    exporter.publish(steps[2]);
    CHECK(exporter.importer_count() == 1);
    std::vector<SharedBufferExporter::DroppedImporter> const dropped = exporter.take_dropped_importers();
    REQUIRE(dropped.size() == 1);
    CHECK(dropped[0].code == cuvmm::ErrorCode::peer_closed);
    CHECK_THAT(dropped[0].reason, ContainsSubstring("sendmsg failed: EPIPE") || ContainsSubstring("sendmsg failed: ECONNRESET"));
    early.wait_for_size(steps[2]);
    CHECK(early.capacity() == exporter.capacity());
    std::memcpy(reinterpret_cast<void*>(exporter.data() + steps[1]), data.data() + steps[1], steps[2] - steps[1]);
    CHECK(same_bytes(early.data(), data, steps[2]));
  }
  CHECK(host.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("a failed growth step of the exporter announces nothing and leaks nothing, at every k",
          "[ipc][shared][faults]") {
  HostBackend host(cuvmm::test::small_host_options());
  cuvmm::FaultInjectingBackend faulty(host);
  SharedBufferExporter exporter(faulty, growable(), quick_policy());
  std::optional<SharedBufferImporter> importer;
  std::jthread connect([&] { importer.emplace(host, exporter.socket_path(), Access::read_write, quick_policy()); });
  exporter.accept_importer();
  connect.join();
  exporter.reserve(steps[0]);
  importer->update();
  std::size_t const chunks_before = importer->chunk_count();
  LiveCounts const live_before = host.live_counts();
  std::size_t const fds_before = open_fd_count();
  std::size_t k = 1;
  for (;; ++k) {
    CAPTURE(k);
    faulty.fail_nth(k);
    try {
      exporter.reserve(steps[2]);
    } catch (const cuvmm::Error& error) {
      CHECK(error.context() == "injected fault");
    }
    if (!faulty.fired()) break;
    CHECK(importer->update() == 0);  // nothing was announced
    CHECK(importer->chunk_count() == chunks_before);
    CHECK(host.live_counts() == live_before);
    CHECK(open_fd_count() == fds_before);
  }
  CHECK(k > 2);
  importer->update();
  CHECK(importer->capacity() == exporter.capacity());
  CHECK(importer->connected());
}

TEST_CASE("an exporter whose allow-list leaves out the importer's uid refuses it; the importer learns why",
          "[ipc][shared][hostile]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend host(cuvmm::test::small_host_options());
  {
    PeerPolicy others_only = quick_policy();
    others_only.allowed_uids = {::geteuid() + 1};
    SharedBufferExporter exporter(host, growable(), others_only);
    exporter.reserve(steps[0]);
    std::string importer_error = "(the importer was not refused)";
    std::jthread importer([&] {
      try {
        SharedBufferImporter refused(host, exporter.socket_path(), Access::read_write, quick_policy());
      } catch (const cuvmm::Error& error) {
        importer_error = error.what();
      }
    });
    auto const error = thrown_by<cuvmm::Error>([&] { exporter.accept_importer(); });
    importer.join();
    CHECK(error.call() == "SO_PEERCRED");
    CHECK_THAT(error.what(), ContainsSubstring("policy allows the allow-list " + std::to_string(::geteuid() + 1)));
    CHECK_THAT(importer_error, ContainsSubstring("closed the connection"));
    CHECK(exporter.importer_count() == 0);
    CHECK(host.live_counts().ranges == 1);  // the exporter's own; the refused importer reserved none
  }
  CHECK(host.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("an importer whose backend fails at any call keeps what it had mapped and leaks nothing, at every k",
          "[ipc][shared][faults]") {
  HostBackend host(cuvmm::test::small_host_options());
  std::size_t const fd_baseline = open_fd_count();
  auto const data = random_bytes(final_size, 41);
  std::size_t k = 1;
  for (;; ++k) {
    CAPTURE(k);
    cuvmm::FaultInjectingBackend faulty(host);
    {
      SharedBufferExporter exporter(host, growable(), quick_policy());
      std::optional<SharedBufferImporter> importer;
      std::jthread connect([&] { importer.emplace(faulty, exporter.socket_path(), Access::read_write, quick_policy()); });
      exporter.accept_importer();
      connect.join();
      REQUIRE(importer.has_value());
      grow_and_publish(exporter, data, 3);
      faulty.fail_nth(k);
      bool failed = false;
      try {
        importer->wait_for_size(steps[2]);
      } catch (const cuvmm::Error& error) {
        failed = true;
        CHECK(error.context() == "injected fault");
      }
      CHECK(failed == faulty.fired());
      // Whatever it mapped before the failure is whole chunks, side by side, holding the data.
      CHECK(host.live_counts().mappings == importer->chunk_count() + exporter.storage().chunk_count());
      CHECK(same_bytes(importer->data(), data, std::min(importer->capacity(), steps[2])));
      CHECK(importer->connected() == !failed);
      if (!failed) CHECK(importer->capacity() == exporter.capacity());
    }
    CHECK(host.live_counts() == LiveCounts{});
    CHECK(open_fd_count() == fd_baseline);
    if (!faulty.fired()) break;
  }
  CHECK(k > 4);  // at least import, chunk_info, map and set_access of the first chunk were failed
}

// ---- importers that read slowly or not at all --------------------------------------------------

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::size_t many = 600;  // more messages than a unix socket's buffer holds (~275)

PeerPolicy impatient_policy() {
  PeerPolicy policy = quick_policy();
  policy.send_timeout = 1000ms;  // long enough that a reading thread is never starved that long, even under load
  return policy;
}

/// One chunk per granule, so reserve(n * G) announces n chunks.
cuvmm::GrowableOptions granule_chunks() {
  cuvmm::GrowableOptions options;
  options.max_capacity_bytes = 1024 * G;
  options.max_chunk_bytes = G;
  return options;
}

/// Runs `work` on a thread and waits up to `guard` for it. If it is still running then, calls
/// `unblock` (which must make it return) and reports the hang: the test fails instead of hanging.
/// Returns how long `work` took, or nothing if it hung.
std::optional<Clock::duration> bounded_run(const std::function<void()>& work, std::chrono::seconds guard,
                                           const std::function<void()>& unblock) {
  std::promise<void> done;
  std::future<void> finished = done.get_future();
  Clock::time_point const start = Clock::now();
  std::jthread worker([&] {
    try {
      work();
      done.set_value();
    } catch (...) {
      done.set_exception(std::current_exception());
    }
  });
  if (finished.wait_for(guard) != std::future_status::ready) {
    unblock();
    worker.join();
    return std::nullopt;
  }
  Clock::duration const took = Clock::now() - start;
  finished.get();  // rethrows what `work` threw
  return took;
}

/// Reads every message `channel` gets, until `count` arrived or the channel fails.
struct MessageCollector {
  std::vector<Message> messages;
  std::size_t fds = 0;
  std::string stopped_by;
  void run(Channel& channel, std::size_t count, std::chrono::milliseconds pause) {
    try {
      while (messages.size() < count) {
        cuvmm::ipc::Received const received = channel.receive();
        messages.push_back(received.message);
        if (received.fd.valid()) ++fds;
        if (pause.count() > 0) std::this_thread::sleep_for(pause);
      }
    } catch (const std::exception& error) {
      stopped_by = error.what();
    }
  }
};

/// The messages an importer that joined an empty exporter gets for reserve(many * G) and then
/// publish(1), publish(2), ... publish(many).
std::vector<Message> expected_stream() {
  std::vector<Message> expected{cuvmm::ipc::hello_message(1024 * G, 0), cuvmm::ipc::size_message(0, 0)};
  for (std::size_t i = 0; i < many; ++i) expected.push_back(chunk_at(i * G, G, i));
  for (std::size_t i = 1; i <= many; ++i) expected.push_back(cuvmm::ipc::size_message(i, many));
  return expected;
}

void grow_and_publish_many(SharedBufferExporter& exporter) {
  exporter.reserve(many * G);
  for (std::size_t i = 1; i <= many; ++i) exporter.publish(i);
}

}  // namespace

TEST_CASE("an importer that never reads is dropped after send_timeout: reserve and publish return, the others get "
          "every message in order",
          "[ipc][shared][hang]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend host(cuvmm::test::small_host_options());
  {
    PeerPolicy const policy = impatient_policy();
    SharedBufferExporter exporter(host, granule_chunks(), policy);
    Channel stuck = Channel::connect(exporter.socket_path(), policy);  // connects, never reads
    exporter.accept_importer();
    Channel reader = Channel::connect(exporter.socket_path(), policy);
    exporter.accept_importer();
    std::vector<Message> const expected = expected_stream();
    MessageCollector collector;
    std::jthread reading([&] { collector.run(reader, expected.size(), 0ms); });

    auto const took = bounded_run([&] { grow_and_publish_many(exporter); }, 20s, [&] { stuck.close(); });
    CHECK(took.has_value());  // before the fix: sendmsg to `stuck` blocked for good
    if (took) CHECK(*took < policy.send_timeout + 4s);
    reading.join();
    CHECK(collector.stopped_by == "");
    CHECK(exporter.importer_count() == 1);
    std::vector<SharedBufferExporter::DroppedImporter> const dropped = exporter.take_dropped_importers();
    REQUIRE(dropped.size() == 1);
    CHECK(dropped[0].peer.pid == ::getpid());
    CHECK(dropped[0].peer.uid == ::geteuid());
    CHECK_THAT(dropped[0].reason, ContainsSubstring("took no message within 1000 ms (PeerPolicy::send_timeout)"));
    CHECK(dropped[0].code == cuvmm::ErrorCode::timed_out);
    CHECK(exporter.take_dropped_importers().empty());  // taken once
    CHECK(collector.messages == expected);
    CHECK(collector.fds == many);
  }
  CHECK(host.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("a slow importer that keeps reading gets every message in order and is not dropped",
          "[ipc][shared][hang]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend host(cuvmm::test::small_host_options());
  {
    PeerPolicy const policy = impatient_policy();
    SharedBufferExporter exporter(host, granule_chunks(), policy);
    Channel reader = Channel::connect(exporter.socket_path(), policy);
    exporter.accept_importer();
    std::vector<Message> const expected = expected_stream();
    MessageCollector collector;
    // ~1 ms per message: the exporter waits for room many times, never a second without progress.
    std::jthread reading([&] { collector.run(reader, expected.size(), 1ms); });
    auto const took = bounded_run([&] { grow_and_publish_many(exporter); }, 30s, [&] { reader.close(); });
    CHECK(took.has_value());
    reading.join();
    CHECK(collector.stopped_by == "");
    CHECK(exporter.importer_count() == 1);
    CHECK(exporter.take_dropped_importers().empty());
    CHECK(collector.messages == expected);
    CHECK(collector.fds == many);
  }
  CHECK(host.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("accept_importer with more chunks than a socket holds: a newcomer that never reads is refused after "
          "send_timeout, one that reads gets them all",
          "[ipc][shared][hang]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend host(cuvmm::test::small_host_options());
  {
    PeerPolicy const policy = impatient_policy();
    SharedBufferExporter exporter(host, granule_chunks(), policy);
    exporter.reserve(many * G);
    exporter.publish(many * G);
    Channel stuck = Channel::connect(exporter.socket_path(), policy);
    std::string refusal = "(accept_importer did not throw)";
    auto const took = bounded_run(
        [&] {
          try {
            exporter.accept_importer();
          } catch (const cuvmm::Error& error) {
            refusal = error.what();
          }
        },
        20s, [&] { stuck.close(); });
    CHECK(took.has_value());  // before the fix: blocked for good
    if (took) CHECK(*took < policy.send_timeout + 4s);
    CHECK_THAT(refusal, StartsWith("cuvmm::ipc::SharedBufferExporter::accept_importer failed: timed out; ") &&
                            ContainsSubstring("took no message within 1000 ms") &&
                            ContainsSubstring("the importer was not kept"));
    CHECK(exporter.importer_count() == 0);
    stuck.close();

    std::optional<SharedBufferImporter> importer;
    std::jthread reading([&] {
      importer.emplace(host, exporter.socket_path(), Access::read, policy);
      importer->wait_for_size(many * G);
    });
    auto const accepted = bounded_run([&] { exporter.accept_importer(); }, 20s, [] {});
    reading.join();
    CHECK(accepted.has_value());
    CHECK(exporter.importer_count() == 1);
    REQUIRE(importer.has_value());
    CHECK(importer->chunk_count() == many);
    CHECK(importer->size() == many * G);
  }
  CHECK(host.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
}

// ---- what an importer accepts from an exporter's hello, and an empty message ------------------

namespace {

/// Plays `script` as the exporter (on a thread) while an importer with `limit` connects and runs
/// `body`; returns the cuvmm::Error the importer threw (fails the test if it threw none).
cuvmm::Error importer_error(HostBackend& host, const Script& script, std::size_t limit,
                            const std::function<void(SharedBufferImporter&)>& body = {}) {
  Listener listener(quick_policy());
  std::jthread exporter([&] {
    try {
      Channel channel = listener.accept();
      script(channel);
    } catch (const std::exception&) {
    }
  });
  return thrown_by<cuvmm::Error>([&] {
    SharedBufferImporter importer(host, listener.socket_path(), Access::read_write, quick_policy(), 0, limit);
    if (body) body(importer);
  });
}

/// An exporter that says hello with `range_bytes` and then waits for the importer to hang up.
Script hello_then_wait(std::uint64_t range_bytes) {
  return [range_bytes](Channel& c) {
    c.send(hello_of(range_bytes));
    (void)c.receive();  // returns (throws) when the importer hangs up
  };
}

}  // namespace

TEST_CASE("an importer refuses an exporter's range above its limit, naming both sizes, and reserves nothing",
          "[ipc][shared][hostile][limit]") {
  HostBackend host(cuvmm::test::small_host_options());
  std::size_t const fd_baseline = open_fd_count();
  auto const over_default = importer_error(host, hello_then_wait(std::uint64_t{1} << 46), cuvmm::ipc::default_max_import_bytes);
  CHECK(over_default.is(cuvmm::ErrorCode::limit_exceeded));
  CHECK(over_default.context() ==
        "the exporter's range is 70368744177664 bytes, more than this importer's limit of 1099511627776 bytes "
        "(max_reservation_bytes); nothing was reserved");
  auto const over_own = importer_error(host, hello_then_wait(max_bytes), 8 * G);
  CHECK(over_own.is(cuvmm::ErrorCode::limit_exceeded));
  CHECK_THAT(over_own.what(), ContainsSubstring("range is 4194304 bytes, more than this importer's limit of 524288 bytes"));
  CHECK(cuvmm::ipc::default_max_import_bytes == std::size_t{1} << 40);
  CHECK(host.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("an exporter's range of 2^63 bytes is a cuvmm::Error, never a bare std::bad_alloc", "[ipc][shared][hostile][limit]") {
  HostBackend host(cuvmm::test::small_host_options());
  std::size_t const fd_baseline = open_fd_count();
  std::uint64_t const huge = std::uint64_t{1} << 63;
  auto const limited = importer_error(host, hello_then_wait(huge), cuvmm::ipc::default_max_import_bytes);
  CHECK(limited.is(cuvmm::ErrorCode::limit_exceeded));
  CHECK_THAT(limited.what(), ContainsSubstring("range is 9223372036854775808 bytes"));
  // With no limit at all, the address space cannot be had: still a cuvmm::Error, with the system's code.
  bool bad_alloc_escaped = false;
  try {
    auto const unlimited = importer_error(host, hello_then_wait(huge), SIZE_MAX);
    CHECK(unlimited.domain() == cuvmm::ErrorDomain::posix);
    CHECK(unlimited.code_name() == "ENOMEM");
    CHECK_THAT(unlimited.context(),
               ContainsSubstring("reserving the exporter's range of 9223372036854775808 bytes (address space exhausted)"));
  } catch (const std::bad_alloc&) {
    bad_alloc_escaped = true;
  }
  CHECK_FALSE(bad_alloc_escaped);
  CHECK(host.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("an empty message is a protocol violation, not the peer closing; update() throws instead of stopping",
          "[ipc][shared][hostile]") {
  HostBackend host(cuvmm::test::small_host_options());
  std::size_t const fd_baseline = open_fd_count();
  Script const empty_after_hello = [](Channel& c) {
    c.send(hello_of(max_bytes));
    REQUIRE(::send(c.native_handle(), nullptr, 0, MSG_NOSIGNAL) == 0);  // a datagram of 0 bytes
    (void)c.receive();  // stay connected until the importer hangs up
  };
  bool connected_after = true;
  auto const error = importer_error(host, empty_after_hello, cuvmm::ipc::default_max_import_bytes,
                                    [&](SharedBufferImporter& importer) {
                                      // update() finds it once it has arrived: wait for that.
                                      for (int i = 0; i < 200 && importer.connected(); ++i) {
                                        try {
                                          (void)importer.update();
                                        } catch (...) {
                                          connected_after = importer.connected();
                                          throw;
                                        }
                                        std::this_thread::sleep_for(5ms);
                                      }
                                    });
  CHECK(error.is(cuvmm::ErrorCode::protocol_violation));
  CHECK(error.code_name() == "protocol violation");
  CHECK_THAT(error.what(), ContainsSubstring("refused: an empty message (0 bytes, 0 descriptors)"));
  CHECK_FALSE(connected_after);
  CHECK(host.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
}
