// The attention layer: the blocked path against an independent loop (and plain == blocked),
// GQA head mapping, sliding windows, the positional hooks (with a probe scheme defined here),
// KV-cache decoding and causality for every scheme the plugin folder provides.

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <map>

#include "hybridlab/position.h"
#include "layers/attention.h"
#include "layers_test_util.h"

using namespace hybridlab;
using hybridlab::test::max_abs_diff;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace attention_test {
namespace {

// A scheme exercising every attention-side hook, with simple closed forms the oracle below
// recomputes: rotate scales q by (1 + 0.01·pos) and k by (1 − 0.004·pos); logit_bias is
// −0.1·(h+1)·|i−j|; relative tables aK, aV [2R+1, Dh] indexed by clip(j−i, −R, R) + R.
class ProbeScheme : public PositionScheme {
 public:
  ProbeScheme(int64_t n_heads, int64_t head_dim, uint32_t hooks)
      : n_heads_(n_heads), hooks_(hooks) {
    aK = register_parameter("aK", torch::randn({2 * R + 1, head_dim}) * 0.3);
    aV = register_parameter("aV", torch::randn({2 * R + 1, head_dim}) * 0.3);
  }
  std::string name() const override { return "probe"; }
  uint32_t hooks() const override { return hooks_; }
  std::pair<torch::Tensor, torch::Tensor> rotate(const torch::Tensor& q, const torch::Tensor& k,
                                                 const torch::Tensor& q_pos,
                                                 const torch::Tensor& k_pos) override {
    rotate_key_counts.push_back(k_pos.size(0));
    const auto qs = (1 + 0.01 * q_pos.to(q.scalar_type())).view({1, 1, -1, 1});
    const auto ks = (1 - 0.004 * k_pos.to(k.scalar_type())).view({1, 1, -1, 1});
    return {q * qs, k * ks};
  }
  torch::Tensor logit_bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos) override {
    const auto d = (q_pos.unsqueeze(1) - k_pos.unsqueeze(0)).abs().to(torch::kFloat);
    const auto slopes = (torch::arange(n_heads_, torch::kFloat) + 1) * 0.1;
    return -slopes.view({-1, 1, 1}) * d.unsqueeze(0);
  }
  torch::Tensor index(const torch::Tensor& q_pos, const torch::Tensor& k_pos) const {
    return (k_pos.unsqueeze(0) - q_pos.unsqueeze(1)).clamp(-R, R) + R;  // [Tq,Tk]
  }
  torch::Tensor relative_logits(const torch::Tensor& q, const torch::Tensor& q_pos,
                                const torch::Tensor& k_pos) override {
    const auto table = aK.index({index(q_pos, k_pos)}).to(q.scalar_type());  // [Tq,Tk,Dh]
    return torch::einsum("bhid,ijd->bhij", {q, table});
  }
  torch::Tensor relative_values(const torch::Tensor& probs, const torch::Tensor& q_pos,
                                const torch::Tensor& k_pos) override {
    const auto table = aV.index({index(q_pos, k_pos)}).to(probs.scalar_type());
    return torch::einsum("bhij,ijd->bhid", {probs, table});
  }
  static constexpr int64_t R = 3;
  torch::Tensor aK, aV;
  std::vector<int64_t> rotate_key_counts;

 private:
  int64_t n_heads_;
  uint32_t hooks_;
};

using test::NoScheme;

AttentionOptions opts(int64_t H, int64_t Hkv, int64_t window = 0, bool causal = true,
                      int64_t block = 512) {
  AttentionOptions o;
  o.n_heads = H;
  o.n_kv_heads = Hkv;
  o.window = window;
  o.causal = causal;
  o.block_size = block;
  return o;
}

// softmax((q·k + q·aK)/√Dh + bias) v + Σ p·aV, written as explicit loops in double, with query head
// h reading kv head h / (H/Hkv) and query i at key index Tk−Tq+i.
torch::Tensor oracle(const torch::Tensor& q_in, const torch::Tensor& k_in,
                     const torch::Tensor& v_in, const torch::Tensor& q_pos,
                     const torch::Tensor& k_pos, int64_t window, bool causal, ProbeScheme* probe) {
  const auto q = q_in.to(torch::kDouble), k = k_in.to(torch::kDouble), v = v_in.to(torch::kDouble);
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Dh = q.size(3);
  const int64_t Hkv = k.size(1), Tk = k.size(2), groups = H / Hkv;
  const uint32_t hooks = probe ? probe->hooks() : 0;
  torch::Tensor out = torch::zeros({B, H, Tq, Dh}, torch::kDouble);
  auto qa = q.accessor<double, 4>(), ka = k.accessor<double, 4>(), va = v.accessor<double, 4>();
  auto oa = out.accessor<double, 4>();
  auto qp = q_pos.accessor<int64_t, 1>(), kp = k_pos.accessor<int64_t, 1>();
  torch::Tensor aK, aV;
  if (probe) {
    aK = probe->aK.detach().to(torch::kDouble);
    aV = probe->aV.detach().to(torch::kDouble);
  }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tq; ++i) {
        std::vector<double> s(Tk, -std::numeric_limits<double>::infinity());
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < Tk; ++j) {
          const int64_t d = qp[i] - kp[j];
          bool ok = !causal || d >= 0;
          if (window > 0) ok = ok && std::abs(d) < window;
          if (!ok) continue;
          const int64_t rel =
              std::max<int64_t>(-ProbeScheme::R, std::min<int64_t>(ProbeScheme::R, -d)) +
              ProbeScheme::R;
          double dot = 0;
          for (int64_t c = 0; c < Dh; ++c) {
            dot += qa[b][h][i][c] * ka[b][h / groups][j][c];
            if (hooks & kHookRelative) dot += qa[b][h][i][c] * aK[rel][c].item<double>();
          }
          dot /= std::sqrt(static_cast<double>(Dh));
          if (hooks & kHookLogitBias) dot += -0.1 * (h + 1) * std::abs(d);
          s[j] = dot;
          mx = std::max(mx, dot);
        }
        double z = 0;
        for (double& x : s) z += (x = std::exp(x - mx));
        for (int64_t j = 0; j < Tk; ++j) {
          const double p = s[j] / z;
          if (p == 0) continue;
          const int64_t d = qp[i] - kp[j];
          const int64_t rel =
              std::max<int64_t>(-ProbeScheme::R, std::min<int64_t>(ProbeScheme::R, -d)) +
              ProbeScheme::R;
          for (int64_t c = 0; c < Dh; ++c) {
            oa[b][h][i][c] += p * va[b][h / groups][j][c];
            if (hooks & kHookRelative) oa[b][h][i][c] += p * aV[rel][c].item<double>();
          }
        }
      }
  return out;
}

}  // namespace

