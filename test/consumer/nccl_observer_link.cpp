// cuvmm::nccl through the CMake package: NcclObserver's header compiles without nccl.h and the
// program links and loads libcuvmm_nccl (and the NCCL it was built with); no GPU is needed.
#include <cstdio>

#include <cuvmm/nccl_observer.hpp>

int main() {
  bool const windows = cuvmm::NcclObserver::has_windows();
  std::printf("nccl_observer_link: NCCL windows %s\n", windows ? "available" : "not available");
  return 0;
}
