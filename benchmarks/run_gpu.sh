#!/usr/bin/env bash
# The GPU run of benchmarks/gpu.py: one NVIDIA H100 (80 GB) or H200 with JAX (CUDA), no
# TensorFlow, no network. Keras and keras-hub travel with the tree as wheels, with the two
# pure-Python or manylinux dependencies the machine lacks (namex, optree); keras-hub needs
# neither TensorFlow, tensorflow-text nor kagglehub to import or to build layers on JAX. The
# wheels stay out of git (/.whl/ is in .gitignore).
#
# One lease of the machine (15 minutes of device time, its start, the transfers and the idle
# time between calls included) runs these three device calls, in order and back to back, each
# with carry [".whl"] and the timeout_s given (together 720 s, each at most 300 s; gpu.py's
# LEASE_PLAN holds them, `bash benchmarks/run_gpu.sh --plan` prints them):
#
#   call 1: bash benchmarks/run_gpu.sh --call 1  (timeout_s 210): fit over 2 batch shapes with the compilation cache, then a second process; attention at 8k-32k tokens, full and causal
#   call 2: bash benchmarks/run_gpu.sh --call 2  (timeout_s 260): train big at 96x256 and 64x256, ours and keras-hub's; the per-op profile of both at 96x256
#   call 3: bash benchmarks/run_gpu.sh --call 3  (timeout_s 250): train base at 96x256 and 64x256, ours and keras-hub's
#
# 1. Here, once, with the network (versions = this checkout's venv; the machine has Python 3.12):
#      bash benchmarks/run_gpu.sh --download
# 2. On the machine, the three calls above. Each installs the wheels (once per machine), runs
#    gpu.py within its timeout_s (`timeout` interrupts it 15 s before, and it then prints what
#    it measured; its own budget ends 10 s earlier still, and a measurement the budget has no
#    room for is a "skipped: budget" row), prints the table and writes it, with the command,
#    commit and versions, to $OUT/RESULTS_gpu_call<N>.md, and the whole log to
#    $OUT/gpu_call<N>.log, where each row appears as it is measured ("row: | ..."), so a call
#    cut short still brings back what it measured. Flags after `--call N` override the
#    plan's: `bash benchmarks/run_gpu.sh --call 3 --shapes 64x256` reruns one shape. Without
#    `--call`, the flags go to gpu.py as they are, within 300 s.
# 3. Here, append each call's section to the results:
#      tail -n +2 <files_at>/RESULTS_gpu_call<N>.md >> benchmarks/RESULTS.md
#    (if the tree travelled without .git, its "commit unknown" is the commit you sent: say so).
set -euo pipefail
cd "$(dirname "$0")/.."

WHEELS=(keras==3.15.1 keras-hub==0.32.0 namex==0.1.0 optree==0.20.0)

if [ "${1:-}" = "--download" ]; then
    mkdir -p .whl
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux1_x86_64 -d .whl "${WHEELS[@]}"
    exit 0
fi
if [ $# -eq 0 ] || [ "$1" = "--plan" ]; then
    python3 benchmarks/gpu.py --plan
    exit 0
fi
CALL=""
TIMEOUT_S=300
if [ "$1" = "--call" ]; then
    CALL="$2"
    shift 2
    TIMEOUT_S=$(python3 benchmarks/gpu.py --call-timeout "$CALL")
fi

# The machine keeps /tmp between the calls of a lease: install the wheels once.
INSTALLED="/tmp/site/.installed-$(ls .whl | sort | md5sum | cut -c1-12)"
if [ ! -e "$INSTALLED" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl
    touch "$INSTALLED"
fi
export PYTHONPATH="/tmp/site:$PWD" KERAS_BACKEND=jax PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2
# The naive attention at 32k tokens needs 64 GiB of temporaries: let JAX's pool take 95% of
# the card.
export XLA_PYTHON_CLIENT_MEM_FRACTION=0.95
OUT="${OUT:-/tmp/gpu_out}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv || true
# Seconds from now: the interrupt 15 s before the call's limit, gpu.py's budget 10 s before it.
INTERRUPT_S=$((TIMEOUT_S - SECONDS - 15))
BUDGET_S=$((INTERRUPT_S - 10))
NAME="gpu${CALL:+_call$CALL}"
timeout -s INT -k 8 "$INTERRUPT_S" python3 benchmarks/gpu.py ${CALL:+--call "$CALL"} \
    --budget "$BUDGET_S" --output "$OUT/RESULTS_$NAME.md" "$@" 2>&1 | tee "$OUT/$NAME.log"
