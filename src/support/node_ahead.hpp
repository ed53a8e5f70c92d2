// support/node_ahead.hpp: an element of a node-based standard container, made before the change
// that inserts it.
//
// A change of several containers keeps the strong guarantee without a catch block when it is built
// in two phases, as GrowableStorage::reserve is: every node it needs is allocated first (the only
// step that can fail, and it changes nothing), then the nodes go in and the rest is moved with calls
// that cannot throw. insert(std::move(node)) allocates nothing in an ordered container, nor in an
// unordered one whose buckets were reserved for it.
#pragma once

#include <utility>

namespace cuvmm::detail {

/// A node of `Container` (std::map, std::multimap, std::set, std::multiset or an unordered one)
/// holding the element made from `args`. Throws std::bad_alloc (or what the element's constructor
/// throws), and nothing else changed then.
template <class Container, class... Args>
typename Container::node_type node_ahead(Args&&... args) {
  Container staging;
  staging.emplace(std::forward<Args>(args)...);
  return staging.extract(staging.begin());
}

}  // namespace cuvmm::detail
