#!/usr/bin/env bash
# Create .venv (once) and install the project into it, editable; again only when
# pyproject.toml changed or more extras are asked for than were installed.
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
extras="${1:-}"
stamp="$venv/.gpt-block-explorer-installed"
wanted="$(python -c "import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],'rb').read()).hexdigest())" "$root/pyproject.toml") $root"
if [ -f "$stamp" ] && [ "$(head -n 1 "$stamp")" = "$wanted" ] && grep -qx "extras:$extras" "$stamp"; then
  echo "==> gpt-block-explorer${extras:+[$extras]} is installed"
else
  if ! python -c "import torch" 2>/dev/null; then
    # A pinned torch: an unpinned one can pull a multi-GB CUDA build on Linux.
    echo "==> installing torch ${EXPLORER_TORCH:-2.13.0}"
    pip_q "torch==${EXPLORER_TORCH:-2.13.0}"
  fi
  echo "==> installing gpt-block-explorer${extras:+[$extras]}"
  pip_q -e "$root${extras:+[$extras]}"
  # what is installed now: this pyproject.toml, these extras and no extras
  { echo "$wanted"; echo "extras:"; [ -n "$extras" ] && echo "extras:$extras"
    if [ -f "$stamp" ] && [ "$(head -n 1 "$stamp")" = "$wanted" ]; then tail -n +2 "$stamp"; fi
  } | awk '!seen[$0]++' > "$stamp.new"
  mv "$stamp.new" "$stamp"
fi
python -c "import torch, tiktoken, safetensors, huggingface_hub, explorer" \
  || { rm -f "$stamp"; echo "installation failed: see the messages above" >&2; exit 1; }
