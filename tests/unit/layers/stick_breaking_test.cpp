// Stick-breaking attention (Tan et al. 2024, arXiv 2410.17980): the weights against hand values
// and against the product written out per key, the layer's attend() against an explicit loop (GQA,
// windows, cached keys, a logit bias), gradients by finite differences, decoding == forward, and
// the config and export refusals.

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "hybridlab/position.h"
#include "layers/attention.h"
#include "layers/kernels/stick_breaking.h"
#include "layers_test_util.h"

using namespace hybridlab;

namespace stick_breaking_test {
namespace {

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

// A linear distance bias −slope·(h+1)·(i−j), to show the weights take every bias the scores take.
class DistanceBias : public PositionScheme {
 public:
  explicit DistanceBias(int64_t n_heads) : n_heads_(n_heads) {}
  std::string name() const override { return "distance_bias"; }
  uint32_t hooks() const override { return kHookLogitBias; }
  torch::Tensor logit_bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos) override {
    const auto d = (q_pos.unsqueeze(1) - k_pos.unsqueeze(0)).to(torch::kDouble);
    const auto slopes = (torch::arange(n_heads_, torch::kDouble) + 1) * kSlope;
    return -slopes.view({-1, 1, 1}) * d.unsqueeze(0);
  }
  static constexpr double kSlope = 0.2;

 private:
  int64_t n_heads_;
};

using test::NoScheme;

AttentionOptions stick_breaking(int64_t H, int64_t Hkv, int64_t window = 0, int64_t block = 512) {
  AttentionOptions o;
  o.n_heads = H;
  o.n_kv_heads = Hkv;
  o.window = window;
  o.block_size = block;
  o.normalization = AttentionNormalization::kStickBreaking;
  return o;
}

// Σ_j A_ij v_j with every weight formed as the paper writes it, a product per key:
// A_ij = σ(z_ij) ∏_{j<k<i} (1 − σ(z_ik)) for visible j < i and ∏_{k<i} (1 − σ(z_ik)) on v_i.
// Query i sits at key index Tk − Tq + i; query head h reads kv head h / (H/Hkv).
torch::Tensor oracle(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     int64_t window, double slope) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Dh = q.size(3);
  const int64_t Hkv = k.size(1), Tk = k.size(2), G = H / Hkv, n_cached = Tk - Tq;
  auto qa = q.accessor<double, 4>(), ka = k.accessor<double, 4>(), va = v.accessor<double, 4>();
  torch::Tensor out = torch::zeros({B, H, Tq, Dh}, torch::kDouble);
  auto oa = out.accessor<double, 4>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tq; ++i) {
        const int64_t self = n_cached + i;
        std::vector<double> beta(Tk, 0.0);  // 0 for keys that cannot break the stick
        for (int64_t j = 0; j < self; ++j) {
          if (window > 0 && self - j >= window) continue;
          double z = 0;
          for (int64_t c = 0; c < Dh; ++c) z += qa[b][h][i][c] * ka[b][h / G][j][c];
          z = z / std::sqrt(static_cast<double>(Dh)) - slope * (h + 1) * (self - j);
          beta[j] = sigmoid(z);
        }
        std::vector<double> weight(Tk, 0.0);
        double leftover = 1;
        for (int64_t j = 0; j < self; ++j) {
          double w = beta[j];
          for (int64_t m = j + 1; m < self; ++m) w *= 1 - beta[m];
          weight[j] = w;
          leftover *= 1 - beta[j];
        }
        weight[self] = leftover;
        for (int64_t j = 0; j < Tk; ++j)
          for (int64_t c = 0; c < Dh; ++c) oa[b][h][i][c] += weight[j] * va[b][h / G][j][c];
      }
  return out;
}

}  // namespace