TEST_CASE("attention core: blocked == plain == explicit loop (GQA, windows, bidirectional)",
          "[attention]") {
  const int64_t window = GENERATE(0, 5);
  const bool causal = GENERATE(true, false);
  const int64_t block = GENERATE(1, 7, 16, 1000);
  CAPTURE(window, causal, block);
  torch::manual_seed(10);
  Attention att(opts(4, 2, window, causal, block), 32, std::make_shared<NoScheme>(), true);
  const torch::Tensor q = torch::randn({2, 4, 23, 8}, torch::kDouble);
  const torch::Tensor k = torch::randn({2, 2, 23, 8}, torch::kDouble);
  const torch::Tensor v = torch::randn({2, 2, 23, 8}, torch::kDouble);
  const torch::Tensor pos = torch::arange(23);
  const torch::Tensor blocked = att.attend(q, k, v, pos, pos, block, /*allow_fused=*/false);
  const torch::Tensor plain = att.attend(q, k, v, pos, pos, 1 << 20, false);
  REQUIRE_TENSORS_CLOSE(blocked, plain, 1e-12);
  REQUIRE_TENSORS_CLOSE(plain, oracle(q, k, v, pos, pos, window, causal, nullptr), 1e-12);
  // The default path (fused where available) agrees in fp32 to 1e-5.
  const torch::Tensor fused = att.attend(q.to(torch::kFloat), k.to(torch::kFloat),
                                         v.to(torch::kFloat), pos, pos, block, true);
  REQUIRE_TENSORS_CLOSE(fused, plain, 1e-5);
}

