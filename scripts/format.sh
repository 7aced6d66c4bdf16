#!/usr/bin/env bash
# Formats every C++ file the project owns with clang-format (the repo's .clang-format).
# usage: scripts/format.sh [--check]   (--check: list unformatted files, exit 1 if any)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.hpp')
if [ "${1:-}" = --check ]; then
  bad=0
  for f in "${files[@]}"; do
    clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || { echo "not formatted: $f"; bad=1; }
  done
  exit $bad
fi
clang-format -i "${files[@]}"
