#!/usr/bin/env bash
# One call on a GPU machine: build hybridlab against the Python PyTorch's CUDA LibTorch from the
# bundled third-party inputs (scripts/device-bundle.sh made third_party/bundle on a Debian
# machine; nothing is downloaded), run the GPU-vs-CPU tests, time training, and report.
#
# usage: scripts/device-check.sh            (from anywhere; builds in build-device/)
# Environment:
#   PYTHON            the Python whose torch provides LibTorch (default: python3)
#   BUNDLE            the bundle folder (default: third_party/bundle)
#   OUT               if set, the log (device-check.log) and the full build log go there
#   JOBS              build jobs (default: all cores)
#   FULL_BUILD_BY_S   build every other target too (all tests) if no more than this many seconds
#                     have passed by then (default 330; 0 = never)
# Needs: an NVIDIA GPU, PyTorch 2.x with CUDA, nvcc, CMake >= 3.18, Ninja, g++.
# Steps, in order; the first failing one stops the script and is named:
#   environment, configure, build, cuda tests (layers and kernels), cli on cuda, throughput M,
#   throughput 1024x24 4K, throughput M in-process, cuda tests (training), full build.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
t_start=$(date +%s)

if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  exec > >(tee -a "$OUT/device-check.log") 2>&1
fi
build_log=${OUT:-$root/build-device}/build.log
mkdir -p "$(dirname "$build_log")"

current_step="starting"
step() {
  current_step="$*"
  echo
  echo "==> [device-check +$(($(date +%s) - t_start))s] $*"
}
trap 'rc=$?; echo "device-check.sh: FAILED at step: ${current_step} (exit code ${rc})" >&2; exit ${rc}' ERR

python=${PYTHON:-python3}
bundle=${BUNDLE:-third_party/bundle}
jobs=${JOBS:-$(nproc)}
build=build-device

step "environment"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,utilization.gpu \
  --format=csv
"$python" - <<'EOF'
import torch
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
      f"cuda available: {torch.cuda.is_available()}, "
      f"C++11 ABI: {torch.compiled_with_cxx11_abi()}")
