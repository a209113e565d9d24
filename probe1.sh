for p in fp16 bf16; do
for c in 192,11008,4096,nt 256,11008,4096,nt 512,11008,4096,nt 256,11008,2048,nt 640,11008,4096,nt 256,28672,8192,nt 128,11008,4096,nt; do
python3 perf/tile_probe.py --case $c --precision $p --only auto --graph --rounds 2 2>&1 | grep -v Warn | grep "cublas\|auto" | sed "s/^/$p $c /"
done; done
python3 -m pytest -q -n 16 tests/test_wide.py tests/test_configs.py 2>&1 | tail -2
