// CoPE: contextual position encoding (Golovneva, Wang, Weston & Sukhbaatar, "Contextual Position
// Encoding: Learning to Count What's Important", arXiv 2405.18719, eq. 3–5). A query counts the
// keys that matter to it instead of the tokens between them:
//   g_ij = σ(q_i·k_j)                      gates, for visible keys j ≤ i,
//   p_ij = Σ_{t=j..i} g_it                 the position of key j as query i sees it (real-valued),
//   e[p] = interpolation of e[⌊p⌋] and e[⌈p⌉] with weight p − ⌊p⌋,
// and q_i·e[p_ij] is added to the logit of (i, j). Following facebookresearch/RAM@e6f051f
// projects/cope/context_position.py: the gate logits are the attention logits q·k before the
// 1/√d scaling, the position term is added to them before that scaling, the embeddings e are one
// [head_dim, npos_max] table per layer shared by the heads and initialised to zero (so an
// untrained CoPE layer is NoPE attention), and counts clamp at npos_max − 1. Its query-side
// product q·e is computed once per query ([B,H,Tq,npos_max]) and gathered at ⌊p⌋ and ⌈p⌉, as the
// reference does, rather than building e[p] per pair.
//
// CoPE needs each query's whole row of logits (the counts are sums over the row), so it is the
// content_bias hook of plugin API v3, which attention calls on its dense path only.

#include <fmt/format.h>

#include <algorithm>

#include "hybridlab/position.h"

namespace {

using hybridlab::PositionContext;
using hybridlab::PositionTable;
using hybridlab::Section;

class Cope : public hybridlab::PositionScheme {
 public:
  Cope(int64_t npos_max, int64_t n_heads, int64_t head_dim)
      : npos_max_(npos_max), heads_(n_heads), head_dim_(head_dim) {
    pos_emb_ = register_parameter("pos_emb", torch::zeros({head_dim, npos_max}));
  }

  std::string name() const override { return "cope"; }
  uint32_t hooks() const override { return hybridlab::kHookContentBias | hybridlab::kHookFlops; }

  torch::Tensor content_bias(const torch::Tensor& q, const torch::Tensor& logits,
                             const torch::Tensor&, const torch::Tensor&,
                             const torch::Tensor& visible) override {
    torch::Tensor gates = torch::sigmoid(logits);  // [B,H,Tq,Tk]
    if (visible.defined()) gates = gates.masked_fill(visible.logical_not(), 0.0);
    // p_ij = Σ_{t ≥ j} g_it over the row (keys after the query are invisible: gate 0).
    const torch::Tensor pos =
        gates.flip(-1).cumsum(-1).flip(-1).clamp_max(static_cast<double>(npos_max_ - 1));
    const torch::Tensor floor = pos.floor();
    const torch::Tensor frac = pos - floor;
    const torch::Tensor per_position = torch::matmul(q, pos_emb_.to(q.scalar_type()));
    const torch::Tensor at_floor = per_position.gather(-1, floor.to(torch::kLong));
    const torch::Tensor at_ceil = per_position.gather(-1, pos.ceil().to(torch::kLong));
    return (at_ceil * frac + at_floor * (1 - frac)).to(logits.scalar_type());
  }

  // Per query and head: q·e over the table, then per key a gate, the count and the
  // interpolation (about 8 operations).
  double flops_per_token(int64_t, double keys) const override {
    return static_cast<double>(heads_) *
           (2.0 * static_cast<double>(head_dim_ * npos_max_) + 8.0 * keys);
  }

  std::vector<PositionTable> inspect(int64_t length) override {
    torch::NoGradGuard no_grad;
    // The counts when every gate is σ(0) = 1/2 (zero logits): p_ij = (i − j + 1)/2, the
    // positions CoPE starts from before its gates learn what to count.
    const torch::Tensor i = torch::arange(length).unsqueeze(1), j = torch::arange(length);
    const torch::Tensor p = ((i - j + 1).to(torch::kFloat) / 2)
                                .clamp_max(static_cast<double>(npos_max_ - 1))
                                .masked_fill(j.gt(i), 0.0);
    PositionTable counts;
    counts.name = "positions_at_zero_logits";
    counts.description = "CoPE position p_ij with every gate at 1/2 (j <= i)";
    counts.values = p;
    counts.row_label = "query position i";
    counts.column_label = "key position j";
    PositionTable table;
    table.name = "pos_emb";
    table.description = "CoPE position embeddings e[p] (rows: integer positions p)";
    table.values = pos_emb_.detach().t().contiguous().to(torch::kFloat);
    table.row_label = "position p";
    table.column_label = "channel";
    return {counts, table};
  }

  static std::shared_ptr<hybridlab::PositionScheme> create(Section& params,
                                                           const PositionContext& ctx) {
    // RAM sizes the table to the context (block_size + 1: a count reaches i − j + 1 ≤ T).
    const int64_t fallback = ctx.train_length > 0 ? ctx.train_length + 1 : 64;
    const int64_t npos_max = params.get<int64_t>("npos_max", fallback);
    params.check(ctx.n_heads > 0 && ctx.head_dim > 0, "scheme",
                 "CoPE reads an attention layer's queries and logits; it cannot be the "
                 "model-level input scheme");
    params.check(ctx.n_heads <= 0 || ctx.causal, "scheme",
                 "CoPE counts gates from key j up to query i (j <= i); the paper defines no "
                 "bidirectional form: use it with causal attention");
    params.check(npos_max >= 1 && npos_max <= (int64_t{1} << 24), "npos_max",
                 fmt::format("must be from 1 to 2^24 integer positions (counts clamp at "
                             "npos_max - 1), got {}",
                             npos_max));
    params.done();
    return std::make_shared<Cope>(std::max<int64_t>(npos_max, 1), std::max<int64_t>(ctx.n_heads, 1),
                                  std::max<int64_t>(ctx.head_dim, 1));
  }

 private:
  int64_t npos_max_, heads_, head_dim_;
  torch::Tensor pos_emb_;  // [head_dim, npos_max]
};

}  // namespace

HYBRIDLAB_POSITION_PLUGIN("cope", "1.0",
                          "CoPE: contextual positions counted by gates over the keys "
                          "(Golovneva et al. 2024)",
                          Cope::create)
