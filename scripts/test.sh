#!/usr/bin/env bash
# Sets up (packages, the Brown corpus and GPT-2's ranks, which the tokenizer tests read, and the
# build) and runs the whole test suite with ctest.
# usage: scripts/test.sh [ctest arguments, e.g. -R position]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh --all
echo "==> [test] running the test suite"
ctest --test-dir build --output-on-failure --timeout 600 -j2 "$@"
