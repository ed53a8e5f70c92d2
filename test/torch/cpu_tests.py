"""The cuvmm_torch package without a GPU: it imports, enable() says clearly why it cannot work, and
the very malloc/free functions PyTorch calls, run over host-backend arenas, raise
torch.OutOfMemoryError (never a null pointer) and keep working afterwards; stats() and trim() give
exact numbers.

    python3 test/torch/cpu_tests.py -v     (with the installed cuvmm_torch and torch importable)

Each test uses its own device index (a host arena per index: the registry cannot drop one).
"""
import contextlib
import ctypes
import gc
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import torch

import cuvmm_torch
from cuvmm_torch import _C

MiB = 1 << 20
# Host arenas: 2 MiB pages (HostBackend's granularity), 32 MiB large pages (the Arena's default).
BYTE_LIMIT = 64 * MiB
DEVICE_BYTES = 256 * MiB
ADDRESS_SPACE = 1024 * MiB


def host_arena(device: int) -> int:
    _C._install_host_arena(device, BYTE_LIMIT, ADDRESS_SPACE, DEVICE_BYTES)
    return device


def poison_and_check(ptr: int, size: int, byte: int) -> None:
    """Writes `byte` over the whole allocation and reads back its first and last bytes."""
    ctypes.memset(ptr, byte, size)
    data = ctypes.string_at(ptr, 1) + ctypes.string_at(ptr + size - 1, 1)
    assert data == bytes([byte, byte]), data


class PackageTest(unittest.TestCase):
    def test_the_extension_exports_the_entry_points_pytorch_looks_up(self):
        library = ctypes.CDLL(_C.__file__)
        self.assertTrue(library.cuvmm_torch_malloc)
        self.assertTrue(library.cuvmm_torch_free)

    def test_the_extension_finds_its_own_libcuvmm_through_origin(self):
        dynamic = subprocess.run(["readelf", "-d", _C.__file__], check=True, capture_output=True, text=True).stdout
        needed = re.findall(r"\(NEEDED\).*\[(libcuvmm[^\]]*)\]", dynamic)
        self.assertEqual(len(needed), 1, dynamic)
        self.assertIn("$ORIGIN", re.search(r"\(RUNPATH\).*\[(.*)\]", dynamic).group(1))
        self.assertTrue(os.path.exists(os.path.join(os.path.dirname(_C.__file__), needed[0])))

    @unittest.skipIf(torch.cuda.is_available(), "this machine has a GPU: enable() would succeed")
    def test_enable_without_a_gpu_raises_a_runtime_error_that_says_so(self):
        with self.assertRaises(RuntimeError) as caught:
            cuvmm_torch.enable()
        self.assertIn("PyTorch sees no CUDA device", str(caught.exception))
        self.assertIn(torch.__version__, str(caught.exception))
        self.assertFalse(cuvmm_torch.is_enabled())

    def test_stats_of_a_device_without_an_arena_are_all_zero(self):
        s = cuvmm_torch.stats(63)
        self.assertEqual(s["bytes_physical"], {"current": 0, "peak": 0, "total": 0})
        self.assertEqual(s["allocations"], {"current": 0, "peak": 0, "total": 0})
        self.assertEqual(s["chunks_created"], 0)
        self.assertEqual(cuvmm_torch.trim(63), 0)

    def test_a_device_index_out_of_range_raises_value_error(self):
        with self.assertRaises(ValueError):
            _C._malloc(MiB, 64)
        with self.assertRaises(ValueError):
            cuvmm_torch.stats(-1)

    def test_stats_and_trim_of_the_current_device_do_not_start_cuda(self):
        self.assertEqual(cuvmm_torch.stats(), cuvmm_torch.stats(0))
        self.assertEqual(cuvmm_torch.stats("cuda"), cuvmm_torch.stats(0))
        self.assertEqual(cuvmm_torch.trim(), 0)
        self.assertFalse(torch.cuda.is_initialized())

    def test_stats_on_a_cpu_device_raises_value_error(self):
        with self.assertRaises(ValueError):
            cuvmm_torch.stats("cpu")


