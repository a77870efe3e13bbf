#!/usr/bin/env bash
# The whole test suite, from a fresh Debian machine with the Swift toolchain:
# installs what it needs, builds every product (the CLI and the plugin libraries), runs the tests.
#
# The console gets each suite's result, every failure with its details, and the counts; the
# whole output of the build and of each test pass is kept in .build/artifacts/ (the path is
# printed). Arguments are passed to `swift test` (e.g. `--filter SandboxUploadTests`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
artifacts=.build/artifacts
mkdir -p "$artifacts"

# Runs a command with its output in the log $1, showing the filtered view; on failure, the
# log's last lines too (a crash prints no summary of its own).
logged() {
  local log="$1"; shift
  local status=0
  "$@" 2>&1 | scripts/test-output.py "$log" || status=$?   # pipefail: the test's own status
  if [ "$status" -ne 0 ]; then
    echo "--- failed (exit status $status); the last lines of $log:"
    tail -n 120 "$log"
  fi
  return "$status"
}

# Builds the tests too (so `swift test` below only runs them) and fails on any warning about the
# project's own files: the build is kept warning-free.
build_log="$artifacts/build-output.txt"
echo "building (log: $build_log)"
if ! swift build --build-tests > "$build_log" 2>&1; then
  grep -E "error:" "$build_log" | head -n 100 || true
  tail -n 60 "$build_log"
  exit 1
fi
scripts/own-warnings.py "$build_log"
# swift-argument-parser's man page generator, so the staleness test checks docs/reference/orchestrate.1 too.
swift build --product generate-manual >> "$build_log" 2>&1
# The tests run the real binary and load the real plugin libraries from here.
ORCHESTRATE_BIN_DIR="$(swift build --show-bin-path)"
export ORCHESTRATE_BIN_DIR
# The PyPI packages some tests use (scripts/requirements-test.txt), in a virtual environment.
ORCHESTRATE_TEST_PYTHON="$(scripts/python-venv.sh)"
export ORCHESTRATE_TEST_PYTHON
echo "testing on the SQLite store"
logged "$artifacts/test-output-sqlite.txt" swift test --skip-build "$@"
# The end-to-end CLI tests once more on a PostgreSQL store (each test its own database on a
# throwaway cluster; the tests about the SQLite file itself skip), when no tests were chosen.
if [ $# -eq 0 ]; then
  echo "testing end to end on a PostgreSQL store"
  ORCHESTRATE_TEST_STORE=postgres logged "$artifacts/test-output-postgres.txt" \
    swift test --skip-build --filter OrchestrateCLITests
  # serve across a wall-clock step: the test steps this machine's clock back and forward again,
  # so it runs alone, after the others (root only: clock_settime).
  if [ "$(id -u)" = 0 ]; then
    echo "testing serve across a wall-clock step"
    ORCHESTRATE_TEST_CLOCK_STEP=1 logged "$artifacts/test-output-clock.txt" \
      swift test --skip-build --filter ClockStepTests
  fi
fi
