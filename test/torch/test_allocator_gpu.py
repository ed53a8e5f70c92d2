"""cuvmm_torch as PyTorch's CUDA allocator, on a GPU: what PyTorch users rely on, checked with exact
results. Each test runs its code in a fresh interpreter (an allocator is chosen once per process, and
a crash must show as a failed test, not end the run).

    CUVMM_TORCH_TEST_MODE=cuvmm pytest test/torch/test_allocator_gpu.py   # cuvmm_torch.enable() first
    CUVMM_TORCH_TEST_MODE=torch pytest test/torch/test_allocator_gpu.py   # PyTorch's own allocator

The second run is the control: every test that is not about cuvmm itself passes on PyTorch's
allocator too, so each checks PyTorch's behaviour, not cuvmm's. The tests skip without a GPU.
"""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

MODE = os.environ.get("CUVMM_TORCH_TEST_MODE", "cuvmm")
assert MODE in ("cuvmm", "torch"), MODE

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

PRELUDE = f"""
import faulthandler, gc, os, sys
import torch
MODE = {MODE!r}
IS_CUVMM = MODE == "cuvmm"
if IS_CUVMM:
    import cuvmm_torch
    cuvmm_torch.enable()
MiB = 1 << 20
dev = torch.device("cuda", 0)
"""
# After the test's code: the allocator really was cuvmm's (its arena served memory), or PyTorch's.
EPILOGUE = """
if IS_CUVMM:
    assert cuvmm_torch.stats(0)["allocations"]["total"] > 0, cuvmm_torch.stats(0)
print("PASS")
"""

only_cuvmm = pytest.mark.skipif(MODE != "cuvmm", reason="about cuvmm_torch itself")


CHILD_TIMEOUT = int(os.environ.get("CUVMM_TORCH_TEST_TIMEOUT", "300"))  # seconds per child


def run(code: str, timeout: int | None = None, env: dict | None = None) -> str:
    """Runs `code` after the prelude in a fresh interpreter (with `env` added to the environment);
    fails with its output unless it printed PASS and exited with 0 (a crash is a failure, with the
    signal in the message; a hang, with the Python stacks of every thread)."""
    timeout = CHILD_TIMEOUT if timeout is None else timeout
    # A child that hangs prints its threads' stacks and exits before the timeout kills it unseen.
    watchdog = f"faulthandler.dump_traceback_later({max(timeout - 20, 10)}, exit=True)\n"
    source = PRELUDE + watchdog + textwrap.dedent(code) + EPILOGUE
    result = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=timeout,
                            env=None if env is None else {**os.environ, **env})
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "PASS" in result.stdout, f"exit {result.returncode}:\n{output[-6000:]}"
    return output


