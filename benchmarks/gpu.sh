#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and a CUDA build of torch in .venv (or $PYTHON), in one
# call: the device tests (the CPU's numbers on the GPU; the static-cache decode recorded as
# CUDA graphs giving the growing cache's tokens and nodes; the compiled statistics), then
# the speed benchmarks on cuda. Budgets (docs/PERFORMANCE.md): every node's statistics
# <= 1.5x a plain forward at T = 1024; decode with per-token capture >= 4x transformers'
# generate and >= 0.5 of the bound. Each benchmark also runs its slower way
# (--no-compile, --static off) for the comparison on the same GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA GPU here')" || exit 2
"$PY" -c "import torch; print(torch.__version__, torch.cuda.get_device_name(0))"
status=0
GPT_EXPLORER_TEST_DEVICE=cuda "$PY" -m pytest -q -p no:cacheprovider \
  tests/core/base/test_devices.py tests/core/run/test_graph_decode.py || status=1
"$PY" benchmarks/bench_capture.py --device cuda --repeats 5 || status=1
"$PY" benchmarks/bench_capture.py --device cuda --dtype bfloat16 --repeats 5 || status=1
"$PY" benchmarks/bench_capture.py --device cuda --repeats 3 --no-compile || status=1
"$PY" benchmarks/bench_generate.py --device cuda --repeats 5 || status=1
"$PY" benchmarks/bench_generate.py --device cuda --repeats 3 --static off || status=1
for preset in smollm2-135m gemma3-270m qwen3-0.6b; do
  "$PY" benchmarks/bench_generate.py --device cuda --repeats 3 --preset "$preset" || status=1
done
exit $status
