#!/usr/bin/env bash
# The whole test suite, from a fresh Debian machine with the Swift toolchain:
# installs what it needs, builds every product (the CLI and the plugin libraries), runs the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build
# The tests run the real binary and load the real plugin libraries from here.
ORCHESTRATE_BIN_DIR="$(swift build --show-bin-path)"
export ORCHESTRATE_BIN_DIR
swift test "$@"
