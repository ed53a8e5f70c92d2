"""PyTorch's CUDA allocations served by cuvmm's Arena.

    import cuvmm_torch
    cuvmm_torch.enable()          # before the first CUDA call of the process
    x = torch.empty(2**30, device="cuda")
    torch.cuda.memory_allocated() # PyTorch's statistics, kept by cuvmm
    cuvmm_torch.stats()           # the arena's counters: {"bytes_physical": {"current", "peak", "total"}, ...}
    cuvmm_torch.trim()            # give cached pages back to the device; returns the bytes given back

Or without changing the program: CUVMM_TORCH_ENABLE=1 with `import cuvmm_torch` in it, or
`python -m cuvmm_torch script.py ARGS...`. `python -m cuvmm_torch` alone prints the status.

enable() makes cuvmm PyTorch's whole CUDA allocator (a c10::cuda::CUDACachingAllocator::CUDAAllocator,
the _allocator extension): torch.cuda.memory_allocated/memory_stats/reset_peak_memory_stats,
Tensor.record_stream, CUDA graphs and their private pools (torch.cuda.graph,
make_graphed_callables, torch.compile(mode="reduce-overhead")), empty_cache,
set_per_process_memory_fraction and torch.cuda.MemPool work as with PyTorch's allocator. What it
cannot do (CUDA IPC, allocator trace trackers, peer access between devices) raises a RuntimeError naming it.

An allocation the arena cannot serve raises torch.OutOfMemoryError, as with PyTorch's own allocator,
after the arena gave its cached pages back; the process keeps working.

The arenas' options come from the environment variable CUVMM_ARENA_CONF, read when a device's arena
is made: comma-separated key:value pairs naming fields of cuvmm::ArenaOptions (address_space_bytes,
page_bytes, large_page_bytes, byte_limit: bytes or with KiB/MiB/GiB/TiB; share_large_page_tails:
true/false; compression: none/preferred/required), as PYTORCH_CUDA_ALLOC_CONF is for PyTorch's
allocator. E.g. CUVMM_ARENA_CONF=large_page_bytes:128MiB trades memory for speed (fewer, larger pages
to map). arena_options() shows what they give.

GrowableTensor (growable.py) is a tensor that grows along its first dimension in place, for key/value
caches and other buffers that grow: its data_ptr() never changes, growth copies nothing.
"""
from __future__ import annotations

import os

import torch

from . import _build_info

# The extensions link torch's C++ libraries, whose ABI belongs to the one torch build they were
# built against: under any other they could crash, so they are not loaded.
if (str(torch.__version__), torch.version.cuda) != (_build_info.TORCH_VERSION, _build_info.TORCH_CUDA):
    raise ImportError(
        f"cuvmm_torch was built against torch {_build_info.TORCH_VERSION} (CUDA {_build_info.TORCH_CUDA}) but "
        f"this Python has torch {torch.__version__} (CUDA {torch.version.cuda}); rebuild it against this torch: "
        "pip install --no-build-isolation ./python, from a cuvmm checkout")

from . import _C
from .growable import GrowableTensor

try:  # built only against a CUDA build of torch
    from . import _allocator
except ImportError as _error:
    _allocator = None
    _allocator_missing = str(_error)
else:
    _allocator_missing = ""

__all__ = ["GrowableTensor", "arena_options", "enable", "is_enabled", "stats", "status", "trim"]

ENABLE_VARIABLE = "CUVMM_TORCH_ENABLE"
_enabled = False


