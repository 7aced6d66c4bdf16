// RoPE (Su et al. 2021, RoFormer) through the `rope` plugin: relative property, norms, layouts,
// partial rotary, tiles and decoding steps.

#include <cmath>

#include "scheme_loader.h"

using namespace hybridlab;
using namespace hybridlab::test;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace rope_test {
TEST_CASE("rope: q·k depends only on m - n (seed lesson step 4)", "[position][rope]") {
  // ⟨R_m q, R_n k⟩ = ⟨R_{m+s} q, R_{n+s} k⟩ for random vectors, positions and shifts.
  torch::manual_seed(3);
  for (const char* layout : {"half", "interleaved"}) {
    auto rope = make_scheme("rope", std::string("{layout: ") + layout + "}", test_context(2, 64));
    const torch::Tensor q = torch::randn({2, 2, 8, 64}), k = torch::randn({2, 2, 8, 64});
    const torch::Tensor qp = torch::randint(0, 500, {8}, torch::kLong);
    const torch::Tensor kp = torch::randint(0, 500, {8}, torch::kLong);
    const auto [q0, k0] = rope->rotate(q, k, qp, kp);
    for (int64_t shift : {1, 17, 999}) {
      const auto [q1, k1] = rope->rotate(q, k, qp + shift, kp + shift);
      INFO("layout " << layout << ", shift " << shift);
      REQUIRE_TENSORS_CLOSE(scores(q0, k0), scores(q1, k1), 1e-5);
    }
    // ... and it does depend on m - n: moving only the keys changes the scores.
    const auto [q2, k2] = rope->rotate(q, k, qp, kp + 3);
    REQUIRE(max_abs_diff(scores(q0, k0), scores(q2, k2)) > 1e-2);
  }
}

TEST_CASE("rope: rotation preserves the norm of every vector and every pair", "[position][rope]") {
  torch::manual_seed(4);
  auto rope = make_scheme("rope", "{layout: half}", test_context(2, 64));
  const torch::Tensor q = torch::randn({1, 2, 16, 64}, torch::kDouble);
  const torch::Tensor pos = torch::arange(100, 116, torch::kLong);
  const auto [rq, rk] = rope->rotate(q, q, pos, pos);
  REQUIRE_TENSORS_CLOSE(rq.norm(2, -1), q.norm(2, -1), 1e-12);
  // Pairs (k, k + 32) keep their own norm in the half layout.
  auto pair_norms = [](const torch::Tensor& x) {
    return (x.narrow(-1, 0, 32).pow(2) + x.narrow(-1, 32, 32).pow(2)).sqrt();
  };
  REQUIRE_TENSORS_CLOSE(pair_norms(rq), pair_norms(q), 1e-12);
}

TEST_CASE("rope: worked example x = [1..8] at position 3, both layouts", "[position][rope]") {
  // Independent loop over the RoFormer formula: pair k, angle 3·10000^(-2k/8);
  // x_a' = x_a cos − x_b sin, x_b' = x_b cos + x_a sin. Interleaved pairs (2k, 2k+1), half
  // pairs (k, k+4).
  const torch::Tensor x = torch::arange(1, 9, torch::kDouble).view({1, 1, 1, 8});
  std::vector<double> inter(8), half(8);
  for (int k = 0; k < 4; ++k) {
    const double a = 3 * std::pow(10000.0, -2.0 * k / 8), c = std::cos(a), s = std::sin(a);
    const double xa = 2 * k + 1, xb = 2 * k + 2;  // interleaved pair values
    inter[2 * k] = xa * c - xb * s;
    inter[2 * k + 1] = xb * c + xa * s;
    const double ha = k + 1, hb = k + 5;  // half pair values
    half[k] = ha * c - hb * s;
    half[k + 4] = hb * c + ha * s;
  }
  // e.g. interleaved pair 0: (cos 3 − 2 sin 3, 2 cos 3 + sin 3) = (−1.27223, −1.83886).
  REQUIRE(std::abs(inter[0] - (-1.2722325)) < 1e-6);
  for (const auto& [layout, want] : {std::pair{"interleaved", inter}, std::pair{"half", half}}) {
    auto rope = make_scheme("rope", std::string("{layout: ") + layout + "}", test_context(1, 8));
    const auto [rq, rk] = rope->rotate(x, x, positions({3}), positions({3}));
    INFO("layout " << layout);
    REQUIRE_TENSORS_CLOSE(rq.flatten(), torch::tensor(want, torch::kDouble), 1e-12);
  }
}

TEST_CASE("rope: the two layouts agree after the matching channel permutation",
          "[position][rope]") {
  // HF's Llama converter: interleaved RoPE on x equals rotate_half RoPE on x with channels
  // gathered evens-then-odds (positional_schemes.md §6).
  torch::manual_seed(5);
  auto inter = make_scheme("rope", "{layout: interleaved}", test_context(2, 32));
  auto half = make_scheme("rope", "{layout: half}", test_context(2, 32));
  const torch::Tensor perm =
      torch::cat({torch::arange(0, 32, 2, torch::kLong), torch::arange(1, 32, 2, torch::kLong)});
  const torch::Tensor q = torch::randn({2, 2, 10, 32}), k = torch::randn({2, 2, 10, 32});
  const torch::Tensor pos = torch::arange(40, 50, torch::kLong);
  const auto [qi, ki] = inter->rotate(q, k, pos, pos);
  const auto [qh, kh] = half->rotate(q.index_select(-1, perm), k.index_select(-1, perm), pos, pos);
  REQUIRE_TENSORS_CLOSE(qi.index_select(-1, perm), qh, 1e-6);
  REQUIRE_TENSORS_CLOSE(ki.index_select(-1, perm), kh, 1e-6);
  // Without the permutation they differ: the conventions are not interchangeable.
  REQUIRE(max_abs_diff(qi, half->rotate(q, k, pos, pos).first) > 1e-2);
}

TEST_CASE("rope: partial rotary leaves the other channels untouched", "[position][rope]") {
  // partial_rotary_factor 0.25 at head_dim 64: d = 16 rotated channels with θ_k = base^(-2k/16)
  // (HF computes inv_freq over the rotary dim only), channels 16..63 pass through.
  torch::manual_seed(6);
  for (const char* layout : {"half", "interleaved"}) {
    auto part =
        make_scheme("rope", std::string("{partial_rotary_factor: 0.25, layout: ") + layout + "}",
                    test_context(2, 64));
    auto full16 = make_scheme("rope", std::string("{layout: ") + layout + "}", test_context(2, 16));
    const torch::Tensor q = torch::randn({1, 2, 12, 64});
    const torch::Tensor pos = torch::arange(7, 19, torch::kLong);
    const auto [rq, rk] = part->rotate(q, q, pos, pos);
    INFO("layout " << layout);
    REQUIRE(max_abs_diff(rq.narrow(-1, 16, 48), q.narrow(-1, 16, 48)) == 0.0);
    const torch::Tensor first = q.narrow(-1, 0, 16).contiguous();
    REQUIRE_TENSORS_CLOSE(rq.narrow(-1, 0, 16), full16->rotate(first, first, pos, pos).first, 1e-6);
    REQUIRE(max_abs_diff(rq.narrow(-1, 0, 16), first) > 1e-2);  // really rotated
  }
}

TEST_CASE("rope: query tiles, decoding steps and grouped keys", "[position][rope]") {
  torch::manual_seed(7);
  auto rope = make_scheme("rope", "", test_context(4, 32));
  const torch::Tensor q = torch::randn({2, 4, 32, 32});
  const torch::Tensor k = torch::randn({2, 2, 32, 32});  // 2 kv heads (GQA)
  const torch::Tensor pos = torch::arange(32, torch::kLong);
  const auto [fq, fk] = rope->rotate(q, k, pos, pos);
  REQUIRE(fq.sizes() == q.sizes());
  REQUIRE(fk.sizes() == k.sizes());
  // A query block 8..15 with all keys.
  const auto [tq, tk] = rope->rotate(q.slice(2, 8, 16), k, pos.slice(0, 8, 16), pos);
  REQUIRE_TENSORS_CLOSE(tq, fq.slice(2, 8, 16), 1e-6);
  REQUIRE_TENSORS_CLOSE(tk, fk, 1e-6);
  // One decoding step: the query at position 31, the unrotated cache 0..31.
  const auto [dq, dk] = rope->rotate(q.slice(2, 31, 32), k, positions({31}), pos);
  REQUIRE_TENSORS_CLOSE(dq, fq.slice(2, 31, 32), 1e-6);
  // q and k as the attention layer makes them: [B,T,H,Dh] projections transposed to [B,H,T,Dh]
  // (not contiguous), in both layouts.
  for (const char* layout : {"half", "interleaved"}) {
    auto r = make_scheme("rope", std::string("{layout: ") + layout + "}", test_context(4, 32));
    const torch::Tensor qt = q.transpose(1, 2).contiguous().transpose(1, 2);
    const torch::Tensor kt = k.transpose(1, 2).contiguous().transpose(1, 2);
    REQUIRE_FALSE(qt.is_contiguous());
    const auto [cq, ck] = r->rotate(q, k, pos, pos);
    const auto [nq, nk] = r->rotate(qt, kt, pos, pos);
    INFO("layout " << layout);
    REQUIRE_TENSORS_CLOSE(nq, cq, 0.0);
    REQUIRE_TENSORS_CLOSE(nk, ck, 0.0);
  }
  // bfloat16 in, bfloat16 out.
  const auto [bq, bk] = rope->rotate(q.to(torch::kBFloat16), k.to(torch::kBFloat16), pos, pos);
  REQUIRE(bq.scalar_type() == torch::kBFloat16);
  REQUIRE_TENSORS_CLOSE(bq.to(torch::kFloat), fq, 0.05);
}

TEST_CASE("rope: rotate_num_heads rotates the last heads and leaves the others NoPE",
          "[position][rope]") {
  // x-transformers' rotate_num_heads: the last n heads are rotated, the first H − n untouched.
  torch::manual_seed(8);
  const torch::Tensor pos = torch::arange(5, 15, torch::kLong);
  auto all = make_scheme("rope", "", test_context(4, 16));
  {
    auto some = make_scheme("rope", "{rotate_num_heads: 3}", test_context(4, 16));
    const torch::Tensor q = torch::randn({2, 4, 10, 16}), k = torch::randn({2, 4, 10, 16});
    const auto [sq, sk] = some->rotate(q, k, pos, pos);
    const auto [aq, ak] = all->rotate(q, k, pos, pos);
    REQUIRE(max_abs_diff(sq.narrow(1, 0, 1), q.narrow(1, 0, 1)) == 0.0);
    REQUIRE(max_abs_diff(sk.narrow(1, 0, 1), k.narrow(1, 0, 1)) == 0.0);
    REQUIRE(max_abs_diff(sq.narrow(1, 1, 3), aq.narrow(1, 1, 3)) == 0.0);
    REQUIRE(max_abs_diff(sk.narrow(1, 1, 3), ak.narrow(1, 1, 3)) == 0.0);
    REQUIRE(max_abs_diff(sq.narrow(1, 1, 3), q.narrow(1, 1, 3)) > 1e-2);
    // The NoPE head's logits do not depend on positions; the rotated ones depend on m − n.
    const auto [tq, tk] = some->rotate(q, k, pos, pos + 4);
    const torch::Tensor s0 = torch::matmul(sq, sk.transpose(-2, -1));
    const torch::Tensor s1 = torch::matmul(tq, tk.transpose(-2, -1));
    REQUIRE(max_abs_diff(s0.narrow(1, 0, 1), s1.narrow(1, 0, 1)) == 0.0);
    REQUIRE(max_abs_diff(s0.narrow(1, 1, 3), s1.narrow(1, 1, 3)) > 1e-2);
  }
  // GQA, 4 query heads on 2 key heads: rotate_num_heads 2 rotates query heads 2, 3 and key
  // head 1 (the one they read); query heads 0, 1 and key head 0 are NoPE.
  auto gqa_ctx = test_context(4, 16);
  gqa_ctx.n_kv_heads = 2;
  auto gqa = make_scheme("rope", "{rotate_num_heads: 2}", gqa_ctx);
  const torch::Tensor q = torch::randn({1, 4, 10, 16}), k = torch::randn({1, 2, 10, 16});
  const auto [gq, gk] = gqa->rotate(q, k, pos, pos);
  const auto [aq, ak] = all->rotate(q, k, pos, pos);
  REQUIRE(max_abs_diff(gq.narrow(1, 0, 2), q.narrow(1, 0, 2)) == 0.0);
  REQUIRE(max_abs_diff(gk.narrow(1, 0, 1), k.narrow(1, 0, 1)) == 0.0);
  REQUIRE(max_abs_diff(gq.narrow(1, 2, 2), aq.narrow(1, 2, 2)) == 0.0);
  REQUIRE(max_abs_diff(gk.narrow(1, 1, 1), ak.narrow(1, 1, 1)) == 0.0);
  // inspect marks the rotated heads.
  REQUIRE_TENSORS_CLOSE(inspect_table(*gqa, 4, "rotated_heads").flatten(),
                        torch::tensor({0.0f, 0.0f, 1.0f, 1.0f}), 0.0);
}

}  // namespace rope_test
