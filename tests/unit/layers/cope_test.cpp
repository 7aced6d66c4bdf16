// CoPE (the `cope` plugin, Golovneva et al. 2024) through the content_bias hook (plugin API v3):
// the reference notes' hand values for three tokens, zero embeddings == NoPE attention, the layer
// against an explicit loop (GQA, windows, cached keys), finite-difference gradients of q, k, v and
// the embeddings, decoding == forward, and the settings a config may get wrong.

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "hybridlab/config.h"
#include "hybridlab/error.h"
#include "hybridlab/position.h"
#include "layers/attention.h"
#include "layers_test_util.h"

using namespace hybridlab;

namespace cope_test {
namespace {

PositionContext context(int64_t H, int64_t Hkv, int64_t Dh, bool causal = true) {
  return test::attention_context(H, Hkv, Dh, causal);
}

std::shared_ptr<PositionScheme> make(const std::string& name, const std::string& yaml,
                                     const PositionContext& ctx) {
  return test::make_scheme(name, yaml, ctx);
}

std::string config_error(const std::string& yaml, const PositionContext& ctx) {
  try {
    make("cope", yaml, ctx);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

torch::Tensor& pos_emb(PositionScheme& s) { return s.named_parameters()["pos_emb"]; }

AttentionOptions options(int64_t H, int64_t Hkv, int64_t window = 0) {
  AttentionOptions o;
  o.n_heads = H;
  o.n_kv_heads = Hkv;
  o.window = window;
  return o;
}

// softmax((q·k + q·e[p]) / √Dh) v with p_ij = Σ_{t=j..i} σ(q_i·k_t) over visible keys, clamped at
// npos − 1, e[p] interpolated between ⌊p⌋ and ⌈p⌉: explicit loops in double.
torch::Tensor oracle(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     const torch::Tensor& e_in, int64_t window) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Dh = q.size(3);
  const int64_t Hkv = k.size(1), Tk = k.size(2), G = H / Hkv, n_cached = Tk - Tq;
  const torch::Tensor e = e_in.to(torch::kDouble);  // [Dh, npos]
  const int64_t npos = e.size(1);
  auto qa = q.accessor<double, 4>(), ka = k.accessor<double, 4>(), va = v.accessor<double, 4>();
  auto ea = e.accessor<double, 2>();
  torch::Tensor out = torch::zeros({B, H, Tq, Dh}, torch::kDouble);
  auto oa = out.accessor<double, 4>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tq; ++i) {
        const int64_t self = n_cached + i;
        const int64_t first = window > 0 ? std::max<int64_t>(0, self - window + 1) : 0;
        std::vector<double> dot(Tk, 0.0), logit(Tk, -INFINITY);
        for (int64_t j = first; j <= self; ++j)
          for (int64_t c = 0; c < Dh; ++c) dot[j] += qa[b][h][i][c] * ka[b][h / G][j][c];
        double mx = -INFINITY;
        for (int64_t j = first; j <= self; ++j) {
          double p = 0;
          for (int64_t t = j; t <= self; ++t) p += 1 / (1 + std::exp(-dot[t]));
          p = std::min(p, static_cast<double>(npos - 1));
          const int64_t lo = static_cast<int64_t>(std::floor(p)),
                        hi = static_cast<int64_t>(std::ceil(p));
          double term = 0;
          for (int64_t c = 0; c < Dh; ++c)
            term += qa[b][h][i][c] * ((p - lo) * ea[c][hi] + (1 - (p - lo)) * ea[c][lo]);
          logit[j] = (dot[j] + term) / std::sqrt(static_cast<double>(Dh));
          mx = std::max(mx, logit[j]);
        }
        double z = 0;
        for (int64_t j = first; j <= self; ++j) z += std::exp(logit[j] - mx);
        for (int64_t j = first; j <= self; ++j) {
          const double w = std::exp(logit[j] - mx) / z;
          for (int64_t c = 0; c < Dh; ++c) oa[b][h][i][c] += w * va[b][h / G][j][c];
        }
      }
  return out;
}

}  // namespace

TEST_CASE("cope: hand values for three tokens at zero gate logits", "[position][cope]") {
  // Zero logits: every gate 1/2, so p_ij = (i − j + 1)/2; at (2, 0) p = 1.5, half of e[1] and
  // half of e[2]. With Dh = 1, q = 2 and e = (10, 20, 40, 80): q·e[p] = 2·(e[⌊p⌋]·(1 − f) +
  // e[⌈p⌉]·f).
  auto scheme = make("cope", "{npos_max: 4}", context(1, 1, 1));
  {
    torch::NoGradGuard no_grad;
    pos_emb(*scheme).copy_(torch::tensor({{10.0, 20.0, 40.0, 80.0}}));
  }
  const torch::Tensor q = torch::full({1, 1, 3, 1}, 2.0);
  const torch::Tensor logits = torch::zeros({1, 1, 3, 3});
  const torch::Tensor pos = torch::arange(3);
  const torch::Tensor visible = visible_pairs(pos, pos, true, 0);
  const torch::Tensor bias = scheme->content_bias(q, logits, pos, pos, visible)[0][0];
  // p: row 0 (0.5); row 1 (1, 0.5); row 2 (1.5, 1, 0.5).
  const double half = 2 * (10 + 20) / 2.0;  // p = 0.5
  CHECK(bias[0][0].item<double>() == Approx(half));
  CHECK(bias[1][0].item<double>() == Approx(2 * 20.0));  // p = 1
  CHECK(bias[1][1].item<double>() == Approx(half));
  CHECK(bias[2][0].item<double>() == Approx(2 * (20 + 40) / 2.0));  // p = 1.5
  CHECK(bias[2][1].item<double>() == Approx(2 * 20.0));
  CHECK(bias[2][2].item<double>() == Approx(half));
  // npos_max 2 clamps every count at 1: row 2's key 0 reads e[1] alone.
  auto clamped = make("cope", "{npos_max: 2}", context(1, 1, 1));
  {
    torch::NoGradGuard no_grad;
    pos_emb(*clamped).copy_(torch::tensor({{10.0, 20.0}}));
  }
  CHECK(clamped->content_bias(q, logits, pos, pos, visible)[0][0][2][0].item<double>() ==
        Approx(40.0));
}

TEST_CASE("cope: zero embeddings (its initialisation) leave attention as NoPE's",
          "[position][cope]") {
  torch::manual_seed(1);
  auto cope =
      std::make_shared<Attention>(options(4, 2), 32, make("cope", "{}", context(4, 2, 8)), true);
  auto nope =
      std::make_shared<Attention>(options(4, 2), 32, make("nope", "{}", context(4, 2, 8)), true);
  for (const auto& p : nope->named_parameters()) {
    torch::NoGradGuard no_grad;
    p.value().copy_(cope->named_parameters()[p.key()]);
  }
  const torch::Tensor x = torch::randn({2, 11, 32});
  REQUIRE_TENSORS_CLOSE(cope->forward(x, torch::arange(11), nullptr),
                        nope->forward(x, torch::arange(11), nullptr), 1e-6);
  CHECK(cope->info(64).position_hooks == (kHookContentBias | kHookFlops));
  CHECK(cope->info(64).flops_per_token > nope->info(64).flops_per_token);
}

TEST_CASE("cope attend: == an explicit loop (GQA, windows, cached keys, blocks)",
          "[position][cope]") {
  const int64_t window = GENERATE(0, 4);
  const int64_t n_cached = GENERATE(0, 3);
  const int64_t block = GENERATE(2, 512);
  CAPTURE(window, n_cached, block);
  torch::manual_seed(2);
  auto scheme = make("cope", "{npos_max: 6}", context(4, 2, 8));
  scheme->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    pos_emb(*scheme).normal_();
  }
  Attention att(options(4, 2, window), 32, scheme, true);
  const int64_t Tq = 13, Tk = Tq + n_cached;
  const torch::Tensor q = torch::randn({2, 4, Tq, 8}, torch::kDouble);
  const torch::Tensor k = torch::randn({2, 2, Tk, 8}, torch::kDouble);
  const torch::Tensor v = torch::randn({2, 2, Tk, 8}, torch::kDouble);
  const torch::Tensor k_pos = torch::arange(Tk), q_pos = k_pos.narrow(0, n_cached, Tq);
  const torch::Tensor got = att.attend(q, k, v, q_pos, k_pos, block);
  REQUIRE_TENSORS_CLOSE(got, oracle(q, k, v, pos_emb(*scheme), window), 1e-12);
  att.set_attend_path(AttendPath::kTiled);  // no tiled form: the same dense rows
  REQUIRE_TENSORS_CLOSE(att.attend(q, k, v, q_pos, k_pos, block), got, 1e-15);
}

