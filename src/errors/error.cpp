// The error types: formatting, construction, and one helper per kind of error.
//
// Owns nothing beyond the shared, immutable details each exception points to.
// Invariants: an error of ErrorDomain::cuvmm has an ErrorCode in `code` and to_string(code) as its
// code_name when a helper built it; OutOfMemory is thrown for ENOMEM/ENOSPC and
// ErrorCode::out_of_memory, never Error.
// Never does: call the driver (the driver layer fills in a CUresult's name and text before it
// throws) or MPI (libcuvmm_mpi passes its code's name and text to foreign_error_details).
#include <cuvmm/error.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include <cuvmm/types.hpp>

namespace cuvmm {
namespace {

std::string strerror_text(int error_number) {
  char buffer[256] = {};
  // GNU strerror_r returns the message (possibly not in buffer).
  return ::strerror_r(error_number, buffer, sizeof buffer);
}

}  // namespace

std::string errno_name(int error_number) {
  switch (error_number) {
    // memory and files
    case ENOMEM: return "ENOMEM";
    case ENOSPC: return "ENOSPC";
    case EINVAL: return "EINVAL";
    case EBADF: return "EBADF";
    case EPERM: return "EPERM";
    case EACCES: return "EACCES";
    case EEXIST: return "EEXIST";
    case ENOENT: return "ENOENT";
    case ENOTDIR: return "ENOTDIR";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case ELOOP: return "ELOOP";
    case EROFS: return "EROFS";
    case EMFILE: return "EMFILE";
    case ENFILE: return "ENFILE";
    case ENODEV: return "ENODEV";
    case ENOSYS: return "ENOSYS";
    case EOVERFLOW: return "EOVERFLOW";
    case EFBIG: return "EFBIG";
    case ETXTBSY: return "ETXTBSY";
    case EBUSY: return "EBUSY";
    case EAGAIN: return "EAGAIN";  // also EWOULDBLOCK on Linux
    case EINTR: return "EINTR";
    case EFAULT: return "EFAULT";
    case EIO: return "EIO";
    // sockets (the IPC channel)
    case EPIPE: return "EPIPE";
    case ECONNRESET: return "ECONNRESET";
    case ECONNREFUSED: return "ECONNREFUSED";
    case ECONNABORTED: return "ECONNABORTED";
    case ENOTCONN: return "ENOTCONN";
    case EISCONN: return "EISCONN";
    case ETIMEDOUT: return "ETIMEDOUT";
    case ETOOMANYREFS: return "ETOOMANYREFS";
    case EMSGSIZE: return "EMSGSIZE";
    case ENOBUFS: return "ENOBUFS";
    case ENOTSOCK: return "ENOTSOCK";
    case EADDRINUSE: return "EADDRINUSE";
    case EAFNOSUPPORT: return "EAFNOSUPPORT";
    case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
    case EPROTO: return "EPROTO";
    case EOPNOTSUPP: return "EOPNOTSUPP";  // also ENOTSUP on Linux
    default: return "errno " + std::to_string(error_number);
  }
}

std::string_view to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::unspecified: return "unspecified";
    case ErrorCode::invalid_argument: return "invalid argument";
    case ErrorCode::out_of_memory: return "out of memory";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::capacity_exceeded: return "capacity exceeded";
    case ErrorCode::limit_exceeded: return "limit exceeded";
    case ErrorCode::protocol_violation: return "protocol violation";
    case ErrorCode::peer_closed: return "peer closed";
    case ErrorCode::peer_refused: return "peer refused";
    case ErrorCode::timed_out: return "timed out";
    case ErrorCode::not_connected: return "not connected";
    case ErrorCode::injected_fault: return "injected fault";
  }
  return "unknown error code";
}

namespace {
ErrorCode code_of(const ErrorDetails& d) noexcept {
  return d.domain == ErrorDomain::cuvmm ? static_cast<ErrorCode>(d.code) : ErrorCode::unspecified;
}
}  // namespace

ErrorCode ErrorInfo::cuvmm_code() const noexcept { return code_of(*details_); }

ErrorDetails cuvmm_error_details(ErrorCode code, std::string_view call, std::string context,
                                 cuvmm::source_location where) {
  ErrorDetails d;
  d.call = std::string(call);
  d.domain = ErrorDomain::cuvmm;
  d.code = static_cast<int>(code);
  d.code_name = std::string(to_string(code));
  d.context = std::move(context);
  d.where = where;
  return d;
}

