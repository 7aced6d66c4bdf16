// Sinusoidal absolute positions (Vaswani et al. 2017, §3.5), added to the token embeddings once:
//   PE[p, 2k] = sin(p·ω_k),  PE[p, 2k+1] = cos(p·ω_k),  ω_k = base^(−2k/d),  k = 0 … d/2 − 1
// layout: interleaved (the paper; HF DistilBERT/XLM create_sinusoidal_embeddings) or half
// ([sin for all k ‖ cos for all k]: MAE get_1d_sincos_pos_embed, x-transformers).
// frequencies: paper (above) or t2t (tensor2tensor get_timing_signal_1d and fairseq:
// ω_k = base^(−k/(d/2 − 1)), whose slowest frequency is exactly 1/base).
// scale_embeddings multiplies the token embeddings by √d_model first, as the original
// Transformer, t2t and fairseq do (their embeddings are initialised with std d^-½).

#include <cmath>

#include "hybridlab/position.h"

namespace {

using hybridlab::PositionContext;
using hybridlab::PositionTable;
using hybridlab::Section;

class Sinusoidal : public hybridlab::PositionScheme {
 public:
  Sinusoidal(int64_t d, double base, bool interleaved, bool t2t, bool scale)
      : d_(d), interleaved_(interleaved), scale_(scale) {
    const int64_t half = d / 2;
    std::vector<double> omega(static_cast<size_t>(half));
    const double denom =
        t2t ? static_cast<double>(std::max<int64_t>(half - 1, 1)) : static_cast<double>(d) / 2.0;
    for (int64_t k = 0; k < half; ++k) omega[size_t(k)] = std::pow(base, -double(k) / denom);
    omega_ = torch::tensor(omega, torch::kDouble);
  }

  std::string name() const override { return "sinusoidal"; }
  uint32_t hooks() const override { return hybridlab::kHookEmbed; }

  /// PE rows for positions `pos` [T] -> [T, d] (float64, on pos's device).
  torch::Tensor table(const torch::Tensor& pos) const {
    const torch::Tensor angle =
        pos.to(torch::kDouble).unsqueeze(1) * omega_.to(pos.device()).unsqueeze(0);  // [T,d/2]
    const torch::Tensor s = angle.sin(), c = angle.cos();
    if (interleaved_) return torch::stack({s, c}, 2).flatten(1);
    return torch::cat({s, c}, 1);
  }

  torch::Tensor embed(const torch::Tensor& x, const torch::Tensor& pos) override {
    const torch::Tensor pe = table(pos).to(x.dtype());
    return (scale_ ? x * std::sqrt(static_cast<double>(d_)) : x) + pe.unsqueeze(0);
  }

  std::vector<PositionTable> inspect(int64_t length) override {
    std::vector<PositionTable> out;
    PositionTable pe;
    pe.name = "pe";
    pe.description = std::string("sinusoidal PE (") + (interleaved_ ? "interleaved" : "half") +
                     " layout), d = " + std::to_string(d_);
    pe.values = table(torch::arange(length, torch::kLong)).to(torch::kFloat);
    const int64_t half = d_ / 2;
    pe.columns.resize(static_cast<size_t>(d_));
    for (int64_t k = 0; k < half; ++k) {
      const size_t sin_col = size_t(interleaved_ ? 2 * k : k);
      const size_t cos_col = size_t(interleaved_ ? 2 * k + 1 : half + k);
      pe.columns[sin_col] = "sin" + std::to_string(k);
      pe.columns[cos_col] = "cos" + std::to_string(k);
    }
    pe.row_label = "position";
    pe.column_label = "channel";
    out.push_back(pe);
    PositionTable w;
    w.name = "wavelength";
    w.description = "wavelength 2pi/omega_k of channel pair k (the stripes widen with k)";
    w.values = (2 * M_PI / omega_).to(torch::kFloat);
    w.columns = {"wavelength"};
    w.row_label = "pair k";
    out.push_back(w);
    return out;
  }

  static std::shared_ptr<hybridlab::PositionScheme> create(Section& params,
                                                           const PositionContext& ctx) {
    const std::string layout = params.get<std::string>("layout", "interleaved");
    const double base = params.get<double>("base", 10000.0);
    const std::string freqs = params.get<std::string>("frequencies", "paper");
    const bool scale = params.get<bool>("scale_embeddings", false);
    params.check(layout == "interleaved" || layout == "half", "layout",
                 "expected interleaved (sin at even channels, cos at odd: the paper) or half "
                 "([sin ‖ cos]), got '" +
                     layout + "'");
    params.check(freqs == "paper" || freqs == "t2t", "frequencies",
                 "expected paper (base^(-2k/d)) or t2t (base^(-k/(d/2-1))), got '" + freqs + "'");
    params.check(base > 1, "base", "must be > 1, got " + std::to_string(base));
    params.check(ctx.d_model > 0 && ctx.d_model % 2 == 0, "scheme",
                 "sinusoidal positions need an even d_model (sin/cos channel pairs), got " +
                     std::to_string(ctx.d_model));
    params.done();
    return std::make_shared<Sinusoidal>(ctx.d_model, base, layout == "interleaved", freqs == "t2t",
                                        scale);
  }

 private:
  int64_t d_;
  bool interleaved_, scale_;
  torch::Tensor omega_;  // [d/2] float64, CPU; moved to the positions' device per call
};

}  // namespace

HYBRIDLAB_POSITION_PLUGIN("sinusoidal", "1.0",
                          "fixed sin/cos absolute positions added to the embeddings (Vaswani et "
                          "al. 2017)",
                          Sinusoidal::create)
