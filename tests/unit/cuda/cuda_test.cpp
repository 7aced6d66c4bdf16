// The GPU against the CPU: the attention core (reference path and, with LibTorch >= 2,
// at::scaled_dot_product_attention), the tensor-form Gated DeltaNet kernel and layer, forward and
// backward, and a few training steps plus an evaluation of a small hybrid with
// `runtime.device: cuda`. Without a CUDA device each test says so and passes; with
// HYBRIDLAB_REQUIRE_CUDA=1 (scripts/device-check.sh) a missing device fails instead.
//
// Tolerances, as the largest |gpu − cpu| over the largest |cpu| of each tensor:
//   fp32: 1e-4 (forward and gradients). The two devices sum in different orders (cuBLAS vs
//         OpenBLAS, chunked solve vs the fused CPU kernels); TF32 is off in LibTorch by default.
//   bf16: 2e-2 for bf16 inputs on the GPU against fp32 on the CPU from the same rounded inputs
//         (bf16 keeps 8 significant bits, 2⁻⁸ ≈ 4e-3 per rounding; the attention kernels round
//         probabilities too). The Gated DeltaNet kernel keeps the gate cumsums and the state in
//         fp32 (as fla does), so its state is compared at the fp32 tolerance ×10.
//   training: per-step losses within 1e-4 relative over 6 AdamW steps.

#include <torch/cuda.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hybridlab/config.h"
#include "hybridlab/evaluator.h"
#include "hybridlab/position.h"
#include "hybridlab/run_build.h"
#include "hybridlab/trainer.h"
#include "layers/attention.h"
#include "layers/gated_deltanet.h"
#include "layers/kernels/gated_deltanet_kernels.h"
#include "support/tensor_match.h"

using namespace hybridlab;
namespace fs = std::filesystem;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace cuda_test {
namespace {

constexpr double kFp32Tol = 1e-4;
constexpr double kBf16Tol = 2e-2;

// Whether the test can run; fails instead of skipping when HYBRIDLAB_REQUIRE_CUDA=1.
bool have_cuda() {
  if (torch::cuda::is_available()) return true;
  const char* require = std::getenv("HYBRIDLAB_REQUIRE_CUDA");
  if (require && std::string(require) == "1") {
    FAIL("HYBRIDLAB_REQUIRE_CUDA=1 but LibTorch sees no CUDA device");
  }
  WARN("no CUDA device (or a CPU-only LibTorch): GPU-vs-CPU test skipped");
  return false;
}

// max |a − b| / max |b|, b the CPU reference.
double rel_max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor bd = b.detach().to(torch::kCPU, torch::kDouble);
  const double diff = (a.detach().to(torch::kCPU, torch::kDouble) - bd).abs().max().item<double>();
  return diff / std::max(bd.abs().max().item<double>(), 1e-30);
}

// REQUIREs rel_max_diff(gpu, cpu) <= tol and prints it (the figures of the device check).
void require_close(const std::string& what, const torch::Tensor& gpu, const torch::Tensor& cpu,
                   double tol) {
  INFO(what << ": shapes " << gpu.sizes() << " vs " << cpu.sizes());
  REQUIRE(gpu.sizes() == cpu.sizes());
  const double r = rel_max_diff(gpu, cpu);
  std::printf("  %-44s max|gpu-cpu|/max|cpu| = %.2e (tolerance %.0e)\n", what.c_str(), r, tol);
  INFO("max|gpu-cpu|/max|cpu| = " << r << " (tolerance " << tol << ")");
  REQUIRE(r <= tol);
}

class NoScheme : public PositionScheme {
 public:
  std::string name() const override { return "none"; }
  uint32_t hooks() const override { return kHookNone; }
};

AttentionOptions attention_options(int64_t window, bool causal) {
  AttentionOptions o;
  o.n_heads = 4;
  o.n_kv_heads = 2;
  o.window = window;
  o.causal = causal;
  o.block_size = 16;
  return o;
}

const torch::Device kCuda(torch::kCUDA);

}  // namespace

