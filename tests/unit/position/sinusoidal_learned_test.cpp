// Absolute schemes: sinusoidal (Vaswani et al. 2017, §3.5) and learned (GPT-2 wpe).

#include <cmath>
#include <filesystem>

#include "scheme_loader.h"

using namespace hybridlab;
using namespace hybridlab::test;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace sinusoidal_learned_test {
namespace {
// PE rows through the embed hook: zero token embeddings plus PE.
torch::Tensor pe_rows(PositionScheme& s, int64_t d, const torch::Tensor& pos) {
  return s.embed(torch::zeros({1, pos.size(0), d}, torch::kDouble), pos)[0];
}
}  // namespace

TEST_CASE("sinusoidal: rows 0, 1 and 100 at d = 8, both layouts", "[position][sinusoidal]") {
  // ω_k = 10000^(−2k/8) = 1, 0.1, 0.01, 0.001. Values by hand (Python math.sin / math.cos):
  // p = 1:   sin 1 = 0.841470985, cos 1 = 0.540302306, sin .1 = 0.099833417, cos .1 = 0.995004165,
  //          sin .01 = 0.009999833, cos .01 = 0.99995, sin .001 = 0.001, cos .001 = 0.9999995
  // p = 100: sin 100 = −0.506365641, cos 100 = 0.862318872, sin 10 = −0.544021111,
  //          cos 10 = −0.839071529, then sin/cos of 1 and 0.1 as above.
  const std::vector<double> r0 = {0, 1, 0, 1, 0, 1, 0, 1};
  const std::vector<double> r1 = {0.841470985, 0.540302306, 0.099833417, 0.995004165,
                                  0.009999833, 0.99995,     0.001,       0.9999995};
  const std::vector<double> r100 = {-0.506365641, 0.862318872, -0.544021111, -0.839071529,
                                    0.841470985,  0.540302306, 0.099833417,  0.995004165};
  auto inter = make_scheme("sinusoidal", "{layout: interleaved}", test_context(1, 8));
  std::vector<double> rows = r0;
  rows.insert(rows.end(), r1.begin(), r1.end());
  rows.insert(rows.end(), r100.begin(), r100.end());
  const torch::Tensor want = torch::tensor(rows, torch::kDouble).view({3, 8});
  REQUIRE_TENSORS_CLOSE(pe_rows(*inter, 8, positions({0, 1, 100})), want, 1e-9);
  // half layout: [sin for all k ‖ cos for all k] = channels 0,2,4,6 then 1,3,5,7 of the above.
  auto half = make_scheme("sinusoidal", "{layout: half}", test_context(1, 8));
  const torch::Tensor perm = torch::tensor({0, 2, 4, 6, 1, 3, 5, 7}, torch::kLong);
  REQUIRE_TENSORS_CLOSE(pe_rows(*half, 8, positions({0, 1, 100})), want.index_select(1, perm),
                        1e-9);
  // t2t frequencies ω_k = 10000^(−k/3) = 1, 0.0464159, 0.00215443, 1e−4 (§1 table (c)):
  // row 1 = [sin ω ‖ cos ω] = 0.841470985, 0.046399223, 0.002154433, 0.0001,
  //                          0.540302306, 0.998922976, 0.999997679, 0.999999995.
  auto t2t = make_scheme("sinusoidal", "{layout: half, frequencies: t2t}", test_context(1, 8));
  REQUIRE_TENSORS_CLOSE(pe_rows(*t2t, 8, positions({1}))[0],
                        torch::tensor({0.841470985, 0.046399223, 0.002154433, 0.0001, 0.540302306,
                                       0.998922976, 0.999997679, 0.999999995},
                                      torch::kDouble),
                        1e-9);
}

TEST_CASE("sinusoidal: the stripes widen (wavelength grows with the channel pair)",
          "[position][sinusoidal]") {
  // The seed exercise's picture: d = 128, 512 positions. Pair k has wavelength 2π·10000^(2k/d);
  // counting sign changes of its sin channel over 512 positions gives ≈ 512/(wavelength/2),
  // fewer and fewer as k grows.
  auto s = make_scheme("sinusoidal", "", test_context(2, 64));
  const torch::Tensor pe = inspect_table(*s, 512, "pe");
  REQUIRE(pe.sizes() == torch::IntArrayRef({512, 128}));
  int64_t prev = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> crossings;
  for (int64_t k = 0; k < 64; ++k) {
    const torch::Tensor sin_k = pe.select(1, 2 * k);
    const int64_t changes = ((sin_k.slice(0, 1) * sin_k.slice(0, 0, -1)) < 0).sum().item<int64_t>();
    REQUIRE(changes <= prev);
    prev = changes;
    crossings.push_back(changes);
  }
  // Independently: sin(p·ω_k) changes sign each time p·ω_k passes a multiple of π, so over
  // p = 0 … 511 that is floor(511·ω_k/π) times: 162 for pair 0 (ω = 1), 51 for pair 8
  // (ω = 10000^(−1/8) = 0.316228), 0 for the slowest pairs.
  for (int64_t k = 0; k < 64; ++k) {
    const double omega = std::pow(10000.0, -2.0 * k / 128);
    INFO("pair " << k);
    REQUIRE(crossings[size_t(k)] == static_cast<int64_t>(std::floor(511 * omega / M_PI)));
  }
  REQUIRE(crossings[0] == 162);
  REQUIRE(crossings[8] == 51);
  REQUIRE(crossings[63] == 0);
  const torch::Tensor wl = inspect_table(*s, 512, "wavelength");
  REQUIRE(std::abs(wl[0].item<double>() - 2 * M_PI) < 1e-5);
  REQUIRE((wl.slice(0, 1) > wl.slice(0, 0, -1)).all().item<bool>());
}

TEST_CASE("sinusoidal: scale_embeddings and tiles", "[position][sinusoidal]") {
  auto scaled = make_scheme("sinusoidal", "{scale_embeddings: true}", test_context(1, 8));
  const torch::Tensor x = torch::ones({2, 3, 8}, torch::kDouble);
  const torch::Tensor pos = positions({5, 6, 7});
  const torch::Tensor out = scaled->embed(x, pos);
  // x·√8 + PE (the original Transformer scales the embeddings by √d_model).
  REQUIRE_TENSORS_CLOSE(out[1], std::sqrt(8.0) + pe_rows(*scaled, 8, pos), 1e-12);
  // A tile of positions gives the same rows as the full sequence.
  auto s = make_scheme("sinusoidal", "", test_context(1, 8));
  REQUIRE_TENSORS_CLOSE(pe_rows(*s, 8, torch::arange(10, torch::kLong)).slice(0, 5, 8),
                        pe_rows(*s, 8, pos), 0.0);
}

TEST_CASE("learned: embed adds table rows and past the table clamps or refuses",
          "[position][learned]") {
  PositionContext ctx = test_context(1, 8);
  ctx.train_length = ctx.max_length = 16;  // the table covers every length used
  auto s = make_scheme("learned", "{max_position_embeddings: 16}", ctx);
  REQUIRE(s->max_length() == 16);
  torch::Tensor wpe = s->named_parameters()["wpe"];
  REQUIRE(wpe.sizes() == torch::IntArrayRef({16, 8}));
  const torch::Tensor x = torch::randn({2, 3, 8});
  const torch::Tensor pos = positions({0, 7, 15});
  REQUIRE_TENSORS_CLOSE(s->embed(x, pos), x + wpe.index_select(0, pos).unsqueeze(0), 0.0);
  // GPT-2 init N(0, 0.02): the sample std of 16·8 draws is within 0.02 ± 30 %.
  auto big = make_scheme("learned", "{max_position_embeddings: 256}", ctx);
  const double sd = big->named_parameters()["wpe"].std().item<double>();
  REQUIRE(sd > 0.017);
  REQUIRE(sd < 0.023);
  // Position 16 has no row.
  REQUIRE_THROWS_AS(s->embed(x.slice(1, 0, 1), positions({16})), UserError);
  // beyond: clamp reuses the last row.
  auto clamp = make_scheme("learned", "{max_position_embeddings: 16, beyond: clamp}", ctx);
  REQUIRE(clamp->max_length() == 0);
  const torch::Tensor w2 = clamp->named_parameters()["wpe"];
  REQUIRE_TENSORS_CLOSE(clamp->embed(x.slice(1, 0, 1), positions({40})), x.slice(1, 0, 1) + w2[15],
                        0.0);
}

}  // namespace sinusoidal_learned_test
