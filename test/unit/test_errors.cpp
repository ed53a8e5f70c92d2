// The error hierarchy: what each type is, what its message says, and that copies share details.
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <cuvmm/source_location.hpp>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cuvmm/error.hpp>

#include "host_memory.hpp"

using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::StartsWith;

namespace {

// The file name format_error prints: the last path component.
constexpr const char* this_file = "test_errors.cpp";

std::string at_line(std::uint_least32_t line) { return std::string(" [") + this_file + ":" + std::to_string(line) + "]"; }

cuvmm::ErrorDetails driver_failure(cuvmm::source_location where = cuvmm::source_location::current()) {
  cuvmm::ErrorDetails details;
  details.call = "cuMemCreate";
  details.domain = cuvmm::ErrorDomain::cuda;
  details.code = 2;
  details.code_name = "CUDA_ERROR_OUT_OF_MEMORY";
  details.code_text = "out of memory";
  details.context = "creating a 2 MiB chunk on device 0";
  details.where = where;
  return details;
}

}  // namespace

static_assert(std::is_base_of_v<std::runtime_error, cuvmm::Error>);
static_assert(std::is_base_of_v<cuvmm::Error, cuvmm::Unsupported>);
static_assert(std::is_base_of_v<std::length_error, cuvmm::CapacityExceeded>);  // as std::vector past max_size()
static_assert(!std::is_base_of_v<cuvmm::Error, cuvmm::CapacityExceeded>);  // one std::exception base only
static_assert(std::is_base_of_v<std::bad_alloc, cuvmm::OutOfMemory>);
static_assert(!std::is_base_of_v<cuvmm::Error, cuvmm::OutOfMemory>);
static_assert(!std::is_base_of_v<std::runtime_error, cuvmm::OutOfMemory>);
static_assert(std::is_nothrow_copy_constructible_v<cuvmm::Error>);
static_assert(std::is_nothrow_copy_constructible_v<cuvmm::Unsupported>);
static_assert(std::is_nothrow_copy_constructible_v<cuvmm::CapacityExceeded>);
static_assert(std::is_nothrow_copy_constructible_v<cuvmm::OutOfMemory>);

TEST_CASE("an error message carries the call, the code's name, number and text, the context and file:line",
          "[errors]") {
  std::uint_least32_t const line = cuvmm::source_location::current().line() + 1;
  cuvmm::Error const error(driver_failure());

  CHECK(std::string(error.what()) ==
        "cuMemCreate failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory; creating a 2 MiB chunk on device 0" +
            at_line(line));
  CHECK(error.call() == "cuMemCreate");
  CHECK(error.domain() == cuvmm::ErrorDomain::cuda);
  CHECK(error.code() == 2);
  CHECK(error.code_name() == "CUDA_ERROR_OUT_OF_MEMORY");
  CHECK(error.code_text() == "out of memory");
  CHECK(error.context() == "creating a 2 MiB chunk on device 0");
  CHECK(error.where().line() == line);
}

TEST_CASE("an invalid-argument error names the call and the context, without a code number in its message", "[errors]") {
  std::uint_least32_t line = 0;
  auto const error = cuvmm::test::thrown_by<cuvmm::Error>([&] {
    line = cuvmm::source_location::current().line() + 1;
    cuvmm::throw_invalid_argument("HostBackend::map", "size 4096 is not the chunk's size 65536");
  });

  CHECK(std::string(error.what()) ==
        "HostBackend::map failed: invalid argument; size 4096 is not the chunk's size 65536" + at_line(line));
  CHECK(error.domain() == cuvmm::ErrorDomain::cuvmm);
  CHECK(error.code() == static_cast<int>(cuvmm::ErrorCode::invalid_argument));
  CHECK(error.cuvmm_code() == cuvmm::ErrorCode::invalid_argument);
  CHECK(error.is(cuvmm::ErrorCode::invalid_argument));
  CHECK(error.code_name() == "invalid argument");
}

