#!/usr/bin/env bash
# Data-parallel scaling on this host: config M of bench/train_step.cpp (d_model 128, GGGA x 2,
# RoPE, Gated DeltaNet head_dim 32 expand_v 2, SwiGLU 512, batch 8 x 512) trained by one process
# with one thread, then by two ranks with one thread each (`run --nproc-per-node 2`, c10d Gloo
# over loopback). Prints tokens/s of both, their ratio, and the gradient all-reduce wait per step
# (the part not hidden behind backward) and its share of the step.
#
#   bench/data_parallel.sh [BUILD_DIR] [STEPS]     (default: build 10)
set -euo pipefail
build=${1:-build}
steps=${2:-10}
exe=$build/bin/hybridlab
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/m.yaml" <<YAML
name: m
model: {d_model: 128, vocab_size: 256, layers: {pattern: GGGA, repeat: 2},
        attention: {n_heads: 4, position: {scheme: rope}}, mlp: {intermediate_size: 512},
        gated_deltanet: {n_heads: 4, head_dim: 32, expand_v: 2, chunk_size: 64}}
task: {name: mqar, seq_len: 512, vocab_size: 256, num_kv_pairs: 16}
train: {steps: $steps, batch_size: 8, lr: 0.002, warmup_steps: 1, checkpoint_every: 0}
eval: {lengths: [512], examples: 8}
runtime: {threads: 1}
plugins: {paths: ['$(cd "$build" && pwd)/lib/hybridlab/plugins']}
YAML
export HYBRIDLAB_PLUGIN_PATH=
OMP_NUM_THREADS=1 "$exe" train "$tmp/m.yaml" --runs-dir "$tmp/one" --quiet >/dev/null
"$exe" train "$tmp/m.yaml" --runs-dir "$tmp/two" --quiet --nproc-per-node 2 >/dev/null

# Steps after the first two (allocation warm-up): tokens/s (harmonic mean), wait and step time.
summary() {
  awk -v skip=2 '
    function num(key,   m) {
      if (match($0, "\"" key "\":[-0-9.e+]+")) return substr($0, RSTART + length(key) + 3, RLENGTH - length(key) - 3) + 0
      return -1
    }
    /"loss"/ {
      n++; t = num("time_s")
      if (n > skip) { inv += 1 / num("tokens_per_s"); k++; w += (num("allreduce_wait_s") > 0 ? num("allreduce_wait_s") : 0); dt += t - prev }
      prev = t
    }
    END { printf "%.0f %.4f %.4f\n", k / inv, w / k, dt / k }' "$1"
}
read -r one_tps _ one_step < <(summary "$tmp/one/m/main/metrics.jsonl")
read -r two_tps two_wait two_step < <(summary "$tmp/two/m/main/metrics.jsonl")
echo "config M, $steps steps, timed from step 3; load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '1 rank  x 1 thread: %8.0f tokens/s (%.3f s/step)\n' "$one_tps" "$one_step"
printf '2 ranks x 1 thread: %8.0f tokens/s (%.3f s/step), all-reduce wait %.4f s/step (%.1f%% of the step)\n' \
  "$two_tps" "$two_step" "$two_wait" "$(awk -v w="$two_wait" -v s="$two_step" 'BEGIN { print 100 * w / s }')"
printf '2 ranks / 1 rank:   %8.2fx\n' "$(awk -v a="$two_tps" -v b="$one_tps" 'BEGIN { print a / b }')"
