#!/usr/bin/env bash
# Device run Y (session 9): run X showed the stall after large children with a parent that holds no
# CUDA context but has initialized the driver (cuInit). Is a parent that only called cuInit enough?
set -uo pipefail
out=$OUT; B=/work/main/build
export LD_LIBRARY_PATH=$B/src:$PWD/.device
[ -d $B ] || tar -xJf .device/build.tar.xz -C /work/main
P=$B/tools/cuvmm-plan/cuvmm-plan
cat > /tmp/parent.py <<PY
import ctypes, os, subprocess, sys, time
if sys.argv[1] == "cuinit":
    print("cuInit:", ctypes.CDLL("libcuda.so.1").cuInit(0), flush=True)
def link(f):
    try: return os.readlink("/proc/self/fd/" + f)
    except OSError: return "?"
print("nvidia fds:", " ".join(link(f) for f in os.listdir("/proc/self/fd") if "nvidia" in link(f)), flush=True)
def g(spec, why):
    t = time.time()
    text = subprocess.run(["$P", "--backend", "cuda", "--growth-case", spec], capture_output=True, text=True).stdout
    f = text.split()
    print("--", spec, "(" + why + ")", "total %.3f ms steps %.3f ms p99 %s us, process %.2f s" % (float(f[7])*1e3, float(f[12])*1e3, f[8], time.time() - t), flush=True)
for rep in range(2):
    g("preallocated:128849018880:67108864", "holds 120 GiB"); g("growable:8589934592:1073741824", "right after it")
g("growable:268435456:4096", "after a small child")
PY
{
nvidia-smi -q | grep -i -E "persistence|driver version" 
echo "== python parent, no CUDA"; timeout 100 python3 /tmp/parent.py none
echo "== python parent that called cuInit only"; timeout 100 python3 /tmp/parent.py cuinit
} > $out/children.txt 2>&1
cat $out/children.txt
