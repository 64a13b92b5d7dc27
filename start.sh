#!/usr/bin/env bash
# Install (into .venv, once) and launch GPT Block Explorer on the default model.
set -euo pipefail
cd "$(dirname "$0")"
. scripts/bootstrap.sh
exec gpt-explorer "$@"