def test_memory_statistics_are_exact_and_peaks_reset():
    run("""
    def allocated(): return torch.cuda.memory_allocated()
    assert allocated() == 0 and torch.cuda.max_memory_allocated() == 0
    a = torch.empty(1 * MiB, dtype=torch.uint8, device=dev)
    b = torch.empty(3 * MiB, dtype=torch.uint8, device=dev)
    c = torch.empty(1000, dtype=torch.uint8, device=dev)   # rounded to 1024 bytes, 1000 requested
    s = torch.cuda.memory_stats()
    assert allocated() == 4 * MiB + 1024, allocated()
    assert s["allocated_bytes.all.current"] == 4 * MiB + 1024
    assert s["requested_bytes.all.current"] == 4 * MiB + 1000, s["requested_bytes.all.current"]
    assert s["allocation.all.current"] == 3 and s["allocation.large_pool.current"] == 1
    assert s["allocation.small_pool.current"] == 2
    assert torch.cuda.memory_reserved() >= allocated()
    # The device-generic API reads the same allocator (c10's allocator for CUDA is this one too).
    g = torch.accelerator.memory_stats()
    assert g["active_bytes.all.current"] == s["active_bytes.all.current"] == 4 * MiB + 1024, (g, s)
    assert torch.accelerator.memory_allocated() == allocated()
    del a
    assert allocated() == 3 * MiB + 1024
    assert torch.cuda.max_memory_allocated() == 4 * MiB + 1024
    torch.cuda.reset_peak_memory_stats()
    assert torch.cuda.max_memory_allocated() == 3 * MiB + 1024
    assert torch.cuda.max_memory_reserved() == torch.cuda.memory_reserved()
    d = torch.empty(5 * MiB, dtype=torch.uint8, device=dev)
    del d
    assert torch.cuda.max_memory_allocated() == 8 * MiB + 1024
    s = torch.cuda.memory_stats()
    assert s["allocation.all.allocated"] == 4 and s["allocation.all.freed"] == 2, s
    torch.cuda.reset_accumulated_memory_stats()
    s = torch.cuda.memory_stats()
    assert s["allocation.all.allocated"] == 0 and s["allocation.all.current"] == 2, s
    assert "Allocated memory" in torch.cuda.memory_summary()
    if IS_CUVMM:   # the arena holds exactly what PyTorch counts
        assert cuvmm_torch.stats()["bytes_requested"]["current"] == allocated()
        assert cuvmm_torch.stats()["bytes_physical"]["current"] == torch.cuda.memory_reserved()
    del b, c
    assert allocated() == 0
    """)


def test_record_stream_keeps_memory_from_reuse_until_the_other_stream_is_done():
    run("""
    n = 4 * MiB
    side = torch.cuda.Stream()
    x = torch.full((n,), 1.0, device=dev)
    # Every kernel below loaded and run once first (on small tensors, which leave no cached block of
    # x's size): loading a kernel lazily waits for the device's running kernels, which would end the
    # sleep before the free.
    torch.cuda._sleep(1000)
    x[:16] * 2
    torch.empty(16, device=dev).fill_(7.0)
    torch.cuda.synchronize()
    x_ptr = x.data_ptr()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(2_000_000_000)      # ~1 s: the side stream reads x long after the free
        y = x * 2
    x.record_stream(side)
    assert not side.query(), "the side stream finished before the free: the test would prove nothing"
    del x
    s = torch.cuda.memory_stats()
    assert s["active_bytes.all.current"] == s["allocated_bytes.all.current"] + 4 * n, s   # still in use
    z = torch.empty(n, device=dev).fill_(7.0)    # a reuse on the freeing stream, at once
    torch.cuda.synchronize()
    assert z.data_ptr() != x_ptr
    assert torch.equal(y, torch.full((n,), 2.0, device=dev)), y[:4]
    w = torch.empty(16, device=dev)               # the next allocation retires the finished free
    s = torch.cuda.memory_stats()
    assert s["active_bytes.all.current"] == s["allocated_bytes.all.current"], s
    """)


def test_without_record_stream_the_memory_is_reused_at_once_so_the_test_above_can_tell():
    run("""
    n = 4 * MiB
    side = torch.cuda.Stream()
    x = torch.full((n,), 1.0, device=dev)
    # Every kernel below loaded and run once first (on small tensors, which leave no cached block of
    # x's size): loading a kernel lazily waits for the device's running kernels, which would end the
    # sleep before the free.
    torch.cuda._sleep(1000)
    x[:16] * 2
    torch.empty(16, device=dev).fill_(7.0)
    torch.cuda.synchronize()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(2_000_000_000)
        y = x * 2
    assert not side.query(), "the side stream finished before the free: the test would prove nothing"
    del x                                         # no record_stream: the user's bug
    z = torch.empty(n, device=dev).fill_(7.0)     # takes x's memory, and writes it before y is made
    torch.cuda.synchronize()
    assert torch.equal(y, torch.full((n,), 14.0, device=dev)), y[:4]
    """)


