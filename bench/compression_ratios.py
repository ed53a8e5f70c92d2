#!/usr/bin/env python3
"""Ratios from bench_compression's JSON: for each operation (read, write) and data kind (zeros,
sparse, random), the GB/s of compressible memory over that of ordinary memory. Above 1,
compression pays for that data; cases the device refused (error_occurred) are reported as such."""
import json
import sys


def main() -> int:
    data = json.load(open(sys.argv[1]))
    rates = {}
    errors = {}
    for b in data["benchmarks"]:
        operation, memory, kind = b["name"].split("/")[:3]
        if b.get("error_occurred"):
            errors[(operation, memory, kind)] = b.get("error_message", "error")
        else:
            rates[(operation, memory, kind)] = b["GB/s"]
    print(f"{'operation':<10}{'data':<8}{'ordinary GB/s':>15}{'compressible GB/s':>19}{'ratio':>8}")
    for operation in ("read", "write"):
        for kind in ("zeros", "sparse", "random"):
            ordinary = rates.get((operation, "ordinary", kind))
            compressible = rates.get((operation, "compressible", kind))
            if ordinary is None or compressible is None:
                why = errors.get((operation, "compressible", kind)) or errors.get((operation, "ordinary", kind))
                print(f"{operation:<10}{kind:<8} not measured: {why}")
                continue
            print(f"{operation:<10}{kind:<8}{ordinary:>15.1f}{compressible:>19.1f}{compressible / ordinary:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
