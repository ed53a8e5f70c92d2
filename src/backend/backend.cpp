// Names of the shared value types, for messages and reports.
#include <cuvmm/backend.hpp>
#include <cuvmm/types.hpp>

namespace cuvmm {

std::string_view to_string(Access access) noexcept {
  switch (access) {
    case Access::none: return "none";
    case Access::read: return "read";
    case Access::read_write: return "read-write";
  }
  return "?";
}

std::string_view to_string(MemorySpace space) noexcept {
  switch (space) {
    case MemorySpace::device: return "device";
    case MemorySpace::host: return "host";
  }
  return "?";
}

std::string_view to_string(Compression compression) noexcept {
  switch (compression) {
    case Compression::none: return "none";
    case Compression::preferred: return "preferred";
    case Compression::required: return "required";
  }
  return "?";
}

std::string_view to_string(BackendOp op) noexcept {
  switch (op) {
    case BackendOp::reserve: return "reserve";
    case BackendOp::free_range: return "free_range";
    case BackendOp::create_chunk: return "create_chunk";
    case BackendOp::release_chunk: return "release_chunk";
    case BackendOp::map: return "map";
    case BackendOp::unmap: return "unmap";
    case BackendOp::set_access: return "set_access";
    case BackendOp::export_posix_fd: return "export_posix_fd";
    case BackendOp::import_posix_fd: return "import_posix_fd";
    case BackendOp::export_fabric: return "export_fabric";
    case BackendOp::import_fabric: return "import_fabric";
    case BackendOp::chunk_info: return "chunk_info";
  }
  return "?";
}

}  // namespace cuvmm