def test_a_cuda_graph_replays_correct_values_and_its_memory_is_not_reused_outside_it():
    run("""
    n = 1 << 20
    static_in = torch.full((n,), 1.0, device=dev)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            (static_in * 2 + 1).sum()
    torch.cuda.current_stream().wait_stream(side)
    allocated_before_capture = torch.cuda.memory_allocated()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        tmp = static_in * 2           # intermediates freed inside the capture stay the graph's
        tmp2 = tmp + 1
        del tmp
        static_out = tmp2.sum()
        del tmp2
    poison = [torch.full((n,), float("nan"), device=dev) for _ in range(8)]
    for v in (3.0, -1.5, 7.0, 0.25):
        static_in.fill_(v)
        g.replay()
        torch.cuda.synchronize()
        assert static_out.item() == (2 * v + 1) * n, (v, static_out.item())
    assert all(torch.isnan(p).all().item() for p in poison), "a replay wrote into memory allocated after capture"
    del g, static_out
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    # All the graph's memory is released: what is left is static_in and the poison (PyTorch's
    # allocator gives the same figure).
    assert torch.cuda.memory_allocated() == allocated_before_capture + 8 * 4 * n, torch.cuda.memory_allocated()
    again = torch.full((n,), 5.0, device=dev)
    assert again.sum().item() == 5.0 * n
    """)


def test_a_capture_on_a_stream_that_freed_memory_before_it_replays_correct_values():
    # The graph's pool must not take what the capturing stream freed before the capture: handing it
    # over means recording an event on that stream, which the capture would swallow, and making the
    # pool's stream wait for it, which pulls that stream into the capture ("operation not permitted
    # when stream is capturing", as PyTorch's capturable optimizers met).
    run("""
    n = 1 << 20
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        freed = [torch.full((n,), 5.0, device=dev) for _ in range(3)] + [torch.ones(8, device=dev)]
        del freed                             # cached on s, the sizes the capture asks for
    x = torch.full((n,), 3.0, device=dev)
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        y = x * 2
        z = y + 1
        w = (z * z).sum()
    g.replay()
    torch.cuda.synchronize()
    assert w.item() == 49.0 * n, w.item()
    x.fill_(1.0)
    g.replay()
    torch.cuda.synchronize()
    assert w.item() == 9.0 * n and torch.equal(z, torch.full((n,), 3.0, device=dev)), w.item()
    """)


def test_graphs_sharing_a_pool_replay_in_order_with_correct_values():
    run("""
    n = 1 << 18
    x = torch.full((n,), 2.0, device=dev)
    pool = torch.cuda.graph_pool_handle()
    g1, g2 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(g1, pool=pool):
        y = x * 3
    with torch.cuda.graph(g2, pool=pool):
        z = (y + 1) * 2
    assert torch._C._cuda_checkPoolLiveAllocations(0, pool, {y.data_ptr(), z.data_ptr()})
    assert not torch._C._cuda_checkPoolLiveAllocations(0, pool, {y.data_ptr()})
    for v in (1.0, -4.0):
        x.fill_(v)
        g1.replay()
        g2.replay()
        torch.cuda.synchronize()
        assert torch.equal(z, torch.full((n,), (3 * v + 1) * 2, device=dev))
    """)


def test_make_graphed_callables_gives_eager_results_and_gradients():
    run("""
    import copy
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(dev)
    eager = copy.deepcopy(model)
    sample = torch.randn(32, 64, device=dev, requires_grad=True)
    graphed = torch.cuda.make_graphed_callables(model, (sample,))
    for step in range(4):
        x = torch.randn(32, 64, device=dev)
        for m in (graphed, eager):
            for p in m.parameters():
                p.grad = None
        out_g = graphed(x.clone().requires_grad_(True))
        out_e = eager(x.clone().requires_grad_(True))
        out_g.square().sum().backward()
        out_e.square().sum().backward()
        torch.testing.assert_close(out_g, out_e, rtol=1e-5, atol=1e-5)
        for pg, pe in zip(model.parameters(), eager.parameters()):
            torch.testing.assert_close(pg.grad, pe.grad, rtol=1e-4, atol=1e-5)
    """)


