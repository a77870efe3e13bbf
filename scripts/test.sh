#!/usr/bin/env bash
# The whole test suite, from a fresh Debian machine with the Swift toolchain:
# installs what it needs, builds every product (the CLI and the plugin libraries), runs the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# Builds the tests too (so `swift test` below only runs them) and fails on any warning about the
# project's own files: the build is kept warning-free.
build_log="$(mktemp)"
trap 'rm -f "$build_log"' EXIT
swift build --build-tests 2>&1 | tee "$build_log"
scripts/own-warnings.py "$build_log"
# The tests run the real binary and load the real plugin libraries from here.
ORCHESTRATE_BIN_DIR="$(swift build --show-bin-path)"
export ORCHESTRATE_BIN_DIR
# The PyPI packages some tests use (scripts/requirements-test.txt), in a virtual environment.
ORCHESTRATE_TEST_PYTHON="$(scripts/python-venv.sh)"
export ORCHESTRATE_TEST_PYTHON
swift test "$@"
# The engine's end-to-end tests once more on a PostgreSQL store (each test its own database on a
# throwaway cluster; the tests about the SQLite file itself skip), when no tests were chosen.
if [ $# -eq 0 ]; then
  ORCHESTRATE_TEST_STORE=postgres swift test --skip-build --filter OrchestrateEngineTests
fi
