// PaTH attention (Yang et al. 2025, arXiv 2505.16381): the chunked UT scores against hand values
// and against the products of transforms written out per pair (values and gradients, every chunk
// size, cached keys), the decoding cache, the layer's decoding == forward, the w = 0 limit (plain
// attention) and the config refusals.

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "hybridlab/position.h"
#include "layers/attention.h"
#include "layers/kernels/path_attention.h"
#include "layers_test_util.h"

using namespace hybridlab;

namespace path_attention_test {
namespace {

using test::NoScheme;

// H(w, β) = I − β w wᵀ.
torch::Tensor householder(const torch::Tensor& w, const torch::Tensor& beta) {
  return torch::eye(w.size(0), w.options()) - beta * torch::outer(w, w);
}

// The oracle: s_ij = q_iᵀ H_i ⋯ H_{j+1} k_j with every product multiplied out, [B,H,T,T] (zero
// above the diagonal). q, k, w [B,H,T,D], beta [B,H,T]. Differentiable.
torch::Tensor naive_scores(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w,
                           const torch::Tensor& beta) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  std::vector<torch::Tensor> rows;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < T; ++i) {
        std::vector<torch::Tensor> row;
        for (int64_t j = 0; j < T; ++j) {
          if (j > i) {
            row.push_back(torch::zeros({}, q.options()));
            continue;
          }
          torch::Tensor P = torch::eye(D, q.options());
          for (int64_t s = j + 1; s <= i; ++s)
            P = torch::matmul(householder(w[b][h][s], beta[b][h][s]), P);
          row.push_back(torch::dot(q[b][h][i], torch::mv(P, k[b][h][j])));
        }
        rows.push_back(torch::stack(row));
      }
    }
  }
  return torch::stack(rows).view({B, H, T, T});
}

// Key j carried by every later transform: H_{T−1} ⋯ H_{j+1} k_j, [B,H,T,D].
torch::Tensor naive_cache(const torch::Tensor& k, const torch::Tensor& w,
                          const torch::Tensor& beta) {
  const int64_t B = k.size(0), H = k.size(1), T = k.size(2), D = k.size(3);
  torch::Tensor out = torch::empty_like(k);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t j = 0; j < T; ++j) {
        torch::Tensor P = torch::eye(D, k.options());
        for (int64_t s = j + 1; s < T; ++s)
          P = torch::matmul(householder(w[b][h][s], beta[b][h][s]), P);
        out[b][h][j] = torch::mv(P, k[b][h][j]);
      }
    }
  }
  return out;
}

struct Segment {
  torch::Tensor q, k, w, beta;
};

Segment random_segment(int64_t B, int64_t H, int64_t T, int64_t D) {
  Segment s;
  s.q = torch::randn({B, H, T, D}, torch::kDouble);
  s.k = torch::randn({B, H, T, D}, torch::kDouble);
  s.w = torch::nn::functional::normalize(torch::randn({B, H, T, D}, torch::kDouble),
                                         torch::nn::functional::NormalizeFuncOptions().dim(-1));
  s.beta = 2.0 * torch::rand({B, H, T}, torch::kDouble);
  return s;
}

// The full score matrix from the chunked path, by query blocks of `block` rows.
torch::Tensor chunked_scores(const Segment& s, int64_t chunk, int64_t block) {
  const PathChunks p = path_prepare(s.q, s.k, s.w, s.beta, chunk);
  const int64_t T = s.q.size(2);
  std::vector<torch::Tensor> rows;
  for (int64_t q0 = 0; q0 < T; q0 += block) {
    const int64_t q1 = std::min(T, q0 + block);
    rows.push_back(torch::constant_pad_nd(path_block_scores(p, {}, q0, q1), {0, T - q1}, 0));
  }
  return torch::cat(rows, 2).tril();
}

AttentionOptions path_options(int64_t H, int64_t Hkv, int64_t window = 0, int64_t chunk = 3) {
  AttentionOptions o;
  o.n_heads = H;
  o.n_kv_heads = Hkv;
  o.window = window;
  o.path = true;
  o.path_chunk_size = chunk;
  o.block_size = 6;
  return o;
}

}  // namespace

