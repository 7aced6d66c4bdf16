// T5 relative attention bias (Raffel et al., JMLR 2020, §2.1): one learned scalar per head per
// relative-position bucket, added to the logits before softmax and shared by every layer.
//
// Buckets follow T5Attention._relative_position_bucket in huggingface/transformers
// (models/t5/modeling_t5.py, itself from Mesh-TF transformer_layers.py): with rel = j − i,
//   bidirectional: nb = num_buckets/2, offset = nb if rel > 0, n = |rel|
//   causal:        nb = num_buckets,   offset = 0,             n = max(−rel, 0)
//   bucket = offset + n                                            if n < nb/2
//          = offset + min(nb−1, nb/2 + trunc(ln(n/(nb/2)) / ln(max_distance/(nb/2)) · (nb − nb/2)))
// with the log in float32 and ln(max_distance/max_exact) in double, as in the reference. The table
// is Embedding(num_buckets, n_heads)
// ("relative_attention_bias"), initialised N(0, (initializer_factor·d_model^-½)²) as HF does.
// Unlike T5 (no 1/√d scaling at all) the bias here is added to q·kᵀ/√Dh; it is learned, so only
// its scale at initialisation differs.

#include <cmath>

#include "hybridlab/position.h"

namespace {

using hybridlab::PositionContext;
using hybridlab::PositionTable;
using hybridlab::Section;

// Bucket of each relative position rel = j − i (int64, any shape) -> int64, same shape.
torch::Tensor relative_position_bucket(const torch::Tensor& rel, bool bidirectional,
                                       int64_t num_buckets, int64_t max_distance) {
  int64_t nb = num_buckets;
  torch::Tensor bucket = torch::zeros_like(rel);
  torch::Tensor n;
  if (bidirectional) {
    nb /= 2;
    bucket = (rel > 0).to(torch::kLong) * nb;
    n = rel.abs();
  } else {
    n = (-rel).clamp_min(0);
  }
  const int64_t max_exact = nb / 2;
  // n < max_exact never uses the log branch; clamping keeps log() finite there.
  const torch::Tensor n_large = n.clamp_min(max_exact).to(torch::kFloat);
  torch::Tensor large =
      max_exact + (torch::log(n_large / static_cast<float>(max_exact)) /
                   static_cast<float>(std::log(static_cast<double>(max_distance) / max_exact)) *
                   static_cast<float>(nb - max_exact))
                      .to(torch::kLong);
  large = large.clamp_max(nb - 1);
  return bucket + torch::where(n < max_exact, n, large);
}

class T5Bias : public hybridlab::PositionScheme {
 public:
  T5Bias(int64_t num_buckets, int64_t max_distance, bool bidirectional, bool shared,
         int64_t n_heads, double init_std)
      : num_buckets_(num_buckets),
        max_distance_(max_distance),
        bidirectional_(bidirectional),
        shared_(shared) {
    weight_ = register_parameter("relative_attention_bias",
                                 torch::randn({num_buckets, n_heads}) * init_std);
  }

  std::string name() const override { return "t5"; }
  uint32_t hooks() const override { return hybridlab::kHookLogitBias; }
  bool shared_across_layers() const override { return shared_; }

  torch::Tensor buckets(const torch::Tensor& q_pos, const torch::Tensor& k_pos) const {
    return relative_position_bucket(k_pos.unsqueeze(0) - q_pos.unsqueeze(1), bidirectional_,
                                    num_buckets_, max_distance_);
  }

  torch::Tensor logit_bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos) override {
    const torch::Tensor b = buckets(q_pos, k_pos);                 // [Tq,Tk]
    const torch::Tensor w = weight_.index_select(0, b.flatten());  // [Tq·Tk, H]
    return w.view({b.size(0), b.size(1), -1}).permute({2, 0, 1});
  }

  std::vector<PositionTable> inspect(int64_t length) override {
    torch::NoGradGuard no_grad;
    std::vector<PositionTable> out;
    const torch::Tensor pos = torch::arange(length, torch::kLong).to(weight_.device());
    PositionTable b;
    b.name = "bucket";
    b.description = std::string("T5 bucket of j-i (") +
                    (bidirectional_ ? "bidirectional" : "causal") + ", " +
                    std::to_string(num_buckets_) + " buckets, max_distance " +
                    std::to_string(max_distance_) + ")";
    b.values = buckets(pos, pos).to(torch::kFloat);
    b.row_label = "query position i";
    b.column_label = "key position j";
    out.push_back(b);
    PositionTable t;
    t.name = "relative_attention_bias";
    t.description = "T5 learned bias per bucket and head";
    t.values = weight_.detach().clone();
    t.row_label = "bucket";
    t.column_label = "head";
    for (int64_t h = 0; h < weight_.size(1); ++h) t.columns.push_back("head" + std::to_string(h));
    out.push_back(t);
    const torch::Tensor bias = logit_bias(pos, pos);
    for (int64_t h = 0; h < bias.size(0); ++h) {
      out.push_back(
          hybridlab::head_bias_table(h, bias[h].clone(), "T5 bias head " + std::to_string(h)));
    }
    return out;
  }

  static std::shared_ptr<hybridlab::PositionScheme> create(Section& params,
                                                           const PositionContext& ctx) {
    const int64_t num_buckets = params.get<int64_t>("num_buckets", 32);
    const int64_t max_distance = params.get<int64_t>("max_distance", 128);
    const bool bidirectional = params.get<bool>("bidirectional", !ctx.causal);
    const bool shared = params.get<bool>("shared_across_layers", true);
    const double factor = params.get<double>("initializer_factor", 1.0);
    params.check(ctx.n_heads > 0, "scheme",
                 "T5 bias needs the number of attention heads (n_heads), got " +
                     std::to_string(ctx.n_heads));
    // max_exact = num_buckets/4 (bidirectional) or /2 (causal) must be >= 1.
    const int64_t min_buckets = bidirectional ? 4 : 2;
    const int64_t max_exact = (bidirectional ? num_buckets / 2 : num_buckets) / 2;
    if (num_buckets < min_buckets) {
      params.error("num_buckets", "must be >= " + std::to_string(min_buckets) + " (" +
                                      (bidirectional ? "bidirectional" : "causal") + "), got " +
                                      std::to_string(num_buckets));
    } else {
      params.check(max_distance > max_exact, "max_distance",
                   "must be larger than the exact range (" + std::to_string(max_exact) +
                       " distances for " + std::to_string(num_buckets) + " buckets), got " +
                       std::to_string(max_distance));
    }
    params.check(factor > 0, "initializer_factor", "must be > 0");
    params.done();
    const double init_std =
        factor * (ctx.d_model > 0 ? 1.0 / std::sqrt(double(ctx.d_model)) : 0.02);
    return std::make_shared<T5Bias>(num_buckets, max_distance, bidirectional, shared, ctx.n_heads,
                                    init_std);
  }

 private:
  int64_t num_buckets_, max_distance_;
  bool bidirectional_, shared_;
  torch::Tensor weight_;  // [num_buckets, H]
};

}  // namespace

HYBRIDLAB_POSITION_PLUGIN("t5", "1.0",
                          "T5 relative attention bias: learned scalar per head per log bucket "
                          "(Raffel et al. 2020)",
                          T5Bias::create)
