"""The PyTorch integration on a GPU (the H200): run with the cuvmm_torch package importable.

    PYTHONPATH=<site> python3 test/torch/gpu_checks.py --plugin <prefix>/lib/.../libcuvmm_torch.so

Each check runs in a process of its own (the allocator is chosen once per process, before CUDA
starts) and prints its exact numbers:
  oom_package       cuvmm_torch.enable(); a live set of 42% of the device, then a request of 76% (the
                    issue's 59 GiB live / 106 GiB asked): torch.OutOfMemoryError naming the numbers,
                    never a null tensor; the arena holds exactly its live pages afterwards; a request
                    that needs the pages cached by freed tensors succeeds; kernels and the live values
                    stay right; a request larger than the device raises too.
  oom_plugin        the plain plug-in (--plugin): the same request raises RuntimeError (not a null
                    tensor) and the process keeps working.
  stats_trim        stats() counts a tensor's bytes exactly; trim() after freeing it returns > 0 and
                    bytes_physical drops by exactly that much, the driver's free memory rises by it.
  too_late          enable() after CUDA started: RuntimeError saying so; stats(None) is the current device's.
  training          examples/torch_pluggable_allocator.py --compare --against cuvmm cuvmm_torch:
                    losses identical to PyTorch's allocator at every step.
  conf_package      with CUVMM_ARENA_CONF=large_page_bytes:64MiB: arena_options() says so, and an
                    80 MiB tensor makes the package's arena hold exactly two 64 MiB pages more.
  conf_plugin       the same variable for the plain plug-in: the driver's free memory drops by two
                    64 MiB pages for that tensor (the default 32 MiB pages would take 96 MiB).
Exit status 0 when every check passed; the failing checks are named.
"""
import argparse
import os
import subprocess
import sys

