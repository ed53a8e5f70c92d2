"""Train a small model with PyTorch allocating through cuvmm's Arena.

    python3 examples/torch_pluggable_allocator.py --allocator cuvmm_torch      # the Python package
    python3 examples/torch_pluggable_allocator.py --library build/src/libcuvmm_torch.so   # the plain plug-in
    python3 examples/torch_pluggable_allocator.py --allocator default
    python3 examples/torch_pluggable_allocator.py --compare --against cuvmm cuvmm_torch

The allocator must be chosen before PyTorch's first CUDA allocation, so each allocator runs in a
process of its own; `--compare` runs the default allocator and each one of `--against` as
subprocesses and checks that the losses match at every step.
"""
import argparse
import ctypes
import json
import subprocess
import sys


def train(steps: int) -> list[float]:
    import torch

    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True)
    device = torch.device("cuda", 0)
    inputs = torch.randn(4096, 256, device=device)
    teacher = torch.nn.Linear(256, 10).to(device)
    labels = teacher(inputs).argmax(dim=1)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 10)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for step in range(steps):
        batch = slice((step * 512) % 4096, (step * 512) % 4096 + 512)
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(inputs[batch]), labels[batch])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--allocator", choices=["cuvmm", "cuvmm_torch", "default"], default="cuvmm",
                        help="cuvmm: the plain plug-in (--library); cuvmm_torch: the Python package")
    parser.add_argument("--library", default="build/src/libcuvmm_torch.so", help="path of libcuvmm_torch.so")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--compare", action="store_true", help="run the default allocator and those of --against "
                        "and compare their losses")
    parser.add_argument("--against", nargs="+", choices=["cuvmm", "cuvmm_torch"], default=["cuvmm"])
    args = parser.parse_args()

    if args.compare:
        runs = {}
        for allocator in ("default", *args.against):
            out = subprocess.run([sys.executable, __file__, "--allocator", allocator, "--library", args.library,
                                  "--steps", str(args.steps)], check=True, capture_output=True, text=True).stdout
            runs[allocator] = json.loads(out.strip().splitlines()[-1])
        print(f"default allocator:  final loss {runs['default']['losses'][-1]:.6f}")
        same = True
        for allocator in args.against:
            run = runs[allocator]
            identical = run["losses"] == runs["default"]["losses"]
            same = same and identical
            print(f"{allocator + ':':19} final loss {run['losses'][-1]:.6f} "
                  f"(arena peak requested {run['peak_requested'] / 2**20:.1f} MiB, "
                  f"peak held {run['peak_held'] / 2**20:.1f} MiB): "
                  + ("losses identical at every step" if identical else "LOSSES DIFFER"))
        return 0 if same else 1

    import torch

    if args.allocator == "cuvmm":
        allocator = torch.cuda.memory.CUDAPluggableAllocator(args.library, "cuvmm_torch_malloc", "cuvmm_torch_free")
        torch.cuda.memory.change_current_allocator(allocator)
    elif args.allocator == "cuvmm_torch":
        import cuvmm_torch

        cuvmm_torch.enable()
    losses = train(args.steps)
    result = {"allocator": args.allocator, "losses": losses}
    if args.allocator == "cuvmm":
        library = ctypes.CDLL(args.library)
        requested, held = ctypes.c_size_t(), ctypes.c_size_t()
        if library.cuvmm_torch_peaks(0, ctypes.byref(requested), ctypes.byref(held)) != 0:
            raise RuntimeError("cuvmm_torch_peaks failed")
        result["peak_requested"], result["peak_held"] = requested.value, held.value
    elif args.allocator == "cuvmm_torch":
        stats = cuvmm_torch.stats(0)
        result["peak_requested"], result["peak_held"] = stats["bytes_requested"]["peak"], stats["bytes_physical"]["peak"]
    if args.allocator != "default":
        if result["peak_requested"] == 0:
            raise RuntimeError("the arena served no allocation: the pluggable allocator was not used")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
