#!/usr/bin/env bash
# Build rowstoch_fast._core here for the lent GPU machine's Python (3.12 on the H200 image), so that a device run
# spends no device time compiling: the in-place build took 219 s of the device's 900 s on 2026-11-30 (one
# translation unit, gcc 13 -O3). Run it on the development machine before the device run, then call the device
# with `carry: ["rowstoch_fast/_core.cpython-312-x86_64-linux-gnu.so"]` and `PREBUILT=1 bash bench/gpu_check.sh`
# (the checks then import the tree itself: PYTHONPATH=., no pip). The extension is the same code the tree holds
# (built from it now; rebuild after any C++ change); it is built with this machine's compiler (gcc 12 here, the
# device's build used gcc 13: the same bits, the same flags, possibly other timings on the device's CPU).
#
#   bash bench/gpu_prebuild.sh                 # PY312=/path/to/python3.12 to choose the interpreter
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PY312:-}" ]; then  # (the first candidate that really runs Python 3.12: pyenv's shim may not)
    for candidate in python3.12 /root/.pyenv/versions/3.12*/bin/python3.12; do
        if "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2> /dev/null; then
            PY312=$candidate
            break
        fi
    done
fi
if [ -z "${PY312:-}" ]; then echo "no Python 3.12 here (set PY312)"; exit 1; fi
VENV=${VENV:-/tmp/rowstoch-py312}
[ -x "$VENV/bin/python" ] || "$PY312" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q "pybind11>=2.12" setuptools wheel numpy
"$VENV/bin/python" setup.py -q build_ext --inplace
so=$(ls rowstoch_fast/_core.cpython-312-*.so)
"$VENV/bin/python" - "$so" <<'PYEOF'
import importlib.util, sys  # (the extension alone: the package needs SciPy and the rest, the device has them)
spec = importlib.util.spec_from_file_location("_core", sys.argv[1])
core = importlib.util.module_from_spec(spec)
spec.loader.exec_module(core)
print("built", sys.argv[1], core.build_info())
PYEOF
echo "carry: [\"$so\"]"
