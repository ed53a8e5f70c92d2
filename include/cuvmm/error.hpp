// cuvmm/error.hpp: the error types users catch.
//
//   std::exception
//   ├── std::runtime_error
//   │   └── cuvmm::Error              a failing call: its name, its code (CUresult or errno), where
//   │       ├── cuvmm::Unsupported     a capability is missing: which one, and the remedy
//   │       └── cuvmm::CapacityExceeded growth past a reserved address range
//   └── std::bad_alloc
//       └── cuvmm::OutOfMemory        physical memory exhausted (same details as Error)
//
// Every type is cheap to copy (the details are shared and immutable), as exceptions must be.
// `catch (const std::exception&)` catches all of them.
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
  cuda,   ///< a CUresult from the driver
  posix,  ///< an errno from the operating system
  cuvmm,  ///< cuvmm's own check (invalid argument, capacity, injected fault); code is 0
};

/// The details every cuvmm error carries.
struct ErrorDetails {
  std::string call;       ///< the failing call, e.g. "cuMemCreate" or "memfd_create"
  ErrorDomain domain = ErrorDomain::cuvmm;
  int code = 0;           ///< the CUresult or errno; 0 for ErrorDomain::cuvmm
  std::string code_name;  ///< e.g. "CUDA_ERROR_OUT_OF_MEMORY" or "ENOMEM"
  std::string code_text;  ///< the driver's or strerror's description
  std::string context;    ///< what cuvmm was doing, e.g. "creating a 2 MiB chunk on device 0"
  cuvmm::source_location where = cuvmm::source_location::current();
};

/// Formats details as "call failed: CODE_NAME (code): text; context [file:line]".
std::string format_error(const ErrorDetails& details);

/// A failed operation. Base of every cuvmm error except OutOfMemory.
class Error : public std::runtime_error {
 public:
  explicit Error(ErrorDetails details);

  const std::string& call() const noexcept { return details_->call; }
  ErrorDomain domain() const noexcept { return details_->domain; }
  int code() const noexcept { return details_->code; }
  const std::string& code_name() const noexcept { return details_->code_name; }
  const std::string& code_text() const noexcept { return details_->code_text; }
  const std::string& context() const noexcept { return details_->context; }
  const cuvmm::source_location& where() const noexcept { return details_->where; }
  const ErrorDetails& details() const noexcept { return *details_; }

 protected:
  Error(ErrorDetails details, std::string message);

 private:
  std::shared_ptr<const ErrorDetails> details_;
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

/// Growth past the reserved address range. The object is unchanged; data never moves.
class CapacityExceeded : public Error {
 public:
  CapacityExceeded(std::size_t requested_bytes, std::size_t max_capacity_bytes,
                   cuvmm::source_location where = cuvmm::source_location::current());
  std::size_t requested_bytes() const noexcept { return requested_; }
  std::size_t max_capacity_bytes() const noexcept { return max_capacity_; }

 private:
  std::size_t requested_;
  std::size_t max_capacity_;
};

/// Physical memory is exhausted. A std::bad_alloc (so allocator users catch it as usual)
/// carrying the same details as cuvmm::Error.
class OutOfMemory : public std::bad_alloc {
 public:
  explicit OutOfMemory(ErrorDetails details);
  const char* what() const noexcept override;
  const std::string& call() const noexcept { return state_->details.call; }
  ErrorDomain domain() const noexcept { return state_->details.domain; }
  int code() const noexcept { return state_->details.code; }
  const std::string& code_name() const noexcept { return state_->details.code_name; }
  const std::string& context() const noexcept { return state_->details.context; }
  const cuvmm::source_location& where() const noexcept { return state_->details.where; }
  const ErrorDetails& details() const noexcept { return state_->details; }

 private:
  struct State {
    ErrorDetails details;
    std::string message;
  };
  std::shared_ptr<const State> state_;
};

/// Throws cuvmm::Error for a failed cuvmm check (ErrorDomain::cuvmm), e.g. an invalid argument.
[[noreturn]] void throw_invalid_argument(std::string_view call, std::string context,
                                         cuvmm::source_location where = cuvmm::source_location::current());

/// Throws for a failed system call: OutOfMemory for ENOMEM/ENOSPC, otherwise Error.
[[noreturn]] void throw_errno(std::string_view call, int error_number, std::string context = {},
                              cuvmm::source_location where = cuvmm::source_location::current());

}  // namespace cuvmm
