#!/usr/bin/env bash
# The main job, from a fresh Debian machine with the Swift toolchain: installs what it needs,
# builds orchestrate, generates a sample file, starts the local Vimeo-style sandbox, and runs the
# classic Vimeo upload workflow (quota check → create → export → resumable upload → activate →
# metadata) end to end against it, with progress shown; then checks the uploaded video is
# byte-identical and stops the sandbox. The sandbox drops the connection once mid-upload, so
# the run also shows a retry resuming from the offset the server confirmed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build
bin="$(swift build --show-bin-path)"
# A directory of its own, deleted at the end (the sample and its uploaded copy are 2 x 256 MiB)
# unless DEMO_KEEP=1 or DEMO_DIR names one to keep.
if [ -n "${DEMO_DIR:-}" ]; then work="$DEMO_DIR"; keep=1; else work="$(mktemp -d /tmp/orchestrate-demo.XXXXXX)"; keep="${DEMO_KEEP:-0}"; fi
size_mib="${DEMO_SIZE_MIB:-256}"
rate="${DEMO_MAX_RATE:-$((64 * 1024 * 1024))}"   # bytes/s, so the progress is visible on loopback
echo "generating a ${size_mib} MiB sample in $work" >&2
head -c "$((size_mib * 1024 * 1024))" /dev/urandom > "$work/sample.mov"

"$bin/orchestrate-sandbox" --port 0 --data-dir "$work/sandbox" \
  --drop-after-bytes "$((size_mib * 1024 * 1024 / 2))" --max-drops 1 > "$work/sandbox.out" &
sandbox_pid=$!
finish() {
  kill "$sandbox_pid" 2>/dev/null || true
  if [ "$keep" = 1 ]; then echo "kept: $work" >&2; else wait "$sandbox_pid" 2>/dev/null || true; rm -rf "$work"; fi
}
trap finish EXIT
for _ in $(seq 100); do grep -q listening "$work/sandbox.out" 2>/dev/null && break; sleep 0.1; done
api="$(sed -n 's/.* on //p' "$work/sandbox.out")"
echo "sandbox (Vimeo-style API) at $api" >&2

export VIMEO_TOKEN=sandbox-token
"$bin/orchestrate" run workflows/vimeo-upload.yaml \
  --input source="$work/sample.mov" --input api="$api" --input title="Demo upload" \
  --input description="uploaded by scripts/demo.sh" --input max_rate="$rate" \
  --state "$work/state"
cmp "$work/sample.mov" "$work/sandbox/videos/1001.bin"
echo "the uploaded video is byte-identical to the sample (DEMO_KEEP=1 keeps both)" >&2
curl -sS -H "Authorization: bearer $VIMEO_TOKEN" "$api/videos/1001"
echo