@pytest.mark.parametrize("pool_asserts", [False, True], ids=["plain", "pool_asserts"])
def test_torch_compile_reduce_overhead_gives_eager_results(pool_asserts):
    # pool_asserts: the graph trees check after each checkpoint that the pool's live blocks are
    # exactly their live tensors (checkPoolLiveAllocations, then the pool's snapshot).
    run(f"""
    import torch._inductor.config as inductor_config
    inductor_config.triton.slow_path_cudagraph_asserts = {pool_asserts}
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 256),
                                torch.nn.GELU(), torch.nn.Linear(256, 8)).to(dev)
    compiled = torch.compile(model, mode="reduce-overhead")
    with torch.no_grad():
        # 16: warm-up, recording, replay; then 32 while 16's output lives: the graph trees restore
        # a pool checkpoint (setCheckpointPoolState) before warming up and recording it.
        for batch in (16, 16, 16, 32, 32, 32, 16, 32):
            x = torch.randn(batch, 64, device=dev)
            last = compiled(x)
            torch.testing.assert_close(last.clone(), model(x), rtol=1e-4, atol=1e-4)
        del last
    # Training: forward and backward graphs, several steps, with the optimizer in eager mode.
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(5):
        x = torch.randn(16, 64, device=dev)
        opt.zero_grad(set_to_none=True)
        loss = compiled(x).square().mean()
        loss.backward()
        opt.step()
        assert torch.isfinite(loss).item()
    with torch.no_grad():
        x = torch.randn(16, 64, device=dev)
        torch.testing.assert_close(compiled(x).clone(), model(x), rtol=1e-4, atol=1e-4)
    """, timeout=600)


def test_empty_cache_gives_freed_memory_back_to_the_device():
    run("""
    big = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
    big.fill_(1)
    del big
    torch.cuda.synchronize()
    reserved = torch.cuda.memory_reserved()
    free_before, _ = torch.cuda.mem_get_info()
    assert reserved >= 1 << 30, reserved
    torch.cuda.empty_cache()
    free_after, _ = torch.cuda.mem_get_info()
    assert torch.cuda.memory_reserved() <= reserved - (1 << 30), torch.cuda.memory_reserved()
    assert free_after >= free_before + (1 << 30) - 64 * MiB, (free_before, free_after)
    x = torch.full((MiB,), 3.0, device=dev)
    assert x.sum().item() == 3.0 * MiB
    """)


def test_impossible_requests_raise_pytorchs_out_of_memory_messages_and_change_nothing():
    run("""
    t = torch.zeros(1024, device=dev)
    for size, want in ((2**30 * 800000000, "CUDA out of memory. Tried to allocate 800000000.00 GiB. GPU 0 has a total "
                                           "capacity of "),
                       (2**30 * 8000000000, "CUDA out of memory. Tried to allocate more than 1EB memory.")):
        try:
            torch.empty(size, dtype=torch.int8, device=dev)
        except torch.OutOfMemoryError as e:
            assert str(e).startswith(want), str(e)
        else:
            raise AssertionError(f"{size} bytes were allocated")
    t.fill_(1)
    assert bool((t == 1).all()) and torch.cuda.memory_allocated() == 4096
    """)


def test_with_caching_turned_off_requests_bypass_the_allocator_and_its_statistics():
    run("""
    torch.cuda.init()
    torch.cuda.caching_allocator_enable(False)
    x = torch.full((1 << 20,), 2.0, device=dev)          # cudaMalloc, as PyTorch's allocator does then
    assert torch.cuda.memory_allocated() == 0 and x.sum().item() == 2.0 * (1 << 20)
    stream = torch.cuda.current_stream().cuda_stream
    p = torch._C._cuda_cudaCachingAllocator_raw_alloc(1 << 20, stream)
    assert p != 0 and torch.cuda.memory_stats().get("requested_bytes.all.allocated", 0) == 0
    torch._C._cuda_cudaCachingAllocator_raw_delete(p)
    del x
    torch.cuda.caching_allocator_enable(True)
    p = torch._C._cuda_cudaCachingAllocator_raw_alloc(1 << 20, stream)
    assert torch.cuda.memory_stats()["requested_bytes.all.allocated"] == 1 << 20
    torch._C._cuda_cudaCachingAllocator_raw_delete(p)
    y = torch.ones(1 << 20, device=dev)
    assert torch.cuda.memory_allocated() == 4 << 20 and y.sum().item() == 1 << 20
    """)


