#!/usr/bin/env bash
# Install (into .venv, once) and launch GPT Block Explorer on the default model.
set -euo pipefail
cd "$(dirname "$0")"
# "" : no extras (a sourced script would otherwise see this script's arguments)
. scripts/bootstrap.sh ""
exec gpt-explorer "$@"
