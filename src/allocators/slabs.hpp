// slabs.hpp: the Arena's size classes and slab pages (one page split into equal blocks).
//
// Owns: the size classes up to small_max, and per slab page (keyed by its slot) its class, how
//   many blocks were ever handed out, how many are allocated now, and per block the exact number
//   of bytes its allocation asked for (0: free), so a free with another size is refused.
// Invariants: a slab's blocks [0, handed_out) have been handed out at least once; in_use counts the
//   blocks whose requested size is not 0; block k of a slab starts k * block_bytes into its page.
// Never does: know streams, addresses or pages; which free blocks a stream may reuse is
//   StreamCaches' business, mapping the page is PagePool's. Not thread-safe: the Arena's lock.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include <cuvmm/source_location.hpp>

namespace cuvmm::detail {

/// Refuses a free of `bytes` at `address` whose allocation asked for `allocated` bytes: cuvmm::Error
/// (invalid_argument) from Arena::deallocate, at `where` (the check that found it).
[[noreturn]] void throw_wrong_free_size(std::uintptr_t address, std::size_t bytes, std::size_t allocated,
                                        cuvmm::source_location where = cuvmm::source_location::current());

class Slabs {
 public:
  static constexpr std::size_t min_block_bytes = 256;
  /// Blocks keep their requested size in 32 bits: no class is larger than this.
  static constexpr std::size_t max_block_bytes = std::size_t{1} << 31;

  /// Classes up to min(page / 2, max_block_bytes): multiples of 256 B below 1 KiB, then four per
  /// doubling. A page smaller than two minimal blocks has no classes (small_max() is 0).
  explicit Slabs(std::size_t page);

  [[nodiscard]] std::size_t small_max() const noexcept { return small_max_; }
  [[nodiscard]] std::size_t class_count() const noexcept { return classes_.size(); }
  [[nodiscard]] std::size_t block_bytes(std::size_t size_class) const noexcept { return classes_[size_class]; }
  [[nodiscard]] std::size_t slab_count() const noexcept { return slabs_.size(); }
  /// Slabs with at least one live block.
  [[nodiscard]] std::size_t slabs_in_use() const noexcept { return slabs_in_use_; }
  /// Bytes of the live blocks (each its class's size).
  [[nodiscard]] std::size_t live_block_bytes() const noexcept { return live_block_bytes_; }

  /// The smallest class that holds `bytes` and whose block size is a multiple of `alignment` (a
  /// power of two), so every block of it is aligned; nothing when the request takes whole pages.
  /// Inline: the Arena asks it on every allocation, and the common case is a few instructions.
  [[nodiscard]] std::optional<std::size_t> class_for(std::size_t bytes, std::size_t alignment) const noexcept {
    if (bytes > small_max_) return std::nullopt;
    if (alignment > min_block_bytes || page_ % min_block_bytes != 0) return class_by_search(bytes, alignment);
    // Every class is a multiple of 256 B, so the smallest class that holds `bytes` is found by
    // arithmetic: classes 0-2 are 256, 512, 768; above them, four per doubling, class
    // 3 + 4 (e - 10) + q + 1 being 2^e + (q + 1) 2^e / 4 for the e and q with
    // 2^e + q 2^e / 4 < bytes <= 2^e + (q + 1) 2^e / 4.
    std::size_t index = 0;
    if (bytes <= 768) {
      index = bytes == 0 ? 0 : (bytes - 1) / min_block_bytes;
    } else if (bytes <= 1024) {
      index = 3;
    } else {
      std::size_t const below = bytes - 1;  // 2^e <= below < 2^(e + 1)
      int const e = std::bit_width(below) - 1;
      std::size_t const quarter = (below - (std::size_t{1} << e)) >> (e - 2);
      index = 3 + 4 * static_cast<std::size_t>(e - 10) + quarter + 1;
    }
    if (index >= classes_.size()) return std::nullopt;
    return index;
  }