TEST_CASE("cope attend: gradients of q, k, v and the embeddings match finite differences",
          "[position][cope]") {
  torch::manual_seed(3);
  auto scheme = make("cope", "{npos_max: 5}", context(2, 1, 4));
  scheme->to(torch::kDouble);
  torch::Tensor& e = pos_emb(*scheme);
  {
    torch::NoGradGuard no_grad;
    e.normal_();
  }
  Attention att(options(2, 1), 8, scheme, true);
  test::check_attend_gradients(att, {&e}, 1e-6);
}

TEST_CASE("cope layer: decoding token by token == the whole sequence", "[position][cope]") {
  const int64_t window = GENERATE(0, 3);
  CAPTURE(window);
  torch::manual_seed(4);
  auto scheme = make("cope", "{npos_max: 8}", context(4, 2, 8));
  auto att = std::make_shared<Attention>(options(4, 2, window), 32, scheme, true);
  att->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    pos_emb(*scheme).normal_();
  }
  const torch::Tensor x = torch::randn({2, 10, 32}, torch::kDouble);
  torch::NoGradGuard no_grad;
  const torch::Tensor whole = att->forward(x, torch::arange(10), nullptr);
  REQUIRE_TENSORS_CLOSE(test::decode_token_by_token(*att, x), whole, 1e-12);
}

TEST_CASE("cope config: npos_max, bidirectional attention and the input slot are refused",
          "[position][cope][config]") {
  const std::string small = config_error("{npos_max: 0}", context(2, 2, 4));
  CHECK_THAT(small, Catch::Contains("test.yaml:1") && Catch::Contains("npos_max") &&
                        Catch::Contains("from 1 to 2^24"));
  CHECK_THAT(config_error("{npos_max: many}", context(2, 2, 4)), Catch::Contains("npos_max"));
  CHECK_THAT(config_error("{}", context(2, 2, 4, /*causal=*/false)),
             Catch::Contains("no bidirectional form"));
  PositionContext input;
  input.d_model = 16;
  CHECK_THAT(config_error("{}", input), Catch::Contains("model-level input scheme"));
  // The table defaults to the training length + 1 (a count reaches T).
  CHECK(pos_emb(*make("cope", "{}", context(2, 2, 4))).sizes() == at::IntArrayRef({4, 65}));
}

}  // namespace cope_test
