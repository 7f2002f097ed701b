#!/usr/bin/env bash
# The GPU checks (issues 5 and 14) in one go, for a machine with an NVIDIA GPU and CuPy (the lent device
# machine's image has CuPy, pybind11, pytest, pytest-xdist and SciPy; nothing is downloaded). About 8
# minutes on an H100; each stage has its own time limit, so a failing stage leaves the others' results:
#   1. build the extension in place (pip -e, no build isolation);
#   2. bench/gpu_kernels.py: bit-identity of the mixing kernels, mixing bandwidth at n = 2^20 and 2^22,
#      per-iteration overhead at n <= 2^16, the logistic oracle against every CPU core;
#   3. the tests that run CuPy cases, then the rest of the suite (pytest-xdist);
#   4. bench/gpu_e2e.py: rowstoch run --backend cupy vs cpu, set-up and run time, cold and warm kernel cache;
#   5. the GPU half of bench/scaling.py (the design card's figure) when STAGES includes "scaling";
#   6. bench/torch_replicas.py with 64 replicas of a small CNN on the GPU (issue 15) when STAGES includes
#      "torch";
#   7. Nsight Compute's DRAM and L2 byte counts of the mixing kernels at n = 2^20 (the "entry" and "row"
#      kernels, bench/gpu_kernels.py --sections probe) when STAGES includes "ncu".
# Everything lands in $OUT (default /tmp/rowstoch_gpu).
#
#   bash bench/gpu_check.sh                          # from the repository root
#   STAGES=kernels,tests bash bench/gpu_check.sh     # a subset
set -o pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/rowstoch_gpu}
PY=${PYTHON:-python3}
STAGES=${STAGES:-kernels,tests,e2e,rest}
mkdir -p "$OUT"
has() { [[ ",$STAGES," == *",$1,"* ]]; }
start=$(date +%s)
stamp() { echo "== $1 ($(( $(date +%s) - start )) s)"; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv 2>&1 | tee "$OUT/gpu.txt"
"$PY" -c "import cupy; print('cupy', cupy.__version__, cupy.cuda.runtime.getDeviceProperties(0)['name'])" \
    2>&1 | tee -a "$OUT/gpu.txt"
stamp build
{ echo "CXX=$CXX CC=$CC LDFLAGS=$LDFLAGS"; ${CXX:-c++} --version | head -1; file "$(command -v "${CXX:-c++}")";
  echo "libstdc++.so: $(${CXX:-c++} -print-file-name=libstdc++.so)"; } >> "$OUT/gpu.txt" 2>&1
if ! "$PY" -m pip install -q --no-build-isolation --no-deps -e . > "$OUT/build.log" 2>&1; then
    grep -i "rowstoch_fast:" "$OUT/build.log" | tail -5
    echo "build with CXX=$CXX failed; trying the system compiler (g++ on PATH without CXX)"
    env -u CXX -u CC "$PY" -m pip install -q --no-build-isolation --no-deps -e . > "$OUT/build2.log" 2>&1 \
        || { tail -30 "$OUT/build2.log"; exit 1; }
fi
grep -i "rowstoch_fast:" "$OUT/build.log" | tail -3
"$PY" -c "import rowstoch_fast as r; print(r.build_info())" | tee -a "$OUT/gpu.txt"
if has kernels; then
    stamp "kernels (bench/gpu_kernels.py)"
    timeout 240 "$PY" bench/gpu_kernels.py --out "$OUT" 2>&1 | tee "$OUT/gpu_kernels.out"
fi
if has tests; then
    stamp "tests with CuPy cases"
    timeout 200 "$PY" -m pytest -q -p no:cacheprovider -W default -rs tests/test_backends.py \
        tests/test_algorithms.py tests/test_objectives.py tests/test_gt.py tests/test_careless_user.py \
        tests/test_runner.py tests/test_network.py tests/test_torch.py > "$OUT/tests.log" 2>&1
    echo "pytest exit code $?" >> "$OUT/tests.log"
    tail -15 "$OUT/tests.log"
fi
if has e2e; then
    stamp "end to end (bench/gpu_e2e.py)"
    timeout 150 "$PY" bench/gpu_e2e.py --out "$OUT" 2>&1 | tee "$OUT/gpu_e2e.out"
fi
if has rest; then
    stamp "the rest of the suite"
    timeout 100 "$PY" -m pytest -q -p no:cacheprovider -n 8 -rs tests \
        --ignore tests/test_backends.py --ignore tests/test_algorithms.py --ignore tests/test_objectives.py \
        --ignore tests/test_gt.py --ignore tests/test_careless_user.py --ignore tests/test_runner.py \
        --ignore tests/test_network.py --ignore tests/test_torch.py \
        > "$OUT/tests_rest.log" 2>&1
    echo "pytest exit code $?" >> "$OUT/tests_rest.log"
    tail -8 "$OUT/tests_rest.log"
fi
if has scaling; then
    stamp "scaling (bench/scaling.py, GPU half)"
    timeout 240 "$PY" bench/scaling.py --min-log2n 10 --max-log2n 22 --cpu-max-log2n 16 --rounds 3 --out "$OUT" \
        2>&1 | tee "$OUT/scaling.out"
fi
if has torch; then
    stamp "PyTorch replicas on the GPU (bench/torch_replicas.py)"
    timeout 120 "$PY" bench/torch_replicas.py --model cnn --device cuda --nodes 64 --batch 32 --rounds 3 \
        2>&1 | tee "$OUT/torch_replicas.out"
fi
if has ncu; then
    stamp "ncu: bytes moved by the mixing kernels (bench/gpu_kernels.py --sections probe)"
    NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    if [ -z "$NCU" ]; then
        echo "no ncu on this machine"
    else
        timeout 150 "$NCU" --kernel-name regex:csr_mix --csv --page raw \
            --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,lts__t_sector_hit_rate.pct,l1tex__t_bytes.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed \
            "$PY" bench/gpu_kernels.py --sections probe --out "$OUT" > "$OUT/ncu.csv" 2> "$OUT/ncu.err"
        echo "ncu exit code $?"; grep "^probe" "$OUT/ncu.csv"; tail -3 "$OUT/ncu.err"
        "$PY" - "$OUT/ncu.csv" <<'PYEOF'
import csv, sys
lines = [l for l in open(sys.argv[1]) if l.startswith('"')]
rows = list(csv.DictReader(lines))
keys = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum",
        "lts__t_sector_hit_rate.pct", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "lts__throughput.avg.pct_of_peak_sustained_elapsed")
for r in rows:
    if "Kernel Name" in r and r["Kernel Name"].startswith("csr_mix"):
        print(r["Kernel Name"], *(f"{k}={r.get(k)}" for k in keys))
PYEOF
    fi
fi
stamp done