  /// Registers the slab page at `slot` for `size_class`, no block handed out yet. Throws only
  /// std::bad_alloc, and then nothing changed.
  void open(std::size_t slot, std::size_t size_class);
  /// Whether `slot` holds a slab.
  [[nodiscard]] bool contains(std::size_t slot) const noexcept { return slabs_.contains(slot); }

  struct Fresh {
    std::size_t offset;  ///< of the block in its page
    bool last;           ///< the slab has no never-used block left
  };
  /// Hands out the next never-used block of the slab at `slot` for `bytes`.
  Fresh hand_out_fresh(std::size_t slot, std::size_t bytes) noexcept;
  /// Hands out again the freed block at `offset` of the slab at `slot`, for `bytes`.
  void hand_out(std::size_t slot, std::size_t offset, std::size_t bytes) noexcept;

  /// The class of the live block at `offset` in `slot`, freed with `bytes`; throws cuvmm::Error
  /// (naming `address`) and changes nothing when there is no slab there, no live block starts
  /// there, or `bytes` is not what its allocation asked for.
  std::size_t check_free(std::size_t slot, std::size_t offset, std::size_t bytes, std::uintptr_t address) const;
  /// Marks the block free (after check_free accepted it).
  void mark_free(std::size_t slot, std::size_t offset) noexcept;
  /// check_free, then `keep(size_class)`, then mark_free, with one slab lookup (the Arena's free
  /// path). When the check or `keep` throws, nothing changed. Returns the class.
  template <class Keep>
  std::size_t free_block(std::size_t slot, std::size_t offset, std::size_t bytes, std::uintptr_t address, Keep&& keep) {
    auto const [found, block] = live_block(slot, offset, bytes, address);
    Slab& slab = const_cast<Slab&>(*found);  // live_block is const only so that check_free can be
    keep(slab.size_class);
    slab.requested[block] = 0;
    count_free(slab);
    return slab.size_class;
  }

  /// The bytes recorded for the live block at `offset` of the slab at `slot` (which must be live).
  [[nodiscard]] std::size_t recorded_bytes(std::size_t slot, std::size_t offset) const noexcept;
  /// Records `bytes` (up to the block's class size, not 0) for the live block at `offset` of `slot`.
  void rerecord(std::size_t slot, std::size_t offset, std::size_t bytes) noexcept;
  /// Blocks allocated now in the slab at `slot` (which must be a slab).
  [[nodiscard]] std::size_t in_use(std::size_t slot) const noexcept { return slabs_.find(slot)->second.in_use; }

  /// Removes every slab with no block allocated; returns their (slot, class).
  std::vector<std::pair<std::size_t, std::size_t>> remove_empty();

 private:
  struct Slab {
    std::size_t size_class = 0;           // index into classes_
    std::size_t block_bytes = 0;          // the class's size
    std::size_t handed_out = 0;           // blocks [0, handed_out) have been handed out at least once
    std::size_t in_use = 0;               // blocks allocated now
    std::vector<std::uint32_t> requested;  // per block: bytes its allocation asked for; 0: free
  };

  /// The slab and block index of the live block at `offset` in `slot`, freed with `bytes`; throws
  /// as check_free does.
  [[nodiscard]] std::pair<const Slab*, std::size_t> live_block(std::size_t slot, std::size_t offset, std::size_t bytes,
                                                               std::uintptr_t address) const;

  /// class_for for an alignment above min_block_bytes (or pages not a multiple of it).
  [[nodiscard]] std::optional<std::size_t> class_by_search(std::size_t bytes, std::size_t alignment) const noexcept;
  void count_hand_out(Slab& slab) noexcept;  // one more live block in `slab`
  void count_free(Slab& slab) noexcept;      // one live block fewer in `slab`

  std::size_t page_ = 0;                       // bytes of a slab page
  std::size_t slabs_in_use_ = 0;               // slabs whose in_use is not 0
  std::size_t live_block_bytes_ = 0;           // sum over slabs of in_use * block_bytes
  std::size_t small_max_ = 0;                  // largest class
  std::vector<std::size_t> classes_;           // block sizes, ascending
  std::unordered_map<std::size_t, Slab> slabs_;  // slot of the page → its slab
};

}  // namespace cuvmm::detail
