#!/usr/bin/env bash
# Download, here, the wheels that the lent GPU machine's image lacks (it has torch, pandas,
# pyyaml, tqdm, matplotlib, pytest, hypothesis; it has no network). They land in .gpu_wheels/
# (git-ignored), which the device tool carries when named in `carry`.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip download --quiet --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
  --platform manylinux_2_17_x86_64 -d .gpu_wheels optuna "psycopg[binary]" transformers
ls .gpu_wheels
