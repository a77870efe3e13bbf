#!/usr/bin/env python3
"""Keeps `swift test`'s console output short: the whole output goes to a log file, the console
gets what a reader of a CI log needs.

Usage: swift test 2>&1 | scripts/test-output.py LOG

Printed: each suite's result, every failure with the lines that explain it (swift-testing's
`✘` lines and what follows them, XCTest's `error:` and `failed` lines), crashes (`Fatal error`,
an unexpected signal), and the final counts (scripts/test.sh adds the log's last lines when
`swift test` fails). Why: the suite prints ~3,700 lines, and a CI log cut to its first few
hundred KiB hid the one failure that mattered.
"""
import re
import sys

# Lines printed as they come.
ALWAYS = re.compile(
    r"^(✔ Suite |✘|↳|✔ Test run with|Test Suite '.*' (passed|failed)|Test Case '.*' failed"
    r"|\s*Executed \d+ tests?)"
    r"|: error: |Fatal error|fatal error|unexpected signal|Segmentation fault|Aborted|Illegal instruction"
)
# A line that starts a new record: it ends a failure's detail block.
RECORD = re.compile(r"^(◇|✔|✘|Test Case '|Test Suite '|\[\d+/\d+\])")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: swift test 2>&1 | scripts/test-output.py LOG")
    in_failure = False
    with open(sys.argv[1], "w", encoding="utf-8", errors="replace") as log:
        for raw in sys.stdin.buffer:
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            log.write(line + "\n")
            log.flush()
            starts_record = bool(RECORD.match(line))
            if starts_record:
                in_failure = line.startswith("✘")
            if in_failure or ALWAYS.search(line):
                print(line, flush=True)
    print(f"(the whole test output: {sys.argv[1]})", flush=True)


if __name__ == "__main__":
    main()