TEST_CASE("PaTH scores: hand values in two dimensions, newest transform outermost",
          "[attention][path]") {
  // The reference notes' example: k = (1,0), (0,1), (1,1); H_2 = H((1,0), 2) = diag(−1, 1);
  // H_3 = H((1,1)/√2, 2) = [[0,−1],[−1,0]]; q_3 = (0,1) (positions 1-based there, 0-based here).
  Segment s;
  s.k = torch::tensor({1.0, 0.0, 0.0, 1.0, 1.0, 1.0}, torch::kDouble).view({1, 1, 3, 2});
  s.q = torch::tensor({1.0, 0.0, 1.0, 0.0, 0.0, 1.0}, torch::kDouble).view({1, 1, 3, 2});
  const double r = 1.0 / std::sqrt(2.0);
  s.w = torch::tensor({0.0, 1.0, 1.0, 0.0, r, r}, torch::kDouble).view({1, 1, 3, 2});
  s.beta = torch::tensor({1.0, 2.0, 2.0}, torch::kDouble).view({1, 1, 3});
  for (const int64_t chunk : {1, 2, 3}) {
    CAPTURE(chunk);
    const torch::Tensor scores = chunked_scores(s, chunk, chunk);
    // Raw scores of query 3 on keys 1, 2, 3: (1, 0, 1); plain attention would give (0, 1, 1) and
    // the products in the wrong order s₃₁ = −1.
    REQUIRE_TENSORS_CLOSE(scores[0][0][2], torch::tensor({1.0, 0.0, 1.0}, torch::kDouble), 1e-14);
  }
  const torch::Tensor row = chunked_scores(s, 2, 2)[0][0][2];
  REQUIRE_TENSORS_CLOSE(torch::softmax(row * r, -1),
                        torch::tensor({0.4011, 0.1978, 0.4011}, torch::kDouble), 1e-4);
  // PaTH-FoX with f_2 = f_3 = 1/2: key j takes Σ_{s=j+1..3} ln f_s.
  const double half = std::log(0.5);
  REQUIRE_TENSORS_CLOSE(
      torch::softmax(row * r + torch::tensor({2 * half, half, 0.0}, torch::kDouble), -1),
      torch::tensor({0.1671, 0.1647, 0.6682}, torch::kDouble), 1e-4);
  // The decoding cache after token 3: (0,1), (−1,0), (1,1) (H_t never touches k_t).
  REQUIRE_TENSORS_CLOSE(path_transform_keys({}, s.k, s.w, s.beta, 2)[0][0],
                        torch::tensor({{0.0, 1.0}, {-1.0, 0.0}, {1.0, 1.0}}, torch::kDouble),
                        1e-14);
}

TEST_CASE("PaTH scores: == the multiplied-out products for every chunk and query block",
          "[attention][path]") {
  torch::manual_seed(3);
  const Segment s = random_segment(2, 2, 11, 4);
  const torch::Tensor expected = naive_scores(s.q, s.k, s.w, s.beta);
  for (const int64_t chunk : {1, 2, 3, 4, 11, 64}) {
    for (const int64_t blocks : {1, 2, 3}) {
      const int64_t block = std::min<int64_t>(chunk * blocks, 64);
      CAPTURE(chunk, block);
      REQUIRE_TENSORS_CLOSE(chunked_scores(s, chunk, block), expected, 1e-12);
    }
  }
}

TEST_CASE("PaTH scores: gradients of q, k, w and beta == the oracle's and finite differences",
          "[attention][path]") {
  torch::manual_seed(5);
  Segment s = random_segment(1, 2, 7, 3);
  for (torch::Tensor* t : {&s.q, &s.k, &s.w, &s.beta}) t->requires_grad_();
  const torch::Tensor weight = torch::randn({1, 2, 7, 7}, torch::kDouble).tril();
  const auto loss = [&] { return (chunked_scores(s, 3, 3) * weight).sum(); };
  const auto oracle = naive_scores(s.q, s.k, s.w, s.beta);
  const auto expected = torch::autograd::grad({(oracle * weight).sum()}, {s.q, s.k, s.w, s.beta});
  const auto got = torch::autograd::grad({loss()}, {s.q, s.k, s.w, s.beta});
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    REQUIRE_TENSORS_CLOSE(got[i], expected[i], 1e-10);
  }
  torch::Tensor* leaves[] = {&s.q, &s.k, &s.w, &s.beta};
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    REQUIRE_TENSORS_CLOSE(got[i], test::numeric_grad(loss, leaves[i]->detach()), 1e-7);
  }
}