def test_the_memory_fraction_of_pytorch_cuda_alloc_conf_is_read_and_enforced():
    run("""
    assert torch.cuda.get_per_process_memory_fraction(0) == 0.25
    total = torch.cuda.get_device_properties(0).total_memory
    ok = torch.full((int(total * 0.10) // 4,), 1.0, device=dev)
    try:
        torch.empty(int(total * 0.20), dtype=torch.uint8, device=dev)
    except torch.OutOfMemoryError:
        pass
    else:
        raise AssertionError("an allocation beyond the memory fraction succeeded")
    assert ok[-1].item() == 1.0
    """, env={"PYTORCH_CUDA_ALLOC_CONF": "per_process_memory_fraction:0.25"})


def test_the_memory_fraction_is_enforced_with_out_of_memory_errors():
    run("""
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(0.25)
    if hasattr(torch.cuda, "get_per_process_memory_fraction"):
        assert torch.cuda.get_per_process_memory_fraction() == 0.25
    ok = torch.empty(int(total * 0.10), dtype=torch.uint8, device=dev)
    asked = int(total * 0.20)
    try:
        torch.empty(asked, dtype=torch.uint8, device=dev)
    except torch.OutOfMemoryError as e:
        print("refused:", str(e)[:200])
        # PyTorch's wording first (test_cuda.py and users' scripts match it), in PyTorch's units.
        assert str(e).startswith(f"CUDA out of memory. Tried to allocate {asked / 2**30:.2f} GiB. GPU 0 has a "
                                 f"total capacity of {total / 2**30:.2f} GiB of which "), str(e)
    else:
        raise AssertionError("an allocation beyond the memory fraction succeeded")
    assert torch.cuda.memory_stats()["num_ooms"] == 1
    assert torch.cuda.memory_reserved() <= total * 0.25
    del ok
    fits = torch.empty(int(total * 0.20), dtype=torch.uint8, device=dev)   # the process keeps working
    fits.fill_(9)
    assert fits[-1].item() == 9
    del fits
    torch.cuda.set_per_process_memory_fraction(1.0)
    """)


def test_a_mem_pool_keeps_its_memory_for_its_own_allocations():
    run("""
    pool = torch.cuda.MemPool()
    assert pool.use_count() == 1
    with torch.cuda.use_mem_pool(pool):
        assert pool.use_count() == 2
        a = torch.full((MiB,), 4.0, device=dev)
    assert pool.use_count() == 1
    a_ptr = a.data_ptr()
    segments = pool.snapshot()
    assert any(s["address"] <= a_ptr < s["address"] + s["total_size"] for s in segments), segments
    del a
    outside = [torch.full((MiB,), 1.0, device=dev) for _ in range(4)]
    assert all(t.data_ptr() != a_ptr for t in outside)
    with torch.cuda.use_mem_pool(pool):
        c = torch.full((MiB,), 6.0, device=dev)
    assert c.data_ptr() == a_ptr                  # the pool's freed block, reused inside it
    assert c.sum().item() == 6.0 * MiB
    del c, pool
    gc.collect()
    torch.cuda.empty_cache()
    assert torch.cuda.memory_allocated() == 4 * 4 * MiB
    """)


def test_a_snapshot_lists_the_live_tensors():
    run("""
    x = torch.empty(3 * MiB, dtype=torch.uint8, device=dev)
    snap = torch.cuda.memory._snapshot()
    assert isinstance(snap["segments"], list) and isinstance(snap["device_traces"], list)
    p = x.data_ptr()
    assert any(s["address"] <= p < s["address"] + s["total_size"] for s in snap["segments"])
    assert sum(b["size"] for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated") >= 3 * MiB
    """)