TEST_CASE("cuda: attention core on the GPU (reference and SDPA paths) == CPU reference", "[cuda]") {
  if (!have_cuda()) return;
  const auto [window, causal] = GENERATE(table<int64_t, bool>({{0, true}, {7, true}, {5, false}}));
  CAPTURE(window, causal);
  torch::manual_seed(3);
  Attention att(attention_options(window, causal), 32, std::make_shared<NoScheme>(), true);
  const int64_t T = 45;  // three blocks, the last one partial
  const torch::Tensor q = torch::randn({2, 4, T, 8}), k = torch::randn({2, 2, T, 8}),
                      v = torch::randn({2, 2, T, 8}), w = torch::randn({2, 4, T, 8});
  const torch::Tensor pos = torch::arange(T);

  auto run = [&](const torch::Device& d, bool fused, torch::ScalarType dt) {
    torch::Tensor qd = q.detach().to(d, dt).requires_grad_(),
                  kd = k.detach().to(d, dt).requires_grad_(),
                  vd = v.detach().to(d, dt).requires_grad_();
    const torch::Tensor o = att.attend(qd, kd, vd, pos.to(d), pos.to(d), 16, fused);
    (o.to(torch::kFloat) * w.to(d)).sum().backward();
    return std::vector<torch::Tensor>{o.to(torch::kFloat), qd.grad(), kd.grad(), vd.grad()};
  };
  const auto ref = run(torch::kCPU, false, torch::kFloat);
  const char* names[] = {"o", "dq", "dk", "dv"};
  for (const bool fused : {false, true}) {
    const auto gpu = run(kCuda, fused, torch::kFloat);
    REQUIRE(gpu[0].device().is_cuda());
    for (size_t i = 0; i < ref.size(); ++i) {
      require_close(fmt::format("attend W={} causal={} {} fp32 {}", window, causal,
                                fused ? "fused" : "reference", names[i]),
                    gpu[i], ref[i], kFp32Tol);
    }
  }
  // bf16 on the GPU against fp32 on the CPU from the same bf16-rounded inputs.
  const torch::Tensor qr = q.to(torch::kBFloat16).to(torch::kFloat),
                      kr = k.to(torch::kBFloat16).to(torch::kFloat),
                      vr = v.to(torch::kBFloat16).to(torch::kFloat);
  const torch::Tensor ref16 = att.attend(qr, kr, vr, pos, pos, 16, false);
  torch::NoGradGuard no_grad;
  const torch::Tensor o16 =
      att.attend(q.to(kCuda, torch::kBFloat16), k.to(kCuda, torch::kBFloat16),
                 v.to(kCuda, torch::kBFloat16), pos.to(kCuda), pos.to(kCuda), 16, true);
  REQUIRE(o16.scalar_type() == torch::kBFloat16);
  require_close(fmt::format("attend W={} causal={} fused bf16 o", window, causal), o16, ref16,
                kBf16Tol);
}

TEST_CASE("cuda: attention layer forward and backward on the GPU == CPU", "[cuda]") {
  if (!have_cuda()) return;
  torch::manual_seed(4);
  Attention att(attention_options(0, true), 32, std::make_shared<NoScheme>(), true);
  const torch::Tensor x = torch::randn({2, 37, 32}), w = torch::randn({2, 37, 32});
  const torch::Tensor pos = torch::arange(37);
  auto run = [&](const torch::Device& d) {
    att.to(d);
    att.zero_grad();
    torch::Tensor xd = x.detach().to(d).requires_grad_();  // a fresh leaf
    const torch::Tensor y = att.forward(xd, pos.to(d), nullptr);
    (y * w.to(d)).sum().backward();
    std::vector<torch::Tensor> out = {y.detach().cpu(), xd.grad().cpu()};
    for (const auto& p : att.parameters()) out.push_back(p.grad().cpu());
    return out;
  };
  const auto ref = run(torch::kCPU);
  const auto gpu = run(kCuda);
  REQUIRE(gpu.size() == ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    require_close(i == 0 ? "attention layer y" : fmt::format("attention layer grad {}", i), gpu[i],
                  ref[i], kFp32Tol);
  }
}