TEST_CASE("stick-breaking weights: hand values, nearest key first, leftover on the own key",
          "[attention][stick_breaking]") {
  const torch::Tensor q_pos = torch::tensor({3}, torch::kLong);
  const torch::Tensor k_pos = torch::arange(4);
  // z = (0, ln 3, 0) over keys 0–2: key 2 takes σ(0) = 1/2, key 1 σ(ln 3)·(1/2) = 3/8, key 0
  // (1/2)(1/4)(1/2) = 1/16, and the query's own key the leftover (1/2)(1/4)(1/2) = 1/16.
  const torch::Tensor z =
      torch::tensor({0.0, std::log(3.0), 0.0, 7.0}, torch::kDouble).view({1, 4});
  const torch::Tensor w = stick_breaking_weights(z, q_pos, k_pos, torch::Tensor());
  REQUIRE_TENSORS_CLOSE(w, torch::tensor({0.0625, 0.375, 0.5, 0.0625}, torch::kDouble).view({1, 4}),
                        1e-15);
  REQUIRE_TENSORS_CLOSE(stick_breaking_weights_reference(z, q_pos, k_pos, torch::Tensor()), w,
                        1e-15);
  // All logits 0: halves from the nearest key backwards; the logit at the own key is unused.
  const torch::Tensor w0 =
      stick_breaking_weights(torch::zeros({1, 4}, torch::kDouble), q_pos, k_pos, torch::Tensor());
  REQUIRE_TENSORS_CLOSE(w0, torch::tensor({0.125, 0.25, 0.5, 0.125}, torch::kDouble).view({1, 4}),
                        1e-15);
  // A window of 2 lets key 2 alone break the stick; keys 0–1 get nothing.
  const torch::Tensor visible = visible_pairs(q_pos, k_pos, true, 2);
  const torch::Tensor ww = stick_breaking_weights(z, q_pos, k_pos, visible);
  REQUIRE_TENSORS_CLOSE(ww, torch::tensor({0.0, 0.0, 0.5, 0.5}, torch::kDouble).view({1, 4}),
                        1e-15);
  // The first token has no earlier key: all its weight on itself.
  const torch::Tensor first =
      stick_breaking_weights(torch::randn({1, 1}, torch::kDouble), torch::tensor({0}, torch::kLong),
                             torch::arange(1), torch::Tensor());
  CHECK(first.item<double>() == 1.0);
}

TEST_CASE("stick-breaking weights: far logits stay finite and sum to 1 in fp32",
          "[attention][stick_breaking]") {
  // 2000 keys with logits of ±60: products of 2000 factors underflow unless taken in log space.
  torch::manual_seed(3);
  const int64_t T = 2000;
  const torch::Tensor z = (torch::randint(0, 2, {2, 1, T}) * 120 - 60).to(torch::kFloat);
  const torch::Tensor q_pos = torch::tensor({T - 1}, torch::kLong);
  const torch::Tensor w = stick_breaking_weights(z, q_pos, torch::arange(T), torch::Tensor());
  REQUIRE(torch::isfinite(w).all().item<bool>());
  REQUIRE_TENSORS_CLOSE(w.sum(-1), torch::ones({2, 1}), 1e-6);
  // With these logits each β is 0 or 1 to fp32: the weight is on the nearest key with z = +60.
  const torch::Tensor nearest =
      (z.select(1, 0).narrow(1, 0, T - 1) > 0).to(torch::kLong).mul(torch::arange(T - 1)).argmax(1);
  CHECK(torch::equal(w.select(1, 0).argmax(1), nearest));
}

TEST_CASE("stick-breaking weights: the fused rows == the reference ops, values and gradients",
          "[attention][stick_breaking]") {
  const auto dtype = GENERATE(torch::kFloat, torch::kDouble);
  const int64_t window = GENERATE(0, 4);
  const int64_t n_cached = GENERATE(0, 3);
  CAPTURE(dtype, window, n_cached);
  torch::manual_seed(5);
  const int64_t bq = 13, bk = bq + n_cached;
  const torch::Tensor k_pos = torch::arange(bk), q_pos = k_pos.narrow(0, n_cached, bq);
  const torch::Tensor visible = visible_pairs(q_pos, k_pos, true, window);
  const torch::Tensor base = torch::randn({2, 3, bq, bk}, dtype) * 4;
  const torch::Tensor dw = torch::randn({2, 3, bq, bk}, dtype);
  const double tol = dtype == torch::kFloat ? 1e-5 : 1e-13;
  torch::Tensor grads[2], values[2];
  for (int fused = 0; fused < 2; ++fused) {
    const torch::Tensor z = base.clone().requires_grad_();
    values[fused] = fused ? stick_breaking_weights(z, q_pos, k_pos, visible)
                          : stick_breaking_weights_reference(z, q_pos, k_pos, visible);
    values[fused].backward(dw);
    grads[fused] = z.grad();
  }
  REQUIRE_TENSORS_CLOSE(values[1], values[0], tol);
  REQUIRE_TENSORS_CLOSE(grads[1], grads[0], tol);
  // Rows of a non-contiguous z (a transposed view) read the same.
  const torch::Tensor zt = base.transpose(0, 1).contiguous().transpose(0, 1);
  REQUIRE_TENSORS_CLOSE(stick_breaking_weights(zt, q_pos, k_pos, visible), values[0], tol);
}

