set -u; cd .probe; export LD_LIBRARY_PATH=$PWD
for r in 1 2 3; do ./arena_probe 2000 8; done 2>&1 | tee $OUT/arena-quick.txt
SMALL_TAILS=1 ./arena_probe 2000 8 2>&1 | tee -a $OUT/arena-quick.txt
for r in 1 2; do ./arena_probe 10000 40; done 2>&1 | tee $OUT/arena-full.txt
