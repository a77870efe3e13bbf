#!/usr/bin/env bash
# Installs orchestrate into PREFIX, laid out the way the binary finds its parts:
#   PREFIX/bin/orchestrate, orchestrate-plugin-runner, orchestrate-exec-guard
#   PREFIX/bin/liborchestrate-plugin-*.so        built-in plugins, beside the executable
#   PREFIX/lib/orchestrate/plugins/              the install's own folder for third-party plugins
#   PREFIX/share/bash-completion/completions/orchestrate, zsh/site-functions/_orchestrate,
#   PREFIX/share/fish/vendor_completions.d/orchestrate.fish
#   PREFIX/share/man/man1/orchestrate.1          from docs/reference/orchestrate.1
#
#   scripts/install.sh PREFIX [BUILD_DIR]
# BUILD_DIR defaults to `swift build -c release --show-bin-path` (build it first:
# `swift build -c release`). Run it again to upgrade: files are replaced, third-party plugins kept.
# Installs nothing when a product is missing. Files are 755/644 and not writable by others (the
# plugin loader refuses plugins other users could replace).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: scripts/install.sh PREFIX [BUILD_DIR]" >&2
  exit 2
fi
prefix="$(realpath -m "$1")"
build="${2:-$(cd "$root" && swift build -c release --show-bin-path)}"

binaries=(orchestrate orchestrate-plugin-runner orchestrate-exec-guard)
shopt -s nullglob
plugins=("$build"/liborchestrate-plugin-*.so)
missing=()
for b in "${binaries[@]}"; do [ -x "$build/$b" ] || missing+=("$build/$b"); done
[ ${#plugins[@]} -gt 0 ] || missing+=("$build/liborchestrate-plugin-*.so")
if [ ${#missing[@]} -gt 0 ]; then
  echo "error: not built: ${missing[*]} (run swift build -c release first)" >&2
  exit 1
fi

umask 022
install -d "$prefix/bin" "$prefix/lib/orchestrate/plugins" "$prefix/share/bash-completion/completions" \
  "$prefix/share/zsh/site-functions" "$prefix/share/fish/vendor_completions.d" "$prefix/share/man/man1"
for b in "${binaries[@]}"; do install -m 755 "$build/$b" "$prefix/bin/$b"; done
for p in "${plugins[@]}"; do install -m 755 "$p" "$prefix/bin/"; done

# Completions come from the installed binary itself, so they match its commands.
"$prefix/bin/orchestrate" --generate-completion-script bash > "$prefix/share/bash-completion/completions/orchestrate"
"$prefix/bin/orchestrate" --generate-completion-script zsh > "$prefix/share/zsh/site-functions/_orchestrate"
"$prefix/bin/orchestrate" --generate-completion-script fish > "$prefix/share/fish/vendor_completions.d/orchestrate.fish"
if [ -f "$root/docs/reference/orchestrate.1" ]; then
  install -m 644 "$root/docs/reference/orchestrate.1" "$prefix/share/man/man1/orchestrate.1"
fi
echo "installed into $prefix: $(ls "$prefix/bin" | tr '\n' ' ')" >&2
