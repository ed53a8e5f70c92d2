// cuvmm/error.hpp: the error types users catch.
//
//   std::exception
//   ├── std::runtime_error
//   │   └── cuvmm::Error              a failing call: its name, its code (CUresult or errno), where
//   │       └── cuvmm::Unsupported     a capability is missing: which one, and the remedy
//   ├── std::logic_error
//   │   └── std::length_error
//   │       └── cuvmm::CapacityExceeded growth past a reserved address range (same details as Error)
//   └── std::bad_alloc
//       └── cuvmm::OutOfMemory        physical memory exhausted (same details as Error)
//
// CapacityExceeded is a std::length_error because that is what std::vector throws past
// max_size(): code written for std::vector catches it unchanged. It cannot also be a cuvmm::Error:
// two std::exception bases would make `catch (const std::exception&)` miss it (an ambiguous base
// never matches a handler). Like OutOfMemory it carries the same details and accessors as Error;
// catch `const CapacityExceeded&` (or std::length_error) to handle it.
//
// Every type is cheap to copy (the details are shared and immutable), as exceptions must be.
// `catch (const std::exception&)` catches all of them.
//
// Deciding by error: compare Error::cuvmm_code() with an ErrorCode (for ErrorDomain::cuvmm), or
// domain() and code() (a CUresult, an errno, an MPI error class), never the English code_name().
// Library code builds errors with the helpers at the end of this file (one per kind), not field by
// field.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <cuvmm/source_location.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

namespace cuvmm {

/// Where an error code came from.
enum class ErrorDomain {
  cuda,   ///< a CUresult from the driver (or a cudaError_t from the runtime)
  posix,  ///< an errno from the operating system
  cuvmm,  ///< cuvmm's own check: code is an ErrorCode
  mpi,    ///< an MPI error code (libcuvmm_mpi)
  nccl,   ///< an ncclResult_t (libcuvmm_nccl)
};

/// The kinds of failure cuvmm itself detects (ErrorDomain::cuvmm): Error::code() holds one.
/// The values are stable (they are part of the ABI); new kinds are added at the end.
enum class ErrorCode : int {
  unspecified = 0,         ///< a check that names its kind only in code_name (older call sites)
  invalid_argument = 1,    ///< the caller passed something the call does not accept
  out_of_memory = 2,       ///< a limit of physical memory was reached (thrown as OutOfMemory)
  unsupported = 3,         ///< a capability is missing (thrown as Unsupported)
  capacity_exceeded = 4,   ///< growth past a reserved address range (thrown as CapacityExceeded)
  limit_exceeded = 5,      ///< a peer asked for more than a caller-set limit allows
  protocol_violation = 6,  ///< a peer sent something the protocol does not allow
  peer_closed = 7,         ///< the peer closed the connection (exited or was killed)
  peer_refused = 8,        ///< the peer's credentials are not allowed by the policy
  timed_out = 9,           ///< a bounded wait ran out
  not_connected = 10,      ///< the channel was closed earlier (by either side, or after a failure)
  injected_fault = 11,     ///< a FaultInjectingBackend failed the call on purpose
};

/// The name of `code` as format_error() prints it, e.g. "protocol violation".
std::string_view to_string(ErrorCode code) noexcept;

/// The details every cuvmm error carries.
struct ErrorDetails {
  std::string call;       ///< the failing call, e.g. "cuMemCreate" or "memfd_create"
  ErrorDomain domain = ErrorDomain::cuvmm;
  int code = 0;           ///< the CUresult, errno or MPI code; an ErrorCode for ErrorDomain::cuvmm
  std::string code_name;  ///< e.g. "CUDA_ERROR_OUT_OF_MEMORY" or "ENOMEM"
  std::string code_text;  ///< the driver's or strerror's description
  std::string context;    ///< what cuvmm was doing, e.g. "creating a 2 MiB chunk on device 0"
  /// Where the error was raised; empty (file "", line 0: format_error prints no location) unless
  /// the helpers below fill it from their caller or a site sets it.
  cuvmm::source_location where{};
};

/// Formats details as "call failed: CODE_NAME (code): text; context [file:line]".
std::string format_error(const ErrorDetails& details);

/// A byte count as every cuvmm message (and tool) writes it: "2 MiB" for an exact multiple of the
/// largest unit it reaches (GiB, MiB, KiB), "1.5 GiB" (one decimal) otherwise, "512 bytes" below 1 KiB.
std::string format_bytes(std::size_t bytes);

/// What every cuvmm exception carries and how it is read: one set of accessors for Error,
/// CapacityExceeded and OutOfMemory, whose standard bases differ (std::runtime_error,
/// std::length_error, std::bad_alloc). Not an exception itself: catch the classes below.
class ErrorInfo {
 public:
  const std::string& call() const noexcept { return details_->call; }
  ErrorDomain domain() const noexcept { return details_->domain; }
  int code() const noexcept { return details_->code; }
  const std::string& code_name() const noexcept { return details_->code_name; }
  const std::string& code_text() const noexcept { return details_->code_text; }
  const std::string& context() const noexcept { return details_->context; }
  const cuvmm::source_location& where() const noexcept { return details_->where; }
  const ErrorDetails& details() const noexcept { return *details_; }
  /// The ErrorCode for ErrorDomain::cuvmm; ErrorCode::unspecified for every other domain.
  ErrorCode cuvmm_code() const noexcept;
  /// Whether this is cuvmm's own error of kind `code`.
  bool is(ErrorCode code) const noexcept { return cuvmm_code() == code; }

