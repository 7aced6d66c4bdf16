// The tiled attention path (layers/kernels/attention_tiled.h) against the dense per-block reference
// path of Attention::attend: values and the gradients of q, k, v and of every parameter of the
// positional scheme, in fp64 (relative error <= 1e-10) and fp32 (<= 1e-5); causal and
// bidirectional, windows smaller and larger than a tile, GQA, cached keys, lengths not divisible
// by the tile and tiles longer than the sequence; every shipped attention-side scheme; central
// finite differences; queries without a visible key; and the dispatch of attend().

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <deque>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "hybridlab/config.h"
#include "hybridlab/position.h"
#include "layers/attention.h"
#include "layers/kernels/attention_tiled.h"
#include "layers_test_util.h"

using namespace hybridlab;
using hybridlab::test::err_ratio;
using hybridlab::test::numeric_grad;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace attention_tiled_test {
namespace {

using test::NoScheme;

// A relative hook that adds nothing (zero logits, no value table): only its dispatch matters.
class ZeroRelative : public PositionScheme {
 public:
  std::string name() const override { return "zero_relative"; }
  uint32_t hooks() const override { return kHookRelative; }
  torch::Tensor relative_logits(const torch::Tensor& q, const torch::Tensor& q_pos,
                                const torch::Tensor& k_pos) override {
    return torch::zeros({q.size(0), q.size(1), q_pos.size(0), k_pos.size(0)}, q.options());
  }
  torch::Tensor relative_values(const torch::Tensor&, const torch::Tensor&,
                                const torch::Tensor&) override {
    return {};
  }
};

AttentionOptions opts(int64_t H, int64_t Hkv, int64_t window, bool causal, int64_t head_dim) {
  AttentionOptions o;
  o.n_heads = H;
  o.n_kv_heads = Hkv;
  o.head_dim = head_dim;
  o.window = window;
  o.causal = causal;
  o.block_size = 8;
  return o;
}

double tolerance(torch::Dtype dtype) { return dtype == torch::kDouble ? 1e-10 : 1e-5; }

// Output and the gradients of sum(out ⊙ w) w.r.t. q0, k0 (before the rotate hook), v and the
// scheme's parameters.
struct Result {
  torch::Tensor out;
  std::vector<torch::Tensor> grads;
};

struct Problem {
  torch::Tensor q, k, v, q_pos, k_pos, w;
};

// q [B,H,Tq,Dh], k, v [B,Hkv,Tk,Dh]; the queries are the last Tq of Tk positions starting at 3.
Problem make_problem(int64_t B, int64_t H, int64_t Hkv, int64_t Tq, int64_t Tk, int64_t Dh,
                     torch::Dtype dtype, uint64_t seed) {
  torch::manual_seed(seed);
  const auto o = torch::TensorOptions().dtype(dtype);
  Problem p;
  p.q = torch::randn({B, H, Tq, Dh}, o).requires_grad_();
  p.k = torch::randn({B, Hkv, Tk, Dh}, o).requires_grad_();
  p.v = torch::randn({B, Hkv, Tk, Dh}, o).requires_grad_();
  p.k_pos = torch::arange(Tk) + 3;
  p.q_pos = p.k_pos.narrow(0, Tk - Tq, Tq);
  p.w = torch::randn({B, H, Tq, Dh}, o);
  return p;
}

// Whether the autograd graph behind `t` has a node whose name contains `needle`.
bool graph_has(const torch::Tensor& t, const std::string& needle) {
  std::deque<std::shared_ptr<torch::autograd::Node>> todo = {t.grad_fn()};
  std::set<torch::autograd::Node*> seen;
  while (!todo.empty()) {
    const auto fn = todo.front();
    todo.pop_front();
    if (!fn || !seen.insert(fn.get()).second) continue;
    if (fn->name().find(needle) != std::string::npos) return true;
    for (const auto& e : fn->next_edges()) todo.push_back(e.function);
  }
  return false;
}

// Puts the ReLU kink of every hidden unit of FIRE's MLP inside its input range [0, 1]
// (mlp_in.bias = −weight·u, u ~ U(0,1)): a unit linear or dead over the whole range gives its
// bias a gradient that is zero up to rounding (a per-head constant cancels in the softmax), and
// comparing two roundings says nothing. L_mult = 0.5 puts the threshold |L_mult·L| = L/2 among
// the query positions (the cases choose L), so it has a gradient too.
void spread_fire_kinks(PositionScheme& scheme) {
  if (scheme.name() != "fire") return;
  torch::NoGradGuard no_grad;
  auto p = scheme.named_parameters();
  p["mlp_in.bias"].copy_(-p["mlp_in.weight"].squeeze(1) * torch::rand_like(p["mlp_in.bias"]));
  p["L_mult"].fill_(0.5);
}

// attend() on `att` with the rotate hook applied first (as Attention::forward does).
Result run(Attention& att, const Problem& p, AttendPath path) {
  att.set_attend_path(path);
  torch::Tensor q = p.q, k = p.k;
  if (att.scheme()->hooks() & kHookRotate) {
    std::tie(q, k) = att.scheme()->rotate(q, k, p.q_pos, p.k_pos);
  }
  Result r;
  r.out = att.attend(q, k, p.v, p.q_pos, p.k_pos, att.options().block_size, false);
  REQUIRE(graph_has(r.out, "TiledAttention") == (path == AttendPath::kTiled));
  std::vector<torch::Tensor> inputs = {p.q, p.k, p.v};
  for (const auto& t : att.scheme()->parameters()) inputs.push_back(t);
  r.grads = torch::autograd::grad({(r.out * p.w).sum()}, inputs, {}, false, false, true);
  att.set_attend_path(AttendPath::kAuto);
  return r;
}

void require_same(const Result& tiled, const Result& dense, double tol) {
  {
    INFO("output");
    REQUIRE(tiled.out.sizes() == dense.out.sizes());
    REQUIRE(err_ratio(tiled.out, dense.out) <= tol);
  }
  REQUIRE(tiled.grads.size() == dense.grads.size());
  for (size_t i = 0; i < dense.grads.size(); ++i) {
    INFO("gradient of input " << i << " (q, k, v, then the scheme's parameters)");
    REQUIRE(dense.grads[i].defined());
    REQUIRE(tiled.grads[i].defined());
    REQUIRE(tiled.grads[i].sizes() == dense.grads[i].sizes());
    REQUIRE(dense.grads[i].abs().max().item<double>() > 0);  // the comparison is not vacuous
    const double e = err_ratio(tiled.grads[i], dense.grads[i]);
    INFO("relative error " << e << " (tolerance " << tol << ")");
    REQUIRE(e <= tol);
  }
}

// A scheme from the build tree's plugins, in `dtype`.
std::shared_ptr<PositionScheme> make_scheme(PluginHost& host, const std::string& name,
                                            const std::string& params_yaml, int64_t H, int64_t Hkv,
                                            int64_t Dh, bool causal, torch::Dtype dtype) {
  const PositionContext ctx = hybridlab::test::attention_context(H, Hkv, Dh, causal);
  Config cfg = Config::parse(params_yaml, "test.yaml");
  Section params = cfg.root();
  std::shared_ptr<PositionScheme> scheme = host.create(name, params, ctx);
  scheme->to(dtype);
  return scheme;
}

}  // namespace

TEST_CASE("tiled attention == dense: causal/bidirectional, windows, GQA, odd lengths, cache",
          "[attention_tiled]") {
  const torch::Dtype dtype = GENERATE(torch::kDouble, torch::kFloat);
  const bool causal = GENERATE(true, false);
  const int64_t window = GENERATE(0, 5, 40);  // none, smaller and larger than a tile
  const int64_t kv_heads = GENERATE(4, 2, 1);
  // 37 queries: tiles with every pair visible inside a window, a short last tile, one beyond T.
  const int64_t tile = GENERATE(2, 8, 64);
  CAPTURE(dtype, causal, window, kv_heads, tile);
  Attention att(opts(4, kv_heads, window, causal, 8), 32, std::make_shared<NoScheme>(), true);
  att.to(dtype);
  // 37 queries after 6 cached keys.
  const Problem p = make_problem(2, 4, kv_heads, 37, 43, 8, dtype, 20);
  const Result dense = run(att, p, AttendPath::kDense);

  TiledAttentionOptions t;
  t.causal = causal;
  t.window = window;
  t.tile_q = tile;
  t.tile_k = tile * 2;
  Result tiled;
  tiled.out = tiled_attention(p.q, p.k, p.v, p.q_pos, p.k_pos, nullptr, t);
  tiled.grads = torch::autograd::grad({(tiled.out * p.w).sum()}, {p.q, p.k, p.v});
  require_same(tiled, dense, tolerance(dtype));
  // The same through attend() with its default tiles.
  require_same(run(att, p, AttendPath::kTiled), dense, tolerance(dtype));
}

TEST_CASE("tiled attention == dense for every positional hook, with the schemes' gradients",
          "[attention_tiled][plugins]") {
  struct SchemeCase {
    std::string name, params;
    uint32_t hooks;
  };
  // Small bucket/clip ranges so that a 29-token sequence reaches the clipped and log buckets.
  const std::vector<SchemeCase> cases = {
      {"nope", "{}", kHookNone},
      {"rope", "{}", kHookRotate},
      {"alibi", "{}", kHookLogitBias},
      {"t5", "{num_buckets: 8, max_distance: 16}", kHookLogitBias},
      {"shaw", "{max_relative_position: 3}", kHookRelative},
      {"shaw", "{max_relative_position: 3, values: false}", kHookRelative},
      {"kerple", "{}", kHookLogitBias},
      {"kerple", "{kernel: power}", kHookLogitBias},
      {"fire", "{mlp_width: 8, L: 15}", kHookLogitBias},  // threshold 7.5, positions 3 … 31
      {"xpos", "{}", kHookRotate},
      {"p_rope", "{p: 0.5}", kHookRotate},
      {"rope", "{rotate_num_heads: 2}", kHookRotate},
      {"nope_temperature", "{floor_scale: 4}", kHookRotate},
  };
  auto host = hybridlab::test::test_host();
  const torch::Dtype dtype = GENERATE(torch::kDouble, torch::kFloat);
  const bool causal = GENERATE(true, false);
  const int64_t window = GENERATE(0, 6);
  for (const SchemeCase& c : cases) {
    CAPTURE(c.name, c.params, dtype, causal, window);
    if (c.name == "xpos" && !causal) continue;  // xPos refuses bidirectional attention
    auto scheme = make_scheme(*host, c.name, c.params, 4, 2, 8, causal, dtype);
    REQUIRE((scheme->hooks() & ~kHookFlops) == c.hooks);  // the FLOP count is not a kernel hook
    Attention att(opts(4, 2, window, causal, 8), 32, scheme, true);
    att.to(dtype);
    // Learned tables start from a random value, not their (near-zero or constant) init, so their
    // gradients and their effect on the logits are both of order one.
    {
      torch::NoGradGuard no_grad;
      for (auto& t : scheme->parameters()) t.copy_(torch::randn_like(t) * 0.5);
    }
    spread_fire_kinks(*scheme);
    const Problem p = make_problem(2, 4, 2, 29, 29, 8, dtype, 21);
    const Result dense = run(att, p, AttendPath::kDense);
    const Result tiled = run(att, p, AttendPath::kTiled);
    REQUIRE(dense.grads.size() == 3 + scheme->parameters().size());
    require_same(tiled, dense, tolerance(dtype));
  }
}

TEST_CASE(
    "tiled attention: the whole layer's parameter gradients == dense (learned biases, Shaw, "
    "rotary, fp64)",
    "[attention_tiled][plugins]") {
  auto host = hybridlab::test::test_host();
  for (const std::string name : {"t5", "shaw", "rope", "kerple", "fire", "xpos"}) {
    CAPTURE(name);
    // FIRE with threshold 7.5: the normaliser ψ(max(i, 7.5)) varies over these 19 queries.
    auto scheme =
        make_scheme(*host, name, name == "fire" ? "{L: 15}" : "{}", 4, 2, 8, true, torch::kDouble);
    spread_fire_kinks(*scheme);
    AttentionOptions o = opts(4, 2, 0, true, 8);
    o.qk_norm = true;
    o.output_gate = true;
    Attention att(o, 32, scheme, true);
    att.to(torch::kDouble);
    torch::manual_seed(22);
    const torch::Tensor x = torch::randn({2, 19, 32}, torch::kDouble).requires_grad_();
    const torch::Tensor w = torch::randn({2, 19, 32}, torch::kDouble);
    const torch::Tensor pos = torch::arange(19);
    std::vector<torch::Tensor> inputs = {x};
    for (const auto& t : att.parameters()) inputs.push_back(t);
    auto grads = [&](AttendPath path) {
      att.set_attend_path(path);
      Result r;
      r.out = att.forward(x, pos, nullptr);
      r.grads = torch::autograd::grad({(r.out * w).sum()}, inputs);
      return r;
    };
    const Result dense = grads(AttendPath::kDense);
    const Result tiled = grads(AttendPath::kTiled);
    REQUIRE(graph_has(tiled.out, "TiledAttention"));
    REQUIRE_FALSE(graph_has(dense.out, "TiledAttention"));
    require_same(tiled, dense, 1e-10);
  }
}

TEST_CASE(
    "tiled attention: gradients == central finite differences (fp64, T5, KERPLE and FIRE biases, "
    "Shaw)",
    "[attention_tiled][plugins]") {
  auto host = hybridlab::test::test_host();
  const bool causal = GENERATE(true, false);
  const std::vector<std::pair<std::string, std::string>> schemes = {
      {"t5", "{num_buckets: 8, max_distance: 12}"},
      {"shaw", "{max_relative_position: 2}"},
      {"kerple", "{}"},
      {"kerple", "{kernel: power}"},
      {"fire", "{mlp_width: 4, L: 17}"}};  // threshold 8.5 (no tie), positions 3 … 9
  for (const auto& [name, params] : schemes) {
    CAPTURE(name, params, causal);
    auto scheme = make_scheme(*host, name, params, 2, 1, 3, causal, torch::kDouble);
    {
      torch::NoGradGuard no_grad;
      for (auto& t : scheme->parameters()) {
        // KERPLE projects its parameters into [0.01, 2]: start inside, away from the clamp, so a
        // finite-difference step is not projected away.
        t.copy_(name == "kerple" ? torch::rand_like(t) + 0.2 : torch::randn_like(t) * 0.5);
      }
    }
    spread_fire_kinks(*scheme);
    const Problem p = make_problem(1, 2, 1, 7, 7, 3, torch::kDouble, 23);
    TiledAttentionOptions t;
    t.causal = causal;
    t.window = causal ? 0 : 4;
    t.tile_q = 2;
    t.tile_k = 3;
    t.hooks = scheme->hooks();
    auto loss = [&]() {
      return (tiled_attention(p.q, p.k, p.v, p.q_pos, p.k_pos, scheme, t) * p.w).sum();
    };
    std::vector<torch::Tensor> inputs = {p.q, p.k, p.v};
    for (const auto& x : scheme->parameters()) inputs.push_back(x);
    const auto grads = torch::autograd::grad({loss()}, inputs);
    for (size_t i = 0; i < inputs.size(); ++i) {
      CAPTURE(i);
      const torch::Tensor fd = numeric_grad(loss, inputs[i]);
      REQUIRE(fd.abs().max().item<double>() > 1e-3);
      REQUIRE(err_ratio(grads[i], fd) <= 1e-7);
    }
  }
}

TEST_CASE("tiled attention: queries without a visible key give 0 and finite gradients",
          "[attention_tiled]") {
  // Causal, keys at positions 0..T-1, queries at −3..T−4: queries 0..2 see no key at all.
  const int64_t T = 21;
  const Problem p = make_problem(1, 2, 1, T, T, 4, torch::kDouble, 24);
  const torch::Tensor q_pos = torch::arange(T) - 3, k_pos = torch::arange(T);
  TiledAttentionOptions t;
  t.tile_q = 4;
  t.tile_k = 8;
  const torch::Tensor out = tiled_attention(p.q, p.k, p.v, q_pos, k_pos, nullptr, t);
  const auto grads = torch::autograd::grad({(out * p.w).sum()}, {p.q, p.k, p.v});
  REQUIRE(torch::isfinite(out).all().item<bool>());
  REQUIRE(out.narrow(2, 0, 3).abs().max().item<double>() == 0);
  for (const auto& g : grads) REQUIRE(torch::isfinite(g).all().item<bool>());
  REQUIRE(grads[0].narrow(2, 0, 3).abs().max().item<double>() == 0);

  // The other queries == the dense path run on them alone (same keys and positions; the dense
  // path's key range per block is a superset of what these queries see, its mask is positional).
  Attention att(opts(2, 1, 0, true, 4), 8, std::make_shared<NoScheme>(), true);
  att.set_attend_path(AttendPath::kDense);
  const torch::Tensor q_rest = p.q.narrow(2, 3, T - 3);
  const torch::Tensor dense = att.attend(q_rest, p.k, p.v, q_pos.narrow(0, 3, T - 3), k_pos, 8);
  REQUIRE(err_ratio(out.narrow(2, 3, T - 3), dense) <= 1e-12);
  const auto dense_grads =
      torch::autograd::grad({(dense * p.w.narrow(2, 3, T - 3)).sum()}, {p.q, p.k, p.v});
  REQUIRE(err_ratio(grads[0], dense_grads[0]) <= 1e-10);
  REQUIRE(err_ratio(grads[1], dense_grads[1]) <= 1e-10);
  REQUIRE(err_ratio(grads[2], dense_grads[2]) <= 1e-10);
}

TEST_CASE("attend dispatch: tiled when training at or above the crossover, dense otherwise",
          "[attention_tiled]") {
  const int64_t Tmin = Attention::kTiledMinQueries;
  torch::manual_seed(25);
  Attention att(opts(2, 1, 0, true, 8), 16, std::make_shared<NoScheme>(), true);
  auto attend_at = [&](int64_t T, bool grad) {
    const torch::Tensor q = torch::randn({1, 2, T, 8}).requires_grad_(grad);
    const torch::Tensor k = torch::randn({1, 1, T, 8}), v = torch::randn({1, 1, T, 8});
    const torch::Tensor pos = torch::arange(T);
    return att.attend(q, k, v, pos, pos, 256);
  };
  REQUIRE(graph_has(attend_at(Tmin, true), "TiledAttention"));
  REQUIRE_FALSE(graph_has(attend_at(Tmin - 1, true), "TiledAttention"));
  REQUIRE_FALSE(attend_at(Tmin, false).requires_grad());  // no gradient wanted: dense
  {
    torch::NoGradGuard no_grad;
    REQUIRE_FALSE(attend_at(Tmin, true).requires_grad());
  }
  // The layer: x requires no grad, but its projections do.
  const torch::Tensor x = torch::randn({1, Tmin, 16});
  const torch::Tensor pos = torch::arange(Tmin);
  const torch::Tensor y = att.forward(x, pos, nullptr);
  REQUIRE(graph_has(y, "TiledAttention"));
  REQUIRE_FALSE(
      graph_has(att.forward(x.narrow(1, 0, 64), pos.narrow(0, 0, 64), nullptr), "TiledAttention"));
  // A probe needs the softmax weights: dense even when training long sequences.
  int64_t calls = 0;
  att.set_probe([&](const torch::Tensor&, const torch::Tensor&, const torch::Tensor&) { ++calls; });
  REQUIRE_FALSE(graph_has(att.forward(x, pos, nullptr), "TiledAttention"));
  REQUIRE(calls > 0);
  att.set_probe({});
  att.set_attend_path(AttendPath::kDense);
  REQUIRE_FALSE(graph_has(att.forward(x, pos, nullptr), "TiledAttention"));
  att.set_attend_path(AttendPath::kTiled);
  REQUIRE(
      graph_has(att.forward(x.narrow(1, 0, 64), pos.narrow(0, 0, 64), nullptr), "TiledAttention"));
  // Forced, it also serves evaluation (no graph) with the dense path's values.
  {
    c10::InferenceMode guard;
    const torch::Tensor tiled = att.forward(x, pos, nullptr);
    att.set_attend_path(AttendPath::kDense);
    REQUIRE(err_ratio(tiled, att.forward(x, pos, nullptr)) <= 1e-5);
  }

  // With a relative hook the crossover is further out.
  Attention rel(opts(2, 1, 0, true, 8), 16, std::make_shared<ZeroRelative>(), true);
  const int64_t Trel = Attention::kTiledMinQueriesRelative;
  REQUIRE(Trel > Tmin);
  auto rel_attend_at = [&](int64_t T) {
    const torch::Tensor q = torch::randn({1, 2, T, 8}).requires_grad_();
    const torch::Tensor k = torch::randn({1, 1, T, 8}), v = torch::randn({1, 1, T, 8});
    const torch::Tensor p = torch::arange(T);
    return rel.attend(q, k, v, p, p, 512);
  };
  REQUIRE_FALSE(graph_has(rel_attend_at(Tmin), "TiledAttention"));
  REQUIRE_FALSE(graph_has(rel_attend_at(Trel - 1), "TiledAttention"));
  REQUIRE(graph_has(rel_attend_at(Trel), "TiledAttention"));
}

TEST_CASE("tiled attention: bad arguments are refused", "[attention_tiled]") {
  const torch::Tensor q = torch::randn({1, 4, 8, 8}), k = torch::randn({1, 3, 8, 8});
  const torch::Tensor pos = torch::arange(8);
  TiledAttentionOptions t;
  REQUIRE_THROWS_WITH(tiled_attention(q, k, k, pos, pos, nullptr, t),
                      Catch::Contains("Hkv dividing H"));
  REQUIRE_THROWS_WITH(tiled_attention(q.to(torch::kHalf), q.to(torch::kHalf), q.to(torch::kHalf),
                                      pos, pos, nullptr, t),
                      Catch::Contains("fp32 or fp64"));
  t.tile_q = 0;
  REQUIRE_THROWS_WITH(tiled_attention(q, q, q, pos, pos, nullptr, t),
                      Catch::Contains("tiles must be > 0"));
  t.tile_q = 4;
  t.hooks = kHookLogitBias;
  REQUIRE_THROWS_WITH(tiled_attention(q, q, q, pos, pos, nullptr, t),
                      Catch::Contains("needs its scheme"));
}

}  // namespace attention_tiled_test