TEST_CASE("PaTH cache: transformed keys == the products, and cached prefixes continue exactly",
          "[attention][path]") {
  torch::manual_seed(7);
  const Segment s = random_segment(2, 2, 10, 4);
  for (const int64_t chunk : {1, 3, 4, 16}) {
    CAPTURE(chunk);
    REQUIRE_TENSORS_CLOSE(path_transform_keys({}, s.k, s.w, s.beta, chunk),
                          naive_cache(s.k, s.w, s.beta), 1e-12);
  }
  const torch::Tensor expected = naive_scores(s.q, s.k, s.w, s.beta);
  for (const int64_t split : {1, 4, 9}) {
    // The first `split` tokens decoded into a cache, the rest as one segment.
    const auto head = [&](const torch::Tensor& t) { return t.narrow(2, 0, split); };
    const auto tail = [&](const torch::Tensor& t) { return t.narrow(2, split, 10 - split); };
    const torch::Tensor cached = path_transform_keys({}, head(s.k), head(s.w), head(s.beta), 2);
    const PathChunks p = path_prepare(tail(s.q), tail(s.k), tail(s.w), tail(s.beta), 3);
    for (int64_t q0 = 0; q0 < 10 - split; q0 += 3) {
      const int64_t q1 = std::min<int64_t>(10 - split, q0 + 3);
      CAPTURE(split, q0);
      const torch::Tensor got = path_block_scores(p, cached, q0, q1);
      const torch::Tensor want = expected.narrow(2, split + q0, q1 - q0).narrow(3, 0, split + q1);
      // Compare the causal entries only (key index <= query index).
      const torch::Tensor visible = (torch::arange(split + q1).unsqueeze(0) <=
                                     torch::arange(split + q0, split + q1).unsqueeze(1));
      REQUIRE_TENSORS_CLOSE(got * visible, want, 1e-12);
    }
    // The cache carried across the segment == the cache of the whole sequence.
    REQUIRE_TENSORS_CLOSE(path_transform_keys(cached, tail(s.k), tail(s.w), tail(s.beta), 3),
                          naive_cache(s.k, s.w, s.beta), 1e-12);
  }
}

TEST_CASE("PaTH layer: decoding token by token and in pieces == the whole sequence",
          "[attention][path]") {
  const int64_t window = GENERATE(0, 4);
  const int64_t Hkv = GENERATE(1, 2);
  CAPTURE(window, Hkv);
  torch::manual_seed(11);
  auto att = std::make_shared<Attention>(path_options(2, Hkv, window), 16,
                                         std::make_shared<NoScheme>(), true);
  att->to(torch::kDouble);
  const torch::Tensor x = torch::randn({2, 13, 16}, torch::kDouble);
  torch::NoGradGuard no_grad;
  const torch::Tensor whole = att->forward(x, torch::arange(13), nullptr);
  REQUIRE_TENSORS_CLOSE(test::decode_token_by_token(*att, x), whole, 1e-12);
  auto cache = att->make_cache();
  const torch::Tensor first = att->forward(x.narrow(1, 0, 5), torch::arange(5), cache.get());
  const torch::Tensor rest = att->forward(x.narrow(1, 5, 8), torch::arange(5, 13), cache.get());
  REQUIRE_TENSORS_CLOSE(torch::cat({first, rest}, 1), whole, 1e-12);
}

TEST_CASE("PaTH layer: zero transforms give plain attention, others do not", "[attention][path]") {
  torch::manual_seed(17);
  Attention path(path_options(2, 2), 16, std::make_shared<NoScheme>(), true);
  AttentionOptions plain_opts = path_options(2, 2);
  plain_opts.path = false;
  Attention plain(plain_opts, 16, std::make_shared<NoScheme>(), true);
  path.to(torch::kDouble);
  plain.to(torch::kDouble);
  torch::NoGradGuard no_grad;
  for (const auto& p : plain.named_parameters()) path.named_parameters()[p.key()].copy_(p.value());
  const torch::Tensor x = torch::randn({2, 9, 16}, torch::kDouble);
  const torch::Tensor pos = torch::arange(9);
  CHECK(test::max_abs_diff(path.forward(x, pos, nullptr), plain.forward(x, pos, nullptr)) > 1e-3);
  // w = L2norm(0) = 0: every H_t is the identity.
  for (const auto& p : path.named_parameters()) {
    if (p.key().rfind("w_proj", 0) == 0) p.value().zero_();
  }
  REQUIRE_TENSORS_CLOSE(path.forward(x, pos, nullptr), plain.forward(x, pos, nullptr), 1e-12);
  // The position knock-out removes the transforms too.
  path.named_parameters()["w_proj.1.weight"].normal_();
  AttentionAblation no_position;
  no_position.no_position = true;
  path.set_ablation(no_position);
  REQUIRE_TENSORS_CLOSE(path.forward(x, pos, nullptr), plain.forward(x, pos, nullptr), 1e-12);
}

