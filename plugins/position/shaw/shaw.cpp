// Relative position representations (Shaw, Uszkoreit & Vaswani, NAACL 2018):
//   e_ij = q_i·(k_j + a^K_ij) / √d    (eq. 4)        z_i = Σ_j α_ij (v_j + a^V_ij)   (eq. 3)
//   a^K_ij = w^K[clip(j − i, k)],  a^V_ij = w^V[clip(j − i, k)],  clip(x, k) = max(−k, min(k, x))
// Two learned tables of 2k+1 rows × head_dim, shared by the heads of a layer as in tensor2tensor
// (common_attention.py _generate_relative_positions_embeddings), one pair per layer.
//
// Neither hook materialises the [Tq, Tk, Dh] tensor a^K_ij: the key side multiplies q by the
// 2k+1-row table once ([B,H,Tq,2k+1]) and gathers by the clipped index; the value side scatters
// the attention weights into the 2k+1 buckets ([B,H,Tq,2k+1]) and multiplies by the value table.
// Default k = 20 as t2t's transformer_relative hparams (models/transformer.py).

#include <cmath>

#include "hybridlab/position.h"

namespace {

using hybridlab::PositionContext;
using hybridlab::PositionTable;
using hybridlab::Section;

class Shaw : public hybridlab::PositionScheme {
 public:
  Shaw(int64_t k, int64_t head_dim, bool values, double init_std) : k_(k) {
    keys_ = register_parameter("relative_keys", torch::randn({2 * k + 1, head_dim}) * init_std);
    if (values) {
      values_ =
          register_parameter("relative_values", torch::randn({2 * k + 1, head_dim}) * init_std);
    }
  }

  std::string name() const override { return "shaw"; }
  uint32_t hooks() const override { return hybridlab::kHookRelative; }

  /// Row of the tables for each (i, j): clip(j − i, k) + k, [Tq,Tk] int64.
  torch::Tensor index(const torch::Tensor& q_pos, const torch::Tensor& k_pos) const {
    return (k_pos.unsqueeze(0) - q_pos.unsqueeze(1)).clamp(-k_, k_) + k_;
  }

  torch::Tensor relative_logits(const torch::Tensor& q, const torch::Tensor& q_pos,
                                const torch::Tensor& k_pos) override {
    const torch::Tensor s = torch::matmul(q, keys_.to(q.dtype()).t());  // [B,H,Tq,2k+1]
    const torch::Tensor idx = index(q_pos, k_pos);
    return s.gather(3, idx.expand({q.size(0), q.size(1), idx.size(0), idx.size(1)}));
  }

  torch::Tensor relative_values(const torch::Tensor& probs, const torch::Tensor& q_pos,
                                const torch::Tensor& k_pos) override {
    if (!values_.defined()) return {};
    const torch::Tensor idx = index(q_pos, k_pos).expand(probs.sizes());
    std::vector<int64_t> shape = probs.sizes().vec();
    shape.back() = 2 * k_ + 1;
    const torch::Tensor buckets = torch::zeros(shape, probs.options()).scatter_add(3, idx, probs);
    return torch::matmul(buckets, values_.to(probs.dtype()));  // [B,H,Tq,Dh]
  }

  std::vector<PositionTable> inspect(int64_t length) override {
    std::vector<PositionTable> out;
    const torch::Tensor pos = torch::arange(length, torch::kLong);
    PositionTable r;
    r.name = "relative_index";
    r.description = "Shaw clip(j-i, k), k = " + std::to_string(k_);
    r.values = (index(pos, pos) - k_).to(torch::kFloat);
    r.row_label = "query position i";
    r.column_label = "key position j";
    out.push_back(r);
    auto table = [&](const char* name, const torch::Tensor& w) {
      PositionTable t;
      t.name = name;
      t.description = std::string("Shaw ") + name + " (row = clip(j-i,k) + k)";
      t.values = w.detach().to(torch::kCPU).clone();
      t.row_label = "clip(j-i,k) + k";
      t.column_label = "channel";
      out.push_back(t);
    };
    table("relative_keys", keys_);
    if (values_.defined()) table("relative_values", values_);
    return out;
  }

  static std::shared_ptr<hybridlab::PositionScheme> create(Section& params,
                                                           const PositionContext& ctx) {
    const int64_t k = params.get<int64_t>("max_relative_position", 20);
    const bool values = params.get<bool>("values", true);
    const double init_std = params.get<double>("initializer_range", 0.02);
    params.check(k > 0, "max_relative_position",
                 "must be > 0 (the clipping distance k), got " + std::to_string(k));
    params.check(init_std > 0, "initializer_range", "must be > 0");
    params.check(
        ctx.head_dim > 0, "scheme",
        "Shaw relative positions need the attention head_dim, got " + std::to_string(ctx.head_dim));
    params.done();
    return std::make_shared<Shaw>(k, ctx.head_dim, values, init_std);
  }

 private:
  int64_t k_;
  torch::Tensor keys_, values_;  // [2k+1, Dh] each; values_ undefined when values: false
};

}  // namespace

HYBRIDLAB_POSITION_PLUGIN("shaw", "1.0",
                          "Shaw et al. 2018 relative position representations: learned key/value "
                          "vectors for clip(j-i, k)",
                          Shaw::create)
