set -u; cd .probe; export LD_LIBRARY_PATH=$PWD
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
for r in 1 2 3; do for m in prealloc reserved growable first2x twot; do ./growth_probe $m 4096 64; done; done 2>&1 | tee $OUT/growth4g.txt
for r in 1 2; do for m in prealloc growable first2x; do ./growth_probe $m 1024 1; done; done 2>&1 | tee $OUT/growth1g.txt
DETAIL=1 ./growth_probe growable 4096 64 > $OUT/detail-growable.txt; DETAIL=1 ./growth_probe twot 4096 64 > $OUT/detail-twot.txt
for r in 1 2; do ./arena_probe 2000 8; done 2>&1 | tee $OUT/arena-quick.txt
SMALL_TAILS=1 ./arena_probe 2000 8 2>&1 | tee -a $OUT/arena-quick.txt
./arena_probe 2000 8 64 2>&1 | tee -a $OUT/arena-quick.txt
./arena_probe 10000 40 2>&1 | tee $OUT/arena-full.txt
