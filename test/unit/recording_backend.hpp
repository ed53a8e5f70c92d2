// A test backend that forwards every call to another and records which operations reached it, in
// order: how the tests see the order in which objects are torn down, and the exact sequence of
// backend calls an operation makes.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include <catch2/catch_tostring.hpp>

#include <cuvmm/backend.hpp>

template <>
struct Catch::StringMaker<cuvmm::BackendOp> {
  static std::string convert(cuvmm::BackendOp op) { return std::string(cuvmm::to_string(op)); }
};

namespace cuvmm::test {

class RecordingBackend final : public Backend {
 public:
  explicit RecordingBackend(Backend& inner) noexcept : inner_(&inner) {}

  /// The operations that reached this backend, in order, since construction or clear().
  std::vector<BackendOp> operations() const {
    std::lock_guard lock(mutex_);
    return operations_;
  }
  void clear() {
    std::lock_guard lock(mutex_);
    operations_.clear();
  }

  std::string_view name() const noexcept override { return "recording"; }
  MemorySpace space() const noexcept override { return inner_->space(); }
  std::size_t granularity(const ChunkProperties& props, GranularityKind kind) const override {
    return inner_->granularity(props, kind);
  }
  MemoryInfo memory_info(int device) const override { return inner_->memory_info(device); }
  Address reserve(std::size_t size, std::size_t alignment) override {
    record(BackendOp::reserve);
    return inner_->reserve(size, alignment);
  }
  void free_range(Address base, std::size_t size) noexcept override {
    record(BackendOp::free_range);
    inner_->free_range(base, size);
  }
  ChunkHandle create_chunk(std::size_t size, const ChunkProperties& props) override {
    record(BackendOp::create_chunk);
    return inner_->create_chunk(size, props);
  }
  void release_chunk(ChunkHandle chunk) noexcept override {
    record(BackendOp::release_chunk);
    inner_->release_chunk(chunk);
  }
  ChunkInfo chunk_info(ChunkHandle chunk) const override {
    record(BackendOp::chunk_info);
    return inner_->chunk_info(chunk);
  }
  void map(Address address, std::size_t size, ChunkHandle chunk) override {
    record(BackendOp::map);
    inner_->map(address, size, chunk);
  }
  void unmap(Address address, std::size_t size) noexcept override {
    record(BackendOp::unmap);
    inner_->unmap(address, size);
  }
  void set_access(Address address, std::size_t size, std::span<const AccessGrant> grants) override {
    record(BackendOp::set_access);
    inner_->set_access(address, size, grants);
  }
  UniqueFd export_posix_fd(ChunkHandle chunk) override {
    record(BackendOp::export_posix_fd);
    return inner_->export_posix_fd(chunk);
  }
  ChunkHandle import_posix_fd(int fd, std::size_t size) override {
    record(BackendOp::import_posix_fd);
    return inner_->import_posix_fd(fd, size);
  }
  FabricHandle export_fabric(ChunkHandle chunk) override {
    record(BackendOp::export_fabric);
    return inner_->export_fabric(chunk);
  }
  ChunkHandle import_fabric(const FabricHandle& handle, std::size_t size) override {
    record(BackendOp::import_fabric);
    return inner_->import_fabric(handle, size);
  }
  LiveCounts live_counts() const noexcept override { return inner_->live_counts(); }

 private:
  // noexcept: a test that records so much that push_back throws has failed anyway.
  void record(BackendOp op) const noexcept {
    std::lock_guard lock(mutex_);
    operations_.push_back(op);
  }

  Backend* inner_;
  mutable std::mutex mutex_;                     // guards operations_
  mutable std::vector<BackendOp> operations_;    // every call that reached this backend, in order
};

}  // namespace cuvmm::test
