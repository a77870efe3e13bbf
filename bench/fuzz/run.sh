#!/usr/bin/env bash
# A long fuzzing campaign of the workflow loader and expression language (the test suite runs a
# short one): ITERATIONS mutated workflows (and twice as many expressions) from SEED.
#   bench/fuzz/run.sh [ITERATIONS] [SEED]
set -euo pipefail
cd "$(dirname "$0")/../.."
export ORCHESTRATE_FUZZ_ITERATIONS="${1:-100000}"
export ORCHESTRATE_FUZZ_SEED="${2:-$RANDOM$RANDOM}"
echo "fuzzing: $ORCHESTRATE_FUZZ_ITERATIONS iterations, seed $ORCHESTRATE_FUZZ_SEED" >&2
swift build --build-tests >/dev/null
time swift test --skip-build --filter FuzzTests
