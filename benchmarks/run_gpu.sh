#!/usr/bin/env bash
# The GPU run of benchmarks/gpu.py: an NVIDIA H200 machine with JAX (CUDA) and no TensorFlow,
# no network. Keras and keras-hub travel with the tree as wheels, with the two pure-Python or
# manylinux dependencies the machine lacks (namex, optree); keras-hub needs neither TensorFlow,
# tensorflow-text nor kagglehub to import or to build layers on JAX. The wheels stay out of git
# (/.whl/ is in .gitignore).
#
# 1. Here, once, with the network (versions = this checkout's venv; the machine has Python 3.12):
#      bash benchmarks/run_gpu.sh --download
# 2. On the machine, from the repository root (the device tool: command
#    `bash benchmarks/run_gpu.sh`, carry [".whl"], timeout_s 420). The script's own budget is
#    210 s of measuring; `timeout` interrupts it at 280 s (it then prints what it measured)
#    and kills it 20 s later. Parts the budget skipped: `bash benchmarks/run_gpu.sh --parts
#    attention,generate` in the same lease. The first part, `fit`, is a short training run of
#    the base model over the fixed batch shapes of the translation pipeline under XLA: its row
#    gives the train step's compilations and their seconds apart from the later steps' time
#    (`bash benchmarks/run_gpu.sh --parts fit` runs it alone).
#      bash benchmarks/run_gpu.sh
#    It prints the table and writes it, with the command, commit and versions, to
#    $OUT/RESULTS_gpu.md (and the whole log to $OUT/gpu.log).
# 3. Here, append the section to the results:
#      tail -n +2 <files_at>/RESULTS_gpu.md >> benchmarks/RESULTS.md
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

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$PWD" KERAS_BACKEND=jax PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2
# The naive attention at 32k tokens needs most of the card: let JAX's pool take 95% of it.
export XLA_PYTHON_CLIENT_MEM_FRACTION=0.95
OUT="${OUT:-/tmp/gpu_out}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv || true
set -o pipefail
timeout -s INT -k 20 280 python3 benchmarks/gpu.py --output "$OUT/RESULTS_gpu.md" "$@" 2>&1 | tee "$OUT/gpu.log"
