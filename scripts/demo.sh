#!/usr/bin/env bash
# The main job, from a fresh Debian machine with the Swift toolchain: installs what it needs,
# builds orchestrate, generates a sample file, and runs the example upload workflow end to end
# with the embedded defaults, then checks the published file is byte-identical.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build
bin="$(swift build --show-bin-path)"
work="${DEMO_DIR:-$(mktemp -d /tmp/orchestrate-demo.XXXXXX)}"
size_mib="${DEMO_SIZE_MIB:-256}"
mkdir -p "$work/outbox"
echo "generating a ${size_mib} MiB sample in $work" >&2
head -c "$((size_mib * 1024 * 1024))" /dev/urandom > "$work/sample.mov"
"$bin/orchestrate" run workflows/local-upload.yaml \
  --input source="$work/sample.mov" --input outbox="$work/outbox" --input title="Demo upload" \
  --state "$work/state"
cmp "$work/sample.mov" "$work/outbox/published/sample.mov"
echo "published file is byte-identical: $work/outbox/published/sample.mov" >&2
cat "$work/outbox/published/sample.mov.json"
