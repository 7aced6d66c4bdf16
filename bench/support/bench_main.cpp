// The one main of every bench_* program: the same BLAS kernels and thread count as hybridlab
// itself, recorded in the benchmark context so a figure never travels without them.

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "hybridlab/runtime.h"
#include "layers/kernels/cpu_blas.h"

int main(int argc, char** argv) {
  hybridlab::prepare_process();
  // One intra-op thread by default: stable figures on a shared 2-core machine. Set
  // HYBRIDLAB_BENCH_THREADS=N (0 = all cores) to measure with more.
  int threads = 1;
  if (const char* env = std::getenv("HYBRIDLAB_BENCH_THREADS")) threads = std::atoi(env);
  at::set_num_threads(threads > 0 ? threads : hybridlab::hardware_threads());
  // On one core, OpenBLAS too: sgemm and the layers' projections then run on the same single
  // core as everything else, so rates and ratios compare like with like.
  std::optional<hybridlab::cpu::SingleThreadedBlas> one_core_blas;
  if (at::get_num_threads() == 1) one_core_blas.emplace();
  benchmark::AddCustomContext("blas", hybridlab::blas_backend());
  benchmark::AddCustomContext("intra_op_threads", std::to_string(at::get_num_threads()));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