TEST_CASE("attention: positional hooks enter where the design says (probe scheme)", "[attention]") {
  const uint32_t hooks = GENERATE(uint32_t(kHookLogitBias), uint32_t(kHookRelative),
                                  uint32_t(kHookLogitBias | kHookRelative | kHookRotate));
  const int64_t block = GENERATE(4, 1000);
  CAPTURE(hooks, block);
  torch::manual_seed(11);
  auto probe = std::make_shared<ProbeScheme>(4, 8, hooks);
  Attention att(opts(4, 1, 0, true, block), 32, probe, true);
  const torch::Tensor q = torch::randn({1, 4, 13, 8});
  const torch::Tensor k = torch::randn({1, 1, 19, 8});
  const torch::Tensor v = torch::randn({1, 1, 19, 8});
  const torch::Tensor k_pos = torch::arange(19) + 5;  // shifted positions, 6 cached keys
  const torch::Tensor q_pos = k_pos.narrow(0, 6, 13);
  const torch::Tensor out = att.attend(q, k, v, q_pos, k_pos, block);
  REQUIRE_TENSORS_CLOSE(out, oracle(q, k, v, q_pos, k_pos, 0, true, probe.get()), 1e-5);
}

TEST_CASE("attention: rotate is called once per call with all keys, cache keeps them unrotated",
          "[attention]") {
  torch::manual_seed(12);
  auto probe = std::make_shared<ProbeScheme>(4, 8, kHookRotate | kHookLogitBias | kHookRelative);
  AttentionOptions o = opts(4, 2, 0, true, 4);
  o.qk_norm = true;
  o.output_gate = true;
  Attention att(o, 32, probe, true);
  const torch::Tensor x = torch::randn({2, 15, 32});
  const torch::Tensor pos = torch::arange(15);
  const torch::Tensor whole = att.forward(x, pos, nullptr);
  REQUIRE(probe->rotate_key_counts == std::vector<int64_t>{15});
  probe->rotate_key_counts.clear();
  auto cache = att.make_cache();
  std::vector<torch::Tensor> outs = {
      att.forward(x.narrow(1, 0, 9), pos.narrow(0, 0, 9), cache.get())};
  for (int64_t t = 9; t < 15; ++t)
    outs.push_back(att.forward(x.narrow(1, t, 1), pos.narrow(0, t, 1), cache.get()));
  REQUIRE(probe->rotate_key_counts == std::vector<int64_t>{9, 10, 11, 12, 13, 14, 15});
  REQUIRE_TENSORS_CLOSE(torch::cat(outs, 1), whole, 1e-5);
}

