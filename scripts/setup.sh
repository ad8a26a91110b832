#!/usr/bin/env bash
# Installs penstock and what it needs into the current Python (python3, or $PYTHON).
# An installed torch is reused. Without one: the CPU-only build on a machine without an NVIDIA GPU
# (from a local wheel cache if pip has one, else from PyTorch's CPU index), the default build otherwise.
# usage: bash scripts/setup.sh [--gpu]     (--gpu adds nvImageCodec and PyNvVideoCodec for GPU decoding)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TORCH_VERSION=${PENSTOCK_TORCH_VERSION:-2.13.0}
pip_install() { "$PY" -m pip install --disable-pip-version-check -q "$@"; }

if "$PY" -c "import torch" 2>/dev/null; then
  echo "using the installed torch $("$PY" -c 'import torch; print(torch.__version__)')"
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  pip_install "torch==$TORCH_VERSION"
else
  # the CPU build from a local wheel cache, if pip has one (its dependencies then come from the index)
  if pip_install --no-index --no-deps "torch==$TORCH_VERSION" 2>/dev/null; then
    pip_install "torch==$TORCH_VERSION"
  else
    pip_install "torch==$TORCH_VERSION" --index-url https://download.pytorch.org/whl/cpu \
      --extra-index-url https://pypi.org/simple
  fi
fi

extras="test,roi"
if [ "${1:-}" = "--gpu" ]; then extras="$extras,gpu"; fi
pip_install -e ".[$extras]"
echo "penstock installed: run 'penstock demo' or 'python3 -m pytest -q'"
