// Shaw, Uszkoreit & Vaswani 2018 relative positions: the fast hooks against a slow oracle that
// materialises a_ij (the paper's eq. 3 and 4 literally).

#include <filesystem>
#include <functional>

#include "scheme_loader.h"

using namespace hybridlab;
using namespace hybridlab::test;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace shaw_test {
namespace {

// a_ij = w[clip(j − i, k) + k] as a [Tq, Tk, Dh] tensor, by explicit loops.
torch::Tensor materialise(const torch::Tensor& w, const torch::Tensor& q_pos,
                          const torch::Tensor& k_pos, int64_t k) {
  const int64_t tq = q_pos.size(0), tk = k_pos.size(0);
  torch::Tensor a = torch::zeros({tq, tk, w.size(1)}, w.options());
  for (int64_t i = 0; i < tq; ++i) {
    for (int64_t j = 0; j < tk; ++j) {
      const int64_t rel = k_pos[j].item<int64_t>() - q_pos[i].item<int64_t>();
      a[i][j] = w[std::max(-k, std::min(k, rel)) + k];
    }
  }
  return a;
}

}  // namespace

TEST_CASE("shaw: relative logits and values equal the materialised eq. 3/4", "[position][shaw]") {
  torch::manual_seed(11);
  const int64_t k = 3;
  auto shaw = make_scheme("shaw", "{max_relative_position: 3}", test_context(2, 8));
  const torch::Tensor wk = shaw->named_parameters()["relative_keys"].detach();
  const torch::Tensor wv = shaw->named_parameters()["relative_values"].detach();
  REQUIRE(wk.sizes() == torch::IntArrayRef({7, 8}));  // 2k+1 rows × head_dim
  REQUIRE(wv.sizes() == torch::IntArrayRef({7, 8}));
  const torch::Tensor all = torch::arange(12, torch::kLong);
  // Full sequence, a query tile with an offset, and one decoding step.
  for (const auto& q_pos : {all, all.slice(0, 4, 9), positions({11})}) {
    const torch::Tensor q = torch::randn({2, 2, q_pos.size(0), 8});
    const torch::Tensor ak = materialise(wk, q_pos, all, k);
    // Σ_d q[b,h,i,d]·a[i,j,d]
    const torch::Tensor want_logits = torch::einsum("bhid,ijd->bhij", {q, ak});
    INFO("queries " << q_pos);
    REQUIRE_TENSORS_CLOSE(shaw->relative_logits(q, q_pos, all), want_logits, 1e-5);
    const torch::Tensor probs = torch::softmax(torch::randn({2, 2, q_pos.size(0), 12}), -1);
    const torch::Tensor av = materialise(wv, q_pos, all, k);
    const torch::Tensor want_values = torch::einsum("bhij,ijd->bhid", {probs, av});
    REQUIRE_TENSORS_CLOSE(shaw->relative_values(probs, q_pos, all), want_values, 1e-5);
  }
  // Shifting every position leaves both unchanged.
  const torch::Tensor q = torch::randn({1, 2, 12, 8});
  REQUIRE_TENSORS_CLOSE(shaw->relative_logits(q, all + 500, all + 500),
                        shaw->relative_logits(q, all, all), 0.0);
}

TEST_CASE("shaw: values: false has no value table", "[position][shaw]") {
  auto shaw = make_scheme("shaw", "{values: false}", test_context(2, 8));
  REQUIRE(shaw->named_parameters().size() == 1);
  REQUIRE(shaw->named_parameters()["relative_keys"].size(0) == 41);  // default k = 20 (t2t)
  const torch::Tensor probs = torch::softmax(torch::randn({1, 2, 4, 4}), -1);
  REQUIRE_FALSE(shaw->relative_values(probs, torch::arange(4), torch::arange(4)).defined());
}

TEST_CASE("learned, shaw and t5 parameters get gradients and go into checkpoints",
          "[position][learned][shaw][t5]") {
  torch::manual_seed(12);
  const PositionContext ctx = test_context(2, 8);
  const torch::Tensor pos = torch::arange(6, torch::kLong);
  struct Case {
    std::string name, params;
    std::function<torch::Tensor(PositionScheme&)> loss;
  };
  const std::vector<Case> cases = {
      {"learned", "{max_position_embeddings: 128}",
       [&](PositionScheme& s) {
         return s.embed(torch::randn({2, 6, 16}), pos).pow(2).sum();
       }},
      {"shaw", "{max_relative_position: 2}",
       [&](PositionScheme& s) {
         const torch::Tensor probs = torch::softmax(torch::randn({1, 2, 6, 6}), -1);
         return s.relative_logits(torch::randn({1, 2, 6, 8}), pos, pos).pow(2).sum() +
                s.relative_values(probs, pos, pos).pow(2).sum();
       }},
      {"t5", "", [&](PositionScheme& s) { return s.logit_bias(pos, pos).pow(2).sum(); }},
  };
  const std::string dir = std::string(HYBRIDLAB_BINARY_DIR) + "/test_position_ckpt";
  std::filesystem::create_directories(dir);
  for (const Case& c : cases) {
    INFO("scheme " << c.name);
    auto s = make_scheme(c.name, c.params, ctx);
    REQUIRE_FALSE(s->parameters().empty());
    c.loss(*s).backward();
    for (const auto& p : s->named_parameters()) {
      INFO("parameter " << p.key());
      REQUIRE(p.value().grad().defined());
      REQUIRE(p.value().grad().abs().sum().item<double>() > 0);
    }
    // Save, then load into a freshly built (differently initialised) scheme.
    const std::string file = dir + "/" + c.name + ".pt";
    {
      torch::serialize::OutputArchive out;
      s->save(out);
      out.save_to(file);
    }
    auto fresh = make_scheme(c.name, c.params, ctx);
    for (const auto& p : s->named_parameters()) {
      REQUIRE(max_abs_diff(fresh->named_parameters()[p.key()], p.value()) > 0);
    }
    torch::serialize::InputArchive in;
    in.load_from(file);
    fresh->load(in);
    for (const auto& p : s->named_parameters()) {
      REQUIRE_TENSORS_CLOSE(fresh->named_parameters()[p.key()], p.value(), 0.0);
    }
  }
}

}  // namespace shaw_test
