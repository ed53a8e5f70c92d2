"""cuvmm_torch.GrowableTensor on a GPU, with exact results. Each test runs in a fresh interpreter
(test_allocator_gpu.run), under both modes of test_allocator_gpu.py: with cuvmm as PyTorch's
allocator (CUVMM_TORCH_TEST_MODE=cuvmm) and with PyTorch's own (=torch): a GrowableTensor maps its
own memory, whichever allocator serves PyTorch's other tensors.

    CUVMM_TORCH_TEST_MODE=torch pytest test/torch/test_growable_gpu.py

The same logic over the host backend is tested without a GPU in cpu_tests.py (GrowableTensorTest).
"""
import textwrap

import pytest
import torch

import test_allocator_gpu

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

PRELUDE = """
from cuvmm_torch import GrowableTensor
POISON = -7.25
ROW = (MiB // 4,)   # float32 rows of 1 MiB

def rows_of(first, count):
    # `count` rows whose every element is the row's number
    return torch.arange(first, first + count, dtype=torch.float32, device=dev).repeat_interleave(ROW[0]).reshape(count, *ROW)

def assert_rows(t, first, count):
    assert tuple(t.shape) == (count, *ROW), t.shape
    assert torch.equal(t, rows_of(first, count)), t[:, 0].tolist()
"""


def run(code: str) -> str:
    return test_allocator_gpu.run(PRELUDE + textwrap.dedent(code))


def test_growth_keeps_the_address_and_every_row_and_maps_ahead():
    run("""
    g = GrowableTensor(ROW, torch.float32, "cuda", max_rows=4096)
    assert g.stats()["maps_ahead"]            # automatic: on for device memory under "fast"
    address, first = None, None
    for i in range(0, 1000, 10):              # 1000 MiB in appends of 10 MiB: many growth steps
        n = len(g)
        g.resize_(g.capacity)                 # poison the mapped rows past the end, then append over them
        g.view(n).fill_(POISON)
        g.resize_(n)
        g.append(rows_of(i, 10))
        address = address or g.data_ptr()
        assert g.data_ptr() == address
        first = first if first is not None else g.tensor
    s = g.stats()
    assert s["growth_steps"] > 3, s
    assert s["prepared_used"] > 0, s         # steps were mapped ahead and used
    assert_rows(first, 0, 10)                 # the first view: same size, memory never moved
    assert_rows(g.tensor, 0, 1000)
    assert g.tensor.data_ptr() == address and g.tensor.device == dev
    """)


def test_a_cuda_graph_captured_over_the_rows_stays_valid_after_growth():
    run("""
    g = GrowableTensor(ROW, torch.float32, "cuda", max_rows=4096)
    g.append(rows_of(1, 8))
    rows = g.view(0, 8)
    total = torch.zeros((), device=dev)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):                # warm-up outside the capture, as PyTorch asks
        rows.mul_(1)
        total.copy_(rows.sum())
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        rows.mul_(2)
        total.copy_(rows.sum())
    address = g.data_ptr()
    for i in range(9, 9 + 600, 20):           # 600 MiB more: growth maps many new chunks
        g.append(rows_of(i, 20))
    assert g.data_ptr() == address and g.stats()["growth_steps"] > 3
    for replay in range(1, 4):
        graph.replay()
        torch.cuda.synchronize()
        expected = torch.arange(1, 9, dtype=torch.float32, device=dev) * 2 ** replay
        assert torch.equal(g.view(0, 8)[:, 0], expected), g.view(0, 8)[:, 0]
        assert total.item() == float(expected.sum().item() * ROW[0]), total.item()
        assert_rows(g.view(8), 9, 600)        # the rows grown after the capture are untouched
    """)