TEST_CASE("attention: a sliding window hides tokens beyond it, its KV cache stays bounded",
          "[attention]") {
  torch::manual_seed(13);
  const int64_t W = 4;
  Attention att(opts(2, 2, W, true, 3), 16, std::make_shared<NoScheme>(), true);
  torch::Tensor x = torch::randn({1, 20, 16});
  const torch::Tensor pos = torch::arange(20);
  const torch::Tensor y = att.forward(x, pos, nullptr);
  torch::Tensor x2 = x.clone();
  x2.select(1, 6).add_(5.0);  // visible to queries 6..9 only
  const torch::Tensor y2 = att.forward(x2, pos, nullptr);
  REQUIRE_TENSORS_CLOSE(y2.narrow(1, 0, 6), y.narrow(1, 0, 6), 0.0);
  for (int64_t t = 6; t < 6 + W; ++t) REQUIRE(max_abs_diff(y2.select(1, t), y.select(1, t)) > 1e-4);
  REQUIRE_TENSORS_CLOSE(y2.narrow(1, 6 + W, 20 - 6 - W), y.narrow(1, 6 + W, 20 - 6 - W), 1e-6);
  // Decoding with the window: the cache never holds more than W keys and matches the whole pass.
  auto cache = att.make_cache();
  std::vector<torch::Tensor> outs;
  for (int64_t t = 0; t < 20; ++t) {
    outs.push_back(att.forward(x.narrow(1, t, 1), pos.narrow(0, t, 1), cache.get()));
    REQUIRE(static_cast<AttentionCache*>(cache.get())->k.size(2) <= W);
  }
  REQUIRE_TENSORS_CLOSE(torch::cat(outs, 1), y, 1e-5);
}

TEST_CASE(
    "attention: every discovered scheme decodes with a KV cache == one forward, and is causal",
    "[attention][plugins]") {
  auto host = hybridlab::test::test_host();
  const auto records = hybridlab::test::discovered_schemes(*host);
  REQUIRE(!records.empty());
  // Each scheme also under PaTH attention where it combines with it (causal, no rotation).
  const bool path = GENERATE(false, true);
  for (const auto& record : records) {
    const std::string& name = record.name;
    for (bool causal : {true, false}) {
      CAPTURE(name, causal, path);
      if (path && !causal) continue;
      PositionContext ctx;
      ctx.d_model = 32;
      ctx.n_heads = 4;
      ctx.n_kv_heads = 2;
      ctx.head_dim = 8;
      ctx.causal = causal;
      ctx.train_length = 64;
      ctx.max_length = 128;
      ctx.layer_index = 0;
      Section params = Config::parse("{}", "test.yaml").root();
      std::shared_ptr<PositionScheme> scheme;
      try {
        scheme = host->create(name, params, ctx);
      } catch (const UserError& e) {
        // A scheme that serves only causal (or only bidirectional) attention may refuse.
        WARN("scheme " << name << " (causal=" << causal << ") not built: " << e.what());
        continue;
      }
      if (scheme->hooks() & kHookEmbed) continue;  // input schemes: covered by the model tests
      if (path && (scheme->hooks() & kHookRotate)) continue;
      const auto with_path = [&](AttentionOptions o) {
        o.path = path;
        o.path_chunk_size = 4;  // several chunks and query blocks in 21 tokens
        return o;
      };
      torch::manual_seed(14);
      Attention att(with_path(opts(4, 2, 0, causal, 8)), 32, scheme, true);
      const torch::Tensor x = torch::randn({2, 21, 32});
      const torch::Tensor pos = torch::arange(21);
      const torch::Tensor whole = att.forward(x, pos, nullptr);
      REQUIRE(torch::isfinite(whole).all().item<bool>());
      // Blocked == plain for this scheme.
      AttentionOptions big = with_path(opts(4, 2, 0, causal, 4096));
      Attention plain(big, 32, scheme, false);
      {
        torch::NoGradGuard ng;
        auto src = att.named_parameters(), dst = plain.named_parameters();
        for (auto& p : dst) p.value().copy_(src[p.key()]);
      }
      REQUIRE_TENSORS_CLOSE(plain.forward(x, pos, nullptr), whole, 1e-5);
      if (!causal) continue;
      auto cache = att.make_cache();
      std::vector<torch::Tensor> outs = {
          att.forward(x.narrow(1, 0, 12), pos.narrow(0, 0, 12), cache.get())};
      for (int64_t t = 12; t < 21; ++t)
        outs.push_back(att.forward(x.narrow(1, t, 1), pos.narrow(0, t, 1), cache.get()));
      REQUIRE_TENSORS_CLOSE(torch::cat(outs, 1), whole, 1e-5);
      torch::Tensor x2 = x.clone();
      x2.select(1, 15).add_(2.0);
      const torch::Tensor changed = att.forward(x2, pos, nullptr);
      REQUIRE_TENSORS_CLOSE(changed.narrow(1, 0, 15), whole.narrow(1, 0, 15), 1e-6);
      REQUIRE(max_abs_diff(changed.select(1, 15), whole.select(1, 15)) > 1e-4);
    }
  }
}

