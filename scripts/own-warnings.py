#!/usr/bin/env python3
"""Fails when a build log holds warnings about the project's own files.

Usage: scripts/own-warnings.py BUILD.log

"Own files" are those under the repository's Sources/, plugins/ and Tests/; warnings about
dependencies (.build/checkouts) are not ours to fix and are ignored. Two shapes are recognised:

  /repo/Sources/X/File.swift:12:5: warning: message           (the compiler)
  warning: 'pkg': found 1 file(s) which are unhandled; ...    (the package manifest; the files
      /repo/plugins/http/README.md                             follow on indented lines)

A build only prints warnings for the files it compiles, and Swift recompiles every file a change
affects, so a warning a change introduces is always in the log of the build after it (and a fresh
clone, as in CI, compiles everything).
"""
import os
import re
import sys

ROOT = os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))
OWN = tuple(os.path.join(ROOT, d) + "/" for d in ("Sources", "plugins", "Tests"))
COMPILER = re.compile(r"^(/[^:]+):(\d+):(\d+): warning: (.*)$")
PACKAGE = re.compile(r"^warning: (.*)$")


def own_warnings(lines):
    found = []
    pending_package = None  # a manifest warning whose file list follows
    for line in lines:
        line = line.rstrip("\n")
        if pending_package is not None:
            path = line.strip()
            if line.startswith((" ", "\t")) and path.startswith("/"):
                if path.startswith(OWN):
                    found.append(f"{path}: warning: {pending_package}")
                continue
            pending_package = None
        m = COMPILER.match(line)
        if m:
            path = os.path.realpath(m.group(1))
            if path.startswith(OWN):
                found.append(f"{path}:{m.group(2)}:{m.group(3)}: warning: {m.group(4)}")
            continue
        m = PACKAGE.match(line)
        if m:
            pending_package = m.group(1)
    return sorted(set(found))  # the same warning is printed once per compile job


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[2])
    with open(sys.argv[1], errors="replace") as log:
        found = own_warnings(log)
    if found:
        print(f"the build warns about {len(found)} place(s) in the project's own files:", file=sys.stderr)
        for warning in found:
            print("  " + warning, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