def run_with_conf(conf: str, code: str) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter (the registry makes an index's arena once per process) with
    CUVMM_ARENA_CONF set to `conf`."""
    env = dict(os.environ, CUVMM_ARENA_CONF=conf)
    return subprocess.run([sys.executable, "-c", "import cuvmm_torch\nfrom cuvmm_torch import _C\n" + code],
                          env=env, capture_output=True, text=True, timeout=120)


class ArenaOptionsTest(unittest.TestCase):
    DEFAULTS = {"address_space_bytes": 0, "page_bytes": 0, "large_page_bytes": 32 * MiB, "max_lent_bytes": 0,
                "max_lent_tail_bytes": 16 * MiB, "share_large_page_tails": True, "byte_limit": 0, "compression": "none",
                "stream_cache_run_bytes": 8 * MiB, "max_idle_percent": 20, "whole_chunk_bytes": 0,
                "wait_before_create": False}

    def test_without_a_text_the_options_are_the_defaults(self):
        self.assertEqual(cuvmm_torch.arena_options(""), self.DEFAULTS)

    def test_a_text_sets_the_options_it_names(self):
        options = cuvmm_torch.arena_options(
            "large_page_bytes:128MiB, share_large_page_tails:false,byte_limit:64GiB,compression:preferred,"
            "max_lent_tail_bytes:64MiB,wait_before_create:true")
        self.assertEqual(options, dict(self.DEFAULTS, large_page_bytes=128 * MiB, share_large_page_tails=False,
                                       byte_limit=64 << 30, compression="preferred", max_lent_tail_bytes=64 * MiB,
                                       wait_before_create=True))

    def test_the_environment_variable_is_what_arena_options_reads_by_default(self):
        result = run_with_conf("page_bytes:4MiB,address_space_bytes:2TiB",
                               "o = cuvmm_torch.arena_options()\nprint(o['page_bytes'], o['address_space_bytes'])")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, f"{4 * MiB} {2 << 40}\n")

    def test_a_bad_text_raises_value_error_naming_the_variable_and_the_pair(self):
        with self.assertRaises(ValueError) as caught:
            cuvmm_torch.arena_options("large_page_bytes:64MiB,huge_pages:1")
        self.assertIn('CUVMM_ARENA_CONF="large_page_bytes:64MiB,huge_pages:1": \'huge_pages:1\' in', str(caught.exception))
        self.assertIn("no such key", str(caught.exception))
        with self.assertRaises(ValueError) as caught:
            cuvmm_torch.arena_options("byte_limit:lots")
        self.assertIn("wants a whole number of bytes", str(caught.exception))

    def test_enable_refuses_a_bad_variable_before_anything_changes(self):
        result = run_with_conf("page_bytes=4MiB", "try:\n    cuvmm_torch.enable()\nexcept ValueError as e:\n"
                               "    print('ValueError', e)\nprint(cuvmm_torch.is_enabled())")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("ValueError cuvmm_torch: CUVMM_ARENA_CONF=\"page_bytes=4MiB\": 'page_bytes=4MiB' in", result.stdout)
        self.assertIn("wants key:value", result.stdout)
        self.assertTrue(result.stdout.endswith("\nFalse\n"), result.stdout)

    def test_with_a_bad_variable_an_allocation_raises_value_error_and_makes_no_arena(self):
        result = run_with_conf("compression:maybe", "try:\n    _C._malloc(1 << 20, 7)\nexcept ValueError as e:\n"
                               "    print('ValueError', e)\nprint(_C.stats(7))")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("ValueError cuvmm_torch: CUVMM_ARENA_CONF=\"compression:maybe\"", result.stdout)
        self.assertIn("wants none, preferred or required", result.stdout)
        self.assertTrue(result.stdout.endswith("\nNone\n"), result.stdout)


class OutOfMemoryTest(unittest.TestCase):
    def test_a_request_beyond_the_byte_limit_raises_torch_out_of_memory_error_with_the_numbers(self):
        device = host_arena(1)
        live = _C._malloc(8 * MiB, device)
        self.assertNotEqual(live, 0)
        poison_and_check(live, 8 * MiB, 0xA5)
        with self.assertRaises(torch.OutOfMemoryError) as caught:
            _C._malloc(100 * MiB, device)
        message = str(caught.exception)
        self.assertIs(type(caught.exception), torch.OutOfMemoryError)
        self.assertTrue(message.startswith("cuvmm: out of memory on device 1: tried to allocate 100.00 MiB "
                                           "(104857600 bytes); the arena holds 8.00 MiB (8388608 bytes) in 1 live "
                                           "allocations and 8.00 MiB (8388608 bytes) of physical memory in all, "
                                           "after giving back "), message)
        # The device (HostBackend's physical_limit) has everything but the live allocation's pages free.
        self.assertIn("; the device has 248.00 MiB (260046848 bytes) free of 256.00 MiB (268435456 bytes).",
                      message)
        self.assertIn("byte_limit 67108864", message)  # the Arena's own reason, kept
        found = re.search(r"after giving back (?:[^(;]*\((\d+) bytes\)|(\d+) bytes)", message)
        given_back = int(found.group(1) or found.group(2))
        s = cuvmm_torch.stats(device)
        self.assertEqual(s["bytes_physical"]["current"], 8 * MiB)
        # What the failed request left cached went back (how much depends on how the Arena gathers
        # pages; at most all it held beyond the live allocation).
        self.assertLessEqual(given_back, BYTE_LIMIT - 8 * MiB)
        self.assertLessEqual(8 * MiB + given_back, s["bytes_physical"]["peak"])
        self.assertEqual(s["allocations"]["current"], 1)
        self.assertEqual(s["bytes_requested"]["current"], 8 * MiB)
        # The live allocation is untouched.
        self.assertEqual(ctypes.string_at(live, 1), b"\xa5")
        _C._free(live, 8 * MiB, device)

    def test_after_out_of_memory_the_arena_serves_what_fits_and_frees_it(self):
        device = host_arena(2)
        live = _C._malloc(8 * MiB, device)
        poison_and_check(live, 8 * MiB, 0xC3)
        with self.assertRaises(torch.OutOfMemoryError):
            _C._malloc(BYTE_LIMIT, device)
        more = _C._malloc(40 * MiB, device)  # 8 + 40 MiB fit in the 64 MiB limit
        self.assertNotEqual(more, 0)
        poison_and_check(more, 40 * MiB, 0x5A)
        self.assertEqual(ctypes.string_at(live + 8 * MiB - 1, 1), b"\xc3")
        s = cuvmm_torch.stats(device)
        self.assertEqual(s["allocations"]["current"], 2)
        self.assertEqual(s["bytes_requested"]["current"], 48 * MiB)
        _C._free(more, 40 * MiB, device)
        _C._free(live, 8 * MiB, device)
        self.assertEqual(cuvmm_torch.stats(device)["allocations"]["current"], 0)

    def test_a_request_larger_than_the_address_space_raises_torch_out_of_memory_error(self):
        device = host_arena(3)
        with self.assertRaises(torch.OutOfMemoryError) as caught:
            _C._malloc(2 * ADDRESS_SPACE, device)
        self.assertIn("tried to allocate 2.00 GiB (2147483648 bytes)", str(caught.exception))
        self.assertIn("more than the arena's whole address space", str(caught.exception))

    def test_a_negative_size_raises_value_error_and_allocates_nothing(self):
        device = host_arena(4)
        with self.assertRaises(ValueError) as caught:
            _C._malloc(-1, device)
        # The number is there: the extension's streams are torch's libstdc++'s, not a static copy.
        self.assertIn("cuvmm_torch: negative allocation size -1", str(caught.exception))
        self.assertEqual(cuvmm_torch.stats(device)["allocations"]["total"], 0)

    def test_freeing_an_unknown_pointer_changes_nothing(self):
        device = host_arena(5)
        live = _C._malloc(4 * MiB, device)
        before = cuvmm_torch.stats(device)
        _C._free(live + 4096, 4 * MiB, device)  # reported on stderr, never raised into PyTorch's deleter
        self.assertEqual(cuvmm_torch.stats(device), before)
        _C._free(live, 4 * MiB, device)
        self.assertEqual(cuvmm_torch.stats(device)["allocations"]["current"], 0)


class StatsAndTrimTest(unittest.TestCase):
    def test_trim_gives_back_the_freed_pages_and_bytes_physical_drops_by_as_much(self):
        device = host_arena(6)
        a = _C._malloc(6 * MiB, device)
        b = _C._malloc(10 * MiB, device)
        s = cuvmm_torch.stats(device)
        self.assertEqual(s["bytes_requested"], {"current": 16 * MiB, "peak": 16 * MiB, "total": 16 * MiB})
        self.assertEqual(s["allocations"], {"current": 2, "peak": 2, "total": 2})
        self.assertEqual(s["bytes_physical"]["current"], 16 * MiB)  # 3 + 5 pages of 2 MiB
        self.assertEqual(s["bytes_reserved"]["current"], ADDRESS_SPACE)
        _C._free(b, 10 * MiB, device)
        cached = cuvmm_torch.stats(device)
        self.assertEqual(cached["bytes_requested"]["current"], 6 * MiB)
        self.assertEqual(cached["bytes_physical"]["current"], 16 * MiB)  # freed pages stay cached
        self.assertEqual((cached["bytes_live"], cached["bytes_cached"]), (6 * MiB, 10 * MiB))
        self.assertEqual(sum(cached[k] for k in ("bytes_live", "bytes_pinned", "bytes_lent", "bytes_cached",
                                                 "bytes_pooled")), cached["bytes_physical"]["current"])
        self.assertEqual(cuvmm_torch.trim(device), 10 * MiB)
        trimmed = cuvmm_torch.stats(device)
        self.assertEqual(trimmed["bytes_physical"]["current"], 6 * MiB)
        self.assertEqual(trimmed["bytes_physical"]["peak"], 16 * MiB)
        self.assertEqual(trimmed["at_physical_peak"],  # where the 16 MiB were at the peak: all live
                         {"bytes_requested": 16 * MiB, "bytes_live": 16 * MiB, "bytes_pinned": 0, "bytes_lent": 0,
                          "bytes_cached": 0, "bytes_pooled": 0})
        self.assertEqual(cuvmm_torch.trim(device), 0)
        _C._free(a, 6 * MiB, device)
        self.assertEqual(cuvmm_torch.trim(device), 6 * MiB)
        self.assertEqual(cuvmm_torch.stats(device)["bytes_physical"]["current"], 0)

    def test_stats_has_every_arena_stats_field(self):
        device = host_arena(7)
        self.assertEqual(set(cuvmm_torch.stats(device)),
                         {"bytes_requested", "allocations", "bytes_mapped", "bytes_physical", "bytes_reserved",
                          "chunks_created", "chunks_released", "maps", "unmaps", "access_calls",
                          "create_seconds", "release_seconds", "map_seconds", "unmap_seconds", "access_seconds",
                          "cross_stream_reuses", "host_waits", "host_wait_seconds", "front_allocations", "front_frees", "reclaims", "pages_moved", "bytes_stale", "streams",
                          "bytes_live", "bytes_pinned", "bytes_lent", "bytes_cached", "bytes_pooled",
                          "at_physical_peak", "bytes_whole_idle", "whole_chunk_reuses", "whole_chunks_created", "whole_chunks_released",
                          "fragmentation"})
        self.assertEqual(set(cuvmm_torch.stats(device)), set(cuvmm_torch.stats(62)))

    def test_a_second_host_arena_for_the_same_index_is_refused(self):
        device = host_arena(8)
        with self.assertRaises(ValueError):
            host_arena(device)


class AllocatorExtensionTest(unittest.TestCase):
    """The whole-allocator extension (_allocator) without a GPU: it loads, converts to PyTorch's
    allocator type, and every way of switching it on says clearly why it cannot work here."""

    def run_python(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *args], env=dict(os.environ, **env), capture_output=True, text=True,
                              timeout=120)

    @unittest.skipIf(cuvmm_torch._allocator is None, "built without _allocator (a torch without CUDA)")
    def test_the_allocator_is_a_pytorch_cuda_allocator_object(self):
        from cuvmm_torch import _allocator
        self.assertIsInstance(_allocator.allocator(), torch._C._cuda_CUDAAllocator)
        self.assertIs(_allocator.allocator(), _allocator.allocator())
        self.assertIsNone(_allocator.stats(0))  # nothing allocated: no arena
        self.assertEqual(_allocator.trim(0), 0)
        self.assertFalse(torch.cuda.is_initialized())

    @unittest.skipIf(torch.cuda.is_available(), "this machine has a GPU: enabling would succeed")
    def test_the_enable_variable_makes_the_import_raise_that_there_is_no_gpu(self):
        result = self.run_python("-c", "import cuvmm_torch", CUVMM_TORCH_ENABLE="1")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("RuntimeError: cuvmm_torch.enable(): PyTorch sees no CUDA device", result.stderr)
        result = self.run_python("-c", "import cuvmm_torch; print(cuvmm_torch.is_enabled())", CUVMM_TORCH_ENABLE="0")
        self.assertEqual((result.returncode, result.stdout), (0, "False\n"), result.stderr)

    def test_python_m_cuvmm_torch_prints_the_status_as_json(self):
        result = self.run_python("-m", "cuvmm_torch", CUVMM_ARENA_CONF="page_bytes:4MiB")
        self.assertEqual(result.returncode, 0, result.stderr)
        status = json.loads(result.stdout)
        self.assertEqual(status["torch"], torch.__version__)
        self.assertEqual(status["enabled"], False)
        self.assertEqual(status["allocator_built"], cuvmm_torch._allocator is not None)
        self.assertEqual(status["arena_options"]["page_bytes"], 4 * MiB)

    @unittest.skipIf(torch.cuda.is_available(), "this machine has a GPU: the script would run")
    def test_python_m_cuvmm_torch_with_a_script_enables_first_and_says_why_it_cannot(self):
        result = self.run_python("-m", "cuvmm_torch", "-c-is-not-a-script")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("PyTorch sees no CUDA device", result.stderr)


GRANULE = 2 * MiB  # HostBackend's granularity
ROW = (GRANULE // 2 // 4,)  # float32 rows of 1 MiB: two a granule
POISON = -7.25


def host_growable(**kwargs) -> cuvmm_torch.GrowableTensor:
    kwargs.setdefault("max_rows", 64)
    return cuvmm_torch.GrowableTensor(ROW, torch.float32, "cpu", **kwargs)


def rows_of(first: int, count: int) -> torch.Tensor:
    """`count` rows whose every element is the row's number (first, first + 1, ...)."""
    return torch.arange(first, first + count, dtype=torch.float32).repeat_interleave(ROW[0]).reshape(count, *ROW)


class GrowableTensorTest(unittest.TestCase):
    """cuvmm_torch.GrowableTensor over the host backend (CPU tensors): the same C++ class and
    Python code as on a GPU, with cuvmm::HostBackend in place of the CUDA driver."""

    def assert_rows(self, t: torch.Tensor, first: int, count: int):
        self.assertEqual(tuple(t.shape), (count, *ROW))
        self.assertTrue(torch.equal(t, rows_of(first, count)), t[:, 0])

    def test_appended_rows_land_after_the_last_and_write_nothing_beyond(self):
        g = host_growable(growth="compact")
        g.reserve(6)
        self.assertEqual(g.capacity, 6)  # three granules
        g.resize_(6)
        g.tensor.fill_(POISON)
        g.resize_(0)
        g.append(rows_of(0, 3))
        g.append(rows_of(3, 2))
        self.assertEqual(len(g), 5)
        self.assertEqual(g.shape, torch.Size((5, *ROW)))
        self.assert_rows(g.tensor, 0, 5)
        g.resize_(6)
        self.assertTrue(torch.equal(g.view(5, 6), torch.full((1, *ROW), POISON)))

    def test_data_ptr_and_earlier_views_stay_valid_through_growth(self):
        g = host_growable()
        g.append(rows_of(0, 1))
        address = g.data_ptr()
        first = g.tensor
        self.assertEqual(first.data_ptr(), address)
        for i in range(1, 40):  # 40 MiB in 1 MiB rows: many growth steps
            g.append(rows_of(i, 1))
            self.assertEqual(g.data_ptr(), address)
        self.assertGreater(g.stats()["growth_steps"], 3)
        self.assert_rows(first, 0, 1)  # its size kept, its memory never moved
        self.assert_rows(g.tensor, 0, 40)
        self.assertEqual(g.tensor.data_ptr(), address)
        self.assertEqual(g.view(39).data_ptr(), address + 39 * MiB)

    def test_the_view_is_an_ordinary_tensor_writing_the_rows(self):
        g = host_growable()
        g.append(rows_of(1, 3))
        view = g.tensor
        self.assertIs(type(view), torch.Tensor)
        self.assertEqual(view.sum().item(), (1 + 2 + 3) * ROW[0])
        view[1].mul_(10)
        self.assertEqual(g[1][0].item(), 20.0)
        self.assertEqual(g.view(1, 2)[0, 5].item(), 20.0)
        g.append(g.view(0, 2))  # its own rows: the memory does not move under the copy
        self.assertEqual(g.tensor[:, 0].tolist(), [1.0, 20.0, 3.0, 1.0, 20.0])

    def test_torch_functions_take_the_growable_tensor_as_its_view(self):
        g = host_growable()
        g.append(rows_of(1, 2))
        self.assertEqual(torch.sum(g).item(), 3 * ROW[0])
        both = torch.cat([g, rows_of(3, 1)])
        self.assert_rows(both, 1, 3)
        self.assertEqual(torch.nn.functional.relu(g).shape, g.shape)

    def test_a_view_keeps_its_memory_after_the_tensor_is_gone(self):
        g = host_growable()
        g.append(rows_of(0, 4))
        view = g.view(2, 4)
        del g
        gc.collect()
        self.assert_rows(view, 2, 2)
        view.add_(1)  # still mapped, still writable
        self.assert_rows(view, 3, 2)

    def test_shrink_to_fit_gives_back_exactly_the_memory_no_row_and_no_view_reaches(self):
        g = host_growable(growth="compact")
        for n in range(2, 12, 2):  # one granule a step: five chunks
            g.reserve(n)
        self.assertEqual(g.stats()["chunk_count"], 5)
        g.append(rows_of(0, 10))
        view = g.view(0, 7)  # reaches into the fourth granule
        g.resize_(1)
        self.assertEqual(g.shrink_to_fit(), GRANULE)  # the fifth only: the view reaches the fourth
        self.assertEqual((g.capacity, g.stats()["viewed_bytes"]), (8, 7 * MiB))
        self.assert_rows(view, 0, 7)
        del view
        self.assertEqual(g.shrink_to_fit(), 3 * GRANULE)
        self.assertEqual(g.capacity, 2)
        self.assertEqual(g.stats()["chunks_released"], 4)
        self.assert_rows(g.tensor, 0, 1)
        self.assertEqual(g.shrink_to_fit(), 0)

    def test_resize_keeps_the_rows_and_leaves_memory_mapped(self):
        g = host_growable()
        g.append(rows_of(0, 5))
        capacity = g.capacity
        self.assertIs(g.resize_(2), g)
        self.assertEqual((len(g), g.capacity), (2, capacity))
        g.resize_(5)  # the rows are still there: nothing was given back
        self.assert_rows(g.tensor, 0, 5)

    def test_wrong_rows_raise_type_or_value_errors_naming_what_is_wrong_and_change_nothing(self):
        g = host_growable()
        g.append(rows_of(0, 2))
        before = (len(g), g.capacity, g.data_ptr())
        cases = [
            (TypeError, "rows have dtype torch.float64, the tensor torch.float32", rows_of(0, 1).double()),
            (TypeError, "rows must be a torch.Tensor, got list", [[1.0]]),
            (ValueError, f"rows must have shape (k,) + {ROW}, got (1, 3)", torch.zeros(1, 3)),
            (ValueError, f"rows must have shape (k,) + {ROW}, got {ROW}", torch.zeros(ROW)),
        ]
        for error, message, rows in cases:
            with self.assertRaises(error) as caught:
                g.append(rows)
            self.assertIn(message, str(caught.exception))
        with self.assertRaisesRegex(ValueError, "rows must be non-negative, got -1"):
            g.resize_(-1)
        with self.assertRaisesRegex(TypeError, "rows must be an int, got str"):
            g.reserve("3")
        with self.assertRaisesRegex(ValueError, r"rows \[1, 3\) are not within the tensor's 2 rows"):
            g.view(1, 3)
        self.assertEqual((len(g), g.capacity, g.data_ptr()), before)
        self.assert_rows(g.tensor, 0, 2)

    def test_append_returns_the_view_of_all_rows_that_tensor_gives(self):
        g = host_growable(growth="compact")
        g.reserve(4)
        g.resize_(4)
        g.tensor.fill_(POISON)  # what a view reaching past the rows appended would show
        g.resize_(0)
        first = g.append(rows_of(1, 2))
        self.assertIs(type(first), torch.Tensor)
        self.assert_rows(first, 1, 2)
        self.assertTrue(torch.equal(first, g.tensor))
        self.assertEqual(first.data_ptr(), g.data_ptr())
        self.assertEqual(first.data_ptr(), g.tensor.data_ptr())
        both = g.append(rows_of(3, 1))
        self.assert_rows(both, 1, 3)
        self.assertTrue(torch.equal(both, g.tensor))
        self.assertEqual(both.data_ptr(), g.data_ptr())
        self.assertEqual(g.append(rows_of(9, 0)).shape, (3, *ROW))  # no rows: the view all the same
        both[0].fill_(POISON)  # the rows themselves, not a copy of them
        self.assertEqual(g.tensor[:, 0].tolist(), [POISON, 2.0, 3.0])
        self.assertEqual(g.stats()["live_views"], 2)  # first and both: none of the copies' targets stays

    def test_a_view_append_returned_keeps_its_size_and_rows_as_later_appends_grow_the_tensor(self):
        g = host_growable()
        first = g.append(rows_of(1, 2))
        for i in range(3, 43):  # 40 MiB in 1 MiB rows: many growth steps
            latest = g.append(rows_of(i, 1))
            self.assertEqual(len(latest), i)
        self.assertGreater(g.stats()["growth_steps"], 3)
        self.assert_rows(first, 1, 2)  # its size kept, its memory never moved
        self.assertEqual(first.data_ptr(), g.data_ptr())
        self.assert_rows(latest, 1, 42)
        del g
        gc.collect()
        self.assert_rows(first, 1, 2)  # and it keeps its memory after the tensor is gone
        self.assert_rows(latest, 1, 42)

    def test_a_failing_append_raises_as_before_and_changes_neither_the_size_nor_the_rows(self):
        g = host_growable(max_rows=4)
        view = g.append(rows_of(1, 3))
        cases = [
            (TypeError, "GrowableTensor.append: rows have dtype torch.float64, the tensor torch.float32",
             rows_of(4, 1).double()),
            (TypeError, "GrowableTensor.append: rows must be a torch.Tensor, got list", [[1.0]]),
            (TypeError, "GrowableTensor.append: rows must be a torch.Tensor, got NoneType", None),
            (ValueError, f"cuvmm_torch.GrowableTensor.append: rows must have shape (k,) + {ROW}, got (1, 3)",
             torch.full((1, 3), 4.0)),
            (ValueError, f"cuvmm_torch.GrowableTensor.append: rows must have shape (k,) + {ROW}, got {ROW}",
             torch.full(ROW, 4.0)),
            (NotImplementedError, "Cannot copy out of meta tensor; no data!", torch.empty((1, *ROW), device="meta")),
        ]
        for error, message, rows in cases:
            with self.subTest(message=message):
                with self.assertRaises(error) as caught:
                    g.append(rows)
                self.assertEqual(str(caught.exception), message)
                self.assertEqual((len(g), g.capacity), (3, 4))
                self.assert_rows(g.tensor, 1, 3)
                self.assertEqual(g.stats()["live_views"], 1)  # `view` only: a failed append holds none
        with self.assertRaisesRegex(ValueError, "can hold at most 4 rows"):
            g.append(rows_of(4, 2))
        self.assertEqual(len(g), 3)
        self.assert_rows(view, 1, 3)
        self.assert_rows(g.append(rows_of(4, 1)), 1, 4)  # and it goes on where it was

    def test_bad_construction_arguments_raise_type_or_value_errors(self):
        cases = [
            (ValueError, "every dimension of row_shape must be positive", dict(row_shape=(4, 0))),
            (TypeError, "row_shape must hold ints", dict(row_shape=(4.0,))),
            (TypeError, "dtype must be a torch.dtype", dict(dtype="float32")),
            (ValueError, "device must be a CUDA device or the CPU, got meta", dict(device="meta")),
            (ValueError, "max_rows must be a non-negative int", dict(max_rows=-1)),
            (ValueError, 'growth must be "fast" or "compact", got "slow"', dict(growth="slow")),
            (ValueError, "map_ahead must be None, True or False", dict(map_ahead="yes")),
        ]
        for error, message, kwargs in cases:
            args = dict(row_shape=ROW, dtype=torch.float32, device="cpu") | kwargs
            with self.assertRaises(error) as caught:
                cuvmm_torch.GrowableTensor(**args)
            self.assertIn(message, str(caught.exception))

    def test_growth_past_max_rows_is_a_value_error_and_changes_nothing(self):
        g = host_growable(max_rows=4)
        self.assertEqual(g.max_rows, 4)
        g.append(rows_of(0, 3))
        with self.assertRaisesRegex(ValueError, "can hold at most 4 rows"):
            g.append(rows_of(3, 2))
        with self.assertRaisesRegex(ValueError, "can hold at most 4 rows"):
            g.reserve(5)
        self.assertEqual((len(g), g.capacity), (3, 4))
        g.append(rows_of(3, 1))  # exactly max_rows still fits
        self.assert_rows(g.tensor, 0, 4)

    def test_running_out_of_memory_raises_torch_out_of_memory_error_and_keeps_working(self):
        g = host_growable(growth="compact", _host_memory_limit=2 * GRANULE)
        g.append(rows_of(0, 3))
        with self.assertRaisesRegex(torch.OutOfMemoryError, "out of memory growing to more rows"):
            g.append(rows_of(3, 2))  # a third granule
        self.assertEqual((len(g), g.capacity), (3, 4))
        self.assertEqual(g.stats()["chunks_created"], 1)  # the first append's: nothing of the failed one
        g.append(rows_of(3, 1))
        self.assert_rows(g.tensor, 0, 4)

    def test_an_append_whose_copy_fails_leaves_the_length_as_it_was(self):
        g = host_growable()
        g.append(rows_of(0, 2))
        with self.assertRaises(NotImplementedError):
            g.append(torch.empty((2, *ROW), device="meta"))  # the copy itself fails
        self.assertEqual(len(g), 2)
        self.assert_rows(g.tensor, 0, 2)

    def test_dlpack_exports_the_current_rows_without_a_copy(self):
        g = host_growable()
        g.append(rows_of(4, 3))
        self.assertEqual(g.__dlpack_device__(), (1, 0))  # kDLCPU
        t = torch.from_dlpack(g)
        self.assertEqual(t.data_ptr(), g.data_ptr())
        self.assert_rows(t, 4, 3)
        try:
            import numpy  # not a dependency of torch: checked where it is installed
        except ImportError:
            return
        a = numpy.from_dlpack(g)
        self.assertEqual(a.ctypes.data, g.data_ptr())
        self.assertEqual(a.shape, (3, *ROW))
        self.assertEqual(a[2, 0], 6.0)

    def test_mapping_ahead_on_the_host_holds_one_step_that_shrink_to_fit_gives_back(self):
        g = host_growable(map_ahead=True, max_rows=1024)
        self.assertFalse(host_growable().stats()["maps_ahead"])  # automatic: off for host memory
        for i in range(8):
            g.append(rows_of(i, 1))
        g._rows.settle()
        s = g.stats()
        self.assertTrue(s["maps_ahead"])
        self.assertGreater(s["bytes_prepared"], 0)
        self.assertEqual(s["capacity_bytes"], g.capacity * MiB)
        self.assertGreaterEqual(g.shrink_to_fit(), s["bytes_prepared"])
        self.assertEqual(g.stats()["bytes_prepared"], 0)
        self.assert_rows(g.tensor, 0, 8)


def bench_script(name: str):
    """bench/NAME.py of this checkout, imported as a module (its main() does not run)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", name + ".py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BenchScriptsTest(unittest.TestCase):
    """The PyTorch benchmarks measure each case in a fresh process started with a command line they
    build themselves: that command line must parse as the child's (this runs no GPU work)."""

    def test_allocators_child_gets_its_workload_and_mode(self):
        script = bench_script("torch_allocators")
        parent = script.make_parser().parse_args(["random", "--ops", "123"])
        child = script.make_parser().parse_args(script.child_command("random:2", "cuvmm", parent)[2:])
        self.assertTrue(child.child)
        self.assertEqual((child.workload, child.mode, child.ops, child.steps), ("random:2", "cuvmm", 123, 40))

    def test_growth_child_gets_its_case(self):
        script = bench_script("torch_growth")
        child = script.make_parser().parse_args(script.child_command("growable", 1 << 30, 1 << 20)[2:])
        self.assertEqual(child.child, ["growable", str(1 << 30), str(1 << 20)])

    def test_decode_child_gets_the_parent_options(self):
        script = bench_script("torch_decode")
        passed = ["--out", "somewhere", "--batch", "4", "--new-tokens", "64"]
        child = script.make_parser().parse_args(script.child_command(passed, ["growable+graphs", "cat"])[2:])
        self.assertEqual((child.child, child.batch, child.new_tokens, child.out),
                         ("growable+graphs,cat", 4, 64, "somewhere"))

    def test_decode_profiles_only_in_the_first_process(self):
        script = bench_script("torch_decode")
        passed = ["--out", "somewhere", "--profile", "16"]
        first = script.make_parser().parse_args(script.child_command(passed, ["growable"])[2:])
        later = script.make_parser().parse_args(script.child_command(passed, ["growable"], profile=False)[2:])
        self.assertEqual((first.profile, later.profile, later.child), (16, 0, "growable"))

    def test_decode_variants_take_turns_run_by_run(self):
        script = bench_script("torch_decode")
        self.assertEqual(script.alternation(["preallocated", "growable+graphs"], 3),
                         ["preallocated", "growable+graphs"] * 3)
        self.assertEqual(script.parse_variant("growable+graphs"), ("growable", True))
        self.assertEqual(script.parse_variant("cat"), ("cat", False))

    def test_decode_speed_is_the_median_over_processes_of_each_ones_median(self):
        script = bench_script("torch_decode")

        def runs(*rates):
            return [{"tokens_per_second": r, "capture_seconds": r / 1000, "peak_bytes": 7, "cache_bytes": 5,
                     "tokens_held_bytes": 4, "checksum": 1.5} for r in rates]

        # Per process medians 100, 60, 10: their median is 60; the median of all nine runs would be 70.
        row = script.summarize("growable", False, [runs(100, 100, 100), runs(50, 60, 70), runs(200, 10, 10)])
        self.assertEqual(row["tokens_per_second"], 60)
        self.assertEqual(row["tokens_per_second_by_process"], [100, 60, 10])
        self.assertEqual(row["capture_seconds"], 0.06)
        self.assertEqual((row["peak_bytes"], row["cache_bytes"], row["tokens_held_bytes"]), (7, 5, 4))

    @staticmethod
    def decode_process(rates: dict, failing: dict | None = None):
        """A stand-in for run_process: process i measures each variant at rates[variant][i] tokens/s
        (two runs), and fails the variants `failing` names from the process number given there."""
        calls = []

        def fake(passed, variants, profile):
            number = len(calls)
            calls.append((list(variants), profile))
            measured = {}
            for name in variants:
                if failing and number >= failing.get(name, number + 1):
                    measured[name] = {"runs": [], "error": f"{name} broke"}
                    continue
                run = {"tokens_per_second": rates[name][number], "capture_seconds": 0.0, "peak_bytes": 8,
                       "cache_bytes": 6, "tokens_held_bytes": 4, "checksum": 2.0, "seconds": 1.0}
                measured[name] = {"runs": [run, run]}
            return {"variants": measured, "process_seconds": 3.0}

        return fake, calls

    def run_decode_main(self, variants: str, fake) -> tuple[int, dict]:
        script = bench_script("torch_decode")
        with tempfile.TemporaryDirectory() as out:
            argv = ["torch_decode.py", "--out", out, "--variants", variants]
            with mock.patch.object(sys, "argv", argv), mock.patch.object(script, "run_process", fake), \
                    mock.patch("torch.cuda.get_device_name", lambda i: "a test GPU"), \
                    contextlib.redirect_stdout(io.StringIO()):
                status = script.main()
            with open(os.path.join(out, "torch_decode.json")) as f:
                return status, json.load(f)

    def test_decode_report_holds_every_process_and_the_ratios_within_each(self):
        # A slow second process slows both kinds: the ratio within each process sees through it.
        fake, calls = self.decode_process({"preallocated": [100, 30, 200], "growable": [90, 30, 210]})
        status, report = self.run_decode_main("preallocated,growable,preallocated", fake)
        self.assertEqual(status, 0)
        # Three processes, each measuring both variants (the repeated name once), the first profiled.
        self.assertEqual(calls, [(["preallocated", "growable"], True)] + [(["preallocated", "growable"], False)] * 2)
        self.assertEqual((report["config"]["processes"], report["config"]["runs_alternate"]), (3, True))
        self.assertEqual([len(v["processes"]) for v in report["variants"]], [3, 3])
        self.assertEqual([len(v["runs"]) for v in report["variants"]], [6, 6])
        rows = {r["kind"]: r for r in report["summary"]}
        self.assertEqual(rows["growable"]["tokens_per_second_by_process"], [90, 30, 210])
        self.assertEqual(rows["preallocated"]["tokens_per_second"], 100)
        self.assertEqual(rows["growable"]["tokens_per_second_over_preallocated_by_process"], [0.9, 1.0, 1.05])
        # The median of the ratios within processes, not the ratio of the medians (90 / 100).
        self.assertEqual(rows["growable"]["tokens_per_second_over_preallocated"], 1.0)
        self.assertEqual(rows["preallocated"]["tokens_per_second_over_preallocated"], 1.0)
        self.assertEqual(rows["growable"]["cache_over_tokens_held"], 1.5)

    def test_decode_a_failed_variant_runs_no_more_and_the_others_go_on(self):
        fake, calls = self.decode_process({"preallocated": [100, 110, 120], "cat": [50, 60, 70]}, failing={"cat": 1})
        status, report = self.run_decode_main("preallocated,cat", fake)
        self.assertEqual(status, 1)
        self.assertEqual([c[0] for c in calls], [["preallocated", "cat"], ["preallocated", "cat"], ["preallocated"]])
        failed = next(v for v in report["variants"] if v["kind"] == "cat")
        self.assertEqual(failed["error"], "cat broke")
        self.assertEqual([r["kind"] for r in report["summary"]], ["preallocated"])
        self.assertEqual(report["summary"][0]["tokens_per_second_by_process"], [100, 110, 120])

    def test_decode_every_cache_kind_decodes_the_same_tokens_on_the_host(self):
        # The whole loop in fresh processes, as on a GPU, at sizes the host runs in seconds.
        script = bench_script("torch_decode")
        layers, batch, heads, head_dim, prompt, new, max_len = 2, 2, 2, 16, 24, 12, 64
        kinds = ["preallocated", "growable", "growable_premapped", "cat"]
        with tempfile.TemporaryDirectory() as out:
            done = subprocess.run(
                [sys.executable, script.__file__, "--device", "cpu", "--out", out, "--layers", str(layers),
                 "--batch", str(batch), "--heads", str(heads), "--head-dim", str(head_dim), "--prompt", str(prompt),
                 "--new-tokens", str(new), "--max-len", str(max_len), "--repeats", "1", "--processes", "2",
                 "--profile", "4", "--variants", ",".join(kinds)], capture_output=True, text=True)
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            with open(os.path.join(out, "torch_decode.json")) as f:
                report = json.load(f)
        self.assertEqual((report["gpu"], report["config"]["device"]), ("cpu", "cpu"))
        self.assertEqual([v["kind"] for v in report["variants"]], kinds)
        checksums = {r["checksum"] for v in report["variants"] for r in v["runs"]}
        self.assertEqual(len(checksums), 1, checksums)  # the same tokens whatever holds the keys and values
        row_bytes = heads * head_dim * 2  # bf16
        held = 2 * layers * batch * (prompt + new) * row_bytes
        one = cuvmm_torch.GrowableTensor((heads, head_dim), torch.bfloat16, "cpu", max_rows=max_len, growth="compact")
        one.append(torch.zeros(prompt + new, heads, head_dim, dtype=torch.bfloat16))
        rows = {r["kind"]: r for r in report["summary"]}
        self.assertEqual({k: r["tokens_held_bytes"] for k, r in rows.items()}, dict.fromkeys(kinds, held))
        self.assertEqual(rows["preallocated"]["cache_bytes"], 2 * layers * batch * max_len * row_bytes)
        self.assertEqual(rows["growable"]["cache_bytes"], 2 * layers * batch * one.stats()["capacity_bytes"])
        for v in report["variants"]:  # the first process of each is profiled, and it alone
            first, second = v["processes"]
            self.assertNotIn("profile", second)
            regions = first["profile"]["regions"]
            self.assertEqual((regions["cache_update"]["count"], regions["attention"]["count"]), (4 * layers * batch,) * 2)

    def refusal(self, *args: str) -> str:
        """torch_decode.py's main() with `args`: it must stop with a usage error; what it printed."""
        script = bench_script("torch_decode")
        with mock.patch.object(sys, "argv", ["torch_decode.py", "--out", "somewhere", *args]), \
                contextlib.redirect_stderr(io.StringIO()) as err, self.assertRaises(SystemExit) as exit:
            script.main()
        self.assertEqual(exit.exception.code, 2)
        return err.getvalue()

    def test_decode_refuses_no_process_before_running_any(self):
        self.assertIn("--processes must be at least 1", self.refusal("--processes", "0"))

    def test_decode_refuses_an_unknown_variant_before_running_any(self):
        self.assertIn("'cache' is not KIND[+graphs]",
                      self.refusal("--variants", "growable_premapped,growable+graphs,cache"))


if __name__ == "__main__":
    unittest.main()
