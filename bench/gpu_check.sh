#!/usr/bin/env bash
# The GPU checks (issues 5, 14 and 15) in one go, for a machine with an NVIDIA GPU and CuPy (the lent device
# machine's image has CuPy, PyTorch, torchvision, pybind11, pytest, pytest-xdist and SciPy; nothing is
# downloaded). The extension is built in place first (pip -e, no build isolation); then the stages named in
# STAGES run in the order given, each under its own time limit and all under DEADLINE seconds from the start
# (default 540), so a failing or slow stage leaves the others' results:
#   kernels  bench/gpu_kernels.py (sections: SECTIONS, default all but the probe of the mixing kernels):
#            bit-identity of the mixing kernels, mixing bandwidth at n = 2^20 and 2^22, per-iteration
#            overhead at n <= 2^16, the logistic oracle against every CPU core;
#   tests    the test files with CuPy and CUDA cases (pytest-xdist; TESTFILES to choose others);
#   messages bench/gpu_messages.py: compressed, noisy and delayed messages on the device vs the CPU (bits, speed);
#   links    bench/gpu_links.py: robust gradient-push and R-FAST's running sums (link_sums, link_sums2) vs the CPU
#            bit for bit, and their step against SGP / Push-Pull at n = 2^16 and 2^20 (GENERIC=1: the generic
#            operations too);
#   samples  bench/gpu_samples.py: the per-sample methods' draws and table on the device vs the host's (draws and
#            iterates against the CPU; GT-SAGA's step at n = 2^20 against DIGing, host draws beside it);
#   profile  bench/gpu_profile.py: a step's time kernel by kernel (SGP, robust gradient-push, Push-Pull, R-FAST on a
#            lossy network, DIGing and GT-SAGA on a static one, n = 2^20), and the floor of per-link noise;
#   e2e      bench/gpu_e2e.py: rowstoch run --backend cupy vs cpu, set-up and run time, cold and warm cache;
#   rest     the rest of the suite (REST_LIMIT seconds, default 100);
#   scaling  the GPU half of bench/scaling.py (the design card's figure);
#   algorithms  bench/algorithms_step.py: one step of every algorithm at n = 2^16, d = 10 on the GPU and on
#            the host's cores (the CPU half with its scipy compositions; ALGO_CPU=0: the GPU half alone);
#   step20   bench/algorithms_step.py on the GPU alone at n = 2^20 for ONLY (default: the plain methods against
#            the centralized baseline and GT-SAGA, issue 52's item 2);
#   torch    bench/torch_replicas.py with 64 replicas of a small CNN on the GPU (issue 15);
#   resnet   examples/cifar10_resnet.py: 16 ResNet-18 replicas on random CIFAR-shaped images (issue 15's job);
#   ncu      Nsight Compute's DRAM and L2 byte counts of the mixing kernels at n = 2^20 (the "entry" and "row"
#            kernels, bench/gpu_kernels.py --sections probe);
#   ncu_oracle  Nsight Compute's durations of the logistic kernel at n = 512 and 2^15 (20 calls each, medians;
#            bench/gpu_kernels.py --sections probe-oracle), against the calls' times.
# Everything lands in $OUT (default /tmp/rowstoch_gpu), in at most 8 files (the device tool's limit).
# PY (or PYTHON): the interpreter (default python3). PREBUILT=1: no build here; the extension bench/gpu_prebuild.sh built on the development machine for this Python
# was carried (it saves the 219 s the in-place build took on the H200), and the tree is imported (PYTHONPATH).
#
#   bash bench/gpu_check.sh                                  # from the repository root
#   STAGES=kernels,torch,ncu,tests DEADLINE=500 bash bench/gpu_check.sh
set -o pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/rowstoch_gpu}
PY=${PY:-${PYTHON:-python3}}
STAGES=${STAGES:-kernels,tests,e2e,rest}
DEADLINE=${DEADLINE:-540}
mkdir -p "$OUT"
start=$(date +%s)
stamp() { echo "== $1 ($(( $(date +%s) - start )) s)" | tee -a "$OUT/gpu.txt"; }
# limit SECONDS CMD...: run CMD under the smaller of SECONDS and what is left before DEADLINE
limit() {
    local left=$(( DEADLINE - ($(date +%s) - start) ))
    local s=$(( $1 < left ? $1 : left )); shift
    if (( s < 5 )); then echo "(skipped: ${left} s left before DEADLINE=$DEADLINE)"; return 124; fi
    timeout "$s" "$@"
}
TESTFILES=${TESTFILES:-"tests/test_backends.py tests/test_algorithms.py tests/test_objectives.py tests/test_gt.py
    tests/test_careless_user.py tests/test_runner.py tests/test_network.py tests/test_torch.py tests/test_undirected.py
    tests/test_messages.py"}

stage_kernels() {
    limit 240 "$PY" bench/gpu_kernels.py --sections "${SECTIONS:-bits,mix,overhead,oracle,probe-oracle,probe-host}" \
        --out "$OUT" 2>&1 | tee "$OUT/gpu_kernels.out"
}
stage_tests() {
    # (one OpenMP thread per worker: 6 workers of 16 threads each oversubscribed the 16-core host, load 22.8, and
    # the stage was cut at 97% in 200 s; with one thread each, 15 workers took the CPU half of these files in 48 s)
    # shellcheck disable=SC2086
    limit 200 env OMP_NUM_THREADS=1 "$PY" -m pytest -q -p no:cacheprovider -n 12 -W default -rs $TESTFILES \
        > "$OUT/tests.log" 2>&1
    echo "pytest exit code $?" >> "$OUT/tests.log"
    tail -15 "$OUT/tests.log"
}
stage_messages() {
    limit 200 "$PY" bench/gpu_messages.py --json "$OUT/messages.json" 2>&1 | tee "$OUT/messages.out"
}
stage_links() {
    limit 150 "$PY" bench/gpu_links.py ${GENERIC:+--generic} --json "$OUT/links.json" 2>&1 | tee "$OUT/links.out"
}
stage_samples() {
    limit 150 "$PY" bench/gpu_samples.py --json "$OUT/samples.json" 2>&1 | tee "$OUT/samples.out"
}
stage_profile() {
    limit 150 "$PY" bench/gpu_profile.py --json "$OUT/profile.json" 2>&1 | tee "$OUT/profile.out"
}
stage_step20() {
    limit 100 "$PY" bench/algorithms_step.py --backend cupy --log2n 20 --rounds 3 \
        --only "${ONLY:-dsgd,diging,sgp,push-pull,centralized,gt-saga}" 2>&1 | tee "$OUT/step20.out"
}
stage_e2e() {
    limit 150 "$PY" bench/gpu_e2e.py --out "$OUT" 2>&1 | tee "$OUT/gpu_e2e.out"
}
stage_rest() {
    local ignore=""
    for f in $TESTFILES; do ignore="$ignore --ignore $f"; done
    # shellcheck disable=SC2086
    limit "${REST_LIMIT:-100}" env OMP_NUM_THREADS=1 "$PY" -m pytest -q -p no:cacheprovider -n 12 -rfEs tests $ignore \
        > "$OUT/tests_rest.log" 2>&1
    echo "pytest exit code $?" >> "$OUT/tests_rest.log"
    tail -8 "$OUT/tests_rest.log"
}
stage_scaling() {
    limit 240 "$PY" bench/scaling.py --min-log2n 10 --max-log2n 22 --cpu-max-log2n 16 --rounds 3 --out "$OUT" \
        2>&1 | tee "$OUT/scaling.out"
}
stage_algorithms() {
    limit 100 "$PY" bench/algorithms_step.py --backend cupy --log2n 16 --rounds 3 --json "$OUT/algorithms_gpu.json" \
        2>&1 | tee "$OUT/algorithms.out"
    [ "${ALGO_CPU:-1}" = 0 ] && return  # (ALGO_CPU=0: the GPU half alone)
    limit 120 "$PY" bench/algorithms_step.py --log2n 16 --rounds 2 --json "$OUT/algorithms_cpu.json" \
        2>&1 | tee -a "$OUT/algorithms.out"
}
stage_torch() {
    limit 120 "$PY" bench/torch_replicas.py --model cnn --device cuda --nodes 64 --batch 32 --rounds 3 \
        2>&1 | tee -a "$OUT/torch.out"
}
stage_resnet() {
    limit 120 "$PY" examples/cifar10_resnet.py --synthetic 4096 --model resnet18 --device cuda \
        --rounds-budget 40 --rounds 1,10 --graphs ring --record-every 20 --out /tmp/rowstoch_resnet \
        2>&1 | tee -a "$OUT/torch.out"
}
# ncu_probe REGEX SECTION CSV METRICS GROUP: Nsight Compute on `gpu_kernels.py --sections SECTION`, the kernels
# matching REGEX; prints each kernel's metrics, or with GROUP > 0 the median of each GROUP launches in a row
ncu_probe() {
    local NCU
    NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    if [ -z "$NCU" ]; then echo "no ncu on this machine"; return 1; fi
    limit 150 "$NCU" --kernel-name "regex:$1" --csv --page raw --metrics "$4" \
        "$PY" bench/gpu_kernels.py --sections "$2" --out /tmp > "$OUT/$3" 2>> "$OUT/gpu.txt"
    echo "ncu exit code $?"; grep "^probe" "$OUT/$3"
    "$PY" - "$OUT/$3" "$1" "$4" "$5" <<'PYEOF'
import csv, re, statistics, sys
path, regex, metrics, group = sys.argv[1], sys.argv[2], sys.argv[3].split(","), int(sys.argv[4])
rows = [r for r in csv.DictReader(l for l in open(path) if l.startswith('"'))
        if re.match(regex, r.get("Kernel Name", ""))]
if group:
    for i in range(0, len(rows), group):
        chunk = rows[i:i + group]
        print(chunk[0]["Kernel Name"], f"launches {i}-{i + len(chunk) - 1}:",
              *(f"median {k}={statistics.median(float(r[k].replace(',', '')) for r in chunk)}" for k in metrics))
else:
    for r in rows:
        print(r["Kernel Name"], *(f"{k}={r.get(k)}" for k in metrics))
PYEOF
}
stage_ncu() {
    ncu_probe csr_mix probe ncu.csv gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,lts__t_sector_hit_rate.pct,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed 0
}
stage_ncu_oracle() {
    ncu_probe logistic_grad probe-oracle ncu_oracle.csv gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed 20
}

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv 2>&1 | tee "$OUT/gpu.txt"
"$PY" -c "import cupy; print('cupy', cupy.__version__, cupy.cuda.runtime.getDeviceProperties(0)['name'])" \
    2>&1 | tee -a "$OUT/gpu.txt"
stamp build
{ echo "CXX=$CXX CC=$CC LDFLAGS=$LDFLAGS"; ${CXX:-c++} --version | head -1; file "$(command -v "${CXX:-c++}")";
  echo "libstdc++.so: $(${CXX:-c++} -print-file-name=libstdc++.so)"; } >> "$OUT/gpu.txt" 2>&1
if [ "${PREBUILT:-0}" = 1 ]; then  # (bench/gpu_prebuild.sh built _core for this Python; it was carried here)
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
    # (no pip install: no package metadata, which this one test reads)
    export PYTEST_ADDOPTS="${PYTEST_ADDOPTS:-} --deselect tests/test_embedding.py::test_one_version_everywhere"
    if ! "$PY" -c "from rowstoch_fast import _core; print('PREBUILT=1: the carried', _core.__file__)" \
            2>&1 | tee -a "$OUT/gpu.txt" > "$OUT/build.log"; then
        echo "PREBUILT=1 but no carried extension imports for $("$PY" -V) (bench/gpu_prebuild.sh, carry)"; exit 1
    fi
elif ! "$PY" -m pip install -q --no-build-isolation --no-deps -e . > "$OUT/build.log" 2>&1; then
    grep -i "rowstoch_fast:" "$OUT/build.log" | tail -5
    echo "build with CXX=$CXX failed; trying the system compiler (g++ on PATH without CXX)"
    env -u CXX -u CC "$PY" -m pip install -q --no-build-isolation --no-deps -e . >> "$OUT/build.log" 2>&1 \
        || { tail -30 "$OUT/build.log"; exit 1; }
fi
grep -i "rowstoch_fast:" "$OUT/build.log" | tail -3
"$PY" -c "import rowstoch_fast as r; print(r.build_info())" | tee -a "$OUT/gpu.txt"
for name in ${STAGES//,/ }; do
    if ! declare -F "stage_$name" > /dev/null; then echo "unknown stage $name"; continue; fi
    stamp "$name"
    "stage_$name"
done
stamp done