TEST_CASE("OutOfMemory is a std::bad_alloc with the same details, and not a cuvmm::Error", "[errors]") {
  std::uint_least32_t const line = cuvmm::source_location::current().line() + 1;
  cuvmm::ErrorDetails const details = driver_failure();

  bool caught_as_bad_alloc = false;
  bool caught_as_error = false;
  try {
    try {
      throw cuvmm::OutOfMemory(details);
    } catch (const cuvmm::Error&) {
      caught_as_error = true;
    }
  } catch (const std::bad_alloc& caught) {
    caught_as_bad_alloc = true;
    CHECK(std::string(caught.what()) == "out of memory: " + cuvmm::format_error(details));
    CHECK_THAT(caught.what(), ContainsSubstring("CUDA_ERROR_OUT_OF_MEMORY (2)") &&
                                  ContainsSubstring(at_line(line)));
    auto const* oom = dynamic_cast<const cuvmm::OutOfMemory*>(&caught);
    REQUIRE(oom != nullptr);
    CHECK(oom->call() == "cuMemCreate");
    CHECK(oom->domain() == cuvmm::ErrorDomain::cuda);
    CHECK(oom->code() == 2);
    CHECK(oom->code_name() == "CUDA_ERROR_OUT_OF_MEMORY");
    CHECK(oom->context() == "creating a 2 MiB chunk on device 0");
    CHECK(oom->where().line() == line);
  }
  CHECK(caught_as_bad_alloc);
  CHECK_FALSE(caught_as_error);
}

TEST_CASE("every cuvmm error is caught as std::exception", "[errors]") {
  auto const message_of = [](auto&& thrower) -> std::string {
    try {
      thrower();
    } catch (const std::exception& caught) {
      return caught.what();
    }
    return "nothing was thrown";
  };
  CHECK_THAT(message_of([] { throw cuvmm::Error(driver_failure()); }), StartsWith("cuMemCreate failed"));
  CHECK_THAT(message_of([] { throw cuvmm::OutOfMemory(driver_failure()); }), StartsWith("out of memory: "));
  CHECK_THAT(message_of([] { throw cuvmm::CapacityExceeded(3, 2); }), StartsWith("grow failed"));
  CHECK_THAT(message_of([] { throw cuvmm::Unsupported("multicast", "none", driver_failure()); }),
             StartsWith("unsupported: multicast"));
}

TEST_CASE("ErrorDetails filled by hand carry no location and format_error prints none", "[errors]") {
  cuvmm::ErrorDetails details;
  details.call = "cuMemMap";
  details.context = "mapping 2 MiB at offset 0";

  CHECK(std::string(details.where.file_name()).empty());
  CHECK(details.where.line() == 0);
  CHECK(cuvmm::format_error(details) == "cuMemMap failed; mapping 2 MiB at offset 0");
}

TEST_CASE("format_bytes prints the largest exact unit, else one decimal, else bytes", "[errors]") {
  CHECK(cuvmm::format_bytes(0) == "0 bytes");
  CHECK(cuvmm::format_bytes(512) == "512 bytes");
  CHECK(cuvmm::format_bytes(1023) == "1023 bytes");
  CHECK(cuvmm::format_bytes(4096) == "4 KiB");
  CHECK(cuvmm::format_bytes(2 * cuvmm::MiB) == "2 MiB");
  CHECK(cuvmm::format_bytes(1536 * cuvmm::MiB) == "1.5 GiB");  // not "1536 MiB": the largest unit it reaches
  CHECK(cuvmm::format_bytes(3 * cuvmm::GiB) == "3 GiB");
  CHECK(cuvmm::format_bytes(2 * cuvmm::MiB + 1) == "2.0 MiB");
}

TEST_CASE("Unsupported names the missing capability and the remedy", "[errors]") {
  cuvmm::ErrorDetails details;
  details.call = "cuMemCreate";
  details.code_name = "unsupported";
  details.context = "creating a fabric chunk";
  cuvmm::Unsupported const error("fabric handles", "start the IMEX service", details);

  CHECK(error.capability() == "fabric handles");
  CHECK(error.remedy() == "start the IMEX service");
  CHECK(error.call() == "cuMemCreate");
  CHECK(std::string(error.what()) ==
        "unsupported: fabric handles (remedy: start the IMEX service) — " + cuvmm::format_error(details));
  const cuvmm::Error& as_error = error;
  CHECK(as_error.context() == "creating a fabric chunk");
}

TEST_CASE("CapacityExceeded reports the requested size and the capacity", "[errors]") {
  std::uint_least32_t const line = cuvmm::source_location::current().line() + 1;
  cuvmm::CapacityExceeded const error(3 * cuvmm::GiB + 17, 2 * cuvmm::GiB);

  CHECK(error.requested_bytes() == 3 * cuvmm::GiB + 17);
  CHECK(error.max_capacity_bytes() == 2 * cuvmm::GiB);
  CHECK(error.call() == "grow");
  CHECK(error.where().line() == line);
  CHECK_THAT(error.what(), ContainsSubstring("requested 3221225489 bytes") &&
                               ContainsSubstring("holds 2147483648 bytes") && ContainsSubstring(at_line(line)));
}

