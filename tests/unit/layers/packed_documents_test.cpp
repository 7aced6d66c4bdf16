// Packed documents: the layout that cuts packed rows at document starts (hand-computed indices),
// and the model on packed rows against every document run alone, for every mixer (attention with
// every discovered scheme, Gated DeltaNet, the DeltaNet, Mamba2 and KDA plugins): logits and
// every parameter's gradient equal in fp64. Bidirectional attention, which cannot honour the
// boundaries, is refused at task.packing.

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "hybridlab/error.h"
#include "layers_test_util.h"
#include "model/hybrid_model.h"
#include "model/model_options.h"
#include "model/packed_documents.h"

using namespace hybridlab;
using Catch::Matchers::Contains;
using hybridlab::test::max_abs_diff;

namespace packed_documents_test {
namespace {

std::shared_ptr<HybridModel> build(const std::string& model_yaml, PluginHost& host,
                                   const std::string& packed = "") {
  Config cfg = Config::parse(
      model_yaml + "plugins: {paths: ['" + std::string(HYBRIDLAB_TEST_PLUGIN_DIR) + "']}\n",
      "exp.yaml");
  auto opts = read_model_options(cfg.section("model"));
  cfg.raise_errors();
  return std::make_shared<HybridModel>(*opts, host, ModelBuildContext(32, 64, packed));
}

std::vector<torch::Tensor> grads(const torch::nn::Module& m) {
  std::vector<torch::Tensor> out;
  for (const auto& p : m.parameters())
    out.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  return out;
}

// Row 0 packs documents of 7 and 13 tokens, row 1 is one document of 20: the model on the packed
// rows against each document alone, logits and gradients of a weighted sum of them (fp64).
void check_packed_equals_alone(HybridModel& model, int64_t vocab) {
  model.to(torch::kDouble);
  torch::manual_seed(3);
  const torch::Tensor tokens = torch::randint(0, vocab, {2, 20});
  torch::Tensor starts = torch::zeros({2, 20}, torch::kBool);
  starts[0][7] = true;
  const torch::Tensor w = torch::randn({2, 20, vocab}, torch::kDouble);

  model.zero_grad();
  const torch::Tensor packed = model.forward_packed(tokens, starts);
  (packed * w).sum().backward();
  const std::vector<torch::Tensor> packed_grads = grads(model);

  model.zero_grad();
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> docs = {
      {0, 0, 7}, {0, 7, 13}, {1, 0, 20}};
  torch::Tensor alone = torch::zeros_like(packed);
  torch::Tensor loss = torch::zeros({}, torch::kDouble);
  for (const auto& [row, start, len] : docs) {
    const torch::Tensor out = model.forward(tokens.slice(0, row, row + 1).narrow(1, start, len));
    alone.slice(0, row, row + 1).narrow(1, start, len).copy_(out.detach());
    loss = loss + (out * w.slice(0, row, row + 1).narrow(1, start, len)).sum();
  }
  loss.backward();
  const std::vector<torch::Tensor> alone_grads = grads(model);

  CHECK(max_abs_diff(packed.detach(), alone) < 1e-10);
  REQUIRE(packed_grads.size() == alone_grads.size());
  double worst = 0;
  for (size_t i = 0; i < packed_grads.size(); ++i)
    worst = std::max(worst, max_abs_diff(packed_grads[i], alone_grads[i]));
  CHECK(worst < 1e-9);
  // The boundary matters: the same rows without it (context flowing across) differ after it.
  torch::NoGradGuard no_grad;
  const torch::Tensor crossing = model.forward(tokens);
  CHECK(max_abs_diff(crossing.slice(0, 0, 1).narrow(1, 7, 13),
                     alone.slice(0, 0, 1).narrow(1, 7, 13)) > 1e-6);
  CHECK(max_abs_diff(crossing.slice(0, 0, 1).narrow(1, 0, 7),
                     alone.slice(0, 0, 1).narrow(1, 0, 7)) < 1e-10);
}

}  // namespace

TEST_CASE("packed documents: the layout's indices by hand", "[model][packing]") {
  // Row 0 holds pieces p0 = [0,2) and p1 = [2,5), row 1 one piece p2 = [0,5). Longest first:
  // 5, 3, 2; one group costs 3·5 = 15 slots, {5} + {3, 2} costs 5 + 2·3 plus a quarter of 5 for
  // the second call = 12.25, {5, 3} + {2} 13.25, three groups 12.5: two groups.
  torch::Tensor starts = torch::zeros({2, 5}, torch::kBool);
  starts[0][2] = true;
  starts[1][0] = true;  // a row's first token starts a piece either way
  const PackedDocuments p = packed_documents(starts);
  CHECK(p.pieces == 3);
  REQUIRE(p.groups.size() == 2);
  CHECK(p.groups[0].pieces == 1);
  CHECK(p.groups[0].longest == 5);
  CHECK(p.groups[1].pieces == 2);
  CHECK(p.groups[1].longest == 3);
  const auto vec = [](const torch::Tensor& t) {
    return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
  };
  // Slots: group 0 holds p2 (0..4); group 1, from slot 5, p1 (5..7) then p0 (8..10).
  CHECK(vec(p.place) == std::vector<int64_t>{8, 9, 5, 6, 7, 0, 1, 2, 3, 4});
  CHECK(vec(p.groups[0].gather) == std::vector<int64_t>{5, 6, 7, 8, 9});
  CHECK(vec(p.groups[1].gather) == std::vector<int64_t>{2, 3, 4, 0, 1, 10});
  const torch::Tensor x = torch::arange(1, 21, torch::kDouble).reshape({2, 5, 2});
  const std::vector<torch::Tensor> pieces = p.split(x);
  REQUIRE(pieces[0].sizes() == torch::IntArrayRef({1, 5, 2}));
  REQUIRE(pieces[1].sizes() == torch::IntArrayRef({2, 3, 2}));
  CHECK(pieces[0][0][0][0].item<double>() == 11.0);  // row 1, token 0
  CHECK(pieces[1][0][0][0].item<double>() == 5.0);   // row 0, token 2 begins p1
  CHECK(pieces[1][1][1][1].item<double>() == 4.0);   // row 0, token 1
  CHECK(torch::equal(pieces[1][1][2], torch::zeros({2}, torch::kDouble)));  // p0's padding
  CHECK(torch::equal(p.merge(pieces), x));
  // The state-reset knock-out's pieces: a start every 2 tokens (2, 2, 1: {2, 2} + {1}).
  const PackedDocuments windows = packed_documents(window_starts(1, 5, 2, torch::kCPU));
  CHECK(windows.pieces == 3);
  CHECK(windows.groups.size() == 2);
  CHECK_THROWS_WITH(packed_documents(torch::zeros({2, 5})), Contains("bool"));
}

TEST_CASE("packed documents: pieces grouped by length to cut the padding", "[model][packing]") {
  CHECK(piece_group_starts({}).empty());
  CHECK(piece_group_starts({10, 10, 10, 10}).empty());  // equal lengths: one group
  // One long piece and six short: 100 + 6·10 + 25 = 185 slots against 700 in one group.
  CHECK(piece_group_starts({100, 10, 10, 10, 10, 10, 10}) == std::vector<size_t>{1});
  // Three clear sizes: three groups (the most).
  CHECK(piece_group_starts({400, 400, 100, 100, 100, 10, 10, 10, 10}) == std::vector<size_t>{2, 5});
  // Rows of 256 each cut once: half the pieces are over 128, so the padded slots stay well under
  // the 2x of one group.
  torch::manual_seed(5);
  torch::Tensor starts = torch::zeros({8, 256}, torch::kBool);
  const torch::Tensor cut = torch::randint(1, 256, {8});
  for (int64_t b = 0; b < 8; ++b) starts[b][cut[b].item<int64_t>()] = true;
  const PackedDocuments p = packed_documents(starts);
  int64_t slots = 0;
  for (const PieceGroup& g : p.groups) slots += g.pieces * g.longest;
  CHECK(p.pieces == 16);
  CHECK(slots < 16 * 256 * 3 / 4);
  const torch::Tensor x = torch::randn({8, 256, 3});
  CHECK(torch::equal(p.merge(p.split(x)), x));
}

TEST_CASE("packed documents == each document alone, for every scheme (fp64 logits and gradients)",
          "[model][packing][plugins]") {
  auto host = hybridlab::test::test_host();
  for (const auto& record : hybridlab::test::discovered_schemes(*host)) {
    const std::string& name = record.name;
    CAPTURE(name);
    const bool embed = record.hooks & kHookEmbed;
    const std::string input = embed ? "  position: {scheme: " + name + "}\n" : "";
    torch::manual_seed(20);
    auto model = build("model:\n  d_model: 16\n  vocab_size: 24\n  layers: GA\n" + input +
                           "  attention: {n_heads: 2, block_size: 8, position: {scheme: " +
                           (embed ? std::string("nope") : name) +
                           "}}\n  gated_deltanet: {n_heads: 2, head_dim: 8, chunk_size: 4}\n",
                       *host);
    check_packed_equals_alone(*model, 24);
  }
}

TEST_CASE("packed documents == each document alone, for every mixer (fp64 logits and gradients)",
          "[model][packing][plugins]") {
  auto host = hybridlab::test::test_host();
  const std::vector<std::string> layouts = {
      // Attention with its short convolution, output gate and a sliding window.
      "layers: AA\n  attention: {n_heads: 2, use_short_conv: true, output_gate: true, window: 5}\n",
      "layers: GG\n  gated_deltanet: {n_heads: 2, head_dim: 8, chunk_size: 4}\n",
      "layers: D\n  deltanet: {num_heads: 2, chunk_size: 4}\n",
      "layers: M\n  mamba2: {headdim: 8, d_state: 4, chunk_size: 4}\n",
      "layers: K\n  kda: {num_heads: 2, head_dim: 8, chunk_size: 4}\n",
  };
  for (const std::string& layout : layouts) {
    CAPTURE(layout);
    torch::manual_seed(21);
    auto model = build("model:\n  d_model: 16\n  vocab_size: 24\n  " + layout, *host);
    check_packed_equals_alone(*model, 24);
  }
}

TEST_CASE("packed documents: a mixer that cannot honour boundaries is refused at task.packing",
          "[model][packing]") {
  auto host = hybridlab::test::test_host();
  const std::string yaml =
      "model:\n  d_model: 16\n  vocab_size: 24\n  layers: GA\n  attention: {n_heads: 2, causal: "
      "false}\n";
  CHECK_NOTHROW(build(yaml, *host));
  try {
    build(yaml, *host, "exp.yaml:4:3: task.packing");
    FAIL("expected ConfigError");
  } catch (const ConfigError& e) {
    CHECK_THAT(e.what(), Contains("exp.yaml:4:3: task.packing") &&
                             Contains("layer 1 (attention)") && Contains("bidirectional"));
  }
  CHECK_NOTHROW(build("model:\n  d_model: 16\n  vocab_size: 24\n  layers: GA\n", *host,
                      "exp.yaml:4:3: task.packing"));
}

}  // namespace packed_documents_test