def enable() -> None:
    """Makes cuvmm's Arena PyTorch's CUDA allocator for this process.

    Call it before PyTorch initializes CUDA (the first tensor on a GPU, torch.cuda.current_device(),
    ...): PyTorch cannot change its allocator after that. Calling it again is a no-op. Raises
    ValueError when CUVMM_ARENA_CONF is not a valid text (before anything changes), RuntimeError when
    PyTorch has no CUDA device, or when it is called too late.
    """
    global _enabled
    if _enabled:
        return
    arena_options()  # a bad CUVMM_ARENA_CONF is refused now, not at the first allocation
    if not torch.cuda.is_available():
        raise RuntimeError(
            "cuvmm_torch.enable(): PyTorch sees no CUDA device (torch " + torch.__version__ +
            (", built without CUDA" if torch.version.cuda is None else f", CUDA {torch.version.cuda}") +
            "); cuvmm allocates GPU memory through the CUDA driver and needs a GPU")
    if _allocator is None:
        raise RuntimeError(
            "cuvmm_torch.enable(): this cuvmm_torch was built without its CUDA allocator extension "
            f"(cuvmm_torch._allocator: {_allocator_missing}); rebuild it against a CUDA build of torch")
    if torch.cuda.is_initialized():
        raise RuntimeError(
            "cuvmm_torch.enable() was called after PyTorch initialized CUDA; PyTorch cannot change its "
            "allocator then. Call it first, before any CUDA tensor or torch.cuda call")
    try:
        torch._C._cuda_changeCurrentAllocator(_allocator.allocator())
        _allocator.register_device_allocator()
    except RuntimeError as e:
        raise RuntimeError(
            "cuvmm_torch.enable() was called after PyTorch's CUDA allocator was initialized; call it "
            f"first, before any CUDA tensor or torch.cuda call ({e})") from e
    _enabled = True


def arena_options(conf: str | None = None) -> dict:
    """The options the arenas are made with: cuvmm's defaults with what `conf` sets (default: the
    environment variable CUVMM_ARENA_CONF), as a dict of address_space_bytes, page_bytes,
    large_page_bytes, byte_limit (0: the default or no limit), share_large_page_tails and
    compression. Raises ValueError, naming the variable and the offending pair, for a bad text."""
    return _C.arena_options(os.environ.get("CUVMM_ARENA_CONF", "") if conf is None else conf)


def status() -> dict:
    """What `python -m cuvmm_torch` prints: versions, whether the allocator is built and enabled,
    the arena options, and PyTorch's and the arena's statistics of the current device when enabled."""
    result = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "allocator_built": _allocator is not None,
        "enabled": _enabled,
        "arena_options": arena_options(),
    }
    if _allocator_missing:
        result["allocator_missing"] = _allocator_missing
    if _enabled and torch.cuda.is_initialized():
        result["memory_allocated"] = torch.cuda.memory_allocated()
        result["memory_reserved"] = torch.cuda.memory_reserved()
        result["arena"] = stats()
    return result


def is_enabled() -> bool:
    """Whether enable() made cuvmm PyTorch's CUDA allocator in this process."""
    return _enabled


def _current_device() -> int:
    # Before PyTorch starts CUDA nothing was allocated and the current device is 0; asking PyTorch
    # would start CUDA, after which enable() could no longer work.
    return torch.cuda.current_device() if torch.cuda.is_initialized() else 0


def _device_index(device) -> int:
    if device is None:
        return _current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"cuvmm_torch: {device} is not a CUDA device")
    return _current_device() if device.index is None else device.index


def stats(device=None) -> dict:
    """The arena's statistics for `device` (default: the current device) as a dict of the ArenaStats
    fields: bytes_requested, allocations, bytes_mapped, bytes_physical, bytes_reserved (each a dict
    of "current", "peak" and "total"), chunks_created, chunks_released, maps, unmaps, access_calls,
    cross_stream_reuses, host_waits, front_allocations, front_frees, reclaims, pages_moved, bytes_stale, streams (counts), the bytes held by
    kind: bytes_live, bytes_pinned, bytes_lent, bytes_cached, bytes_pooled (they add up to
    bytes_physical's current; bytes_whole_idle is the part of bytes_cached in idle whole chunks),
    at_physical_peak (a dict of bytes_requested and those five kinds, the first time bytes_physical
    reached its peak: what the arena held beyond the bytes live at that moment),
    whole_chunk_reuses, whole_chunks_created, whole_chunks_released (counts) and fragmentation (0
    to 1). All zero before the device's first allocation through cuvmm."""
    result = (_allocator if _enabled else _C).stats(_device_index(device))
    if result is None:  # nothing allocated on the device yet: no arena, nothing held
        result = _C.stats_of_no_arena()
    return result


def trim(device=None) -> int:
    """Gives the pages of `device`'s arena (default: the current device) that back no tensor back to
    the device, after waiting for the streams that freed them; returns the bytes given back."""
    return (_allocator if _enabled else _C).trim(_device_index(device))


if os.environ.get(ENABLE_VARIABLE, "") not in ("", "0"):
    enable()
