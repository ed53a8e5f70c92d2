// CountingBackend: forwards every call to an inner backend and counts it.
//
// Owns: nothing but its counters; the inner backend owns every object.
// Invariants: each forwarded call is counted exactly once, before it is forwarded, failed ones
//   included; acquiring calls pass through before_call() (which may throw) after being counted;
//   the time of the inner call alone (returned or thrown) is added to its operation's.
// Never does: hold a handle, change an argument, or call before_call() for a releasing operation.
#include <cuvmm/counting_backend.hpp>

namespace cuvmm {

/// Adds the time from its making to its end, the inner call's, to its operation's total.
class CountingBackend::CallTimer {
 public:
  CallTimer(const CountingBackend& counting, BackendOp op) noexcept
      : total_(counting.nanoseconds_[static_cast<std::size_t>(op)]), start_(std::chrono::steady_clock::now()) {}
  CallTimer(const CallTimer&) = delete;
  CallTimer& operator=(const CallTimer&) = delete;
  ~CallTimer() {
    auto const elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_);
    total_.fetch_add(elapsed.count(), std::memory_order_relaxed);
  }

 private:
  std::atomic<std::int64_t>& total_;
  std::chrono::steady_clock::time_point start_;
};

std::chrono::nanoseconds CountingBackend::time_in(BackendOp op) const noexcept {
  auto const i = static_cast<std::size_t>(op);
  return std::chrono::nanoseconds(i < backend_op_count ? nanoseconds_[i].load(std::memory_order_relaxed) : 0);
}

void CountingBackend::count(BackendOp op) const noexcept {
  auto const i = static_cast<std::size_t>(op);
  if (i < backend_op_count) calls_[i].fetch_add(1, std::memory_order_relaxed);
}

std::size_t CountingBackend::calls(BackendOp op) const noexcept {
  auto const i = static_cast<std::size_t>(op);
  return i < backend_op_count ? calls_[i].load(std::memory_order_relaxed) : 0;
}

std::size_t CountingBackend::total_calls() const noexcept {
  std::size_t total = 0;
  for (auto const& c : calls_) total += c.load(std::memory_order_relaxed);
  return total;
}

std::size_t CountingBackend::granularity(const ChunkProperties& props, GranularityKind kind) const {
  return inner_->granularity(props, kind);
}

Backend::MemoryInfo CountingBackend::memory_info(int device) const { return inner_->memory_info(device); }

Address CountingBackend::reserve(std::size_t size, std::size_t alignment) {
  count(BackendOp::reserve);
  before_call(BackendOp::reserve);
  CallTimer const timer(*this, BackendOp::reserve);
  return inner_->reserve(size, alignment);
}

void CountingBackend::free_range(Address base, std::size_t size) noexcept {
  count(BackendOp::free_range);
  CallTimer const timer(*this, BackendOp::free_range);
  inner_->free_range(base, size);
}

ChunkHandle CountingBackend::create_chunk(std::size_t size, const ChunkProperties& props) {
  count(BackendOp::create_chunk);
  before_call(BackendOp::create_chunk);
  CallTimer const timer(*this, BackendOp::create_chunk);
  return inner_->create_chunk(size, props);
}

void CountingBackend::release_chunk(ChunkHandle chunk) noexcept {
  count(BackendOp::release_chunk);
  CallTimer const timer(*this, BackendOp::release_chunk);
  inner_->release_chunk(chunk);
}

ChunkInfo CountingBackend::chunk_info(ChunkHandle chunk) const {
  count(BackendOp::chunk_info);
  before_call(BackendOp::chunk_info);
  CallTimer const timer(*this, BackendOp::chunk_info);
  return inner_->chunk_info(chunk);
}

void CountingBackend::map(Address address, std::size_t size, ChunkHandle chunk) {
  count(BackendOp::map);
  before_call(BackendOp::map);
  CallTimer const timer(*this, BackendOp::map);
  inner_->map(address, size, chunk);
}

void CountingBackend::unmap(Address address, std::size_t size) noexcept {
  count(BackendOp::unmap);
  CallTimer const timer(*this, BackendOp::unmap);
  inner_->unmap(address, size);
}

void CountingBackend::set_access(Address address, std::size_t size, std::span<const AccessGrant> grants) {
  count(BackendOp::set_access);
  before_call(BackendOp::set_access);
  CallTimer const timer(*this, BackendOp::set_access);
  inner_->set_access(address, size, grants);
}

UniqueFd CountingBackend::export_posix_fd(ChunkHandle chunk) {
  count(BackendOp::export_posix_fd);
  before_call(BackendOp::export_posix_fd);
  CallTimer const timer(*this, BackendOp::export_posix_fd);
  return inner_->export_posix_fd(chunk);
}

ChunkHandle CountingBackend::import_posix_fd(int fd, std::size_t size) {
  count(BackendOp::import_posix_fd);
  before_call(BackendOp::import_posix_fd);
  CallTimer const timer(*this, BackendOp::import_posix_fd);
  return inner_->import_posix_fd(fd, size);
}

FabricHandle CountingBackend::export_fabric(ChunkHandle chunk) {
  count(BackendOp::export_fabric);
  before_call(BackendOp::export_fabric);
  CallTimer const timer(*this, BackendOp::export_fabric);
  return inner_->export_fabric(chunk);
}

ChunkHandle CountingBackend::import_fabric(const FabricHandle& handle, std::size_t size) {
  count(BackendOp::import_fabric);
  before_call(BackendOp::import_fabric);
  CallTimer const timer(*this, BackendOp::import_fabric);
  return inner_->import_fabric(handle, size);
}

}  // namespace cuvmm
