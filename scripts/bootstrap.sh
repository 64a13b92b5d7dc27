#!/usr/bin/env bash
# Create .venv (once) and install the project into it, editable.
# Usage: source scripts/bootstrap.sh [EXTRAS]   e.g. "test"
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${EXPLORER_VENV:-$root/.venv}"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
  echo "==> creating $venv"
  "$python" -m venv "$venv"
fi
# shellcheck disable=SC1091
. "$venv/bin/activate"
pip_q() { python -m pip install --disable-pip-version-check -q "$@" 2>&1 | grep -v "^WARNING: Location" || true; }
if ! python -c "import torch" 2>/dev/null; then
  # A pinned torch: an unpinned one can pull a multi-GB CUDA build on Linux.
  echo "==> installing torch ${EXPLORER_TORCH:-2.13.0}"
  pip_q "torch==${EXPLORER_TORCH:-2.13.0}"
fi
extras="${1:-}"
echo "==> installing gpt-block-explorer${extras:+[$extras]}"
pip_q -e "$root${extras:+[$extras]}"
python -c "import torch, tiktoken, safetensors, huggingface_hub, explorer" \
  || { echo "installation failed: see the messages above" >&2; exit 1; }