TEST_CASE("PaTH layer: parameter gradients match finite differences", "[attention][path]") {
  torch::manual_seed(19);
  Attention att(path_options(2, 1, 0, 2), 8, std::make_shared<NoScheme>(), true);
  att.to(torch::kDouble);
  const torch::Tensor x = torch::randn({1, 6, 8}, torch::kDouble);
  const torch::Tensor weight = torch::randn({1, 6, 8}, torch::kDouble);
  const auto loss = [&] { return (att.forward(x, torch::arange(6), nullptr) * weight).sum(); };
  loss().backward();
  for (const char* name : {"w_proj.0.weight", "bt_proj.weight", "bt_proj.bias", "w_conv1d",
                           "k_proj.weight", "q_proj.weight"}) {
    CAPTURE(name);
    torch::Tensor p = att.named_parameters()[name];
    REQUIRE_TENSORS_CLOSE(p.grad(), test::numeric_grad(loss, p.detach()), 1e-7);
  }
}

TEST_CASE("PaTH layer: recomputing blocks in the backward == keeping them (values, gradients)",
          "[attention][path]") {
  // T5's learned bias (parameters read by a hook) and FoX's data bias (separable terms) on top.
  const std::string scheme = GENERATE(std::string("nope"), std::string("t5"), std::string("fox"));
  CAPTURE(scheme);
  AttentionOptions o = path_options(4, 2, 0, 4);
  const auto make = [&] {
    torch::manual_seed(23);
    auto att = std::make_shared<Attention>(
        o, 32, test::make_scheme(scheme, "{}", test::attention_context(4, 2, 8)), true);
    att->to(torch::kDouble);
    return att;
  };
  auto kept = make(), recomputed = make();
  kept->set_attend_path(AttendPath::kDense);
  recomputed->set_attend_path(AttendPath::kTiled);  // PaTH has no tiles: it recomputes
  torch::manual_seed(29);
  const torch::Tensor x0 = torch::randn({2, 15, 32}, torch::kDouble);
  const torch::Tensor weight = torch::randn({2, 15, 32}, torch::kDouble);
  torch::Tensor grads[2];
  torch::Tensor outs[2];
  Attention* layers[2] = {kept.get(), recomputed.get()};
  for (int i = 0; i < 2; ++i) {
    torch::Tensor x = x0.clone().requires_grad_();
    outs[i] = layers[i]->forward(x, torch::arange(15), nullptr);
    (outs[i] * weight).sum().backward();
    grads[i] = x.grad();
  }
  REQUIRE_TENSORS_CLOSE(outs[1], outs[0], 1e-12);
  REQUIRE_TENSORS_CLOSE(grads[1], grads[0], 1e-12);
  const auto kept_params = kept->named_parameters();
  for (const auto& p : recomputed->named_parameters()) {
    CAPTURE(p.key());
    REQUIRE(p.value().grad().defined());
    REQUIRE_TENSORS_CLOSE(p.value().grad(), kept_params[p.key()].grad(), 1e-12);
  }
}

TEST_CASE("PaTH config: path is read, refused bidirectional or with a bad chunk",
          "[attention][path][config]") {
  const std::string head = "model:\n  d_model: 16\n  layers: A\n  attention:\n";
  CHECK(test::model_options_error(head + "    path: true\n") == "");
  const std::string bidir = test::model_options_error(head + "    causal: false\n    path: true\n");
  CHECK_THAT(bidir, Catch::Contains("exp.yaml:6:") && Catch::Contains("model.attention.path") &&
                        Catch::Contains("needs causal: true"));
  const std::string chunk = test::model_options_error(head + "    path_chunk_size: 0\n");
  CHECK_THAT(chunk, Catch::Contains("exp.yaml:5:") &&
                        Catch::Contains("model.attention.path_chunk_size") &&
                        Catch::Contains("must be >= 1"));
  AttentionOptions o = path_options(2, 2);
  o.causal = false;
  CHECK_THROWS_WITH(Attention(o, 8, std::make_shared<NoScheme>(), true),
                    Catch::Contains("PaTH needs causal attention"));
}

}  // namespace path_attention_test