TEST_CASE("copying an exception shares its details instead of duplicating them", "[errors]") {
  cuvmm::Error const original(driver_failure());
  cuvmm::Error const copy = original;  // NOLINT(performance-unnecessary-copy-initialization)
  CHECK(&copy.details() == &original.details());
  CHECK(std::string(copy.what()) == original.what());
  CHECK(copy.context() == "creating a 2 MiB chunk on device 0");

  cuvmm::OutOfMemory const oom(driver_failure());
  cuvmm::OutOfMemory const oom_copy = oom;  // NOLINT(performance-unnecessary-copy-initialization)
  CHECK(&oom_copy.details() == &oom.details());
  CHECK(oom_copy.what() == oom.what());  // the very same string, not an equal one

  cuvmm::Unsupported const unsupported("multicast", "use a device that supports it", driver_failure());
  cuvmm::Unsupported const unsupported_copy = unsupported;  // NOLINT(performance-unnecessary-copy-initialization)
  CHECK(&unsupported_copy.capability() == &unsupported.capability());
  CHECK(&unsupported_copy.remedy() == &unsupported.remedy());
  CHECK(&unsupported_copy.details() == &unsupported.details());
}

TEST_CASE("throw_errno turns ENOMEM and ENOSPC into OutOfMemory", "[errors]") {
  for (int const error_number : {ENOMEM, ENOSPC}) {
    std::uint_least32_t line = 0;
    auto const oom = cuvmm::test::thrown_by<cuvmm::OutOfMemory>([&] {
      line = cuvmm::source_location::current().line() + 1;
      cuvmm::throw_errno("fallocate", error_number, "creating a chunk of 65536 bytes");
    });
    CHECK(oom.call() == "fallocate");
    CHECK(oom.domain() == cuvmm::ErrorDomain::posix);
    CHECK(oom.code() == error_number);
    CHECK(oom.code_name() == (error_number == ENOMEM ? "ENOMEM" : "ENOSPC"));
    CHECK(oom.details().code_text == std::strerror(error_number));
    CHECK(oom.context() == "creating a chunk of 65536 bytes");
    CHECK(oom.where().line() == line);
  }
}

TEST_CASE("throw_errno turns other errno values into cuvmm::Error with the errno's name and text", "[errors]") {
  auto const error = cuvmm::test::thrown_by<cuvmm::Error>(
      [] { cuvmm::throw_errno("mmap", EINVAL, "mapping chunk 7"); });
  CHECK(error.call() == "mmap");
  CHECK(error.domain() == cuvmm::ErrorDomain::posix);
  CHECK(error.code() == EINVAL);
  CHECK(error.code_name() == "EINVAL");
  CHECK(error.code_text() == std::strerror(EINVAL));
  CHECK_THAT(error.what(), StartsWith("mmap failed: EINVAL (" + std::to_string(EINVAL) + "): " +
                                      std::strerror(EINVAL) + "; mapping chunk 7 [test_errors.cpp:"));
}

