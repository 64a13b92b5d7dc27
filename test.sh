#!/usr/bin/env bash
# Install (into .venv, with the test extras) and run the test suite.
set -euo pipefail
cd "$(dirname "$0")"
. scripts/bootstrap.sh test
export QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}"
# pytest exits 5 when it collects no tests, so an empty run fails too.
exec python -m pytest "$@"