assert torch.cuda.is_available(), "torch sees no CUDA device"
print(f"device: {torch.cuda.get_device_name(0)}")
EOF
torch_prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
torch_dir=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
echo "Torch CMake prefix: $torch_prefix"
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
if command -v nvcc >/dev/null; then nvcc --version | tail -1; else echo "no nvcc on PATH"; fi
cmake --version | head -1
echo "ninja $(ninja --version), $(g++ --version | head -1), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
[ -f "$bundle/MANIFEST" ] || { echo "no bundle at $bundle: run scripts/device-bundle.sh on a Debian machine first"; false; }
head -1 "$bundle/MANIFEST"
# The CUDA libraries of the pip wheels (cudart, cublas, ...) for the linker and the loader.
libpath="$torch_dir/lib"
for d in "$torch_dir"/../nvidia/*/lib; do
  [ -d "$d" ] && libpath="$libpath:$(cd "$d" && pwd)"
done
export LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-$("$python" -c \
  'import torch; print("%d.%d" % torch.cuda.get_device_capability(0))')}

step "configure"
# Torch's CMake package enables the CUDA language (nvcc's compiler check): point it at this
# GPU's architecture, which CUDA 13's nvcc supports whatever CMake's default would be.
cuda_args=(-DCMAKE_CUDA_ARCHITECTURES="${TORCH_CUDA_ARCH_LIST//./}")
command -v nvcc >/dev/null && cuda_args+=(-DCMAKE_CUDA_COMPILER="$(command -v nvcc)")
t0=$(date +%s)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$torch_prefix" -DHYBRIDLAB_BUNDLED_DEPS="$bundle" \
  -DHYBRIDLAB_BUILD_BENCH=OFF -DHYBRIDLAB_BUILD_TESTS=ON "${cuda_args[@]}" \
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
  >"$build_log.configure" 2>&1 ||
  { tail -60 "$build_log.configure"; false; }
grep -E "hybridlab:|Found Torch|CUDA|Caffe2" "$build_log.configure" | head -20 || true
echo "CONFIGURE: $(($(date +%s) - t0)) s"

step "build (CLI, plugins, test_cuda, hybridlab_train_throughput; -j$jobs)"
t0=$(date +%s)
if ! ninja -C "$build" -j"$jobs" -k 0 hybridlab_cli test_cuda hybridlab_train_throughput \
  >"$build_log" 2>&1; then
  grep -E "error|Error|FAILED" "$build_log" | head -80 || true
  tail -30 "$build_log"
  false
fi
build_s=$(($(date +%s) - t0))
echo "BUILD: $build_s s with $jobs jobs ($(grep -c 'Building CXX' "$build_log" || true) objects)"

# No debugger there: a crashing program prints its native stack (after Catch's own report, which
# re-raises the signal to the handler installed before it).
crash_trace="$root/$build/crash_backtrace.so"
cat >"$build/crash_backtrace.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
// A jump to a bad address leaves nothing to unwind: also name the faulting address, the
// instruction pointer, and the return address on top of the stack (the caller of a bad call).
static void where(const char* what, void* p) {
  Dl_info i;
  if (p && dladdr(p, &i) && i.dli_fname) {
    fprintf(stderr, "  %s %p = %s(%s+%#lx)\n", what, p, i.dli_fname, i.dli_sname ? i.dli_sname : "?",
            (unsigned long)((char*)p - (char*)(i.dli_saddr ? i.dli_saddr : i.dli_fbase)));
  } else {
    fprintf(stderr, "  %s %p\n", what, p);
  }
}
static void on_crash(int sig, siginfo_t* si, void* ctx) {
  fprintf(stderr, "crash: signal %d (%s), native stack:\n", sig, strsignal(sig));
  where("fault address", si->si_addr);
#if defined(__x86_64__)
  const ucontext_t* uc = (const ucontext_t*)ctx;
  void* rip = (void*)uc->uc_mcontext.gregs[REG_RIP];
  void** rsp = (void**)uc->uc_mcontext.gregs[REG_RSP];
  where("instruction", rip);
  where("return address at [rsp]", rsp ? rsp[0] : NULL);
#else
  (void)ctx;
#endif
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}
__attribute__((constructor)) static void install(void) {
  static char alt[1 << 16];
  stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt, .ss_flags = 0};
  sigaltstack(&ss, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_crash;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigaction(SIGSEGV, &sa, NULL);
  sigaction(SIGBUS, &sa, NULL);
  sigaction(SIGILL, &sa, NULL);
  sigaction(SIGABRT, &sa, NULL);
}
EOF
gcc -shared -fPIC -O1 -o "$crash_trace" "$build/crash_backtrace.c" -ldl

step "cuda tests: layers and kernels (tolerances in tests/unit/cuda/cuda_test.cpp)"
HYBRIDLAB_REQUIRE_CUDA=1 LD_PRELOAD="$crash_trace" "$build/bin/test_cuda" "~[train]" \
  --durations yes

step "cli on cuda (plugins list, hybridlab train with runtime.device: cuda)"
LD_PRELOAD="$crash_trace" "$build/bin/hybridlab" plugins list
work=$(mktemp -d)
cat >"$work/tiny.yaml" <<'EOF'
model: {d_model: 64, vocab_size: 64, layers: GGGA, attention: {n_heads: 2, position: {scheme: rope}},
        gated_deltanet: {n_heads: 2, head_dim: 32}}
task: {name: mqar, seq_len: 128, vocab_size: 64, num_kv_pairs: 8}
train: {steps: 20, batch_size: 8, log_every: 10, checkpoint_every: 0}
eval: {lengths: [128], examples: 32}
runtime: {device: cuda}
EOF
LD_PRELOAD="$crash_trace" "$build/bin/hybridlab" train "$work/tiny.yaml" --runs-dir "$work/runs" \
  --quiet
tail -2 "$(find "$work/runs" -name metrics.jsonl | head -1)"

# Throughput through the CLI, as a user trains: `hybridlab train` on MQAR tokens (no corpus
# needed; the task only supplies the ids), every step logged, no checkpoints in between. tokens/s
# counts the steps after the warm-up: steps × batch × seq_len over the trainer's clock (time_s of
# metrics.jsonl) from the end of the last warm-up step to the end of the last step, data, loss,
# clipping and AdamW included; every step ends on loss.item(), a device sync.
throughput() {  # NAME YAML WARMUP
  local name=$1 yaml=$2 warmup=$3
  LD_PRELOAD="$crash_trace" "$build/bin/hybridlab" train "$yaml" --runs-dir "$work/runs-$name" \
    --quiet
  "$python" - "$(find "$work/runs-$name" -name metrics.jsonl | head -1)" "$warmup" "$yaml" <<'PY'
import json, re, sys
path, warmup, yaml = sys.argv[1], int(sys.argv[2]), open(sys.argv[3]).read()
t = {}
for line in open(path):
    j = json.loads(line)
    if "time_s" in j:
        t[j["step"]] = j["time_s"]
last = max(t)
batch = int(re.search(r"batch_size: (\d+)", yaml).group(1))
seq = int(re.search(r"seq_len: (\d+)", yaml).group(1))
wall = t[last] - t[warmup]
print(f"RESULT: {(last - warmup) * batch * seq / wall:.0f} tokens/s, "
      f"{1e3 * wall / (last - warmup):.1f} ms/step ({last - warmup} timed steps after {warmup} "
      f"warm-up, batch {batch} x {seq})")
PY
}

# Config M of bench/train_step.cpp (d_model 128, GGGA x 2, 4 heads RoPE, Gated DeltaNet head_dim
# 32 expand_v 2, SwiGLU 512, batch 8 x 512), and a d_model 1024, 24-layer GGGA model at 4K.
cat >"$work/m.yaml" <<'EOF'
model: {d_model: 128, vocab_size: 256, layers: {pattern: GGGA, repeat: 2},
        attention: {n_heads: 4, position: {scheme: rope}}, mlp: {intermediate_size: 512},
        gated_deltanet: {n_heads: 4, head_dim: 32, expand_v: 2, chunk_size: 64}}
task: {name: mqar, seq_len: 512, vocab_size: 256, num_kv_pairs: 32}
train: {steps: 23, batch_size: 8, lr: 0.002, warmup_steps: 1, log_every: 1, checkpoint_every: 0}
eval: {lengths: [512]}
runtime: {device: cuda}
EOF
cat >"$work/l.yaml" <<'EOF'
model: {d_model: 1024, vocab_size: 256, layers: {pattern: GGGA, repeat: 6},
        attention: {n_heads: 8, position: {scheme: rope}}, mlp: {intermediate_size: 2816},
        gated_deltanet: {n_heads: 4, head_dim: 256, expand_v: 2, chunk_size: 64}}
task: {name: mqar, seq_len: 4096, vocab_size: 256, num_kv_pairs: 64}
train: {steps: 7, batch_size: 4, lr: 0.0005, warmup_steps: 1, log_every: 1, checkpoint_every: 0}
eval: {lengths: [4096]}
runtime: {device: cuda}
EOF

step "throughput M (d_model 128, GGGA x 2, batch 8 x 512)"
throughput m "$work/m.yaml" 3

step "throughput 1024x24 4K (d_model 1024, 24 layers GGGA, batch 4 x 4096)"
throughput l "$work/l.yaml" 2
nvidia-smi --query-gpu=name,memory.used,utilization.gpu --format=csv,noheader

step "throughput M again through hybridlab_train_throughput (in-process trainer)"
LD_PRELOAD="$crash_trace" "$build/bin/hybridlab_train_throughput" "$work/m.yaml" --warmup 3 \
  --steps 20
rm -rf "$work"

step "cuda tests: training and evaluation, runtime.device cuda vs cpu"
HYBRIDLAB_REQUIRE_CUDA=1 LD_PRELOAD="$crash_trace" "$build/bin/test_cuda" "[train]" \
  --durations yes

full_by=${FULL_BUILD_BY_S:-330}
elapsed=$(($(date +%s) - t_start))
if [ "$full_by" -gt 0 ] && [ "$elapsed" -le "$full_by" ]; then
  step "full build (every test suite; compile check of the whole tree against this LibTorch)"
  t0=$(date +%s)
  if ! ninja -C "$build" -j"$jobs" -k 0 >>"$build_log" 2>&1; then
    grep -E "error|FAILED" "$build_log" | head -60 || true
    false
  fi
  echo "FULL BUILD: $(($(date +%s) - t0)) s more"
else
  echo "(full build skipped: ${elapsed}s elapsed, limit ${full_by}s)"
fi

echo
echo "device-check.sh: all steps passed in $(($(date +%s) - t_start)) s (build $build_s s)"
