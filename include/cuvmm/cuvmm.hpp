// cuvmm/cuvmm.hpp: the umbrella header.
#pragma once

#include <cuvmm/address_range.hpp>
#include <cuvmm/arena.hpp>
#include <cuvmm/alias_view.hpp>
#include <cuvmm/backend.hpp>
#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/device_caps.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/fault_injecting_backend.hpp>
#include <cuvmm/growable_buffer.hpp>
#include <cuvmm/growable_storage.hpp>
#include <cuvmm/growth_policy.hpp>
#include <cuvmm/host_backend.hpp>
#include <cuvmm/ipc/channel.hpp>
#include <cuvmm/ipc/message.hpp>
#include <cuvmm/ipc/shared_buffer.hpp>
#include <cuvmm/mapping.hpp>
#include <cuvmm/multicast.hpp>
#include <cuvmm/multimem.hpp>
#include <cuvmm/physical_chunk.hpp>
#include <cuvmm/ring_buffer.hpp>
#include <cuvmm/types.hpp>
#include <cuvmm/unique_fd.hpp>
#include <cuvmm/version.hpp>
