#!/usr/bin/env bash
# A prepared GPU check (under 5 minutes on one GPU): install, confirm CUDA, run the CUDA-only
# tests, then tune the bundled transformer on the GPU with a small budget and print the verdict.
#   bash scripts/gpu_check.sh            # on a machine with an NVIDIA GPU
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/compile-tune-gpu}
mkdir -p "$OUT"

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
  # The CUDA build: the GPU machine has no CPU-only wheel constraint.
  .venv/bin/pip install --quiet torch==2.13.0 || .venv/bin/pip install --quiet torch
  .venv/bin/pip install --quiet -e '.[test]'
fi
PY=.venv/bin/python
$PY - <<'PYEOF'
import torch
assert torch.cuda.is_available(), "no CUDA device visible"
print("torch", torch.__version__, "on", torch.cuda.get_device_name(), "| devices:", torch.cuda.device_count())
PYEOF

# CUDA-only tests (they skip on CPU machines)
timeout 120 $PY -m pytest -q tests/test_gpu.py 2>&1 | tail -5

# A small GPU tune: reduce-overhead (CUDA graphs) and max-autotune are in this space on CUDA.
timeout 200 $PY -m tuner examples/tiny_transformer.py --device cuda --space gpu_quick --trials 5 \
  --steps 100000 --out "$OUT/tiny_transformer" --trial-timeout 120 --no-progress --check-threads 2 2>&1 | tail -25
cp "$OUT/tiny_transformer/best_config.yaml" "$OUT/" 2>/dev/null || true
