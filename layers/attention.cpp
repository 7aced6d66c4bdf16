#include "layers/attention.h"

#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "hybridlab/error.h"
#include "hybridlab/position_hooks.h"
#include "hybridlab/runtime.h"
#include "layers/kernels/attention_tiled.h"
#include "layers/kernels/gated_deltanet_kernels.h"
#include "layers/kernels/linear_cpu.h"
#include "layers/kernels/path_attention.h"
#include "layers/kernels/recompute.h"
#include "layers/kernels/stick_breaking.h"

namespace hybridlab {

const char* normalization_name(AttentionNormalization n) {
  return n == AttentionNormalization::kStickBreaking ? "stick_breaking" : "softmax";
}

int64_t resolved_kv_heads(const AttentionOptions& o) {
  return o.n_kv_heads > 0 ? o.n_kv_heads : o.n_heads;
}

int64_t resolved_head_dim(const AttentionOptions& o, int64_t d_model) {
  return o.head_dim > 0 ? o.head_dim : d_model / o.n_heads;
}

Attention::Attention(const AttentionOptions& opts, int64_t d_model,
                     std::shared_ptr<PositionScheme> scheme, bool register_scheme)
    : opts_(opts),
      d_model_(d_model),
      n_heads_(opts.n_heads),
      n_kv_heads_(resolved_kv_heads(opts)),
      head_dim_(resolved_head_dim(opts, d_model)),
      hooks_(scheme ? scheme->hooks() : 0),
      scheme_(std::move(scheme)) {
  TORCH_CHECK(scheme_, "Attention: a positional scheme is required (use nope for none)");
  TORCH_CHECK(n_heads_ > 0 && head_dim_ > 0 && n_heads_ % n_kv_heads_ == 0,
              "Attention: bad head layout n_heads=", n_heads_, " n_kv_heads=", n_kv_heads_,
              " head_dim=", head_dim_);
  // The paper defines stick-breaking for causal attention only: the stick breaks from the
  // nearest earlier key backwards (the config reader refuses the pair at the key first).
  TORCH_CHECK(opts_.causal || opts_.normalization == AttentionNormalization::kSoftmax,
              "Attention: stick_breaking normalization needs causal attention");
  // The layer graph refuses such a scheme at its config key (mixer_attention.cpp).
  TORCH_CHECK(!(hooks_ & kHookEmbed), "Attention: scheme '", scheme_->name(),
              "' acts on the input embeddings (embed hook), not inside attention");
  TORCH_CHECK(
      !opts_.path || (opts_.causal && !(hooks_ & kHookRotate) && opts_.path_chunk_size >= 1),
      "Attention: PaTH needs causal attention, a scheme without the rotate hook (got '",
      scheme_->name(), "') and path_chunk_size >= 1");
  using torch::nn::LinearOptions;
  const int64_t q_width = n_heads_ * head_dim_ * (opts_.output_gate ? 2 : 1);
  q_proj =
      register_module("q_proj", torch::nn::Linear(LinearOptions(d_model, q_width).bias(false)));
  k_proj = register_module(
      "k_proj", torch::nn::Linear(LinearOptions(d_model, n_kv_heads_ * head_dim_).bias(false)));
  v_proj = register_module(
      "v_proj", torch::nn::Linear(LinearOptions(d_model, n_kv_heads_ * head_dim_).bias(false)));
  o_proj = register_module(
      "o_proj", torch::nn::Linear(LinearOptions(n_heads_ * head_dim_, d_model).bias(false)));
  if (opts_.qk_norm) {
    q_norm = register_module("q_norm", std::make_shared<RMSNorm>(head_dim_, opts_.norm_eps));
    k_norm = register_module("k_norm", std::make_shared<RMSNorm>(head_dim_, opts_.norm_eps));
  }
  if (opts_.use_short_conv) {
    TORCH_CHECK(opts_.conv_size >= 1, "Attention: conv_size must be >= 1");
    // PyTorch's Conv1d default init (kaiming-uniform with a = sqrt(5): bound 1/sqrt(fan_in)), as
    // Gated DeltaNet's convolutions.
    const double bound = 1.0 / std::sqrt(static_cast<double>(opts_.conv_size));
    const auto conv = [&](const char* name, int64_t channels) {
      return register_parameter(
          name, torch::empty({channels, 1, opts_.conv_size}).uniform_(-bound, bound));
    };
    q_conv = conv("q_conv", n_heads_ * head_dim_);
    k_conv = conv("k_conv", n_kv_heads_ * head_dim_);
    v_conv = conv("v_conv", n_kv_heads_ * head_dim_);
  }
  if (opts_.path) {
    // fla PaTHAttention: a rank-32 w projection when every query head has its own kv head.
    const int64_t kv_width = n_kv_heads_ * head_dim_;
    constexpr int64_t kRank = 32;
    w_proj = torch::nn::Sequential();
    if (n_kv_heads_ == n_heads_) {
      w_proj->push_back(torch::nn::Linear(LinearOptions(d_model, kRank).bias(false)));
      w_proj->push_back(torch::nn::Linear(LinearOptions(kRank, kv_width).bias(false)));
    } else {
      w_proj->push_back(torch::nn::Linear(LinearOptions(d_model, kv_width).bias(false)));
    }
    register_module("w_proj", w_proj);
    bt_proj = register_module("bt_proj",
                              torch::nn::Linear(LinearOptions(d_model, n_kv_heads_).bias(true)));
    if (opts_.path_w_shortconv) {
      constexpr int64_t kWConv = 3;  // fla ShortConvolution(kv_dim, 3)
      const double bound = 1.0 / std::sqrt(static_cast<double>(kWConv));
      w_conv1d = register_parameter("w_conv1d",
                                    torch::empty({kv_width, 1, kWConv}).uniform_(-bound, bound));
    }
  }
  if (register_scheme) register_module("position", scheme_);
}

PathTerms Attention::path_terms(const torch::Tensor& x, AttentionCache* cache) {
  const int64_t B = x.size(0), T = x.size(1);
  torch::Tensor w = w_proj->forward(x);  // [B,T,Hkv*Dh]
  if (opts_.path_w_shortconv)
    w = short_conv_with_tail(w, w_conv1d, cache ? &cache->conv_w : nullptr, opts_.fused_kernels);
  PathTerms t;
  t.w = l2_normalize(w.view({B, T, n_kv_heads_, head_dim_}), 1e-6, opts_.fused_kernels)
            .transpose(1, 2);
  t.beta = 2.0 * torch::sigmoid(bt_proj(x)).transpose(1, 2);  // [B,Hkv,T], in (0, 2)
  return t;
}

void Attention::convolve(torch::Tensor& q, torch::Tensor& k, torch::Tensor& v,
                         AttentionCache* cache) {
  if (!opts_.use_short_conv) return;
  const bool fused = opts_.fused_kernels;
  q = short_conv_with_tail(q, q_conv, cache ? &cache->conv_q : nullptr, fused);
  k = short_conv_with_tail(k, k_conv, cache ? &cache->conv_k : nullptr, fused);
  v = short_conv_with_tail(v, v_conv, cache ? &cache->conv_v : nullptr, fused);
}

int64_t Attention::active_window() const {
  if (ablation_.window <= 0) return opts_.window;
  return opts_.window > 0 ? std::min(opts_.window, ablation_.window) : ablation_.window;
}

int64_t AttentionCache::nbytes() const {
  return bytes_of({&k, &v, &positions, &conv_q, &conv_k, &conv_v, &bias_key, &bias_state, &conv_w});
}

std::unique_ptr<MixerCache> Attention::make_cache() const {
  return std::make_unique<AttentionCache>();
}

torch::Tensor Attention::forward(const torch::Tensor& x, const torch::Tensor& positions,
                                 MixerCache* cache_base) {
  TORCH_CHECK(x.dim() == 3 && x.size(2) == d_model_, "Attention: x must be [B,T,", d_model_,
              "], got ", x.sizes());
  const int64_t B = x.size(0), T = x.size(1);
  TORCH_CHECK(positions.dim() == 1 && positions.size(0) == T, "Attention: positions must be [", T,
              "], got ", positions.sizes());

  AttentionCache* cache = nullptr;
  if (cache_base) {
    cache = dynamic_cast<AttentionCache*>(cache_base);
    TORCH_CHECK(cache, "Attention: wrong cache type");
  }
  torch::Tensor q, gate;
  const torch::Tensor qp = q_proj(x);  // [B,T,H*Dh*(1|2)]
  if (opts_.output_gate) {
    const auto parts = qp.view({B, T, n_heads_, 2 * head_dim_}).split(head_dim_, -1);
    q = parts[0].reshape({B, T, n_heads_ * head_dim_});
    gate = parts[1];  // [B,T,H,Dh]
  } else {
    q = qp;
  }
  torch::Tensor k = k_proj(x), v = v_proj(x);  // [B,T,Hkv*Dh]
  convolve(q, k, v, cache);
  q = q.reshape({B, T, n_heads_, head_dim_}).transpose(1, 2);     // [B,H,T,Dh]
  k = k.reshape({B, T, n_kv_heads_, head_dim_}).transpose(1, 2);  // [B,Hkv,T,Dh]
  v = v.reshape({B, T, n_kv_heads_, head_dim_}).transpose(1, 2);
  if (opts_.qk_norm) {
    q = q_norm->forward(q);
    k = k_norm->forward(k);
  }

  // A data-dependent bias from this layer's input: two terms [B,H,T] per call (position.h).
  SeparableBias separable;
  torch::Tensor bias_state;
  const bool data_bias = (active_hooks() & kHookDataBias) != 0;
  if (data_bias) {
    DataBias d = checked_data_bias(*scheme_, x, positions,
                                   cache ? cache->bias_state : torch::Tensor(), n_heads_);
    separable.query = std::move(d.query);
    separable.key = std::move(d.key);
    bias_state = std::move(d.state);
  }

  // PaTH's transforms; the position ablation knocks them out with the other position signals.
  PathTerms path;
  if (opts_.path && !ablation_.no_position) path = path_terms(x, cache);

  torch::Tensor k_pos = positions;
  if (cache) {
    const torch::Tensor k_new = k;
    if (cache->k.defined()) {
      k = torch::cat({cache->k, k}, 2);
      v = torch::cat({cache->v, v}, 2);
      k_pos = torch::cat({cache->positions, positions}, 0);
      if (data_bias) {
        TORCH_CHECK(cache->bias_key.defined(), "Attention: the decoding cache has keys without '",
                    scheme_->name(), "' key terms (the ablation changed during decoding)");
        separable.key =
            torch::cat({cache->bias_key.to(separable.key.scalar_type()), separable.key}, 2);
      }
    }
    // Keep unrotated keys; with a window only the keys a later query can still see.
    const int64_t window = active_window();
    const int64_t keep = window > 0 ? std::min<int64_t>(window, k.size(2)) : k.size(2);
    // PaTH decodes with keys carried through every later transform (§3.3).
    // The transforms run in fp32 at least (as attend() computes PaTH's scores), stored as k.
    torch::Tensor stored = k;
    if (path.defined()) {
      const auto wide = k.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
      const auto as_wide = [&](const torch::Tensor& t) { return t.defined() ? t.to(wide) : t; };
      stored = path_transform_keys(as_wide(cache->k), as_wide(k_new), as_wide(path.w),
                                   as_wide(path.beta), opts_.path_chunk_size)
                   .to(k.scalar_type());
    }
    cache->k = stored.narrow(2, stored.size(2) - keep, keep);
    cache->v = v.narrow(2, v.size(2) - keep, keep);
    cache->positions = k_pos.narrow(0, k_pos.size(0) - keep, keep);
    if (data_bias) {
      // Each key's term as it was computed when the key was new: the per-key state.
      cache->bias_key = separable.key.narrow(2, separable.key.size(2) - keep, keep);
      cache->bias_state = bias_state;
    }
  }
  if (active_hooks() & kHookRotate)
    std::tie(q, k) = checked_rotate(*scheme_, q, k, positions, k_pos);

  torch::Tensor o = attend(q, k, v, positions, k_pos, opts_.block_size, opts_.fused_kernels,
                           separable, path);  // [B,H,T,Dh]
  o = o.transpose(1, 2);                      // [B,T,H,Dh]
  if (opts_.output_gate) o = o * torch::sigmoid(gate);
  return o_proj(o.reshape({B, T, n_heads_ * head_dim_}));
}

bool Attention::use_tiled(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          const SeparableBias& separable, const PathTerms& path) const {
  if (probe_ || attend_path_ == AttendPath::kDense) return false;  // a probe needs the weights
  if (path.defined()) return false;  // PaTH's scores are dense-path only
  // A content bias (CoPE) needs each query's whole row at once.
  if (active_hooks() & kHookContentBias) return false;
  // The stick-breaking tiles take q, k and v alone (a rotation is applied before): no bias.
  const bool stick = opts_.normalization == AttentionNormalization::kStickBreaking;
  if (stick && ((active_hooks() & (kHookLogitBias | kHookRelative)) || separable.defined()))
    return false;
  const auto dtype = q.scalar_type();
  if ((dtype != torch::kFloat && dtype != torch::kDouble) || k.scalar_type() != dtype ||
      v.scalar_type() != dtype) {
    return false;
  }
  if (attend_path_ == AttendPath::kTiled) return true;
  if (!opts_.fused_kernels) return false;  // the reference run: the dense matmul-softmax path
  // The crossover was measured on the CPU; other devices keep their fused kernels.
  const int64_t min_queries = stick                              ? kTiledMinQueriesStickBreaking
                              : (active_hooks() & kHookRelative) ? kTiledMinQueriesRelative
                                                                 : kTiledMinQueries;
  if (!q.device().is_cpu() || q.size(2) < min_queries || !torch::GradMode::is_enabled()) {
    return false;
  }
  if (q.requires_grad() || k.requires_grad() || v.requires_grad()) return true;
  if (separable.defined() && (separable.query.requires_grad() || separable.key.requires_grad()))
    return true;
  if (active_hooks() & (kHookLogitBias | kHookRelative)) {
    for (const torch::Tensor& p : scheme_->parameters()) {
      if (p.requires_grad()) return true;
    }
  }
  return false;
}

// The tensors one query block of the dense path reads (undefined where absent), and where the
// block sits.
struct DenseBlockInputs {
  torch::Tensor qb, kb, vb;                      // [B,H,bq,Dh], [B,H,bk,Dh] (kv heads repeated)
  torch::Tensor separable_query, separable_key;  // [B,H,bq], [B,H,bk]
  PathChunks path;                               // the segment's PaTH chunks (the whole segment)
  torch::Tensor path_cached;                     // PaTH's transformed cached keys [B,H,Tc,Dh]

