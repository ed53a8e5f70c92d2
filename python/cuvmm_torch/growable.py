"""GrowableTensor: a tensor that grows along its first dimension in place.

    import cuvmm_torch
    keys = cuvmm_torch.GrowableTensor((heads, head_dim), dtype=torch.bfloat16, device="cuda")
    keys.append(k)             # k: (tokens, heads, head_dim); copied on the current stream; returns
                               # keys.tensor: (len(keys), heads, head_dim), an ordinary torch.Tensor
    keys.data_ptr()            # the same from construction to destruction

The rows live in one range of virtual addresses reserved when the tensor is made; growing maps
physical memory behind the end (cuvmm's GrowableStorage), so nothing is copied and no address
changes. Views taken before a growth stay valid: they keep their size, and a new view shows the new
rows. A CUDA graph captured over the rows stays valid after the tensor grows.

Memory: the rows are mapped by cuvmm through the CUDA driver, not taken from PyTorch's allocator:
torch.cuda.memory_allocated() and memory_reserved() do not count them (stats() does, and the
device's free memory, torch.cuda.mem_get_info(), shows them). Memory that a live view reaches is
never unmapped: shrink_to_fit() keeps it, and the last view to go (or the tensor) gives it back.

Streams: each call uses PyTorch's current stream on the tensor's device (the C++ side asks PyTorch
for it): append copies on it; shrink_to_fit() and the destruction of the memory first wait for every
stream the tensor was used on (the current stream of each call, and those given to record_stream()).
Growth itself waits for nothing.
"""
from __future__ import annotations

from typing import Iterable

import torch
import torch.utils._pytree

from . import _C

__all__ = ["GrowableTensor"]

_MAP_AHEAD = {None: "auto", True: "on", False: "off"}