TEST_CASE("cuda: tensor-form Gated DeltaNet kernel on the GPU == CPU kernels, with gradients",
          "[cuda]") {
  if (!have_cuda()) return;
  torch::manual_seed(5);
  const int64_t B = 2, Hk = 2, Hv = 4, T = 100, K = 16, V = 24;  // T not a multiple of the chunk
  const torch::Tensor q = torch::nn::functional::normalize(
      torch::randn({B, Hk, T, K}), torch::nn::functional::NormalizeFuncOptions().dim(-1));
  const torch::Tensor k = torch::nn::functional::normalize(
      torch::randn({B, Hk, T, K}), torch::nn::functional::NormalizeFuncOptions().dim(-1));
  const torch::Tensor v = torch::randn({B, Hv, T, V});
  const torch::Tensor g = -torch::rand({B, Hv, T}) * 0.5;  // log decay in (−0.5, 0]
  const torch::Tensor beta = torch::rand({B, Hv, T});
  const torch::Tensor h0 = torch::randn({B, Hv, K, V}) * 0.1;
  const torch::Tensor wo = torch::randn({B, Hv, T, V}), ws = torch::randn({B, Hv, K, V});
  const double scale = 1.0 / std::sqrt(static_cast<double>(K));

  // CPU: the fused kernels (forward and backward) and the recurrent oracle; GPU: the tensor form.
  enum class Form { cpu_fused, cpu_recurrent, gpu_tensor };
  auto run = [&](Form f) {
    const torch::Device d = f == Form::gpu_tensor ? kCuda : torch::Device(torch::kCPU);
    std::vector<torch::Tensor> in;
    for (const auto& t : {q, k, v, g, beta, h0}) in.push_back(t.detach().to(d).requires_grad_());
    const GatedDeltaResult r =
        f == Form::cpu_recurrent
            ? recurrent_gated_delta_rule(in[0], in[1], in[2], in[3], in[4], scale, in[5])
            : chunk_gated_delta_rule(in[0], in[1], in[2], in[3], in[4], scale, in[5], 32);
    ((r.o * wo.to(d)).sum() + (r.state * ws.to(d)).sum()).backward();
    std::vector<torch::Tensor> out = {r.o, r.state};
    for (const auto& t : in) out.push_back(t.grad());
    return out;
  };
  const auto gpu = run(Form::gpu_tensor);
  REQUIRE(gpu[0].device().is_cuda());
  const char* names[] = {"o", "state", "dq", "dk", "dv", "dg", "dbeta", "dh0"};
  for (const Form f : {Form::cpu_fused, Form::cpu_recurrent}) {
    const auto ref = run(f);
    for (size_t i = 0; i < ref.size(); ++i) {
      require_close(fmt::format("gdn kernel vs cpu {} {}",
                                f == Form::cpu_fused ? "fused" : "recurrent", names[i]),
                    gpu[i], ref[i], kFp32Tol);
    }
  }

  SECTION("bf16 inputs: fp32 gate sums and state, bf16 output") {
    torch::NoGradGuard no_grad;
    auto r16 = [](const torch::Tensor& t) { return t.to(torch::kBFloat16); };
    const GatedDeltaResult r =
        chunk_gated_delta_rule(r16(q).to(kCuda), r16(k).to(kCuda), r16(v).to(kCuda), g.to(kCuda),
                               r16(beta).to(kCuda), scale, h0.to(kCuda), 32);
    REQUIRE(r.o.scalar_type() == torch::kBFloat16);
    REQUIRE(r.state.scalar_type() == torch::kFloat);
    auto f32 = [&](const torch::Tensor& t) { return r16(t).to(torch::kFloat); };
    const GatedDeltaResult ref =
        chunk_gated_delta_rule(f32(q), f32(k), f32(v), g, f32(beta), scale, h0, 32);
    require_close("gdn kernel bf16 o", r.o, ref.o, kBf16Tol);
    require_close("gdn kernel bf16 (fp32) state", r.state, ref.state, 10 * kFp32Tol);
  }
}