 protected:
  explicit ErrorInfo(ErrorDetails details);

 private:
  std::shared_ptr<const ErrorDetails> details_;  // shared: exceptions are copied as they propagate
};

/// A failed operation. Base of every cuvmm error except OutOfMemory and CapacityExceeded.
class Error : public std::runtime_error, public ErrorInfo {
 public:
  explicit Error(ErrorDetails details);

 protected:
  Error(ErrorDetails details, std::string message);
};

/// A capability the operation needs is missing on this machine. Says which, and what to do.
class Unsupported : public Error {
 public:
  Unsupported(std::string capability, std::string remedy, ErrorDetails details);
  const std::string& capability() const noexcept { return *capability_; }
  const std::string& remedy() const noexcept { return *remedy_; }

 private:
  std::shared_ptr<const std::string> capability_;
  std::shared_ptr<const std::string> remedy_;
};

/// Growth past the reserved address range. The object is unchanged; data never moves. A
/// std::length_error (as std::vector past max_size()) with the details and accessors of Error.
class CapacityExceeded : public std::length_error, public ErrorInfo {
 public:
  CapacityExceeded(std::size_t requested_bytes, std::size_t max_capacity_bytes,
                   cuvmm::source_location where = cuvmm::source_location::current());
  std::size_t requested_bytes() const noexcept { return requested_; }
  std::size_t max_capacity_bytes() const noexcept { return max_capacity_; }

 private:
  CapacityExceeded(std::size_t requested_bytes, std::size_t max_capacity_bytes, ErrorDetails details);
  std::size_t requested_;
  std::size_t max_capacity_;
};

/// Physical memory is exhausted. A std::bad_alloc (so allocator users catch it as usual)
/// carrying the same details as cuvmm::Error.
class OutOfMemory : public std::bad_alloc, public ErrorInfo {
 public:
  explicit OutOfMemory(ErrorDetails details);
  const char* what() const noexcept override;

 private:
  std::shared_ptr<const std::string> message_;  // std::bad_alloc keeps no message of its own
};

// ---- building errors: one helper per kind ----------------------------------------------------

/// Details of cuvmm's own check that failed: ErrorDomain::cuvmm, `code`, code_name to_string(code).
ErrorDetails cuvmm_error_details(ErrorCode code, std::string_view call, std::string context,
                                 cuvmm::source_location where = cuvmm::source_location::current());

/// Details of a failure reported by another system (`domain` not cuvmm): its code, name and text.
ErrorDetails foreign_error_details(ErrorDomain domain, int code, std::string code_name, std::string code_text,
                                   std::string_view call, std::string context,
                                   cuvmm::source_location where = cuvmm::source_location::current());

/// Throws cuvmm's own error of kind `code` as its type: OutOfMemory for out_of_memory, Error for
/// the rest (Unsupported and CapacityExceeded have their own helpers: they carry more).
[[noreturn]] void throw_error(ErrorCode code, std::string_view call, std::string context,
                              cuvmm::source_location where = cuvmm::source_location::current());

/// Error, ErrorCode::invalid_argument: the caller passed something the call does not accept.
[[noreturn]] void throw_invalid_argument(std::string_view call, std::string context,
                                         cuvmm::source_location where = cuvmm::source_location::current());
/// Error, ErrorCode::protocol_violation: a peer broke the protocol (says what it sent).
[[noreturn]] void throw_protocol_violation(std::string_view call, std::string context,
                                           cuvmm::source_location where = cuvmm::source_location::current());
/// Error, ErrorCode::peer_closed.
[[noreturn]] void throw_peer_closed(std::string_view call, std::string context,
                                    cuvmm::source_location where = cuvmm::source_location::current());
/// Error, ErrorCode::timed_out.
[[noreturn]] void throw_timed_out(std::string_view call, std::string context,
                                  cuvmm::source_location where = cuvmm::source_location::current());
/// Error, ErrorCode::limit_exceeded.
[[noreturn]] void throw_limit_exceeded(std::string_view call, std::string context,
                                       cuvmm::source_location where = cuvmm::source_location::current());
/// OutOfMemory (ErrorDomain::cuvmm, ErrorCode::out_of_memory): a limit of cuvmm's own was reached.
[[noreturn]] void throw_out_of_memory(std::string_view call, std::string context,
                                      cuvmm::source_location where = cuvmm::source_location::current());
/// Unsupported (ErrorCode::unsupported): `capability` is missing; `remedy` says what to do.
[[noreturn]] void throw_unsupported_capability(std::string capability, std::string remedy, std::string_view call,
                                    std::string context,
                                    cuvmm::source_location where = cuvmm::source_location::current());

/// Throws for a failed system call: OutOfMemory for ENOMEM/ENOSPC, otherwise Error.
[[noreturn]] void throw_errno(std::string_view call, int error_number, std::string context = {},
                              cuvmm::source_location where = cuvmm::source_location::current());

/// The symbolic name of an errno value ("EPIPE"), or "errno N" for one cuvmm does not name.
std::string errno_name(int error_number);

}  // namespace cuvmm