# The allocator's history (torch.cuda.memory._record_memory_history). Both allocators trace each
# tensor as alloc (the bytes asked for), then free_requested and free_completed; a tensor that needed
# new memory has a segment_alloc at its address before its alloc (PyTorch's segment is larger than
# the block: 2 MiB for small requests, 20 MiB for these large ones; cuvmm's is the block itself).
HISTORY_HELPERS = """
import pickle, tempfile, time
from torch.cuda import _memory_viz

def trace_of(snap):
    return snap["device_traces"][0]

def names(entry):
    return {f["name"] for f in entry.get("frames", [])}

def actions_at(trace, addr, actions=("alloc", "free_requested", "free_completed")):
    return [(e["action"], e["size"]) for e in trace if e["action"] in actions and e.get("addr") == addr]

def blocks_at(snap, addr):
    return [blk for s in snap["segments"] for blk in s["blocks"] if blk["address"] == addr]
"""


def run_history(code: str) -> str:
    """run() with HISTORY_HELPERS defined first."""
    return run(HISTORY_HELPERS + textwrap.dedent(code))


def test_history_traces_each_tensor_with_its_sizes_frames_and_times():
    run_history("""
    torch.cuda.memory._record_memory_history(context="all", stacks="python")
    ptrs = {}
    def make_and_drop_tensors():
        a = torch.empty(1000, dtype=torch.uint8, device=dev)
        b = torch.empty(3 * MiB, dtype=torch.uint8, device=dev)
        ptrs["a"], ptrs["b"] = a.data_ptr(), b.data_ptr()
        del a
        return b
    started = time.time()
    b = make_and_drop_tensors()
    snap = torch.cuda.memory._snapshot()
    trace = trace_of(snap)
    a_entries = actions_at(trace, ptrs["a"])
    assert a_entries == [("alloc", 1000), ("free_requested", 1000), ("free_completed", 1000)], a_entries
    assert actions_at(trace, ptrs["b"]) == [("alloc", 3 * MiB)], trace
    ours = [e for e in trace if e["action"] in ("alloc", "free_requested", "free_completed")]
    assert len(ours) == 4, ours
    # With context="all" every entry names the function that allocated or freed.
    for e in ours:
        assert "make_and_drop_tensors" in names(e), e
    # Times: microseconds since the epoch, in order.
    times = [e["time_us"] for e in ours]
    assert times == sorted(times), times
    assert abs(times[0] / 1e6 - started) < 60, (times[0], started)
    # Each tensor came from a new segment at its address, traced before its alloc.
    for name, rounded in (("a", 1024), ("b", 3 * MiB)):
        index = [i for i, e in enumerate(trace) if e["action"] == "segment_alloc" and e["addr"] == ptrs[name]]
        alloc = [i for i, e in enumerate(trace) if e["action"] == "alloc" and e["addr"] == ptrs[name]]
        assert len(index) == 1 and index[0] < alloc[0] and trace[index[0]]["size"] >= rounded, (name, trace)
    # The live block, and its segment, carry the allocation's frames.
    blocks = [(s, blk) for s in snap["segments"] for blk in s["blocks"] if blk["address"] == ptrs["b"]]
    assert len(blocks) == 1, snap["segments"]
    segment, block = blocks[0]
    assert block["state"] == "active_allocated" and block["requested_size"] == 3 * MiB, block
    assert "make_and_drop_tensors" in names(block), segment
    if IS_CUVMM:  # the block is the segment (PyTorch's segments carry no frames of their own)
        assert "make_and_drop_tensors" in names(segment), segment
    assert all("frames" in s for s in snap["segments"])
    # The snapshot itself is traced (after the trace was copied): the next one shows it, with the
    # active bytes (b only).
    last = trace_of(torch.cuda.memory._snapshot())[-1]
    assert (last["action"], last["addr"], last["size"]) == ("snapshot", 0, 3 * MiB), last
    torch.cuda.memory._record_memory_history(None)
    """)