TEST_CASE("stick-breaking attend: == the per-key product (GQA, windows, cache, bias, blocks)",
          "[attention][stick_breaking]") {
  const int64_t window = GENERATE(0, 5);
  const int64_t block = GENERATE(1, 7, 1000);
  const bool bias = GENERATE(false, true);
  const int64_t n_cached = GENERATE(0, 4);
  CAPTURE(window, block, bias, n_cached);
  torch::manual_seed(11);
  std::shared_ptr<PositionScheme> scheme;
  if (bias) {
    scheme = std::make_shared<DistanceBias>(4);
  } else {
    scheme = std::make_shared<NoScheme>();
  }
  Attention att(stick_breaking(4, 2, window, block), 32, scheme, true);
  const int64_t Tq = 19, Tk = Tq + n_cached;
  const torch::Tensor q = torch::randn({2, 4, Tq, 8}, torch::kDouble) * 2;
  const torch::Tensor k = torch::randn({2, 2, Tk, 8}, torch::kDouble) * 2;
  const torch::Tensor v = torch::randn({2, 2, Tk, 8}, torch::kDouble);
  const torch::Tensor k_pos = torch::arange(Tk), q_pos = k_pos.narrow(0, n_cached, Tq);
  const torch::Tensor got = att.attend(q, k, v, q_pos, k_pos, block);
  REQUIRE_TENSORS_CLOSE(got, oracle(q, k, v, window, bias ? DistanceBias::kSlope : 0.0), 1e-12);
  // The tiled path (stick_breaking_attention_tiled without a bias, the dense rows with one).
  att.set_attend_path(AttendPath::kTiled);
  REQUIRE_TENSORS_CLOSE(att.attend(q, k, v, q_pos, k_pos, block), got, 1e-12);
  // The probe sees weights that sum to 1 per query.
  att.set_probe([](const torch::Tensor& p, const torch::Tensor&, const torch::Tensor&) {
    REQUIRE_TENSORS_CLOSE(p.sum(-1), torch::ones_like(p.sum(-1)), 1e-12);
  });
  REQUIRE_TENSORS_CLOSE(att.attend(q, k, v, q_pos, k_pos, block), got, 1e-15);
}

TEST_CASE("stick-breaking tiles: == the dense rows, values and every gradient",
          "[attention][stick_breaking]") {
  const int64_t window = GENERATE(0, 6);
  const int64_t n_cached = GENERATE(0, 5);
  const int64_t tile_q = GENERATE(3, 64), tile_k = GENERATE(4, 64);
  CAPTURE(window, n_cached, tile_q, tile_k);
  torch::manual_seed(14);
  const int64_t Tq = 21, Tk = Tq + n_cached;
  const torch::Tensor q = (torch::randn({2, 3, Tq, 8}, torch::kDouble) * 2).requires_grad_();
  const torch::Tensor k = (torch::randn({2, 3, Tk, 8}, torch::kDouble) * 2).requires_grad_();
  const torch::Tensor v = torch::randn({2, 3, Tk, 8}, torch::kDouble).requires_grad_();
  const torch::Tensor dout = torch::randn({2, 3, Tq, 8}, torch::kDouble);
  StickBreakingTiles t;
  t.window = window;
  t.tile_q = tile_q;
  t.tile_k = tile_k;
  const torch::Tensor tiled = stick_breaking_attention_tiled(q, k, v, t);
  const auto grads_of = [&](const torch::Tensor& out) {
    return torch::autograd::grad({out}, {q, k, v}, {dout});
  };
  const auto tiled_grads = grads_of(tiled);
  // The dense form: the reference weights with the leftover on the own key, times v.
  const torch::Tensor k_pos = torch::arange(Tk), q_pos = k_pos.narrow(0, n_cached, Tq);
  const torch::Tensor z = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(8.0);
  const torch::Tensor dense = torch::matmul(
      stick_breaking_weights_reference(z, q_pos, k_pos, visible_pairs(q_pos, k_pos, true, window)),
      v);
  REQUIRE_TENSORS_CLOSE(tiled, dense, 1e-12);
  REQUIRE_TENSORS_CLOSE(tiled, oracle(q.detach(), k.detach(), v.detach(), window, 0.0), 1e-12);
  const auto dense_grads = grads_of(dense);
  for (size_t i = 0; i < 3; ++i) REQUIRE_TENSORS_CLOSE(tiled_grads[i], dense_grads[i], 1e-12);
}

