#!/usr/bin/env bash
# Makes (or reuses) the Python virtual environment of the test suite and prints its python.
#   scripts/python-venv.sh [REQUIREMENTS]     default: scripts/requirements-test.txt
# The venv lives in .build/test-venv (ORCHESTRATE_TEST_VENV overrides) and is installed again
# only when the requirements file changes. Tests that need a PyPI package call this (or use
# $ORCHESTRATE_TEST_PYTHON when scripts/test.sh has set it); several at once wait for each other.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
requirements="$(realpath "${1:-$root/scripts/requirements-test.txt}")"
venv="${ORCHESTRATE_TEST_VENV:-$root/.build/test-venv}"
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" >&2
  echo "$want" > "$stamp"
fi
echo "$venv/bin/python"