MiB = 1 << 20
GiB = 1 << 30
# ArenaOptions' default large_page_bytes: a request of at least this much takes whole pages this large
# (share_large_page_tails), so it holds less than one large page beyond its size.
LARGE_PAGE = 32 * MiB
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def check(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(what)
    print(f"  ok: {what}")


def filled(nbytes: int, value: int):
    import torch

    return torch.full((nbytes,), value, dtype=torch.uint8, device="cuda")


def kernel_still_works() -> None:
    import torch

    n = 1 << 24
    x = torch.arange(n, dtype=torch.float64, device="cuda")
    total = (x * 2).sum().item()
    torch.cuda.synchronize()
    check(total == float(n * (n - 1)), f"a new tensor and a kernel after it: sum(2*arange({n})) == {n * (n - 1)}")


def oom_package() -> None:
    import torch

    import cuvmm_torch

    cuvmm_torch.enable()
    cuvmm_torch.enable()  # a second call changes nothing
    check(cuvmm_torch.is_enabled(), "enable() made cuvmm PyTorch's allocator")
    free, total = torch.cuda.mem_get_info()
    print(f"  device: {torch.cuda.get_device_name()}, {total} bytes, {free} free before anything")

    live_bytes = int(0.42 * total) // MiB * MiB
    live = [filled(live_bytes // 4, 7 + i) for i in range(4)]
    cached_bytes = int(0.25 * total) // MiB * MiB
    cached = filled(cached_bytes, 1)
    del cached  # its pages stay cached in the arena
    torch.cuda.synchronize()
    s = cuvmm_torch.stats()
    print(f"  live {s['bytes_requested']['current']} bytes, held {s['bytes_physical']['current']} bytes")
    check(s["bytes_requested"]["current"] == live_bytes, f"the arena counts the live set: {live_bytes} bytes")
    check(s["bytes_physical"]["current"] >= live_bytes + cached_bytes, "and holds the freed tensor's pages cached")

    asked = int(0.76 * total) // MiB * MiB
    try:
        t = torch.empty(asked, dtype=torch.uint8, device="cuda")
        raise AssertionError(f"torch.empty({asked}) returned a tensor (data_ptr {t.data_ptr():#x}) instead of raising")
    except torch.OutOfMemoryError as e:
        message = str(e)
        print(f"  message: {message.splitlines()[0]}")
        check(type(e) is torch.OutOfMemoryError, "torch.empty of 76% of the device raised torch.OutOfMemoryError")
        check(f"tried to allocate {asked / GiB:.2f} GiB ({asked} bytes)" in message, "the message says how much was asked")
        check(f"the arena holds {live_bytes / GiB:.2f} GiB ({live_bytes} bytes) in 4 live allocations" in message,
              "the message says how much is live")
        check("of physical memory in all, after giving back" in message and "free of" in message,
              "the message says how much the arena holds, gave back, and the device has free")
    after = cuvmm_torch.stats()
    held = after["bytes_physical"]["current"]
    check(held - live_bytes < 4 * LARGE_PAGE, f"after the failure the arena holds only its live pages: {held} bytes")
    kernel_still_works()
    check(all(int(x.min()) == int(x.max()) == 7 + i for i, x in enumerate(live)), "the live tensors kept their values")

    # A request that fits only once pages the arena cached are reused: the arena reclaims them.
    cached = filled(int(0.25 * total) // MiB * MiB, 3)
    del cached
    torch.cuda.synchronize()
    free_now, _ = torch.cuda.mem_get_info()
    fits = (free_now + int(0.25 * total)) // MiB * MiB - 4 * GiB
    big = filled(fits, 9)
    check(int(big[-1]) == 9 and int(big[0]) == 9,
          f"{fits} bytes (more than the {free_now} bytes the driver has free) served by reusing cached pages")
    del big
    try:
        torch.empty(2 * total, dtype=torch.uint8, device="cuda")
        raise AssertionError("a request of twice the device returned a tensor")
    except torch.OutOfMemoryError:
        check(True, "a request of twice the device raised torch.OutOfMemoryError")
    kernel_still_works()
    del live
    torch.cuda.synchronize()
    cuvmm_torch.trim()
    end = cuvmm_torch.stats()
    physical, requested, allocations = (end["bytes_physical"]["current"], end["bytes_requested"]["current"],
                                        end["allocations"]["current"])
    print(f"  at the end: {allocations} live allocations of {requested} bytes, {physical} bytes held")
    if allocations == 0:
        check(physical == 0, "everything freed and trimmed: the arena holds 0 bytes")
    else:  # whatever PyTorch keeps: each allocation (or slab of small ones) wastes less than a large page
        check(physical - requested < allocations * LARGE_PAGE, "trimmed: the arena holds only pages of live allocations")


def oom_plugin(plugin: str) -> None:
    import torch

    allocator = torch.cuda.memory.CUDAPluggableAllocator(plugin, "cuvmm_torch_malloc", "cuvmm_torch_free")
    torch.cuda.memory.change_current_allocator(allocator)
    _, total = torch.cuda.mem_get_info()
    live = filled(int(0.42 * total) // MiB * MiB, 5)
    asked = int(0.76 * total) // MiB * MiB
    try:
        t = torch.empty(asked, dtype=torch.uint8, device="cuda")
        raise AssertionError(f"the plain plug-in returned a tensor (data_ptr {t.data_ptr():#x}) instead of raising")
    except RuntimeError as e:
        print(f"  message: {str(e).splitlines()[0]}")
        check("out of memory" in str(e), f"the plain plug-in raised {type(e).__name__} saying out of memory")
    kernel_still_works()
    check(int(live.min()) == int(live.max()) == 5, "the live tensor kept its value")


def stats_trim() -> None:
    import torch

    import cuvmm_torch

    cuvmm_torch.enable()
    warm = torch.ones(1, device="cuda")  # CUDA context and PyTorch's own first allocations
    torch.cuda.synchronize()
    cuvmm_torch.trim()
    before = cuvmm_torch.stats()
    nbytes = 1 * GiB + 3 * MiB
    x = filled(nbytes, 4)
    torch.cuda.synchronize()
    s = cuvmm_torch.stats()
    check(s["bytes_requested"]["current"] - before["bytes_requested"]["current"] == nbytes,
          f"bytes_requested rose by exactly {nbytes}")
    check(s["allocations"]["current"] - before["allocations"]["current"] == 1, "allocations rose by exactly 1")
    grown = s["bytes_physical"]["current"] - before["bytes_physical"]["current"]
    whole_pages = -(-nbytes // LARGE_PAGE) * LARGE_PAGE
    check(nbytes <= grown <= whole_pages, f"bytes_physical rose by {grown}: the tensor rounded up to whole large pages")
    del x
    torch.cuda.synchronize()
    freed = cuvmm_torch.stats()
    check(freed["bytes_requested"]["current"] == before["bytes_requested"]["current"], "freeing brought bytes_requested back")
    check(freed["bytes_physical"]["current"] == s["bytes_physical"]["current"], "freed pages stay cached until trim")
    driver_free_before, _ = torch.cuda.mem_get_info()
    given_back = cuvmm_torch.trim()
    driver_free_after, _ = torch.cuda.mem_get_info()
    trimmed = cuvmm_torch.stats()
    drop = freed["bytes_physical"]["current"] - trimmed["bytes_physical"]["current"]
    print(f"  trim() returned {given_back} bytes; bytes_physical dropped by {drop}; "
          f"the driver's free memory rose by {driver_free_after - driver_free_before}")
    check(given_back >= nbytes, f"trim() after freeing returned {given_back} bytes >= the tensor's {nbytes}")
    check(drop == given_back, "bytes_physical dropped by exactly what trim() returned")
    # The driver's own count moves in its granularity (2 MiB); nothing else allocates meanwhile.
    check(abs((driver_free_after - driver_free_before) - given_back) <= 2 * MiB,
          "the driver's free memory rose by what trim() returned (within one 2 MiB page)")
    check(cuvmm_torch.trim() == 0, "a second trim() returns 0")
    check(trimmed["bytes_physical"]["peak"] >= s["bytes_physical"]["current"], "the peak keeps the high-water mark")
    del warm


def too_late() -> None:
    import torch

    import cuvmm_torch

    check(cuvmm_torch.stats()["allocations"]["total"] == 0 and not torch.cuda.is_initialized(),
          "stats() before enable() does not start CUDA")
    torch.zeros(1, device="cuda")
    try:
        cuvmm_torch.enable()
        raise AssertionError("enable() after CUDA started did not raise")
    except RuntimeError as e:
        check("after PyTorch initialized CUDA" in str(e), f"enable() too late raised: {e}")
    check(not cuvmm_torch.is_enabled(), "and cuvmm is not enabled")
    check(cuvmm_torch.stats() == cuvmm_torch.stats(0) == cuvmm_torch.stats("cuda:0"),
          "stats(None), stats(0) and stats('cuda:0') are the same device's")
    check(cuvmm_torch.stats()["allocations"]["total"] == 0, "nothing was allocated through cuvmm")


def training(plugin: str) -> None:
    example = os.path.join(ROOT, "examples", "torch_pluggable_allocator.py")
    result = subprocess.run([sys.executable, example, "--compare", "--against", "cuvmm", "cuvmm_torch",
                             "--library", plugin], capture_output=True, text=True)
    print("  " + result.stdout.strip().replace("\n", "\n  "))
    if result.returncode != 0:
        print(result.stderr[-4000:])
    check(result.returncode == 0, "training losses identical to PyTorch's allocator at every step (both cuvmm ways)")


# The arena options the conf checks run with (CUVMM_ARENA_CONF, set for their processes only).
CONF = "large_page_bytes:64MiB"


def conf_package() -> None:
    import torch

    import cuvmm_torch

    check(os.environ.get("CUVMM_ARENA_CONF") == CONF, f"this process has CUVMM_ARENA_CONF={CONF}")
    check(cuvmm_torch.arena_options()["large_page_bytes"] == 64 * MiB, "arena_options() gives 64 MiB large pages")
    cuvmm_torch.enable()
    warm = filled(MiB, 1)  # CUDA context, the fill kernel, a slab page
    torch.cuda.synchronize()
    cuvmm_torch.trim()
    before = cuvmm_torch.stats()["bytes_physical"]["current"]
    x = filled(80 * MiB, 3)
    torch.cuda.synchronize()
    grown = cuvmm_torch.stats()["bytes_physical"]["current"] - before
    print(f"  an 80 MiB tensor: bytes_physical rose by {grown}")
    check(grown == 128 * MiB, "the arena holds exactly two 64 MiB large pages more")
    check(int(x.min()) == int(x.max()) == 3 and int(warm.min()) == int(warm.max()) == 1, "both tensors kept their values")


def conf_plugin(plugin: str) -> None:
    import torch

    check(os.environ.get("CUVMM_ARENA_CONF") == CONF, f"this process has CUVMM_ARENA_CONF={CONF}")
    allocator = torch.cuda.memory.CUDAPluggableAllocator(plugin, "cuvmm_torch_malloc", "cuvmm_torch_free")
    torch.cuda.memory.change_current_allocator(allocator)
    warm = filled(MiB, 1)  # CUDA context, the fill kernel, a slab page
    torch.cuda.synchronize()
    free_before, _ = torch.cuda.mem_get_info()
    x = filled(80 * MiB, 3)
    torch.cuda.synchronize()
    free_after, _ = torch.cuda.mem_get_info()
    taken = free_before - free_after
    print(f"  an 80 MiB tensor: the driver's free memory dropped by {taken}")
    # The driver counts in its granularity (2 MiB); nothing else allocates meanwhile.
    check(128 * MiB <= taken <= 130 * MiB, "the plain plug-in took two 64 MiB large pages (within one 2 MiB page)")
    check(int(x.min()) == int(x.max()) == 3 and int(warm.min()) == int(warm.max()) == 1, "both tensors kept their values")


CHECKS = {"oom_package": oom_package, "oom_plugin": oom_plugin, "stats_trim": stats_trim, "too_late": too_late,
          "training": training, "conf_package": conf_package, "conf_plugin": conf_plugin}
NEEDS_PLUGIN = {"oom_plugin", "training", "conf_plugin"}
CHILD_ENVIRONMENT = {"conf_package": {"CUVMM_ARENA_CONF": CONF}, "conf_plugin": {"CUVMM_ARENA_CONF": CONF}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plugin", required=True, help="path of the installed libcuvmm_torch.so")
    parser.add_argument("--child", choices=CHECKS, help=argparse.SUPPRESS)
    parser.add_argument("checks", nargs="*", help=f"checks to run (default: all): {' '.join(CHECKS)}")
    args = parser.parse_args()
    unknown = [name for name in args.checks if name not in CHECKS]
    if unknown:
        parser.error(f"unknown checks {unknown}")
    if args.child:
        CHECKS[args.child](*([args.plugin] if args.child in NEEDS_PLUGIN else []))
        return 0

    import torch

    import cuvmm_torch

    print(f"torch {torch.__version__}, cuvmm_torch from {os.path.dirname(cuvmm_torch.__file__)}")
    if not torch.cuda.is_available():
        print("FAILED: PyTorch sees no CUDA device; these checks need the GPU")
        return 1
    chosen = args.checks or list(CHECKS)
    failed = []
    for name in chosen:
        print(f"{name}:", flush=True)
        env = dict(os.environ, **CHILD_ENVIRONMENT.get(name, {}))
        result = subprocess.run([sys.executable, __file__, "--plugin", args.plugin, "--child", name], env=env)
        if result.returncode != 0:
            failed.append(name)
            print(f"FAILED: {name} (exit status {result.returncode})", flush=True)
    print(f"{len(chosen) - len(failed)} passed, {len(failed)} failed" + (f": {' '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