TEST_CASE("stick-breaking tiles: refuse what they do not take", "[attention][stick_breaking]") {
  const torch::Tensor q = torch::randn({1, 2, 4, 8});
  StickBreakingTiles t;
  CHECK_THROWS_WITH(stick_breaking_attention_tiled(q, q.narrow(2, 0, 3), q.narrow(2, 0, 3), t),
                    Catch::Contains("fewer keys"));
  CHECK_THROWS_WITH(stick_breaking_attention_tiled(q, q.to(torch::kDouble), q, t),
                    Catch::Contains("one dtype"));
  t.tile_q = 0;
  CHECK_THROWS_WITH(stick_breaking_attention_tiled(q, q, q, t), Catch::Contains("tiles"));
}

TEST_CASE("stick-breaking attend: gradients of q, k, v match finite differences",
          "[attention][stick_breaking]") {
  torch::manual_seed(12);
  Attention att(stick_breaking(2, 1, /*window=*/4), 16, std::make_shared<NoScheme>(), true);
  test::check_attend_gradients(att, {}, 1e-7);
  att.set_attend_path(AttendPath::kTiled);  // and through the tiles
  test::check_attend_gradients(att, {}, 1e-7);
}

TEST_CASE("stick-breaking layer: decoding token by token == the whole sequence",
          "[attention][stick_breaking]") {
  const int64_t window = GENERATE(0, 3);
  CAPTURE(window);
  torch::manual_seed(13);
  auto att = std::make_shared<Attention>(stick_breaking(4, 2, window), 32,
                                         std::make_shared<NoScheme>(), true);
  att->to(torch::kDouble);
  const torch::Tensor x = torch::randn({2, 9, 32}, torch::kDouble);
  torch::NoGradGuard no_grad;
  const torch::Tensor whole = att->forward(x, torch::arange(9), nullptr);
  REQUIRE_TENSORS_CLOSE(test::decode_token_by_token(*att, x), whole, 1e-12);
  // Not softmax attention: the same weights under softmax give another output.
  AttentionOptions soft = stick_breaking(4, 2, window);
  soft.normalization = AttentionNormalization::kSoftmax;
  Attention softmax(soft, 32, std::make_shared<NoScheme>(), true);
  softmax.to(torch::kDouble);
  for (const auto& p : att->named_parameters())
    softmax.named_parameters()[p.key()].copy_(p.value());
  CHECK(test::max_abs_diff(softmax.forward(x, torch::arange(9), nullptr), whole) > 1e-3);
}

TEST_CASE("stick-breaking config: normalization is read, refused when unknown or bidirectional",
          "[attention][stick_breaking][config]") {
  const std::string head = "model:\n  d_model: 16\n  layers: A\n  attention:\n";
  CHECK(test::model_options_error(head + "    normalization: stick_breaking\n") == "");
  const std::string unknown = test::model_options_error(head + "    normalization: sigmoid\n");
  CHECK(unknown.find("exp.yaml:5:") != std::string::npos);
  CHECK(unknown.find("model.attention.normalization") != std::string::npos);
  CHECK(unknown.find("'softmax' or 'stick_breaking', got 'sigmoid'") != std::string::npos);
  const std::string bidir =
      test::model_options_error(head + "    causal: false\n    normalization: stick_breaking\n");
  CHECK(bidir.find("exp.yaml:6:") != std::string::npos);
  CHECK(bidir.find("model.attention.normalization") != std::string::npos);
  CHECK(bidir.find("needs causal: true") != std::string::npos);
  AttentionOptions o = stick_breaking(2, 2);
  o.causal = false;
  CHECK_THROWS_WITH(Attention(o, 8, std::make_shared<NoScheme>(), true),
                    Catch::Contains("stick_breaking normalization needs causal attention"));
}

}  // namespace stick_breaking_test