def test_history_keeps_the_contexts_that_each_context_level_asks_for():
    run_history("""
    held = []
    def allocate_it():
        held.append(torch.empty(4096, dtype=torch.uint8, device=dev))
    def free_it():
        held.pop()
    for context in ("state", "alloc", "all"):
        torch.cuda.memory._record_memory_history(context=context, stacks="python", clear_history=True)
        allocate_it()
        p = held[0].data_ptr()
        live = blocks_at(torch.cuda.memory._snapshot(), p)
        assert len(live) == 1 and "allocate_it" in names(live[0]), (context, live)   # every level
        free_it()
        trace = trace_of(torch.cuda.memory._snapshot())
        entries = [e for e in trace if e.get("addr") == p and e["action"] in ("alloc", "free_requested", "free_completed")]
        assert [e["action"] for e in entries] == ["alloc", "free_requested", "free_completed"], (context, trace)
        if context == "state":      # contexts only for live blocks, none in the trace
            assert all(not e.get("frames") for e in entries), (context, entries)
            continue
        assert "allocate_it" in names(entries[0]), (context, entries[0])
        for e in entries[1:]:       # a free gathers its own context only with "all"
            expected, other = ("free_it", "allocate_it") if context == "all" else ("allocate_it", "free_it")
            assert expected in names(e) and other not in names(e), (context, e)
    torch.cuda.memory._record_memory_history(None)
    """)


def test_history_skips_the_actions_named_keeps_the_newest_entries_and_stops_when_disabled():
    run_history("""
    torch.cuda.memory._record_memory_history(context=None, skip_actions=["free_requested", "segment_alloc", "segment_free"])
    x = torch.empty(2 * MiB, dtype=torch.uint8, device=dev)
    p = x.data_ptr()
    del x
    trace = trace_of(torch.cuda.memory._snapshot())
    assert actions_at(trace, p) == [("alloc", 2 * MiB), ("free_completed", 2 * MiB)], trace
    assert not {"free_requested", "segment_alloc", "segment_free"} & {e["action"] for e in trace}, trace
    assert all(not e.get("frames") for e in trace), trace      # context=None: no frames
    # A ring of 3 entries (only allocs recorded here): the newest 3 of 5.
    torch.cuda.memory._record_memory_history(
        context=None, max_entries=3, clear_history=True,
        skip_actions=["free_requested", "free_completed", "segment_alloc", "segment_free", "snapshot"])
    kept = [torch.empty(k * 1000, dtype=torch.uint8, device=dev) for k in range(1, 6)]
    trace = trace_of(torch.cuda.memory._snapshot())
    assert [(e["action"], e["size"], e["addr"]) for e in trace] == [("alloc", k * 1000, kept[k - 1].data_ptr()) for k in (3, 4, 5)], trace
    # enabled="state": one entry kept, frames on live blocks.
    torch.cuda.memory._record_memory_history("state", stacks="python", clear_history=True)
    def make_state_tensor():
        return torch.empty(5000, dtype=torch.uint8, device=dev)
    y = make_state_tensor()
    snap = torch.cuda.memory._snapshot()
    assert len(trace_of(snap)) == 1, trace_of(snap)
    live = blocks_at(snap, y.data_ptr())
    assert len(live) == 1 and "make_state_tensor" in names(live[0]), live
    # Disabled: the trace is emptied and stays empty; new blocks have no frames.
    torch.cuda.memory._record_memory_history(None)
    z = torch.empty(7000, dtype=torch.uint8, device=dev)
    snap = torch.cuda.memory._snapshot()
    assert snap["device_traces"][0] == [], snap["device_traces"]
    live = blocks_at(snap, z.data_ptr())
    assert len(live) == 1 and live[0]["frames"] == [], live
    """)