TEST_CASE("each kind of cuvmm error has a helper that throws its type with its typed code and name", "[errors]") {
  using cuvmm::ErrorCode;
  struct Kind {
    ErrorCode code;
    void (*thrower)(std::string_view, std::string, cuvmm::source_location);
    const char* name;
  };
  Kind const kinds[] = {
      {ErrorCode::invalid_argument, cuvmm::throw_invalid_argument, "invalid argument"},
      {ErrorCode::protocol_violation, cuvmm::throw_protocol_violation, "protocol violation"},
      {ErrorCode::peer_closed, cuvmm::throw_peer_closed, "peer closed"},
      {ErrorCode::timed_out, cuvmm::throw_timed_out, "timed out"},
      {ErrorCode::limit_exceeded, cuvmm::throw_limit_exceeded, "limit exceeded"},
  };
  for (const Kind& kind : kinds) {
    CAPTURE(kind.name);
    std::uint_least32_t line = 0;
    auto const error = cuvmm::test::thrown_by<cuvmm::Error>([&] {
      line = cuvmm::source_location::current().line() + 1;
      kind.thrower("cuvmm::ipc::Channel::receive", "what happened", cuvmm::source_location::current());
    });
    CHECK(error.domain() == cuvmm::ErrorDomain::cuvmm);
    CHECK(error.cuvmm_code() == kind.code);
    CHECK(error.code() == static_cast<int>(kind.code));
    CHECK(error.code_name() == kind.name);
    CHECK(cuvmm::to_string(kind.code) == kind.name);
    CHECK(std::string(error.what()) ==
          std::string("cuvmm::ipc::Channel::receive failed: ") + kind.name + "; what happened" + at_line(line));
  }
  auto const every = cuvmm::test::thrown_by<cuvmm::Error>(
      [] { cuvmm::throw_error(ErrorCode::not_connected, "send", "the channel is closed"); });
  CHECK(every.is(ErrorCode::not_connected));
  CHECK(every.code_name() == "not connected");

  auto const oom = cuvmm::test::thrown_by<cuvmm::OutOfMemory>(
      [] { cuvmm::throw_out_of_memory("Arena::allocate", "the byte limit of 1024 is reached"); });
  CHECK(oom.cuvmm_code() == ErrorCode::out_of_memory);
  CHECK(std::string(oom.what()) == "out of memory: Arena::allocate failed: out of memory; the byte limit of 1024 is reached" +
                                       at_line(cuvmm::source_location::current().line() - 2));
  auto const as_oom = cuvmm::test::thrown_by<cuvmm::OutOfMemory>(
      [] { cuvmm::throw_error(ErrorCode::out_of_memory, "grow", "no memory"); });
  CHECK(as_oom.cuvmm_code() == ErrorCode::out_of_memory);

  auto const unsupported = cuvmm::test::thrown_by<cuvmm::Unsupported>([] {
    cuvmm::throw_unsupported_capability("fabric handles", "start the IMEX service", "cuMemCreate", "a fabric chunk");
  });
  CHECK(unsupported.is(ErrorCode::unsupported));
  CHECK(unsupported.capability() == "fabric handles");
  CHECK(unsupported.remedy() == "start the IMEX service");
  CHECK(cuvmm::CapacityExceeded(3, 2).is(ErrorCode::capacity_exceeded));
  // An error of another domain has no cuvmm code, whatever its number.
  CHECK(cuvmm::Error(driver_failure()).cuvmm_code() == ErrorCode::unspecified);
}

TEST_CASE("ErrorCode values are stable: they are part of the ABI", "[errors]") {
  using cuvmm::ErrorCode;
  CHECK(static_cast<int>(ErrorCode::unspecified) == 0);
  CHECK(static_cast<int>(ErrorCode::invalid_argument) == 1);
  CHECK(static_cast<int>(ErrorCode::out_of_memory) == 2);
  CHECK(static_cast<int>(ErrorCode::unsupported) == 3);
  CHECK(static_cast<int>(ErrorCode::capacity_exceeded) == 4);
  CHECK(static_cast<int>(ErrorCode::limit_exceeded) == 5);
  CHECK(static_cast<int>(ErrorCode::protocol_violation) == 6);
  CHECK(static_cast<int>(ErrorCode::peer_closed) == 7);
  CHECK(static_cast<int>(ErrorCode::peer_refused) == 8);
  CHECK(static_cast<int>(ErrorCode::timed_out) == 9);
  CHECK(static_cast<int>(ErrorCode::not_connected) == 10);
  CHECK(static_cast<int>(ErrorCode::injected_fault) == 11);
  CHECK(cuvmm::to_string(ErrorCode::peer_refused) == "peer refused");
  CHECK(cuvmm::to_string(ErrorCode::injected_fault) == "injected fault");
  CHECK(cuvmm::to_string(static_cast<ErrorCode>(99)) == "unknown error code");
}

TEST_CASE("an error of another system (MPI) keeps its own domain, code, name and text", "[errors]") {
  auto const details = cuvmm::foreign_error_details(cuvmm::ErrorDomain::mpi, 13, "MPI error class 13",
                                                    "MPI_ERR_TRUNCATE: message truncated", "MPI_Recv", "receiving");
  cuvmm::Error const error(details);
  CHECK(error.domain() == cuvmm::ErrorDomain::mpi);
  CHECK(error.code() == 13);
  CHECK(error.cuvmm_code() == cuvmm::ErrorCode::unspecified);
  CHECK_THAT(error.what(), StartsWith("MPI_Recv failed: MPI error class 13 (13): MPI_ERR_TRUNCATE: message truncated; receiving"));
}

