// support/node_spares.hpp: nodes of a node-based standard container kept after their elements were
// erased, for the next inserts to reuse.
//
// The Arena's books are node-based containers that one allocation and its free each change by an
// element: without spares every cached pair costs a heap allocation and a free per container (a
// third of the host instructions of a pair at 32 MiB). A NodeSpares keeps up to `kept` nodes of
// erased elements; make() hands one back holding the new element, or makes one (node_ahead) when
// none is kept. Nodes of one container type are interchangeable, so one NodeSpares can serve every
// container of that type (each stream's cache, say). Invariant: it never holds more than `kept`
// nodes, and keeping one never allocates (the room is reserved at construction).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "support/node_ahead.hpp"

namespace cuvmm::detail {

template <class Container>
class NodeSpares {
 public:
  using node_type = typename Container::node_type;

  /// Keeps up to `kept` nodes. Throws std::bad_alloc.
  explicit NodeSpares(std::size_t kept) { spares_.reserve(kept); }

  /// Removes the element at `it` from `c`, keeping its node when there is room. Never throws.
  void erase(Container& c, typename Container::const_iterator it) noexcept { keep(c.extract(it)); }

  /// Keeps `node` (an extracted one) when there is room; else it is freed. Never throws.
  void keep(node_type&& node) noexcept {
    if (spares_.size() < spares_.capacity()) spares_.push_back(std::move(node));
  }

  /// A node holding the element made from `args` (key and mapped value for a map, the value for a
  /// set): a kept one, else a new one. Throws std::bad_alloc, or what the element's constructor or
  /// assignment throws; then nothing changed but that a kept node may be gone.
  template <class... Args>
  node_type make(Args&&... args) {
    if (spares_.empty()) [[unlikely]] return made_anew(std::forward<Args>(args)...);
    node_type node = std::move(spares_.back());
    spares_.pop_back();
    if constexpr (requires { typename Container::mapped_type; }) {
      static_assert(sizeof...(Args) == 2, "a map's node is made from its key and its mapped value");
      assign_pair(node, std::forward<Args>(args)...);
    } else {
      node.value() = typename Container::value_type(std::forward<Args>(args)...);
    }
    return node;
  }

  [[nodiscard]] std::size_t size() const noexcept { return spares_.size(); }

 private:
  /// A new node (none kept): out of line, so that make() stays small enough to inline on the
  /// cached path, which a kept node serves.
  template <class... Args>
  [[gnu::noinline]] static node_type made_anew(Args&&... args) {
    return node_ahead<Container>(std::forward<Args>(args)...);
  }

  template <class Key, class Mapped>
  static void assign_pair(node_type& node, Key&& key, Mapped&& mapped) {
    node.key() = std::forward<Key>(key);
    node.mapped() = std::forward<Mapped>(mapped);
  }

  std::vector<node_type> spares_;
};

}  // namespace cuvmm::detail