namespace {

// Copies the projections of `from` into `to` (layers of the same shapes, other schemes).
void copy_projections(Attention& from, Attention& to) {
  torch::NoGradGuard no_grad;
  const auto src = from.named_parameters(true);
  for (auto& p : to.named_parameters(true)) p.value().copy_(src[p.key()]);
}

}  // namespace

TEST_CASE(
    "attention ablation: none changes nothing, no_position == the same weights without "
    "hooks, window == a layer built with it",
    "[attention][ablation]") {
  torch::manual_seed(14);
  auto probe = std::make_shared<ProbeScheme>(4, 8, kHookRotate | kHookLogitBias | kHookRelative);
  Attention att(opts(4, 2, 0, true, 5), 32, probe, true);
  const torch::Tensor x = torch::randn({2, 17, 32});
  const torch::Tensor pos = torch::arange(17);
  const torch::Tensor trained = att.forward(x, pos, nullptr);
  att.set_ablation(AttentionAblation{});
  REQUIRE(torch::equal(att.forward(x, pos, nullptr), trained));

  Attention bare(opts(4, 2, 0, true, 5), 32, std::make_shared<NoScheme>(), true);
  copy_projections(att, bare);
  att.set_ablation(AttentionAblation{true, 0});
  const torch::Tensor no_position = att.forward(x, pos, nullptr);
  REQUIRE(torch::equal(no_position, bare.forward(x, pos, nullptr)));
  REQUIRE(max_abs_diff(no_position, trained) > 1e-3);  // the hooks did matter

  // A window of 6 at evaluation == a layer built with window 6; a wider one on a trained window
  // keeps the trained one.
  Attention windowed(opts(4, 2, 6, true, 5), 32, probe, false);
  copy_projections(att, windowed);
  att.set_ablation(AttentionAblation{false, 6});
  REQUIRE(torch::equal(att.forward(x, pos, nullptr), windowed.forward(x, pos, nullptr)));
  windowed.set_ablation(AttentionAblation{false, 100});
  REQUIRE(torch::equal(windowed.forward(x, pos, nullptr), att.forward(x, pos, nullptr)));
  att.set_ablation(AttentionAblation{});
  REQUIRE(torch::equal(att.forward(x, pos, nullptr), trained));
}

TEST_CASE("attention probe: sees every block's softmax weights, masked, rows summing to 1",
          "[attention][ablation]") {
  torch::manual_seed(15);
  Attention att(opts(2, 2, 0, true, 4), 16, std::make_shared<NoScheme>(), true);
  const torch::Tensor q = torch::randn({1, 2, 10, 8}, torch::kDouble);
  const torch::Tensor k = torch::randn({1, 2, 10, 8}, torch::kDouble);
  const torch::Tensor v = torch::randn({1, 2, 10, 8}, torch::kDouble);
  const torch::Tensor pos = torch::arange(10);
  std::vector<torch::Tensor> seen;
  int64_t rows = 0;
  att.set_probe([&](const torch::Tensor& p, const torch::Tensor& qp, const torch::Tensor& kp) {
    // Independent weights: softmax(q kᵀ/√8) over the visible keys of these queries.
    const torch::Tensor s =
        torch::matmul(q.index_select(2, qp), k.index_select(2, kp).transpose(2, 3)) /
        std::sqrt(8.0);
    const torch::Tensor visible = (qp.unsqueeze(1) - kp.unsqueeze(0)).ge(0);
    const torch::Tensor expect =
        torch::softmax(s.masked_fill(visible.logical_not(), -INFINITY), -1);
    REQUIRE_TENSORS_CLOSE(p, expect, 1e-12);
    REQUIRE_TENSORS_CLOSE(p.sum(-1), torch::ones({1, 2, qp.size(0)}, torch::kDouble), 1e-12);
    rows += qp.size(0);
    seen.push_back(p);
  });
  const torch::Tensor with_probe = att.attend(q, k, v, pos, pos, 4, false);
  REQUIRE(seen.size() == 3);  // blocks of 4, 4 and 2 queries
  REQUIRE(rows == 10);
  att.set_probe({});
  REQUIRE(torch::equal(att.attend(q, k, v, pos, pos, 4, false), with_probe));
  REQUIRE(seen.size() == 3);
}