def test_history_traces_an_out_of_memory_error_with_the_free_bytes():
    run_history("""
    torch.cuda.memory._record_memory_history(context=None)
    huge = 1 << 42     # 4 TiB: more than any GPU has
    try:
        torch.empty(huge, dtype=torch.uint8, device=dev)
    except torch.OutOfMemoryError:
        pass
    else:
        raise AssertionError("4 TiB were allocated")
    ooms = [e for e in trace_of(torch.cuda.memory._snapshot()) if e["action"] == "oom"]
    assert len(ooms) == 1 and ooms[0]["size"] == huge, ooms
    free, total = torch.cuda.mem_get_info()
    assert 0 < ooms[0]["device_free"] <= total, (ooms, total)
    assert (torch.ones(MiB, device=dev) * 2).sum().item() == 2.0 * MiB    # still working
    torch.cuda.memory._record_memory_history(None)
    """)


def test_a_dumped_snapshot_loads_and_the_memory_visualizer_renders_it():
    run_history("""
    torch.cuda.memory._record_memory_history(stacks="python")
    def visualized_tensors():
        keep = torch.empty(3 * MiB, dtype=torch.uint8, device=dev)
        drop = torch.empty(5000, dtype=torch.uint8, device=dev)
        del drop
        return keep
    keep = visualized_tensors()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "snapshot.pickle")
        torch.cuda.memory._dump_snapshot(path)
        with open(path, "rb") as f:
            snap = pickle.load(f)
    assert actions_at(trace_of(snap), keep.data_ptr()) == [("alloc", 3 * MiB)], trace_of(snap)
    sizes = [e["size"] for e in trace_of(snap) if e["action"] in ("alloc", "free_requested", "free_completed")]
    assert sizes == [3 * MiB, 5000, 5000, 5000], sizes
    for plot in (_memory_viz.trace_plot, _memory_viz.segment_plot):
        html = plot(snap)
        assert "<!DOCTYPE html>" in html and "snapshot.pickle" in html, html[:200]
    text = _memory_viz.trace(snap)
    assert "cudaMalloc(" in text and "del " in text and "# free completed" in text, text
    summary = _memory_viz.segsum(snap)    # checks that each segment's blocks add up to it
    assert "total_allocated: 3.0MiB" in summary, summary
    assert "visualized_tensors" in str(snap["segments"]), snap["segments"]
    torch.cuda.memory._record_memory_history(None)
    """)


@only_cuvmm
def test_what_cuvmm_cannot_do_raises_a_clear_error_and_the_process_keeps_working():
    run("""
    x = torch.ones(MiB, device=dev)
    for call, words in ((lambda: torch.cuda.MemPool(use_on_oom=True), "use_on_oom"),):
        try:
            call()
        except RuntimeError as e:
            assert "cuvmm" in str(e) and words in str(e), str(e)
        else:
            raise AssertionError(f"{words}: no error")
    assert (x * 2).sum().item() == 2.0 * MiB
    """)


@only_cuvmm
def test_enable_after_cuda_started_raises_and_pytorch_keeps_its_allocator():
    source = """
import torch, cuvmm_torch
torch.zeros(1, device="cuda")
try:
    cuvmm_torch.enable()
except RuntimeError as e:
    assert "after PyTorch initialized CUDA" in str(e), e
else:
    raise AssertionError("enable() after CUDA started succeeded")
assert not cuvmm_torch.is_enabled()
print("PASS")
"""
    result = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "PASS" in result.stdout, result.stdout + result.stderr


@only_cuvmm
def test_the_enable_variable_installs_cuvmm_at_import():
    source = """
import torch, cuvmm_torch
assert cuvmm_torch.is_enabled()
x = torch.ones(MiB := 1 << 20, device="cuda")
assert cuvmm_torch.stats()["bytes_requested"]["current"] == torch.cuda.memory_allocated() == 4 * MiB
print("PASS")
"""
    env = dict(os.environ, CUVMM_TORCH_ENABLE="1")
    result = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0 and "PASS" in result.stdout, result.stdout + result.stderr