TEST_CASE("the errno values sockets and files return have their names", "[errors]") {
  struct Named {
    int number;
    const char* name;
  };
  Named const names[] = {{EPIPE, "EPIPE"},           {ECONNRESET, "ECONNRESET"},     {ETIMEDOUT, "ETIMEDOUT"},
                         {ETOOMANYREFS, "ETOOMANYREFS"}, {ECONNREFUSED, "ECONNREFUSED"}, {ENOTCONN, "ENOTCONN"},
                         {EMSGSIZE, "EMSGSIZE"},     {ENOBUFS, "ENOBUFS"},           {EADDRINUSE, "EADDRINUSE"},
                         {ENAMETOOLONG, "ENAMETOOLONG"}, {ENOTSOCK, "ENOTSOCK"},     {ECONNABORTED, "ECONNABORTED"},
                         {EAGAIN, "EAGAIN"},         {ENOMEM, "ENOMEM"},             {EROFS, "EROFS"}};
  for (const Named& named : names) {
    CAPTURE(named.name);
    CHECK(cuvmm::errno_name(named.number) == named.name);
    auto const error = cuvmm::test::thrown_by<cuvmm::Error>([&] {
      if (named.number == ENOMEM) throw cuvmm::Error(cuvmm::foreign_error_details(cuvmm::ErrorDomain::posix, ENOMEM, "ENOMEM", "", "x", ""));
      cuvmm::throw_errno("sendmsg", named.number, "sending");
    });
    CHECK(error.code_name() == named.name);
  }
  CHECK(cuvmm::errno_name(4095) == "errno 4095");
}

// cuvmm::source_location has one layout whatever compiler includes the header (it is in the ABI:
// ErrorDetails holds one, the throw helpers take one by value). Pinned here field by field.
namespace {
struct SourceLocationLayout {
  const char* file;
  const char* function;
  std::uint_least32_t line;
  std::uint_least32_t column;
};
}  // namespace
static_assert(std::is_standard_layout_v<cuvmm::source_location>);
static_assert(std::is_trivially_copyable_v<cuvmm::source_location>);
static_assert(sizeof(cuvmm::source_location) == 2 * sizeof(void*) + 2 * sizeof(std::uint_least32_t));
static_assert(sizeof(cuvmm::source_location) == sizeof(SourceLocationLayout));
static_assert(alignof(cuvmm::source_location) == alignof(void*));
static_assert(offsetof(SourceLocationLayout, line) == 2 * sizeof(void*));
static_assert(offsetof(SourceLocationLayout, column) == 2 * sizeof(void*) + 4);
static_assert(sizeof(std::uint_least32_t) == 4);
#if defined(__cpp_lib_source_location)
static_assert(!std::is_same_v<cuvmm::source_location, std::source_location>, "cuvmm's own type, never an alias");
#endif

TEST_CASE("source_location has the fixed layout file, function, line, column", "[errors][abi]") {
  static constexpr char file[] = "a/b.cpp";
  static constexpr char function[] = "f";
  cuvmm::source_location const where(file, function, 77, 9);
  auto const fields = std::bit_cast<SourceLocationLayout>(where);
  CHECK(fields.file == file);
  CHECK(fields.function == function);
  CHECK(fields.line == 77);
  CHECK(fields.column == 9);
  auto const empty = std::bit_cast<SourceLocationLayout>(cuvmm::source_location{});
  CHECK(std::string(empty.file).empty());
  CHECK(empty.line == 0);
}

TEST_CASE("source_location::current() and a std::source_location give the caller's file, function, line and column",
          "[errors][abi]") {
  std::uint_least32_t const line = cuvmm::source_location::current().line() + 1;
  cuvmm::source_location const here = cuvmm::source_location::current();
  CHECK(here.line() == line);
  CHECK(here.column() > 0);
  CHECK_THAT(here.file_name(), ContainsSubstring("test_errors.cpp"));
  CHECK_THAT(here.function_name(), ContainsSubstring("CATCH2_INTERNAL_TEST"));
#if defined(__cpp_lib_source_location)
  std::source_location const standard = std::source_location::current();
  cuvmm::source_location const converted = standard;
  CHECK(converted.line() == standard.line());
  CHECK(converted.column() == standard.column());
  CHECK(std::string(converted.file_name()) == standard.file_name());
  CHECK(std::string(converted.function_name()) == standard.function_name());
#endif
  cuvmm::source_location const null_names(nullptr, nullptr, 3);
  CHECK(std::string(null_names.file_name()).empty());  // never a null pointer to format
  CHECK(std::string(null_names.function_name()).empty());
}
