#!/usr/bin/env bash
# A Python virtualenv with Selenium (from PyPI) for the dashboard's browser test, made once in
# .build/browser-venv (ignored by git, beside the build it tests); prints its python.
# Chromium and its driver are Debian's (scripts/install-deps.sh), not a browser Selenium downloads.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.build/browser-venv"
if ! "$venv/bin/python" -c "import selenium" 2>/dev/null; then
  # Debian's python (python3-venv), not whatever python3 comes first on PATH.
  /usr/bin/python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check "selenium>=4.15,<5" >&2
fi
echo "$venv/bin/python"