TEST_CASE("attention short conv: q, k, v through a causal depthwise conv and SiLU before the heads",
          "[attention][short_conv]") {
  torch::manual_seed(71);
  const int64_t B = 2, T = 9, D = 16, H = 4, Hkv = 2, Dh = 4, K = 3;
  AttentionOptions o = opts(H, Hkv);
  o.head_dim = Dh;
  o.use_short_conv = true;
  o.conv_size = K;
  o.output_gate = GENERATE(false, true);
  Attention att(o, D, std::make_shared<NoScheme>(), true);
  att.to(torch::kDouble);
  const torch::Tensor x = torch::randn({B, T, D}, torch::kDouble).requires_grad_(true);
  const torch::Tensor pos = torch::arange(T);

  // Reference, from the layer's weights with LibTorch's own grouped convolution: F.conv1d with
  // groups = C over the projections left-padded by K-1 zeros (weight tap K-1 meets token t),
  // SiLU, then the explicit-loop attention oracle above and the output projection.
  std::map<std::string, torch::Tensor> w;
  for (const auto& p : att.named_parameters()) w[p.key()] = p.value();
  REQUIRE(w.count("q_conv"));
  REQUIRE(w.at("q_conv").sizes() == torch::IntArrayRef({H * Dh, 1, K}));
  REQUIRE(w.at("k_conv").sizes() == torch::IntArrayRef({Hkv * Dh, 1, K}));
  REQUIRE(w.at("v_conv").sizes() == torch::IntArrayRef({Hkv * Dh, 1, K}));
  const auto conv = [&](const torch::Tensor& in, const torch::Tensor& weight) {  // [B,T,C]
    const torch::Tensor padded = torch::constant_pad_nd(in.transpose(1, 2), {K - 1, 0});
    return torch::silu(torch::conv1d(padded, weight, c10::nullopt, std::vector<int64_t>{1},
                                     std::vector<int64_t>{0}, std::vector<int64_t>{1}, in.size(2))
                           .transpose(1, 2));
  };
  torch::Tensor qp = torch::matmul(x, w.at("q_proj.weight").t()), gate;
  if (o.output_gate) {
    const auto parts = qp.view({B, T, H, 2 * Dh}).split(Dh, -1);
    qp = parts[0].reshape({B, T, H * Dh});
    gate = parts[1];
  }
  const torch::Tensor q = conv(qp, w.at("q_conv")).view({B, T, H, Dh}).transpose(1, 2);
  const torch::Tensor k = conv(torch::matmul(x, w.at("k_proj.weight").t()), w.at("k_conv"))
                              .view({B, T, Hkv, Dh})
                              .transpose(1, 2);
  const torch::Tensor v = conv(torch::matmul(x, w.at("v_proj.weight").t()), w.at("v_conv"))
                              .view({B, T, Hkv, Dh})
                              .transpose(1, 2);
  torch::Tensor heads;
  {
    torch::NoGradGuard no_grad;
    heads = oracle(q, k, v, pos, pos, 0, true, nullptr).transpose(1, 2);  // [B,T,H,Dh]
  }
  if (o.output_gate) heads = heads * torch::sigmoid(gate.detach());
  const torch::Tensor ref =
      torch::matmul(heads.reshape({B, T, H * Dh}), w.at("o_proj.weight").detach().t());

  const torch::Tensor y = att.forward(x, pos, nullptr);
  REQUIRE_TENSORS_CLOSE(y, ref, 1e-10);
  // The first token sees only itself; a later token's output moves when an earlier input moves
  // within the kernel's reach, and never when a later one does (causal).
  {
    torch::NoGradGuard no_grad;
    torch::Tensor x2 = x.detach().clone();
    x2.select(1, 6).add_(1.0);
    const torch::Tensor y2 = att.forward(x2, pos, nullptr);
    CHECK(max_abs_diff(y2.narrow(1, 0, 6), y.detach().narrow(1, 0, 6)) < 1e-12);
    CHECK(max_abs_diff(y2.narrow(1, 6, 3), y.detach().narrow(1, 6, 3)) > 1e-6);
  }

  // Gradients of the fused taps == autograd through the reference convolution, for the input
  // and each convolution weight.
  const torch::Tensor probe = torch::randn({B, T, D}, torch::kDouble);
  const auto grads = torch::autograd::grad({(y * probe).sum()},
                                           {x, w.at("q_conv"), w.at("k_conv"), w.at("v_conv")});
  // The reference, with autograd through q/k/v (the oracle has none): torch's own attention.
  const int64_t groups = H / Hkv;
  const torch::Tensor kk = k.repeat_interleave(groups, 1), vv = v.repeat_interleave(groups, 1);
  const torch::Tensor scores = torch::matmul(q, kk.transpose(-1, -2)) / std::sqrt(double(Dh));
  const torch::Tensor mask = torch::ones({T, T}, torch::kBool).triu(1);
  torch::Tensor ho =
      torch::matmul(torch::softmax(scores.masked_fill(mask, -INFINITY), -1), vv).transpose(1, 2);
  if (o.output_gate) ho = ho * torch::sigmoid(gate);
  const torch::Tensor ref2 = torch::matmul(ho.reshape({B, T, H * Dh}), w.at("o_proj.weight").t());
  REQUIRE_TENSORS_CLOSE(ref2, ref, 1e-10);
  const auto ref_grads = torch::autograd::grad({(ref2 * probe).sum()},
                                               {x, w.at("q_conv"), w.at("k_conv"), w.at("v_conv")});
  for (size_t i = 0; i < grads.size(); ++i) REQUIRE_TENSORS_CLOSE(grads[i], ref_grads[i], 1e-10);

  // Decoding: a prefix of 2 (shorter than the kernel), then one token at a time == whole.
  torch::NoGradGuard no_grad;
  auto cache = att.make_cache();
  std::vector<torch::Tensor> outs = {
      att.forward(x.narrow(1, 0, 2), pos.narrow(0, 0, 2), cache.get())};
  for (int64_t t = 2; t < T; ++t)
    outs.push_back(att.forward(x.narrow(1, t, 1), pos.narrow(0, t, 1), cache.get()));
  REQUIRE_TENSORS_CLOSE(torch::cat(outs, 1), y.detach(), 1e-10);
  auto* ac = dynamic_cast<AttentionCache*>(cache.get());
  REQUIRE(ac->conv_q.sizes() == torch::IntArrayRef({B, K - 1, H * Dh}));
  // Its size in `model summary`: the K-1 taps of q, k and v are fixed-size decoding state, and
  // the convolution's 2K FLOPs per channel and token.
  const MixerInfo info = att.info(T);
  REQUIRE(info.state_floats == (K - 1) * (H + 2 * Hkv) * Dh);
  AttentionOptions plain = o;
  plain.use_short_conv = false;
  const MixerInfo plain_info = Attention(plain, D, std::make_shared<NoScheme>(), true).info(T);
  REQUIRE(plain_info.state_floats == 0);
  REQUIRE(info.flops_per_token - plain_info.flops_per_token ==
          Approx(2.0 * K * (H + 2 * Hkv) * Dh));
}

}  // namespace attention_test