class GrowableTensor:
    """A tensor of rows of shape `row_shape` and type `dtype` that grows in place.

    device: "cuda" (the current device), "cuda:N", an index, or "cpu" (host memory through cuvmm's
    host backend: CPU tensors, for machines without a GPU). max_rows: the most rows it must be able to
    hold (its address range, rounded up to whole granules: the max_rows property says how many fit;
    0 or None: as large as the device's memory, see cuvmm's GrowableOptions).
    growth: "fast" (std::vector-like below a few hundred MiB, then chunks that hide their mapping
    behind the GPU's work) or "compact" (1/16 of the size each step: least slack). map_ahead: None
    (cuvmm's default: on for CUDA under "fast"), True or False: whether the next growth step is
    mapped ahead on cuvmm's mapping thread.
    """

    def __init__(self, row_shape: Iterable[int] | int = (), dtype: torch.dtype = torch.float32, device=None, *,
                 max_rows: int | None = None, growth: str = "fast", map_ahead: bool | None = None,
                 _host_memory_limit: int = 0):
        if isinstance(row_shape, int):
            row_shape = (row_shape,)
        try:
            row_shape = tuple(row_shape)
        except TypeError:
            raise TypeError(f"GrowableTensor: row_shape must be a sequence of ints, got {type(row_shape).__name__}") from None
        for d in row_shape:
            if not isinstance(d, int) or isinstance(d, bool):
                raise TypeError(f"GrowableTensor: row_shape must hold ints, got {row_shape!r}")
            if d <= 0:
                raise ValueError(f"GrowableTensor: every dimension of row_shape must be positive, got {row_shape!r}")
        if not isinstance(dtype, torch.dtype):
            raise TypeError(f"GrowableTensor: dtype must be a torch.dtype, got {dtype!r}")
        if max_rows is None:
            max_rows = 0
        if not isinstance(max_rows, int) or max_rows < 0:
            raise ValueError(f"GrowableTensor: max_rows must be a non-negative int, got {max_rows!r}")
        if map_ahead not in _MAP_AHEAD:
            raise ValueError(f"GrowableTensor: map_ahead must be None, True or False, got {map_ahead!r}")
        self._device = _device_of(device)
        self._row_shape = row_shape
        self._dtype = dtype
        index = -1 if self._device.type == "cpu" else self._device.index
        self._rows = _C.GrowableRows(dtype, list(row_shape), index, max_rows, growth, _MAP_AHEAD[map_ahead],
                                     _host_memory_limit)

    # --- what it is ---------------------------------------------------------------------------

    @property
    def dtype(self) -> torch.dtype:
        return self._dtype

    @property
    def device(self) -> torch.device:
        return self._device

    @property
    def row_shape(self) -> tuple:
        return self._row_shape

    @property
    def shape(self) -> torch.Size:
        return torch.Size((self._rows.size,) + self._row_shape)

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    def __len__(self) -> int:
        return self._rows.size

    @property
    def capacity(self) -> int:
        """Rows that fit in the memory mapped now (growing to them maps nothing)."""
        return self._rows.capacity

    @property
    def max_rows(self) -> int:
        """The most rows the tensor can ever hold (its address range)."""
        return self._rows.max_rows

    def data_ptr(self) -> int:
        """The address of row 0: the same for the tensor's whole life."""
        return self._rows.data_ptr

    def stats(self) -> dict:
        """cuvmm's counters of the memory: capacity_bytes (mapped now), peak_capacity_bytes,
        bytes_prepared (mapped ahead beyond capacity), max_capacity_bytes (reserved), chunk counts,
        growth_steps, live_views and viewed_bytes (how far they reach), streams recorded."""
        return self._rows.stats()

    # --- views --------------------------------------------------------------------------------

    def view(self, start: int = 0, stop: int | None = None) -> torch.Tensor:
        """Rows [start, stop) (default: all) as an ordinary tensor over the same memory. It keeps its
        size when the tensor grows or shrinks, and keeps its memory mapped while it lives."""
        n = self._rows.size
        stop = n if stop is None else stop
        if not (isinstance(start, int) and isinstance(stop, int)):
            raise TypeError(f"GrowableTensor.view: start and stop must be ints, got {start!r}, {stop!r}")
        if not 0 <= start <= stop <= n:
            raise ValueError(f"GrowableTensor.view: rows [{start}, {stop}) are not within the tensor's {n} rows")
        return self._rows.view(start, stop)

    @property
    def tensor(self) -> torch.Tensor:
        """All rows as an ordinary torch.Tensor (view(), in one call into the C++ side)."""
        return self._rows.view_all()

    def __getitem__(self, index):
        return self._rows.view_all()[index]

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """torch functions take a GrowableTensor as its current view: torch.sum(t), torch.cat([t, u])."""
        def as_view(a):
            return a.tensor if isinstance(a, GrowableTensor) else a

        args = torch.utils._pytree.tree_map(as_view, args)
        kwargs = torch.utils._pytree.tree_map(as_view, kwargs or {})
        return func(*args, **kwargs)

    def __repr__(self) -> str:
        return (f"GrowableTensor(shape={tuple(self.shape)}, dtype={self._dtype}, device={self._device}, "
                f"capacity={self.capacity})")

    # DLPack: the current view's (its capsule keeps the memory alive).
    def __dlpack__(self, *args, **kwargs):
        return self.tensor.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()

    # --- growth -------------------------------------------------------------------------------

    def append(self, rows: torch.Tensor) -> torch.Tensor:
        """Appends `rows`, a tensor of shape (k, *row_shape) and this tensor's dtype (on any device),
        copied on the current stream, and returns all rows as `tensor` would: a decode step's
        `keys = cache.append(k)` in one call. On any error (TypeError: not a tensor, another dtype;
        ValueError: another row shape, past max_rows; torch.OutOfMemoryError; the copy's own) nothing
        changed."""
        return self._rows.append(rows)  # checks, grows, copies and makes the view; rolls back on error

    def resize_(self, rows: int) -> GrowableTensor:
        """Makes the tensor `rows` long; new rows are uninitialized, memory stays mapped when it shrinks."""
        self._rows.resize(_count(rows, "resize_"))
        return self

    def reserve(self, rows: int) -> None:
        """Maps memory for `rows` rows now, so that growing up to them maps nothing."""
        self._rows.reserve(_count(rows, "reserve"))

    def shrink_to_fit(self) -> int:
        """Gives back the memory that neither the rows in use nor a live view reach, after waiting
        for the streams the tensor was used on; returns the bytes given back. Not during a CUDA
        graph capture (it would wait for the capturing stream)."""
        if self._device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise RuntimeError("GrowableTensor.shrink_to_fit() during a CUDA graph capture: unmapping must wait "
                               "for the stream, which cannot be waited for while it captures")
        return self._rows.shrink_to_fit()

    def record_stream(self, stream: torch.cuda.Stream) -> None:
        """Says that `stream` uses the memory too: shrinking and destruction wait for it."""
        if self._device.type == "cuda":
            self._rows.record_stream(stream.cuda_stream)


def _count(rows, what: str) -> int:
    if not isinstance(rows, int) or isinstance(rows, bool):
        raise TypeError(f"GrowableTensor.{what}: rows must be an int, got {type(rows).__name__}")
    if rows < 0:
        raise ValueError(f"GrowableTensor.{what}: rows must be non-negative, got {rows}")
    return rows


def _device_of(device) -> torch.device:
    if device is None:
        device = "cuda"
    if isinstance(device, int) and not isinstance(device, bool):
        device = torch.device("cuda", device)
    try:
        device = torch.device(device)
    except (TypeError, RuntimeError) as e:
        raise TypeError(f"GrowableTensor: device must name a CUDA device or the CPU, got {device!r}") from e
    if device.type == "cpu":
        return torch.device("cpu")
    if device.type != "cuda":
        raise ValueError(f"GrowableTensor: device must be a CUDA device or the CPU, got {device}")
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device
