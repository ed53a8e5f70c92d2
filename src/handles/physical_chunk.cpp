// PhysicalChunk: create or import on construction, release on destruction.
//
// Owns: one backend chunk handle. After creation it reads back what was granted (chunk_info), so
// compression that the device refused is visible. The adopting constructor is the only place a
// raw handle becomes owned: if reading its properties throws, the handle is released there.
#include <cuvmm/physical_chunk.hpp>

#include <string>
#include <utility>

#include <cuvmm/error.hpp>

namespace cuvmm {

PhysicalChunk::PhysicalChunk(Backend& backend, ChunkHandle handle, bool compression_requested, bool imported)
    : compression_requested_(compression_requested), imported_(imported) {
  try {
    info_ = backend.chunk_info(handle);
  } catch (...) {
    backend.release_chunk(handle);
    throw;
  }
  backend_ = &backend;
  handle_ = handle;
}

namespace {
ChunkHandle create_checked(Backend& backend, std::size_t size, const ChunkProperties& props) {
  std::size_t const granularity = backend.granularity(props);
  if (size == 0 || size % granularity != 0) {
    throw_invalid_argument("PhysicalChunk", "size " + std::to_string(size) +
                                                " is not a positive multiple of the granularity " +
                                                std::to_string(granularity));
  }
  return backend.create_chunk(size, props);
}
}  // namespace

PhysicalChunk::PhysicalChunk(Backend& backend, std::size_t size, const ChunkProperties& props)
    : PhysicalChunk(backend, create_checked(backend, size, props), props.compression, false) {}

PhysicalChunk PhysicalChunk::import_posix_fd(Backend& backend, int fd, std::size_t size) {
  return PhysicalChunk(backend, backend.import_posix_fd(fd, size), false, true);
}

PhysicalChunk PhysicalChunk::import_fabric(Backend& backend, const FabricHandle& handle, std::size_t size) {
  return PhysicalChunk(backend, backend.import_fabric(handle, size), false, true);
}

PhysicalChunk::PhysicalChunk(PhysicalChunk&& other) noexcept
    : backend_(std::exchange(other.backend_, nullptr)),
      handle_(std::exchange(other.handle_, {})),
      info_(std::exchange(other.info_, {})),
      compression_requested_(std::exchange(other.compression_requested_, false)),
      imported_(std::exchange(other.imported_, false)) {}

PhysicalChunk& PhysicalChunk::operator=(PhysicalChunk&& other) noexcept {
  if (this != &other) {
    reset();
    backend_ = std::exchange(other.backend_, nullptr);
    handle_ = std::exchange(other.handle_, {});
    info_ = std::exchange(other.info_, {});
    compression_requested_ = std::exchange(other.compression_requested_, false);
    imported_ = std::exchange(other.imported_, false);
  }
  return *this;
}

PhysicalChunk::~PhysicalChunk() { reset(); }

UniqueFd PhysicalChunk::export_posix_fd() const {
  if (empty()) throw_invalid_argument("PhysicalChunk::export_posix_fd", "the chunk is empty");
  return backend_->export_posix_fd(handle_);
}

FabricHandle PhysicalChunk::export_fabric() const {
  if (empty()) throw_invalid_argument("PhysicalChunk::export_fabric", "the chunk is empty");
  return backend_->export_fabric(handle_);
}

void check_compression(const PhysicalChunk& chunk, Compression policy) {
  if (policy != Compression::required || chunk.compression_granted()) return;
  throw_unsupported_capability(
      "generic compression on device " + std::to_string(chunk.device()),
      "use Compression::preferred to fall back to ordinary memory, or a device whose cuvmm-info shows generic "
      "compression",
      "check_compression",
      "a " + std::to_string(chunk.size()) + "-byte chunk on device " + std::to_string(chunk.device()) +
          " was created without compression" +
          (chunk.compression_requested() ? " although it was requested" : " (it was not requested)") + " on the '" +
          std::string(chunk.empty() ? "no" : chunk.backend()->name()) + "' backend");
}

void PhysicalChunk::reset() noexcept {
  if (backend_ == nullptr) return;
  backend_->release_chunk(handle_);
  backend_ = nullptr;
  handle_ = {};
  info_ = {};
  compression_requested_ = false;
  imported_ = false;
}

}  // namespace cuvmm
