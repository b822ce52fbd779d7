#!/usr/bin/env bash
# A prepared GPU check (under 12 minutes on one GPU): confirm CUDA, run the CUDA-only tests, tune the
# bundled transformer on the GPU with a small budget, print the verdict and package it (AOTInductor), then one zoo model at
# real size (ResNet-50, benchmarks/zoo/) unchanged, under a 2-minute budget.
#
# On a machine with torch already installed (the lent GPU machines have it, and no network):
#   bash scripts/gpu_wheels.sh            # here, once: wheels of the packages that machine lacks
#   bash scripts/gpu_check.sh             # there, from the repository root
# Elsewhere, with network: PY=.venv/bin/python after `pip install -e '.[test]'` in a venv.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/compile-tune-gpu}
PY=${PY:-python3}
mkdir -p "$OUT"

if [ -d .gpu_wheels ]; then  # carried wheels: optuna and friends, no downloads
  $PY -m pip install --quiet --no-index --find-links .gpu_wheels optuna "psycopg[binary]" pytest hypothesis \
    transformers 2>&1 | tail -2 || true
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
$PY - <<'PYEOF'
import torch
assert torch.cuda.is_available(), "no CUDA device visible"
print("torch", torch.__version__, "on", torch.cuda.get_device_name(), "| devices:", torch.cuda.device_count())
PYEOF

# CUDA-only tests (they skip on CPU machines)
timeout 150 $PY -m pytest -q -p no:cacheprovider tests/test_gpu.py 2>&1 | tail -5 || true

# A small GPU tune: reduce-overhead (CUDA graphs) and max-autotune-no-cudagraphs are in this
# space on CUDA, where configs beyond plain torch.compile win most. Each searched config joins the
# race and is decided against plain compile (beats, ties, slower) within the budget: the answer
# lines say what was searched and where the best config beyond plain stands.
timeout 240 $PY -m tuner examples/tiny_transformer.py --device cuda --space gpu_quick --trials 4 \
  --steps 100000 --out "$OUT/tiny_transformer" --trial-timeout 120 --confirm 2 --confirm-rounds 8 \
  --budget 3m30s --no-progress --check-threads 2 2>&1 | tee "$OUT/tiny_transformer.log" | tail -30
grep -E "^so far:|joins the race|does not join|stopped measuring" "$OUT/tiny_transformer.log" | cut -c1-300 || true
# The winner as an AOTInductor package on the GPU, loaded and checked in a fresh process
# (skipped with a line when the verdict is stay eager).
timeout 240 $PY -m tuner package "$OUT/tiny_transformer" 2>&1 | tail -5 || true
cp "$OUT/tiny_transformer/best_config.yaml" "$OUT/tiny_transformer/report.md" "${OUT_COPY:-$OUT}/" 2>/dev/null || true

# The zoo at real size runs unchanged on the GPU (the workload files know no device).
timeout 200 $PY -m tuner benchmarks/zoo/resnet50.py --device cuda --budget 2m --out "$OUT/resnet50" \
  --no-progress 2>&1 | tail -20
cp "$OUT/resnet50/best_config.yaml" "${OUT_COPY:-$OUT}/resnet50_best_config.yaml" 2>/dev/null || true