ErrorDetails foreign_error_details(ErrorDomain domain, int code, std::string code_name, std::string code_text,
                                   std::string_view call, std::string context, cuvmm::source_location where) {
  ErrorDetails d;
  d.call = std::string(call);
  d.domain = domain;
  d.code = code;
  d.code_name = std::move(code_name);
  d.code_text = std::move(code_text);
  d.context = std::move(context);
  d.where = where;
  return d;
}

std::string format_bytes(std::size_t bytes) {
  struct Unit {
    std::size_t size;
    const char* name;
  };
  constexpr Unit units[] = {{GiB, "GiB"}, {MiB, "MiB"}, {KiB, "KiB"}};
  for (Unit const& unit : units) {
    if (bytes < unit.size) continue;
    char text[32] = {};
    if (bytes % unit.size == 0)
      std::snprintf(text, sizeof text, "%zu %s", bytes / unit.size, unit.name);
    else
      std::snprintf(text, sizeof text, "%.1f %s", static_cast<double>(bytes) / static_cast<double>(unit.size),
                    unit.name);
    return text;
  }
  return std::to_string(bytes) + " bytes";
}

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

ErrorInfo::ErrorInfo(ErrorDetails details) : details_(std::make_shared<const ErrorDetails>(std::move(details))) {}

Error::Error(ErrorDetails details, std::string message)
    : std::runtime_error(std::move(message)), ErrorInfo(std::move(details)) {}

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
  return cuvmm_error_details(ErrorCode::capacity_exceeded, "grow",
                             "requested " + std::to_string(requested) + " bytes, but the reserved address range holds " +
                                 std::to_string(max_capacity) + " bytes; data never moves, so reserve more up front",
                             where);
}
}  // namespace

CapacityExceeded::CapacityExceeded(std::size_t requested_bytes, std::size_t max_capacity_bytes,
                                   cuvmm::source_location where)
    : CapacityExceeded(requested_bytes, max_capacity_bytes, capacity_details(requested_bytes, max_capacity_bytes, where)) {}

CapacityExceeded::CapacityExceeded(std::size_t requested_bytes, std::size_t max_capacity_bytes, ErrorDetails details)
    : std::length_error(format_error(details)),  // bases are built in order: details not moved yet
      ErrorInfo(std::move(details)),
      requested_(requested_bytes),
      max_capacity_(max_capacity_bytes) {}

OutOfMemory::OutOfMemory(ErrorDetails details)
    : ErrorInfo(std::move(details)),
      message_(std::make_shared<const std::string>("out of memory: " + format_error(this->details()))) {}

const char* OutOfMemory::what() const noexcept { return message_->c_str(); }

void throw_error(ErrorCode code, std::string_view call, std::string context, cuvmm::source_location where) {
  ErrorDetails d = cuvmm_error_details(code, call, std::move(context), where);
  if (code == ErrorCode::out_of_memory) throw OutOfMemory(std::move(d));
  throw Error(std::move(d));
}

void throw_invalid_argument(std::string_view call, std::string context, cuvmm::source_location where) {
  throw_error(ErrorCode::invalid_argument, call, std::move(context), where);
}

void throw_protocol_violation(std::string_view call, std::string context, cuvmm::source_location where) {
  throw_error(ErrorCode::protocol_violation, call, std::move(context), where);
}

void throw_peer_closed(std::string_view call, std::string context, cuvmm::source_location where) {
  throw_error(ErrorCode::peer_closed, call, std::move(context), where);
}

void throw_timed_out(std::string_view call, std::string context, cuvmm::source_location where) {
  throw_error(ErrorCode::timed_out, call, std::move(context), where);
}

void throw_limit_exceeded(std::string_view call, std::string context, cuvmm::source_location where) {
  throw_error(ErrorCode::limit_exceeded, call, std::move(context), where);
}

void throw_out_of_memory(std::string_view call, std::string context, cuvmm::source_location where) {
  throw_error(ErrorCode::out_of_memory, call, std::move(context), where);
}

void throw_unsupported_capability(std::string capability, std::string remedy, std::string_view call, std::string context,
                       cuvmm::source_location where) {
  throw Unsupported(std::move(capability), std::move(remedy),
                    cuvmm_error_details(ErrorCode::unsupported, call, std::move(context), where));
}

void throw_errno(std::string_view call, int error_number, std::string context, cuvmm::source_location where) {
  ErrorDetails d = foreign_error_details(ErrorDomain::posix, error_number, errno_name(error_number),
                                         strerror_text(error_number), call, std::move(context), where);
  if (error_number == ENOMEM || error_number == ENOSPC) throw OutOfMemory(std::move(d));
  throw Error(std::move(d));
}

}  // namespace cuvmm
