// UniqueFd: sole ownership of a descriptor, checked against the process's real table of open fds.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <type_traits>

#include <catch2/catch_test_macros.hpp>

#include <cuvmm/error.hpp>
#include <cuvmm/unique_fd.hpp>

#include "host_memory.hpp"
#include "observables.hpp"

using cuvmm::UniqueFd;
using cuvmm::test::open_fd_count;

static_assert(std::is_nothrow_move_constructible_v<UniqueFd>);
static_assert(std::is_nothrow_move_assignable_v<UniqueFd>);
static_assert(!std::is_copy_constructible_v<UniqueFd>);
static_assert(!std::is_copy_assignable_v<UniqueFd>);
static_assert(!std::is_convertible_v<int, UniqueFd>, "taking ownership of an int must be explicit");

namespace {

int open_dev_null() {
  int const fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  return fd;
}

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

}  // namespace

TEST_CASE("a UniqueFd closes its descriptor when it is destroyed", "[unique_fd]") {
  std::size_t const baseline = open_fd_count();
  int number = -1;
  {
    UniqueFd const fd(open_dev_null());
    number = fd.get();
    CHECK(fd.valid());
    CHECK(static_cast<bool>(fd));
    CHECK(open_fd_count() == baseline + 1);
  }
  CHECK(open_fd_count() == baseline);
  CHECK_FALSE(is_open(number));
}

TEST_CASE("a default UniqueFd owns nothing", "[unique_fd]") {
  UniqueFd const fd;
  CHECK(fd.get() == -1);
  CHECK_FALSE(fd.valid());
  CHECK_FALSE(static_cast<bool>(fd));
}

TEST_CASE("moving a UniqueFd hands the descriptor over and empties the source", "[unique_fd]") {
  std::size_t const baseline = open_fd_count();
  UniqueFd source(open_dev_null());
  int const number = source.get();

  UniqueFd target(std::move(source));
  CHECK(source.get() == -1);  // NOLINT(bugprone-use-after-move): the moved-from state is the contract
  CHECK(target.get() == number);
  CHECK(open_fd_count() == baseline + 1);

  SECTION("move assignment closes what the target owned before") {
    UniqueFd other(open_dev_null());
    int const other_number = other.get();
    CHECK(open_fd_count() == baseline + 2);
    other = std::move(target);
    CHECK(other.get() == number);
    CHECK(target.get() == -1);  // NOLINT(bugprone-use-after-move)
    CHECK(open_fd_count() == baseline + 1);
    CHECK(is_open(number));
    if (other_number != number) CHECK_FALSE(is_open(other_number));
  }
}

TEST_CASE("release gives the descriptor to the caller without closing it", "[unique_fd]") {
  std::size_t const baseline = open_fd_count();
  int number = -1;
  {
    UniqueFd fd(open_dev_null());
    int const expected = fd.get();
    number = fd.release();
    CHECK(number == expected);
    CHECK(fd.get() == -1);
    CHECK_FALSE(fd.valid());
  }
  CHECK(is_open(number));
  CHECK(open_fd_count() == baseline + 1);
  ::close(number);
  CHECK(open_fd_count() == baseline);
}

TEST_CASE("reset closes the owned descriptor and takes the new one", "[unique_fd]") {
  std::size_t const baseline = open_fd_count();
  UniqueFd fd(open_dev_null());
  int const first = fd.get();
  int const second = open_dev_null();
  CHECK(open_fd_count() == baseline + 2);

  fd.reset(second);
  CHECK(fd.get() == second);
  CHECK_FALSE(is_open(first));
  CHECK(is_open(second));
  CHECK(open_fd_count() == baseline + 1);

  fd.reset();
  CHECK(fd.get() == -1);
  CHECK_FALSE(is_open(second));
  CHECK(open_fd_count() == baseline);
}

TEST_CASE("duplicate opens a close-on-exec descriptor of the same open file", "[unique_fd]") {
  std::size_t const baseline = open_fd_count();
  UniqueFd const original(::memfd_create("unique-fd-test", 0));  // deliberately not close-on-exec
  REQUIRE(original.valid());
  REQUIRE(::ftruncate(original.get(), 8192) == 0);
  REQUIRE((::fcntl(original.get(), F_GETFD) & FD_CLOEXEC) == 0);

  UniqueFd const copy = original.duplicate();
  CHECK(copy.valid());
  CHECK(copy.get() != original.get());
  CHECK((::fcntl(copy.get(), F_GETFD) & FD_CLOEXEC) == FD_CLOEXEC);
  CHECK(open_fd_count() == baseline + 2);

  // The same open file description: a seek through one moves the offset seen by the other.
  REQUIRE(::lseek(original.get(), 4321, SEEK_SET) == 4321);
  CHECK(::lseek(copy.get(), 0, SEEK_CUR) == 4321);
  struct stat a {};
  struct stat b {};
  REQUIRE(::fstat(original.get(), &a) == 0);
  REQUIRE(::fstat(copy.get(), &b) == 0);
  CHECK(a.st_ino == b.st_ino);
  CHECK(a.st_dev == b.st_dev);
}

TEST_CASE("duplicating an empty UniqueFd throws cuvmm::Error", "[unique_fd]") {
  UniqueFd const empty;
  auto const error = cuvmm::test::thrown_by<cuvmm::Error>([&] { (void)empty.duplicate(); });
  CHECK(error.call() == "UniqueFd::duplicate");
  CHECK(error.context() == "no descriptor is owned");
}
