// The error types: formatting and construction. No driver calls here: the driver layer fills in
// a CUresult's name and text before it throws.
#include <cuvmm/error.hpp>

#include <cerrno>
#include <cstring>
#include <string>

namespace cuvmm {
namespace {

std::string errno_name(int error_number) {
  switch (error_number) {
    case ENOMEM: return "ENOMEM";
    case ENOSPC: return "ENOSPC";
    case EINVAL: return "EINVAL";
    case EBADF: return "EBADF";
    case EPERM: return "EPERM";
    case EACCES: return "EACCES";
    case EEXIST: return "EEXIST";
    case ENOENT: return "ENOENT";
    case EMFILE: return "EMFILE";
    case ENFILE: return "ENFILE";
    case ENOSYS: return "ENOSYS";
    case EOVERFLOW: return "EOVERFLOW";
    case EAGAIN: return "EAGAIN";
    case EINTR: return "EINTR";
    case EFAULT: return "EFAULT";
    default: return "errno " + std::to_string(error_number);
  }
}

std::string strerror_text(int error_number) {
  char buffer[256] = {};
  // GNU strerror_r returns the message (possibly not in buffer).
  return ::strerror_r(error_number, buffer, sizeof buffer);
}

}  // namespace

std::string format_error(const ErrorDetails& d) {
  std::string message = d.call.empty() ? std::string("cuvmm") : d.call;
  message += " failed";
  if (!d.code_name.empty()) {
    message += ": ";
    message += d.code_name;
    if (d.domain != ErrorDomain::cuvmm) message += " (" + std::to_string(d.code) + ")";
  }
  if (!d.code_text.empty()) {
    message += ": ";
    message += d.code_text;
  }
  if (!d.context.empty()) {
    message += "; ";
    message += d.context;
  }
  const char* file = d.where.file_name();
  if (file != nullptr && *file != '\0') {
    if (const char* slash = std::strrchr(file, '/')) file = slash + 1;
    message += " [";
    message += file;
    message += ':';
    message += std::to_string(d.where.line());
    message += ']';
  }
  return message;
}

Error::Error(ErrorDetails details) : Error(details, format_error(details)) {}

Error::Error(ErrorDetails details, std::string message)
    : std::runtime_error(message), details_(std::make_shared<const ErrorDetails>(std::move(details))) {}

namespace {
std::string unsupported_message(const std::string& capability, const std::string& remedy,
                                const ErrorDetails& details) {
  std::string message = "unsupported: " + capability;
  if (!remedy.empty()) message += " (remedy: " + remedy + ")";
  message += " — " + format_error(details);
  return message;
}
}  // namespace

Unsupported::Unsupported(std::string capability, std::string remedy, ErrorDetails details)
    : Error(details, unsupported_message(capability, remedy, details)),
      capability_(std::make_shared<const std::string>(std::move(capability))),
      remedy_(std::make_shared<const std::string>(std::move(remedy))) {}

namespace {
ErrorDetails capacity_details(std::size_t requested, std::size_t max_capacity, cuvmm::source_location where) {
  ErrorDetails d;
  d.call = "grow";
  d.domain = ErrorDomain::cuvmm;
  d.code_name = "capacity exceeded";
  d.context = "requested " + std::to_string(requested) + " bytes, but the reserved address range holds " +
              std::to_string(max_capacity) + " bytes; data never moves, so reserve more up front";
  d.where = where;
  return d;
}
}  // namespace

CapacityExceeded::CapacityExceeded(std::size_t requested_bytes, std::size_t max_capacity_bytes,
                                   cuvmm::source_location where)
    : Error(capacity_details(requested_bytes, max_capacity_bytes, where)),
      requested_(requested_bytes),
      max_capacity_(max_capacity_bytes) {}

OutOfMemory::OutOfMemory(ErrorDetails details) {
  std::string message = "out of memory: " + format_error(details);
  state_ = std::make_shared<const State>(State{std::move(details), std::move(message)});
}

const char* OutOfMemory::what() const noexcept { return state_->message.c_str(); }

void throw_invalid_argument(std::string_view call, std::string context, cuvmm::source_location where) {
  ErrorDetails d;
  d.call = std::string(call);
  d.domain = ErrorDomain::cuvmm;
  d.code_name = "invalid argument";
  d.context = std::move(context);
  d.where = where;
  throw Error(std::move(d));
}

void throw_errno(std::string_view call, int error_number, std::string context, cuvmm::source_location where) {
  ErrorDetails d;
  d.call = std::string(call);
  d.domain = ErrorDomain::posix;
  d.code = error_number;
  d.code_name = errno_name(error_number);
  d.code_text = strerror_text(error_number);
  d.context = std::move(context);
  d.where = where;
  if (error_number == ENOMEM || error_number == ENOSPC) throw OutOfMemory(std::move(d));
  throw Error(std::move(d));
}

}  // namespace cuvmm
