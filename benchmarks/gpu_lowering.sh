#!/usr/bin/env bash
# Lowers the training steps for CUDA on this machine, GPU or not, and checks that every
# attention runs on cuDNN's fused kernel (benchmarks/gpu_lowering.py says what it counts).
# JAX's CUDA plugin (about 2.5 GB with its CUDA libraries) goes into a virtual environment
# of its own, .venv-gpu-lowering, made on the first run; the package is installed there
# without its dependencies, TensorFlow among them, which the check does not need.
#   bash benchmarks/gpu_lowering.sh [--models translation,language_modeling,prefill] [--dump DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-gpu-lowering
PACKAGES=(jax==0.10.2 jaxlib==0.10.2 "jax-cuda12-plugin[with-cuda]==0.10.2" jax-cuda12-pjrt==0.10.2
    keras h5py)
if [ ! -x "$VENV/bin/python" ]; then
    PYTHON="$(command -v python3.11 || command -v python3)"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install -q --no-compile "${PACKAGES[@]}"
    "$VENV/bin/pip" install -q --no-compile --no-deps -e .
fi
# The plugin finds no GPU on a CPU machine and says so at start; JAX goes on with the CPU.
KERAS_BACKEND=jax JAX_PLATFORMS=cpu TF_CPP_MIN_LOG_LEVEL=2 "$VENV/bin/python" \
    benchmarks/gpu_lowering.py "$@"
