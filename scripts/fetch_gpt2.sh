#!/usr/bin/env bash
# Fetches GPT-2's byte-level BPE ranks (50,000 merges, 256 bytes and <|endoftext|>, with GPT-2's
# pre-tokenizer pattern) from the npm package js-tiktoken, pinned and checksummed, into
# data/tokenizers/gpt2.js; `task.tokenizer: gpt2` reads it. The file is js-tiktoken's own
# dist/ranks/gpt2.js, unchanged (framework/src/tokenizer/tokenizer_file.h says its format).
#
# Usage: scripts/fetch_gpt2.sh [--out DIR] [--force]
#   JS_TIKTOKEN_TARBALL=/path/js-tiktoken-1.0.21.tgz scripts/fetch_gpt2.sh   # offline: a local copy
# Idempotent: does nothing when DIR already holds this version.
set -euo pipefail

VERSION=1.0.21
SHA256=3b1f24b185565ca9a8d8f51466dfc4f99d67f1f05bc009258710ddb7a8d810fa
RANKS_SHA256=1895031f2ae2257e4e0c7df144cf381b8643001e9957794e4905dba93dec0969
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="$(cd "$HERE/.." && pwd)/data/tokenizers"
FORCE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    --force) FORCE=1; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "fetch_gpt2.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
. "$HERE/npm_pack_pinned.sh"
fail() { echo "fetch_gpt2.sh: $*" >&2; exit 1; }

if [ "$FORCE" = 0 ] && [ -f "$OUT/gpt2.js" ] &&
  [ "$(sha256sum "$OUT/gpt2.js" | cut -d' ' -f1)" = "$RANKS_SHA256" ]; then
  echo "GPT-2 ranks already in $OUT/gpt2.js"
  exit 0
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
TGZ="$WORK/js-tiktoken-$VERSION.tgz"
npm_pack_pinned js-tiktoken "$VERSION" "$SHA256" "$TGZ" JS_TIKTOKEN_TARBALL
tar -xzf "$TGZ" -C "$WORK" package/dist/ranks/gpt2.js
GOT="$(sha256sum "$WORK/package/dist/ranks/gpt2.js" | cut -d' ' -f1)"
[ "$GOT" = "$RANKS_SHA256" ] || fail "checksum mismatch for dist/ranks/gpt2.js: expected $RANKS_SHA256, got $GOT"
mkdir -p "$OUT"
cp "$WORK/package/dist/ranks/gpt2.js" "$OUT/gpt2.js.tmp.$$"
mv "$OUT/gpt2.js.tmp.$$" "$OUT/gpt2.js"
echo "GPT-2 ranks ready in $OUT/gpt2.js"
