// export_hf_fla against an independent transcription of fla's forward pass
// (tests/fixtures/interop/fla_reference.py, written from fla@bc3b101d's equations and run by the
// system Python): the exported files must give the logits hybridlab computes (fp64, KL < 1e-6)
// and the same greedy continuation; what fla cannot express is refused by name.

#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <filesystem>

#include "hybridlab/error.h"
#include "hybridlab/interop.h"
#include "unit/interop/interop_test_util.h"

using namespace hybridlab;
namespace fs = std::filesystem;

namespace hf_fla_export_test {
namespace {

using interoptest::build_from_yaml;

// hybridlab's fp64 logits and greedy continuation against the oracle's on the exported files.
void check_against_oracle(const std::string& yaml, const std::string& name) {
  auto host = test::test_host();
  torch::manual_seed(7);
  auto model = build_from_yaml(yaml, *host);
  model->to(torch::kFloat64);
  const fs::path dir = interoptest::fresh_dir("export_" + name);
  interoptest::export_to(*model, dir);
  const torch::Tensor tokens = torch::randint(0, model->vocab_size(), {2, 20});
  const auto c = interoptest::compare_with_oracle(*model, "fla_reference.py", dir, tokens, dir);
  INFO("KL " << c.kl << ", largest logit difference " << c.diff);
  CHECK(c.diff < 1e-9);
  CHECK(c.kl < 1e-6);
  CHECK(c.greedy_equal);
  fs::remove_all(dir);
}

std::string export_error(const std::string& yaml) {
  auto host = test::test_host();
  auto model = build_from_yaml(yaml, *host);
  try {
    export_hf_fla(*model, 64);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE(
    "hf-fla export: GVA Gated DeltaNet and GQA windowed attention with interleaved RoPE "
    "give fla's logits",
    "[interop]") {
  // Interleaved RoPE is the trap: fla rotates halves, so q and k rows are permuted per head.
  check_against_oracle(
      "model:\n"
      "  d_model: 32\n  vocab_size: 50\n  layers: GGAG\n  tie_embeddings: false\n"
      "  attention: {n_heads: 4, n_kv_heads: 2, window: 6,\n"
      "              position: {scheme: rope, layout: interleaved, rope_theta: 500}}\n"
      "  gated_deltanet: {n_heads: 2, head_dim: 16, n_v_heads: 4, expand_v: 1.0}\n",
      "gva");
}

TEST_CASE(
    "hf-fla export: tied embeddings, no short convolution, negative eigenvalues and two "
    "attention settings give fla's logits",
    "[interop]") {
  check_against_oracle(
      "model:\n"
      "  d_model: 32\n  vocab_size: 40\n  layers: AGAG\n  norm_eps: 1.0e-6\n"
      "  attention: {n_heads: 2, position: {scheme: rope}}\n"
      "  gated_deltanet: {n_heads: 2, use_short_conv: false, allow_neg_eigval: true, "
      "norm_eps: 1.0e-6}\n"
      "  overrides: {2: {n_heads: 4, window: 5}}\n",
      "tied");
}

TEST_CASE("hf-fla export: what fla's layout cannot express is refused by name", "[interop]") {
  const std::string head = "model:\n  d_model: 32\n  vocab_size: 40\n";
  struct Case {
    std::string yaml, expect;
  };
  const std::vector<Case> cases{
      {head + "  layers: GA\n  attention: {position: {scheme: nope}}\n",
       "layer 1 (attention) uses position scheme 'nope'"},
      {head + "  layers: A\n  attention: {qk_norm: true, position: {scheme: rope}}\n",
       "layer 0 (attention) has model.attention.qk_norm"},
      {head + "  layers: A\n  attention: {output_gate: true, position: {scheme: rope}}\n",
       "output_gate"},
      {head +
           "  layers: A\n  attention: {normalization: stick_breaking, position: {scheme: rope}}\n",
       "layer 0 (attention) has model.attention.normalization: stick_breaking"},
      {head + "  layers: A\n  attention: {position: {scheme: rope, partial_rotary_factor: 0.5}}\n",
       "model.attention.position.partial_rotary_factor is set"},
      {head + "  layers: A\n  attention: {head_dim: 4, position: {scheme: rope}}\n",
       "is not d_model 32"},
      {head + "  layers: G\n  gated_deltanet: {norm_eps: 1.0e-6}\n",
       "model.gated_deltanet.norm_eps 1e-06 differs from model.norm_eps 1e-05"},
      {head + "  layers: GG\n  overrides: {1: {conv_size: 2}}\n",
       "layer 1 (gated_deltanet) has Gated DeltaNet settings"},
      {head + "  layers: G\n  position: {scheme: sinusoidal}\n", "model.position is 'sinusoidal'"},
      {head + "  layers: D\n", "layer 0 (deltanet) is a 'deltanet' mixer"},
  };
  for (const auto& c : cases) {
    INFO(c.yaml);
    const std::string err = export_error(c.yaml);
    INFO(err);
    CHECK(err.find(c.expect) != std::string::npos);
    CHECK(err.find("nothing was written") != std::string::npos);
  }
}

}  // namespace hf_fla_export_test
