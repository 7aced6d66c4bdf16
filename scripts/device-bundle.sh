#!/usr/bin/env bash
# Gathers, from this Debian 12 machine, the third-party inputs a GPU machine without Debian -dev
# packages or network needs to build hybridlab (scripts/device-check.sh there):
#   include/   header-only libraries: CLI11, nlohmann-json, fmt (used with FMT_HEADER_ONLY),
#              Catch2 2 single header, and the subset of Boost 1.74 that hybridlab's sources reach
#              (computed from the compiler's -M dependency output, so it stays small)
#   cmake/     Catch.cmake + CatchAddTests.cmake (catch_discover_tests)
#   yaml-cpp/  yaml-cpp 0.7.0 *source*, built there with the same _GLIBCXX_USE_CXX11_ABI as the
#              LibTorch it links (a prebuilt library could disagree with a pip LibTorch's ABI)
#   licenses/  the copyright files of everything above
#   MANIFEST   versions and sizes
# The folder is git-ignored and rebuilt from scratch by every run; nothing in it is committed.
#
# usage: scripts/device-bundle.sh [OUT_DIR]          (default: third_party/bundle)
# yaml-cpp source, first found wins:
#   YAML_CPP_GIT=/path/to/yaml-cpp.git   a clone (bare or not) holding the tag yaml-cpp-0.7.0
#   YAML_CPP_TARBALL=/path/to/x.tar.gz   a yaml-cpp 0.7.0 source tarball (top folder stripped)
#   otherwise `apt-get source yaml-cpp` (needs deb-src lines) and then a shallow git clone of
#   YAML_CPP_URL (default: the upstream repository) at the tag.
# Needs: the Debian packages of scripts/setup.sh (libboost-dev, libcli11-dev, nlohmann-json3-dev,
# libfmt-dev, catch2), g++, git or tar.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
out=${1:-third_party/bundle}
yaml_tag=yaml-cpp-0.7.0

current_step="starting"
step() { current_step="$*"; echo "==> [bundle] $*"; }
trap 'echo "device-bundle.sh: FAILED at step: ${current_step}" >&2' ERR

step "fresh folder $out"
rm -rf "$out"
mkdir -p "$out/include" "$out/cmake" "$out/licenses"
out=$(cd "$out" && pwd)

step "header-only libraries"
for d in CLI nlohmann fmt catch2; do
  [ -d "/usr/include/$d" ] || { echo "missing /usr/include/$d (run scripts/setup.sh)" >&2; exit 1; }
  cp -r "/usr/include/$d" "$out/include/"
done
cp /usr/lib/cmake/Catch2/Catch.cmake /usr/lib/cmake/Catch2/CatchAddTests.cmake "$out/cmake/"

step "Boost subset (compiler -M over every Boost include of the sources)"
probe=$(mktemp --suffix=.cpp)
deps=$(mktemp)
git ls-files '*.cpp' '*.h' | xargs grep -h '^#include <boost/' | sort -u >"$probe"
echo "boost includes: $(wc -l <"$probe")"
# The same defines the build uses (Boost.DLL on std::filesystem).
g++ -std=c++17 -DBOOST_DLL_USE_STD_FS -M -x c++ "$probe" >"$deps"
tr ' \\' '\n\n' <"$deps" | grep '^/usr/include/boost/' | sort -u | while read -r f; do
  rel=${f#/usr/include/}
  mkdir -p "$out/include/$(dirname "$rel")"
  cp "$f" "$out/include/$rel"
done
rm -f "$probe" "$deps"
echo "boost headers: $(find "$out/include/boost" -type f | wc -l)"

step "yaml-cpp 0.7.0 source"
ysrc="$out/yaml-cpp"
mkdir -p "$ysrc"
if [ -n "${YAML_CPP_GIT:-}" ]; then
  git -C "$YAML_CPP_GIT" archive --format=tar "$yaml_tag" | tar -x -C "$ysrc"
elif [ -n "${YAML_CPP_TARBALL:-}" ]; then
  tar -xf "$YAML_CPP_TARBALL" -C "$ysrc" --strip-components=1
else
  tmp=$(mktemp -d)
  if (cd "$tmp" && apt-get source --download-only yaml-cpp >/dev/null 2>&1) &&
     ls "$tmp"/yaml-cpp_0.7.0*.orig.tar.* >/dev/null 2>&1; then
    tar -xf "$tmp"/yaml-cpp_0.7.0*.orig.tar.* -C "$ysrc" --strip-components=1
  else
    url=${YAML_CPP_URL:-https://github.com/jbeder/yaml-cpp.git}
    git clone --quiet --depth 1 --branch "$yaml_tag" "$url" "$tmp/yaml-cpp"
    git -C "$tmp/yaml-cpp" archive --format=tar HEAD | tar -x -C "$ysrc"
  fi
  rm -rf "$tmp"
fi
grep -q 'VERSION 0.7.0' "$ysrc/CMakeLists.txt" ||
  { echo "yaml-cpp source is not 0.7.0" >&2; exit 1; }
# Only what a library build reads: no tests (they bundle googletest), docs or tools.
rm -rf "$ysrc/test" "$ysrc/docs" "$ysrc/util"

step "licenses"
for p in libboost1.74-dev libcli11-dev nlohmann-json3-dev libfmt-dev catch2 libyaml-cpp-dev; do
  [ -f "/usr/share/doc/$p/copyright" ] && cp "/usr/share/doc/$p/copyright" "$out/licenses/$p.copyright"
done
cp "$ysrc/LICENSE" "$out/licenses/yaml-cpp.LICENSE"

step "manifest"
{
  echo "hybridlab device bundle, made by scripts/device-bundle.sh at $(git -C "$root" rev-parse --short HEAD)"
  for p in libboost1.74-dev libcli11-dev nlohmann-json3-dev libfmt-dev catch2; do
    echo "$p $(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || echo '?')"
  done
  echo "yaml-cpp 0.7.0 (source)"
  echo "size $(du -sh "$out" | cut -f1)"
} >"$out/MANIFEST"
cat "$out/MANIFEST"