TEST_CASE("cuda: Gated DeltaNet layer forward and backward on the GPU == CPU", "[cuda]") {
  if (!have_cuda()) return;
  torch::manual_seed(6);
  GatedDeltaNetOptions o;
  o.n_heads = 2;
  o.n_v_heads = 4;
  o.head_dim = 8;
  o.expand_v = 1.5;
  o.chunk_size = 16;
  GatedDeltaNet layer(o, 32);
  const torch::Tensor x = torch::randn({2, 75, 32}), w = torch::randn({2, 75, 32});
  const torch::Tensor pos = torch::arange(75);
  auto run = [&](const torch::Device& d) {
    layer.to(d);
    layer.zero_grad();
    torch::Tensor xd = x.detach().to(d).requires_grad_();  // a fresh leaf
    const torch::Tensor y = layer.forward(xd, pos.to(d), nullptr);
    (y * w.to(d)).sum().backward();
    std::vector<torch::Tensor> out = {y.detach().cpu(), xd.grad().cpu()};
    for (const auto& p : layer.named_parameters()) out.push_back(p.value().grad().cpu());
    return out;
  };
  const auto ref = run(torch::kCPU);
  const auto gpu = run(kCuda);
  REQUIRE(gpu.size() == ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    require_close(i == 0 ? "gdn layer y" : fmt::format("gdn layer grad {}", i), gpu[i], ref[i],
                  kFp32Tol);
  }
}

namespace {

// Per-step train losses of metrics.jsonl.
std::vector<double> losses(const fs::path& run_dir) {
  std::ifstream in(run_dir / "metrics.jsonl");
  std::vector<double> out;
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) out.push_back(j["loss"].get<double>());
  }
  return out;
}

}  // namespace

TEST_CASE("cuda: training steps and evaluation of a small hybrid with runtime.device: cuda == cpu",
          "[cuda][train]") {
  if (!have_cuda()) return;
  const fs::path root = fs::temp_directory_path() / "hybridlab_cuda_test";
  fs::remove_all(root);
  auto train_on = [&](const std::string& device) {
    const std::string yaml =
        "model: {d_model: 32, vocab_size: 64, layers: GGGA,\n"
        "        attention: {n_heads: 2, position: {scheme: rope}},\n"
        "        gated_deltanet: {n_heads: 2, head_dim: 16, expand_v: 2, chunk_size: 16}}\n"
        "task: {name: mqar, seq_len: 64, vocab_size: 64, num_kv_pairs: 4}\n"
        "train: {steps: 6, batch_size: 4, lr: 0.003, warmup_steps: 1, checkpoint_every: 0,\n"
        "        log_every: 1, seed: 7}\n"
        "eval: {lengths: [64], examples: 16}\n"
        "runtime: {device: " +
        device + ", threads: 1}\n" + "plugins: {paths: ['" HYBRIDLAB_TEST_PLUGIN_DIR "']}\n";
    std::fprintf(stderr, "  [%s] building the run\n", device.c_str());
    BuiltRun b = build_run(Config::parse(yaml, "cuda_test.yaml"));
    REQUIRE(b.model->parameters().front().device().is_cuda() == (device == "cuda"));
    TrainerHooks quiet;
    quiet.quiet = true;
    const fs::path dir = root / device;
    std::fprintf(stderr, "  [%s] training\n", device.c_str());
    train(*b.model, *b.exp.task, b.exp, RunFolder(dir.string()), quiet);
    std::fprintf(stderr, "  [%s] evaluating\n", device.c_str());
    const LengthResult r = evaluate_length(*b.model, *b.exp.task, b.exp.eval, 64, 16);
    return std::make_pair(losses(dir), r.metrics);
  };
  const auto [cpu_losses, cpu_eval] = train_on("cpu");
  const auto [gpu_losses, gpu_eval] = train_on("cuda");
  fs::remove_all(root);
  REQUIRE(cpu_losses.size() == 6);
  REQUIRE(gpu_losses.size() == cpu_losses.size());
  for (size_t i = 0; i < cpu_losses.size(); ++i) {
    std::printf("  train step %zu loss cpu %.7f cuda %.7f\n", i + 1, cpu_losses[i], gpu_losses[i]);
    CAPTURE(i, cpu_losses[i], gpu_losses[i]);
    REQUIRE(std::abs(gpu_losses[i] - cpu_losses[i]) <= 1e-4 * std::abs(cpu_losses[i]));
  }
  std::printf("  eval loss cpu %.7f cuda %.7f\n", cpu_eval.at("loss"), gpu_eval.at("loss"));
  CAPTURE(cpu_eval.at("loss"), gpu_eval.at("loss"));
  REQUIRE(std::abs(gpu_eval.at("loss") - cpu_eval.at("loss")) <= 1e-4 * cpu_eval.at("loss"));
}

}  // namespace cuda_test
