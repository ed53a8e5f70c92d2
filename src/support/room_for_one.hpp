// support/room_for_one.hpp: room in a container for one more element, made ahead of the insert.
//
// A change that must not throw after its first step reserves what its inserts need first. An exact
// reserve(size() + 1) makes that room one element at a time: a vector moves every element at every
// insert (quadratic), and libstdc++ rehashes an unordered container whenever the bucket count that
// reserve asks for differs from the one it has: every few percent of growth, and back down to that
// count in a table that grew by doubling (91 rehashes to 10000 elements, against 13 by doubling).
// room_for_one grows geometrically, and only when the next insert would have to.
#pragma once

namespace cuvmm::detail {

/// Makes sure one more element goes into `c` (a std::vector or an unordered standard container)
/// without allocating: an insert then neither reallocates nor rehashes. Throws std::bad_alloc, and
/// then `c` is unchanged.
template <class Container>
void room_for_one(Container& c) {
  if constexpr (requires { c.bucket_count(); }) {
    // An insert does not rehash while size() + 1 <= max_load_factor() * bucket_count() (the
    // standard's bound), but in a table that never held an element: one bucket, and no room yet
    // (libstdc++ allocates its buckets at the first insert).
    if (c.bucket_count() <= 1 ||
        static_cast<float>(c.size() + 1) > c.max_load_factor() * static_cast<float>(c.bucket_count())) {
      c.reserve(2 * c.size() + 1);
    }
  } else {
    if (c.size() == c.capacity()) c.reserve(2 * c.size() + 1);
  }
}

}  // namespace cuvmm::detail