  // The defined tensors in a fixed order, and back (recompute_in_backward's flat inputs).
  std::vector<torch::Tensor> flat() const {
    std::vector<torch::Tensor> v;
    for (const torch::Tensor* t : fields()) {
      if (t->defined()) v.push_back(*t);
    }
    return v;
  }
  DenseBlockInputs with(const std::vector<torch::Tensor>& v) const {
    DenseBlockInputs r = *this;
    size_t i = 0;
    for (torch::Tensor* t : r.fields()) {
      if (t->defined()) *t = v.at(i++);
    }
    return r;
  }
  std::vector<const torch::Tensor*> fields() const { return fields_of(*this); }
  std::vector<torch::Tensor*> fields() { return fields_of(*this); }

 private:
  template <typename Self>
  static auto fields_of(Self& s) -> std::vector<decltype(&s.qb)> {
    return {&s.qb,
            &s.kb,
            &s.vb,
            &s.separable_query,
            &s.separable_key,
            &s.path.q_tilde,
            &s.path.k_tilde_w,
            &s.path.u,
            &s.path.intra,
            &s.path_cached};
  }
};

struct DenseBlockGeometry {
  int64_t q0, q1, k_begin, k_end;  // the block's queries and the keys it may see
  torch::Tensor qpb, kpb, visible;
};

bool Attention::use_recompute(const torch::Tensor& q) const {
  if (probe_ || attend_path_ == AttendPath::kDense || !torch::GradMode::is_enabled()) return false;
  if (q.scalar_type() != torch::kFloat && q.scalar_type() != torch::kDouble) return false;
  if (attend_path_ == AttendPath::kTiled) return true;
  return q.device().is_cpu() && q.size(2) >= kRecomputeMinQueries;
}

torch::Tensor Attention::attend(const torch::Tensor& q, const torch::Tensor& k_in,
                                const torch::Tensor& v_in, const torch::Tensor& q_pos,
                                const torch::Tensor& k_pos, int64_t block_size, bool allow_fused,
                                const SeparableBias& separable, const PathTerms& path) {
  // Scores, softmax and the bias hooks in the caller's dtype or fp32, never autocast to bf16
  // (hybridlab/runtime.h); SDPA on a GPU takes bf16 q, k, v as they come.
  NoAutocast no_autocast;
  const int64_t Tq = q.size(2), Tk = k_in.size(2);
  TORCH_CHECK(Tk >= Tq, "Attention::attend: fewer keys (", Tk, ") than queries (", Tq, ")");
  TORCH_CHECK(block_size > 0, "Attention::attend: block_size must be > 0");
  if (separable.defined()) {
    TORCH_CHECK(
        separable.query.dim() == 3 && separable.query.size(2) == Tq && separable.key.defined() &&
            separable.key.dim() == 3 && separable.key.size(2) == Tk,
        "Attention::attend: separable bias terms must be [B,H,", Tq, "] and [B,H,", Tk, "]");
  }
  if (use_tiled(q, k_in, v_in, separable, path)) {
    if (opts_.normalization == AttentionNormalization::kStickBreaking) {
      StickBreakingTiles t;
      t.window = active_window();
      t.scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
      const int64_t groups = n_heads_ / n_kv_heads_;
      return stick_breaking_attention_tiled(
          q, groups > 1 ? k_in.repeat_interleave(groups, 1) : k_in,
          groups > 1 ? v_in.repeat_interleave(groups, 1) : v_in, t);
    }
    TiledAttentionOptions t;
    t.causal = opts_.causal;
    t.window = active_window();
    t.scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
    t.hooks = active_hooks();
    return tiled_attention(q, k_in, v_in, q_pos, k_pos, scheme_, t, separable);
  }
  const int64_t groups = n_heads_ / n_kv_heads_;
  // Query head h reads kv head h / groups (repeat_interleave, not tile).
  const torch::Tensor k = groups > 1 ? k_in.repeat_interleave(groups, 1) : k_in;
  const torch::Tensor v = groups > 1 ? v_in.repeat_interleave(groups, 1) : v_in;
  const int64_t n_cached = Tk - Tq;
  const int64_t W = active_window();
  const bool causal = opts_.causal;
  const bool need_scores =
      (active_hooks() & (kHookLogitBias | kHookRelative | kHookContentBias)) != 0 ||
      separable.defined() || probe_ || opts_.normalization != AttentionNormalization::kSoftmax ||
      path.defined();
  PathChunks path_chunks;
  torch::Tensor path_cached;  // the cached keys, already transformed, in the PaTH dtype
  if (path.defined()) {
    const auto dtype = q.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
    const auto heads = [&](const torch::Tensor& t) {
      return (groups > 1 ? t.repeat_interleave(groups, 1) : t).to(dtype);
    };
    TORCH_CHECK(path.w.size(2) == Tq && path.beta.size(2) == Tq,
                "Attention::attend: PaTH terms must cover the ", Tq, " queries");
    path_chunks = path_prepare(q.to(dtype), k.narrow(2, n_cached, Tq).to(dtype), heads(path.w),
                               heads(path.beta), opts_.path_chunk_size);
    if (n_cached > 0) path_cached = k.narrow(2, 0, n_cached).to(dtype);
  }

  // Without autograd (evaluation, prefill), query blocks small enough that one block's scores
  // stay under kEvalScoreBlockBytes: glibc maps every allocation past its mmap threshold (at most
  // 32 MiB) afresh and the kernel zeroes its pages, which made page faults a third of evaluating
  // at 512 tokens (batch 16, 4 heads: 64 MiB of scores per block). Each query row's scores are
  // the same whatever the block; training keeps its blocks (and its tiled path at long lengths).
  int64_t step = block_size;
  if (!torch::GradMode::is_enabled()) {
    const int64_t per_query = q.size(0) * n_heads_ * Tk * static_cast<int64_t>(sizeof(float));
    step =
        std::clamp<int64_t>(kEvalScoreBlockBytes / std::max<int64_t>(per_query, 1), 1, block_size);
  }
  // PaTH scans whole chunks of queries.
  if (path.defined()) step = (step + path_chunks.chunk - 1) / path_chunks.chunk * path_chunks.chunk;
  const bool recompute = use_recompute(q);
  std::vector<torch::Tensor> outs;
  for (int64_t q0 = 0; q0 < Tq; q0 += step) {
    const int64_t q1 = std::min(Tq, q0 + step);
    // Key index range that can be visible to this block (queries are the last Tq keys).
    int64_t k_end = causal ? n_cached + q1 : Tk;
    int64_t k_begin = 0;
    if (W > 0) {
      k_begin = std::max<int64_t>(0, n_cached + q0 - W + 1);
      if (!causal) k_end = std::min(Tk, n_cached + q1 - 1 + W);
    }
    const torch::Tensor qb = q.narrow(2, q0, q1 - q0);  // [B,H,bq,Dh]
    const torch::Tensor kb = k.narrow(2, k_begin, k_end - k_begin);
    const torch::Tensor vb = v.narrow(2, k_begin, k_end - k_begin);
    const torch::Tensor qpb = q_pos.narrow(0, q0, q1 - q0);
    const torch::Tensor kpb = k_pos.narrow(0, k_begin, k_end - k_begin);
    const torch::Tensor visible = visible_pairs(qpb, kpb, causal, W);

#if defined(TORCH_VERSION_MAJOR) && TORCH_VERSION_MAJOR >= 2
    if (allow_fused && !need_scores) {
      c10::optional<torch::Tensor> mask;
      if (visible.defined()) mask = visible;
      outs.push_back(at::scaled_dot_product_attention(qb, kb, vb, mask, 0.0, false));
      continue;
    }
#else
    (void)allow_fused;
    (void)need_scores;
#endif
    DenseBlockInputs in;
    in.qb = qb;
    in.kb = kb;
    in.vb = vb;
    if (separable.defined()) {
      in.separable_query = separable.query.narrow(2, q0, q1 - q0);
      in.separable_key = separable.key.narrow(2, k_begin, k_end - k_begin);
    }
    if (path.defined()) {
      in.path = path_chunks;
      in.path_cached = path_cached;
    }
    const DenseBlockGeometry geometry{q0, q1, k_begin, k_end, qpb, kpb, visible};
    outs.push_back(recompute ? recomputed_block(geometry, in) : dense_block(geometry, in));
  }
  return outs.size() == 1 ? outs[0] : torch::cat(outs, 2);
}

torch::Tensor Attention::dense_block(const DenseBlockGeometry& g, const DenseBlockInputs& in) {
  torch::Tensor separable_tile;  // query_i + key_j, added as the tiled path does (one sum)
  if (in.separable_query.defined()) {
    separable_tile = in.separable_query.unsqueeze(-1) + in.separable_key.unsqueeze(-2);
  }
  torch::Tensor raw;
  if (in.path.q_tilde.defined()) {
    raw = path_block_scores(in.path, in.path_cached, g.q0, g.q1)
              .narrow(3, g.k_begin, g.k_end - g.k_begin);
  }
  return reference_block(in.qb, in.kb, in.vb, g.qpb, g.kpb, g.visible, separable_tile, raw);
}

torch::Tensor Attention::recomputed_block(const DenseBlockGeometry& g, const DenseBlockInputs& in) {
  // The scheme's parameters the hooks read reach their gradients through the recomputation.
  std::vector<torch::Tensor> params;
  if (active_hooks() & (kHookLogitBias | kHookRelative | kHookContentBias)) {
    for (const torch::Tensor& p : scheme_->parameters()) {
      if (p.requires_grad()) params.push_back(p);
    }
  }
  // The lambda keeps the layout (which tensors are present) and the geometry, not the tensors.
  DenseBlockInputs layout = in;
  for (torch::Tensor* t : layout.fields()) {
    if (t->defined()) *t = torch::empty({0});
  }
  return recompute_in_backward(
      [this, g, layout](const std::vector<torch::Tensor>& v) {
        return dense_block(g, layout.with(v));
      },
      in.flat(), params);
}

torch::Tensor Attention::reference_block(const torch::Tensor& qb, const torch::Tensor& kb,
                                         const torch::Tensor& vb, const torch::Tensor& qpb,
                                         const torch::Tensor& kpb, const torch::Tensor& visible,
                                         const torch::Tensor& separable_tile,
                                         const torch::Tensor& raw_scores) {
  const uint32_t hooks = active_hooks();
  const bool low_precision =
      qb.scalar_type() == torch::kHalf || qb.scalar_type() == torch::kBFloat16;
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
  // On the CPU, batch entries spread over the threads (matmul_cpu); elsewhere LibTorch's.
  torch::Tensor scores =
      raw_scores.defined() ? raw_scores
      : matmul_cpu_applies(qb, kb, true)
          ? matmul_cpu(qb, kb, /*trans_b=*/true)
          : torch::matmul(low_precision ? qb.to(torch::kFloat) : qb,
                          (low_precision ? kb.to(torch::kFloat) : kb).transpose(-1, -2));
  if (hooks & kHookRelative) {
    scores = scores + checked_relative_logits(*scheme_, qb, qpb, kpb, scores.scalar_type())
                          .to(scores.scalar_type());
  }
  if (hooks & kHookContentBias) {
    scores =
        scores + checked_content_bias(*scheme_, low_precision ? qb.to(scores.scalar_type()) : qb,
                                      scores, qpb, kpb, visible);
  }
  scores = scores * scale;
  if (hooks & kHookLogitBias) {
    scores = scores + checked_logit_bias(*scheme_, qpb, kpb, n_heads_, qb.scalar_type(),
                                         scores.scalar_type(), qb.device())
                          .to(scores.scalar_type())
                          .unsqueeze(0);
  }
  if (separable_tile.defined()) scores = scores + separable_tile.to(scores.scalar_type());
  torch::Tensor probs;
  if (opts_.normalization == AttentionNormalization::kStickBreaking) {
    probs = stick_breaking_weights(scores, qpb, kpb, visible);
  } else {
    if (visible.defined()) {
      scores = scores.masked_fill(visible.logical_not(), -std::numeric_limits<double>::infinity());
    }
    probs = torch::softmax(scores, -1);
  }
  if (probe_) probe_(probs, qpb, kpb);
  torch::Tensor ob = matmul_cpu_applies(probs, vb, false)
                         ? matmul_cpu(probs, vb, /*trans_b=*/false)
                         : torch::matmul(probs, low_precision ? vb.to(torch::kFloat) : vb);
  if (hooks & kHookRelative) {
    const torch::Tensor rv =
        checked_relative_values(*scheme_, probs, qpb, kpb, head_dim_, qb.scalar_type());
    if (rv.defined()) ob = ob + rv.to(ob.scalar_type());
  }
  return ob.to(qb.scalar_type());
}

MixerInfo Attention::info(int64_t length) const {
  MixerInfo m;
  // PaTH is the layer's own position method; a scheme with hooks adds to it (PaTH-FoX).
  if (!opts_.path)
    m.position = scheme_->name();
  else
    m.position = hooks_ == kHookNone ? "path" : "path+" + scheme_->name();
  m.position_hooks = hooks_;
  m.pairwise = true;
  m.kv_floats_per_token = 2 * n_kv_heads_ * head_dim_;
  m.kv_max_tokens = opts_.window;
  // Average number of keys a query attends to at this length.
  double keys = 0;
  const double L = static_cast<double>(std::max<int64_t>(length, 1));
  if (opts_.causal) {
    if (opts_.window > 0 && opts_.window < length) {
      const double W = static_cast<double>(opts_.window);
      keys = (W * (W + 1) / 2 + (L - W) * W) / L;
    } else {
      keys = (L + 1) / 2;
    }
  } else {
    keys = opts_.window > 0 ? std::min<double>(L, 2.0 * opts_.window - 1) : L;
  }
  double proj = 2.0 * d_model_ * head_dim_ *
                (n_heads_ * (opts_.output_gate ? 2 : 1) + 2 * n_kv_heads_ + n_heads_);
  double per_key = 4.0 * n_heads_ * head_dim_;  // q·k and the weighted sum of v
  if (opts_.path) {
    for (const auto& p : w_proj->parameters()) proj += 2.0 * static_cast<double>(p.numel());
    proj += 2.0 * d_model_ * n_kv_heads_;
    // Per key chunk of C keys a query also carries itself across the chunk: q·Wᵀ (2·C·Dh), ·T⁻¹
    // (2·C²) and ·W (2·C·Dh), beside its C scores (path_block_scores).
    per_key += n_heads_ * (4.0 * head_dim_ + 2.0 * static_cast<double>(opts_.path_chunk_size));
  }
  const int64_t conv_width = (n_heads_ + 2 * n_kv_heads_) * head_dim_;
  const bool conv = opts_.use_short_conv;
  m.state_floats = conv ? (opts_.conv_size - 1) * conv_width : 0;
  if (opts_.path && opts_.path_w_shortconv) m.state_floats += 2 * n_kv_heads_ * head_dim_;
  // A data_bias scheme's key terms: the cache keeps one per key and head beside the key.
  if (hooks_ & kHookDataBias) m.kv_floats_per_token += n_heads_;
  // The scheme's own work, when it counts it (kHookFlops, plugin API v2).
  const double scheme = (hooks_ & kHookFlops) ? scheme_->flops_per_token(length, keys) : 0.0;
  m.flops_per_token =
      proj + per_key * keys + (conv ? 2.0 * opts_.conv_size * conv_width : 0.0) + scheme;
  m.details = "H=" + std::to_string(n_heads_) + " Hkv=" + std::to_string(n_kv_heads_) +
              " Dh=" + std::to_string(head_dim_) + (opts_.causal ? "" : " bidir") +
              (opts_.window > 0 ? " window=" + std::to_string(opts_.window) : "") +
              (opts_.qk_norm ? " qk_norm" : "") + (opts_.output_gate ? " gate" : "") +
              (conv ? " conv=" + std::to_string(opts_.conv_size) : "") +
              (opts_.normalization == AttentionNormalization::kSoftmax ? "" : " stick_breaking") +
              (opts_.path ? " path" : "");
  return m;
}

}  // namespace hybridlab
