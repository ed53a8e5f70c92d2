#!/usr/bin/env bash
# Device run T (session 8): growth children spawned by a process that holds a CUDA context, with
# its file descriptors inherited (os.posix_spawn) and closed (subprocess, close_fds).
set -uo pipefail
out=$OUT; B=/work/main/build
export LD_LIBRARY_PATH=$B/src:$PWD/.device
[ -d $B ] || tar -xJf .device/build.tar.xz -C /work/main
P=$B/tools/cuvmm-plan/cuvmm-plan
cat > /tmp/spawner.py <<PY
import os, subprocess, sys, torch
x = torch.empty(1, device="cuda"); torch.cuda.synchronize()
def link(f):
    try: return os.readlink("/proc/self/fd/" + f)
    except OSError: return "?"
fds = sorted(os.listdir("/proc/self/fd"), key=int)
print("parent fds:", " ".join(f + "->" + link(f) for f in fds if "nvidia" in link(f)), flush=True)
case = "growable:8589934592:1073741824"
for how in ["posix_spawn (fds inherited)", "subprocess (close_fds)", "posix_spawn (fds inherited)", "subprocess (close_fds)"]:
    if how.startswith("posix"):
        r, w = os.pipe()
        pid = os.posix_spawn("$P", ["$P", "--backend", "cuda", "--growth-case", case], os.environ,
                             file_actions=[(os.POSIX_SPAWN_DUP2, w, 1)])
        os.close(w); text = os.read(r, 4096).decode(); os.waitpid(pid, 0); os.close(r)
    else:
        text = subprocess.run(["$P", "--backend", "cuda", "--growth-case", case], capture_output=True, text=True).stdout
    print("--", how, text.strip(), flush=True)
PY
timeout 120 python3 /tmp/spawner.py > $out/spawn.txt 2>&1
cat $out/spawn.txt
