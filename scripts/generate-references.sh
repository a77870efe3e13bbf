#!/usr/bin/env bash
# Regenerates every page made from the code, after `swift build`:
#   schemas/workflow.schema.json   orchestrate schema workflow (decoder fields, step types' inputs)
#   docs/reference/cli.md          the ArgumentParser command tree (--experimental-dump-help)
#   docs/reference/steps.md        the built-in step types' input and output schemas
#   docs/reference/metrics.md      orchestrate schema metrics (MetricDefinition's table)
#   docs/reference/events.md       Sources/OrchestrateStore/Vocabulary.swift
#   docs/reference/orchestrate.1   the man page, by swift-argument-parser's generate-manual
#                                  (built here with `swift build --product generate-manual`)
#
#   scripts/generate-references.sh [OUTDIR]     default: the repository itself
# The binary is $ORCHESTRATE_BIN_DIR/orchestrate, else `swift build --show-bin-path`'s. Only the
# built-in plugins count ($ORCHESTRATE_PLUGIN_PATH is ignored). A test regenerates into a temporary
# folder and fails when a committed page differs (Tests/OrchestrateModelTests/ReferencePagesTests.swift).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$(realpath -m "${1:-$root}")"
bin="${ORCHESTRATE_BIN_DIR:-$(cd "$root" && swift build --show-bin-path)}"
orchestrate="$bin/orchestrate"
[ -x "$orchestrate" ] || { echo "error: $orchestrate not found: run swift build first" >&2; exit 1; }
unset ORCHESTRATE_PLUGIN_PATH
export NO_COLOR=1

mkdir -p "$out/schemas" "$out/docs/reference"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

"$orchestrate" schema workflow > "$scratch/workflow.schema.json"
"$orchestrate" --experimental-dump-help > "$scratch/cli.json"
"$orchestrate" plugins list --json > "$scratch/steps.jsonl"
"$orchestrate" schema metrics > "$scratch/metrics.json"
# The man page: the same tool as swift-argument-parser's GenerateManual plugin. Its date is the
# release's, not today's, so the page only changes with the code (bump it with the version).
man_date=2026-11-27
if [ ! -x "$bin/generate-manual" ] && [ -z "${ORCHESTRATE_REFERENCES_NO_BUILD:-}" ]; then
  (cd "$root" && swift build --product generate-manual >&2)
fi
man=""
if [ -x "$bin/generate-manual" ]; then
  mkdir "$scratch/man"
  "$bin/generate-manual" "$orchestrate" --output-directory "$scratch/man" --date "$man_date"
  # Help may show this machine's figures ("the number of cores x 4, here 8").
  sed -E 's/, here [0-9]+\)/)/' "$scratch/man/orchestrate.1" > "$scratch/orchestrate.1"
  man=1
else
  echo "note: $bin/generate-manual is not built: docs/reference/orchestrate.1 left as it is" >&2
fi
python3 "$root/scripts/references.py" cli "$scratch/cli.json" > "$scratch/cli.md"
python3 "$root/scripts/references.py" steps "$scratch/steps.jsonl" > "$scratch/steps.md"
python3 "$root/scripts/references.py" metrics "$scratch/metrics.json" > "$scratch/metrics.md"
python3 "$root/scripts/references.py" events "$root/Sources/OrchestrateStore/Vocabulary.swift" > "$scratch/events.md"

# Written only once all were made: a failure leaves the old pages as they were.
mv "$scratch/workflow.schema.json" "$out/schemas/workflow.schema.json"
for page in cli steps metrics events; do mv "$scratch/$page.md" "$out/docs/reference/$page.md"; done
[ -z "$man" ] || mv "$scratch/orchestrate.1" "$out/docs/reference/orchestrate.1"
echo "written: $out/schemas/workflow.schema.json, $out/docs/reference/{cli,steps,metrics,events}.md${man:+, orchestrate.1}" >&2
