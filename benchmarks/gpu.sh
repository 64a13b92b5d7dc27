#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and a CUDA build of torch in .venv (or $PYTHON): the
# device-generic tests on the GPU, then the speed benchmarks on cuda in float32 and
# bfloat16, in one call. Budgets (README, Speed): capture <= 1.15x the plain forward,
# decode with capture >= 1.2x transformers on the same GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA GPU here')" || exit 2
"$PY" -c "import torch; print(torch.__version__, torch.cuda.get_device_name(0))"
status=0
GPT_EXPLORER_TEST_DEVICE=cuda "$PY" -m pytest -q -p no:cacheprovider tests/core/base/test_devices.py tests/core/run/test_graph_decode.py || status=1
for dtype in float32 bfloat16; do
  "$PY" benchmarks/bench_capture.py --device cuda --dtype "$dtype" --repeats 5 || status=1
done
"$PY" benchmarks/bench_generate.py --device cuda --repeats 5 || status=1
exit $status
