#!/usr/bin/env bash
# The peer for bench_capture.py --peer: TransformerLens 2.x in an environment of its own
# (.venv-tl), since it pins older transformers/datasets than the explorer's tests use.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-tl
.venv-tl/bin/pip install -q torch==2.13.0 "transformer-lens<3" "datasets<3" "pyarrow<19"
echo "TransformerLens ready in .venv-tl"
