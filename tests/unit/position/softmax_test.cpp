// Biases go on the logits before softmax: rows still sum to 1, and a constant added to a whole
// row changes nothing (the property ALiBi's fairseq implementation relies on, §5 variant 1).

#include <cmath>

#include "scheme_loader.h"

using namespace hybridlab;
using namespace hybridlab::test;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace softmax_test {
namespace {

// softmax over keys of scores [H,T,T] + bias [H,T,T] with a causal mask.
torch::Tensor causal_softmax(const torch::Tensor& logits) {
  const int64_t t = logits.size(-1);
  const torch::Tensor mask = torch::ones({t, t}, torch::kBool).triu(1);
  return torch::softmax(logits.masked_fill(mask, -INFINITY), -1);
}

// Every bias a scheme adds to the logits, as [H,T,T] (Shaw: its q·a^K term for a fixed q).
torch::Tensor bias_of(PositionScheme& s, const torch::Tensor& pos, int64_t heads, int64_t dh) {
  if (s.hooks() & kHookLogitBias) return s.logit_bias(pos, pos);
  torch::manual_seed(21);
  const torch::Tensor q = torch::randn({1, heads, pos.size(0), dh});
  return s.relative_logits(q, pos, pos)[0] / std::sqrt(double(dh));
}

}  // namespace

TEST_CASE("softmax rows sum to 1 after every bias and a constant per row changes nothing",
          "[position]") {
  torch::manual_seed(20);
  const int64_t heads = 4, dh = 16, t = 24;
  const torch::Tensor pos = torch::arange(100, 100 + t, torch::kLong);  // with an offset
  for (const auto& [name, params] : std::vector<std::pair<std::string, std::string>>{
           {"alibi", ""}, {"alibi", "{mode: symmetric}"}, {"t5", ""}, {"shaw", ""}}) {
    INFO("scheme " << name << " " << params);
    auto s = make_scheme(name, params, test_context(heads, dh));
    torch::NoGradGuard no_grad;
    const torch::Tensor scores = torch::randn({heads, t, t});
    const torch::Tensor bias = bias_of(*s, pos, heads, dh);
    REQUIRE(bias.sizes() == scores.sizes());
    REQUIRE(bias.abs().sum().item<double>() > 0);  // the bias does something
    const torch::Tensor p = causal_softmax(scores + bias);
    REQUIRE_TENSORS_CLOSE(p.sum(-1), torch::ones({heads, t}), 1e-6);
    // The bias changes the distribution (so the test above is not vacuous) ...
    REQUIRE(max_abs_diff(p, causal_softmax(scores)) > 1e-3);
    // ... but a different constant on every row does not.
    const torch::Tensor c = torch::randn({heads, t, 1}) * 10;
    REQUIRE_TENSORS_CLOSE(causal_softmax(scores + bias + c), p, 1e-6);
  }
}

TEST_CASE("alibi: -m(i-j) and fairseq's m·j give the same causal softmax", "[position][alibi]") {
  // ofirpress fairseq materialises every row as m·j (the same for every query), which differs
  // from -m·(i-j) by the per-row constant -m·i.
  torch::manual_seed(22);
  auto alibi = make_scheme("alibi", "", test_context(8));
  const int64_t t = 16;
  const torch::Tensor pos = torch::arange(t, torch::kLong);
  const torch::Tensor scores = torch::randn({8, t, t});
  const torch::Tensor ours = causal_softmax(scores + alibi->logit_bias(pos, pos));
  std::vector<double> m;
  for (int h = 1; h <= 8; ++h) m.push_back(std::pow(2.0, -h));
  const torch::Tensor fairseq_bias = torch::tensor(m, torch::kFloat).view({8, 1, 1}) *
                                     pos.to(torch::kFloat).view({1, 1, t}).expand({8, t, t});
  REQUIRE_TENSORS_CLOSE(ours, causal_softmax(scores + fairseq_bias), 1e-6);
}

}  // namespace softmax_test