def test_ops_on_the_view_give_the_results_of_an_ordinary_tensor():
    run("""
    import torch.nn.functional as F
    torch.manual_seed(0)
    k = GrowableTensor((4, 64), torch.bfloat16, "cuda", max_rows=1 << 16)
    v = GrowableTensor((4, 64), torch.bfloat16, "cuda", max_rows=1 << 16)
    keys = torch.randn(777, 4, 64, dtype=torch.bfloat16, device=dev)
    values = torch.randn(777, 4, 64, dtype=torch.bfloat16, device=dev)
    for start in range(0, 777, 111):
        k.append(keys[start:start + 111])
        v.append(values[start:start + 111])
    q = torch.randn(1, 4, 1, 64, dtype=torch.bfloat16, device=dev)
    got = F.scaled_dot_product_attention(q, k.tensor.transpose(0, 1)[None], v.tensor.transpose(0, 1)[None])
    want = F.scaled_dot_product_attention(q, keys.transpose(0, 1)[None], values.transpose(0, 1)[None])
    assert torch.equal(got, want)
    assert torch.equal(k.tensor, keys) and torch.equal(v[776], values[776])
    """)


def test_its_memory_is_not_pytorchs_and_shows_in_its_stats_and_the_devices_free_memory():
    run("""
    g = GrowableTensor(ROW, torch.float32, "cuda", max_rows=4096, map_ahead=False)
    ordinary = torch.full((1024,), 3.0, device=dev)   # PyTorch's allocator (cuvmm's arena) serves this one
    torch.cuda.synchronize()
    allocated = torch.cuda.memory_allocated()
    reserved = torch.cuda.memory_reserved()
    free_before = torch.cuda.mem_get_info()[0]
    g.resize_(512)                            # 512 MiB mapped, nothing written
    held = g.stats()["capacity_bytes"]
    assert held >= 512 * MiB and g.stats()["bytes_prepared"] == 0, g.stats()
    assert (torch.cuda.memory_allocated(), torch.cuda.memory_reserved()) == (allocated, reserved)
    assert free_before - torch.cuda.mem_get_info()[0] >= held
    del g
    assert torch.cuda.mem_get_info()[0] >= free_before - 64 * MiB  # given back (other processes aside)
    assert ordinary.sum().item() == 3072.0
    """)


def test_shrink_to_fit_waits_for_a_stream_that_still_writes_the_rows_it_unmaps():
    # The view below dies at once while its kernel is still queued behind a sleep: only the wait
    # for the streams the tensor was used on keeps cuMemUnmap from pulling the memory from under
    # it (an illegal address, which would end the process).
    run("""
    g = GrowableTensor(ROW, torch.float32, "cuda", max_rows=4096, growth="compact")
    for first in range(0, 256, 16):           # many steps, many chunks: shrinking can give most back
        g.append(rows_of(first, 16))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)        # ~0.1 s of GPU time
        g.view(128, 256).fill_(1.0)           # the view is gone when the with-block ends
    assert g.stats()["streams"] == 2 and g.stats()["live_views"] == 0, g.stats()
    g.resize_(2)
    before = g.stats()["capacity_bytes"] + g.stats()["bytes_prepared"]   # a step mapped ahead goes too
    given = g.shrink_to_fit()
    assert given >= 128 * MiB and g.stats()["capacity_bytes"] == before - given, (given, g.stats())
    torch.cuda.synchronize()                   # raises if the kernel touched unmapped memory
    assert_rows(g.tensor, 0, 2)
    """)


def test_dlpack_exports_the_device_rows_without_a_copy():
    run("""
    g = GrowableTensor(ROW, torch.float32, "cuda", max_rows=64)
    g.append(rows_of(5, 3))
    assert g.__dlpack_device__() == (2, 0)    # kDLCUDA, device 0
    t = torch.from_dlpack(g)
    assert t.data_ptr() == g.data_ptr() and t.device == dev
    assert_rows(t, 5, 3)
    """)


def test_running_out_of_device_memory_is_torch_out_of_memory_error_and_changes_nothing():
    run("""
    total = torch.cuda.mem_get_info()[1]
    rows = 2 * total // MiB                   # twice the device: the range can be reserved, not mapped
    g = GrowableTensor(ROW, torch.float32, "cuda", max_rows=rows, map_ahead=False)
    g.append(rows_of(0, 4))
    capacity = g.capacity
    try:
        g.reserve(rows)
    except torch.OutOfMemoryError as e:
        assert "out of memory growing to more rows" in str(e), e
    else:
        raise AssertionError("reserving twice the device's memory succeeded")
    assert (len(g), g.capacity) == (4, capacity)
    g.append(rows_of(4, 4))                   # it keeps working
    assert_rows(g.tensor, 0, 8)
    """)
