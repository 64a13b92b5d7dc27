#!/usr/bin/env bash
# Install (into .venv, with the test extras) and run the test suite.
set -euo pipefail
cd "$(dirname "$0")"
. scripts/bootstrap.sh test
export QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}"
# Bytecode and pytest's rewritten test modules are cached (in __pycache__, ignored by git):
# each worker and each command-line test's process then skips compiling them again.
unset PYTHONDONTWRITEBYTECODE
# On every core (EXPLORER_TEST_WORKERS=1 for one process); arguments after these win, e.g.
# ./test.sh -m "not slow" for the quick subset. pytest exits 5 when it collects no tests,
# so an empty run fails too.
workers="${EXPLORER_TEST_WORKERS:-auto}"
if [ "$workers" = "1" ]; then
  exec python -m pytest "$@"
fi
exec python -m pytest -n "$workers" --dist worksteal "$@"
