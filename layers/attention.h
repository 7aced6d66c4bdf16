#pragma once
// Multi-head attention with grouped-query heads, causal or bidirectional masking, an optional
// sliding window, optional qk-norm and sigmoid output gate (Qwen3-Next "gated attention"), and the
// positional-scheme hooks of DESIGN.md §2, normalised by softmax or by stick-breaking. Computed by
// query blocks so a long sequence never materialises a full [H,T,T] score tensor; in training, long
// sequences take the tiled FlashAttention-2 path (layers/kernels/attention_tiled.h), so autograd
// does not keep the softmax weights of every block either.
//
// Sources: Vaswani et al. 2017 (scaled dot-product attention, eq. 1); Ainslie et al. 2023 (GQA:
// query head h reads key/value head h / (n_heads / n_kv_heads)); Qwen3-Next (HF
// `Qwen3NextAttention`: q_proj of twice the width, per head query then gate, output ⊙
// sigmoid(gate); per-head q/k RMSNorm); Tan et al. 2024, "Scaling Stick-Breaking Attention"
// (arXiv 2410.17980), §2 eq. 1–2 (stick-breaking weights, computed in log space) with the
// leftover weight on the query's own value as shawntan/stickbreaking-attention@3147a38's
// tests/test_attn.py adds it.

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "hybridlab/mixer.h"
#include "hybridlab/position.h"
#include "layers/kernels/attention_tiled.h"
#include "layers/norm.h"

namespace hybridlab {

/// How a query's weights over its visible keys are formed (`model.attention.normalization`).
enum class AttentionNormalization {
  kSoftmax,  ///< softmax over the visible keys (Vaswani et al. 2017, eq. 1)
  /// Stick-breaking (Tan et al. 2024, eq. 1–2), causal only: with z_ij the scaled logit (after
  /// every bias hook) and β_ij = σ(z_ij), key j < i gets A_ij = β_ij ∏_{j<k<i} (1 − β_ik), the
  /// stick broken from the nearest earlier key backwards, and the query's own key gets the
  /// leftover ∏_{k<i} (1 − β_ik) = 1 − Σ_j A_ij (so the weights sum to 1 and the first token reads
  /// its own value). Only visible keys (window) break the stick.
  kStickBreaking,
};

/// The config spelling of `n`: "softmax" or "stick_breaking".
const char* normalization_name(AttentionNormalization n);

/// The layer's options (the `model.attention` section without its `position:` map, which the
/// layer graph turns into the PositionScheme the constructor takes).
struct AttentionOptions {
  int64_t n_heads = 4;     ///< query heads
  int64_t n_kv_heads = 0;  ///< key/value heads (GQA); 0 = n_heads. Must divide n_heads.
  int64_t head_dim = 0;  ///< channels per head; 0 = d_model / n_heads (n_heads must divide d_model)
  bool causal = true;    ///< causal (decoder) or bidirectional masking
  int64_t window = 0;    ///< sliding window: query i sees keys j with 0 <= i-j < window (|i-j| <
                         ///< window when bidirectional); 0 = unlimited
  bool qk_norm = false;  ///< RMSNorm over head_dim on q and k (shared across heads), before rotate
  bool output_gate = false;  ///< Qwen3-Next sigmoid output gate
  int64_t block_size = 512;  ///< queries per block
  double norm_eps = 1e-6;    ///< eps of the qk-norm
  /// A causal depthwise short convolution (kernel `conv_size`, SiLU) on the q, k and v
  /// projections before the heads, as Gated DeltaNet has (fla `ShortConvolution`): it hands every
  /// position its predecessors' projections, the previous-token half of an induction head that
  /// full attention otherwise learns from its positional signal. Zoology puts a short convolution
  /// before every mixer, attention included (Arora et al. 2024, Based §3 and its code's BaseConv;
  /// the Forgetting Transformer's "Pro" block shifts keys and values alike, Lin et al. 2025 §3.2).
  bool use_short_conv = false;
  int64_t conv_size = 4;  ///< kernel size of that convolution (>= 1)
  /// Softmax or stick-breaking weights; stick-breaking needs `causal` (the constructor throws
  /// otherwise; the config reader refuses it at the key first).
  AttentionNormalization normalization = AttentionNormalization::kSoftmax;
  /// PaTH attention (Yang et al. 2025, arXiv 2505.16381; fla `PaTHAttention`): the logit of
  /// query i on key j is q_iᵀ H_i ⋯ H_{j+1} k_j (layers/kernels/path_attention.h) with H_t = I −
  /// β_t w_t w_tᵀ per kv head, w_t = L2norm(SiLU(ShortConv₃(w_proj x_t))) and β_t =
  /// 2σ(bt_proj x_t) ∈ (0, 2) (negative eigenvalues allowed, as fla does). w_proj is low-rank
  /// (d_model → 32 → kv width) when n_kv_heads == n_heads, a full projection otherwise, as in fla.
  /// Needs `causal`; a scheme with the rotate hook cannot combine with it (the paper uses no RoPE;
  /// the layer graph refuses the pair at the scheme's key, the constructor throws); every additive
  /// hook can (with FoX's forget gate it is PaTH-FoX).
  bool path = false;
  bool path_w_shortconv = true;  ///< the short convolution on w (fla `use_w_shortconv`)
  int64_t path_chunk_size = 64;  ///< tokens per UT chunk of the score computation (>= 1)
  /// The fused CPU short-convolution taps and L2 norm, SDPA per block (LibTorch 2.x) and the tiled
  /// kernels under AttendPath::kAuto, each tested equal to its reference; false runs the LibTorch
  /// tensor forms and the dense matmul-softmax path, the reference run. Set from
  /// model.fused_kernels when the model is built (not a key of `model.attention`).
  bool fused_kernels = true;
};

/// n_kv_heads and head_dim with the automatic values filled in.
int64_t resolved_kv_heads(const AttentionOptions& o);
int64_t resolved_head_dim(const AttentionOptions& o, int64_t d_model);

/// PaTH's per-token transforms of the new keys (Attention::attend): w [B,Hkv,Tq,Dh] unit rows and
/// beta [B,Hkv,Tq] of the last Tq keys; both undefined when the layer is not PaTH.
struct PathTerms {
  torch::Tensor w, beta;
  bool defined() const { return w.defined(); }
};

/// Which code attend() runs (Attention::set_attend_path).
enum class AttendPath {
  kAuto,   ///< tiled when training at or above Attention::kTiledMinQueries queries, else dense
  kDense,  ///< the per-query-block path (matmul-mask-softmax, or SDPA where allowed)
  kTiled,  ///< tiled_attention (layers/kernels/attention_tiled.h) for fp32/fp64, with or without
           ///< autograd
};

/// KV cache of one attention layer: keys are stored UNrotated (after qk-norm) and the rotate hook
/// is applied to all keys at every call, so schemes whose rotation depends on the length (dynamic
/// NTK) stay exact. With a window only the last `window` keys are kept.
struct AttentionCache : MixerCache {
  torch::Tensor k;          ///< [B,Hkv,Tc,Dh], undefined when empty
  torch::Tensor v;          ///< [B,Hkv,Tc,Dh]
  torch::Tensor positions;  ///< [Tc] int64
  /// With the short convolution: the last conv_size−1 projections [B,conv_size−1,C] of q, k, v
  /// (before the convolution), undefined when empty.
  torch::Tensor conv_q, conv_k, conv_v;
  /// With a data_bias scheme (FoX): each cached key's term [B,H,Tc] (windowed as k), and the
  /// scheme's own state after the last token (DataBias::state).
  torch::Tensor bias_key, bias_state;
  /// With PaTH: the last 2 w projections [B,2,Hkv*Dh] before their short convolution. Cached
  /// keys (`k`) are then stored transformed by every later H, as the paper decodes (§3.3).
  torch::Tensor conv_w;
  int64_t nbytes() const override;
};

struct DenseBlockInputs;
struct DenseBlockGeometry;

class Attention : public Mixer {
 public:
  /// scheme: the positional scheme (never null; NoPE is a scheme). register_scheme: register it as
  /// the submodule "position" (false when the model owns a scheme shared across layers).
  /// Throws c10::Error if the scheme uses the embed hook (that belongs to `model.position`; the
  /// layer graph refuses it at the config key first), stick-breaking or PaTH is asked of a
  /// bidirectional layer, PaTH of a scheme with the rotate hook, or path_chunk_size < 1.
  Attention(const AttentionOptions& opts, int64_t d_model, std::shared_ptr<PositionScheme> scheme,
            bool register_scheme);

  /// x [B,T,d_model], positions [T] int64 consecutive → [B,T,d_model]. See Mixer::forward.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& positions,
                        MixerCache* cache) override;
  std::unique_ptr<MixerCache> make_cache() const override;
  MixerInfo info(int64_t length) const override;

  /// The attention core. q [B,H,Tq,Dh], k and v [B,Hkv,Tk,Dh] (already rotated), q_pos [Tq],
  /// k_pos [Tk]; queries are the last Tq keys (key index Tk-Tq+i is query i); `separable`: a
  /// data-dependent bias query [B,H,Tq] + key [B,H,Tk] (the data_bias hook's terms, cached keys'
  /// first) or none. Returns [B,H,Tq,Dh].
  /// Dense path: by query blocks of `block_size` (the reference matmul-mask-softmax path when
  /// `allow_fused` is false or a bias/relative hook or separable bias is active;
  /// at::scaled_dot_product_attention
  /// per block otherwise, LibTorch >= 2 only); autograd keeps every block's softmax weights, O(T²)
  /// memory in training. Tiled path (tiled_attention, O(T·Dh) memory in training): taken with
  /// AttendPath::kAuto when no probe is set, q, k, v are fp32/fp64 CPU tensors, grad mode is on,
  /// q, k, v, a separable term or a parameter of the bias/relative hooks requires grad, and Tq >=
  /// kTiledMinQueries (kTiledMinQueriesRelative with a relative hook); always with
  /// AttendPath::kTiled unless a probe is set or the dtype is not fp32/fp64. A content_bias
  /// hook (CoPE), which needs each query's whole row at once, is computed on the dense reference
  /// path only; stick-breaking weights take stick_breaking_attention_tiled
  /// (layers/kernels/stick_breaking.h) instead of tiled_attention, from
  /// kTiledMinQueriesStickBreaking queries, unless a bias, relative or separable term is active
  /// (dense path then). Throws c10::Error when Tk < Tq, block_size <= 0 or separable terms of the
  /// wrong length. `path` (PaTH layers): the logits are PaTH's (path_block_scores) on the dense
  /// path, the cached keys (the first Tk − Tq) already transformed, query blocks rounded up to
  /// whole chunks; q, k and the terms are computed in fp32 at least.
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& q_pos, const torch::Tensor& k_pos, int64_t block_size,
                       bool allow_fused = true, const SeparableBias& separable = {},
                       const PathTerms& path = {});

  const PositionScheme* position_scheme() const override { return scheme_.get(); }
  /// Causal attention runs each packed document as its own row; bidirectional attention would
  /// read the zero padding after a short document, so it cannot.
  DocumentBoundaries document_boundaries() const override {
    return opts_.causal ? DocumentBoundaries::kSeparateRows : DocumentBoundaries::kUnsupported;
  }
  /// Applies `a` to every later forward (AttentionAblation{} restores the trained layer).
  void set_ablation(const AttentionAblation& a) override { ablation_ = a; }
  /// Observes attention weights through `probes.attention` (see set_probe).
  void set_probes(const MixerProbes& probes) override { set_probe(probes.attention); }
  const AttentionAblation& ablation() const { return ablation_; }
  /// Sets (or, with an empty function, removes) the observer of attention weights. While one is
  /// set, attend() takes the reference (matmul-mask-softmax) path so the weights exist.
  void set_probe(AttentionProbe probe) { probe_ = std::move(probe); }
  /// Chooses attend()'s path (AttendPath::kAuto by default).
  void set_attend_path(AttendPath path) { attend_path_ = path; }
  AttendPath attend_path() const { return attend_path_; }
  /// Query length from which kAuto trains with the tiled path: below it the dense path's few
  /// large matmuls are faster than the tiled path's many small ones (bench_attention_train, one
  /// core, 4 heads of 64: tiled/dense time 1.10 at 128 queries, 0.92 at 256 without hooks, 1.02
  /// with T5's bias; docs/layers.md).
  static constexpr int64_t kTiledMinQueries = 256;
  /// The same with a relative hook (Shaw), whose tiled backward rebuilds each tile under autograd:
  /// tiled/dense 1.28 at 2048 queries, 1.50 at 3072, 0.43 at 4096.
  static constexpr int64_t kTiledMinQueriesRelative = 4096;
  /// The same for stick-breaking weights, whose dense path is one fused pass per row
  /// (layers/kernels/stick_breaking.h): bench_attention_train BM_StickBreakingTrainTime, one core,
  /// 4 heads of 64, tiled/dense time 1.21 at 512, 1.60 at 2048, 0.50 at 4096.
  static constexpr int64_t kTiledMinQueriesStickBreaking = 4096;
  /// Query length from which kAuto trains the variants that have no tiled path (PaTH, a
  /// content_bias hook, stick-breaking with a bias) by recomputing each query block's scores in
  /// the backward instead of keeping them: O(T·Dh) memory per head plus one block's scores.
  static constexpr int64_t kRecomputeMinQueries = 4096;
  /// Without autograd, the dense path's query blocks keep their scores under this many bytes.
  static constexpr int64_t kEvalScoreBlockBytes = int64_t{8} << 20;

  const AttentionOptions& options() const { return opts_; }
  const std::shared_ptr<PositionScheme>& scheme() const { return scheme_; }
  int64_t n_heads() const { return n_heads_; }
  int64_t n_kv_heads() const { return n_kv_heads_; }
  int64_t head_dim() const { return head_dim_; }

 private:
  AttentionOptions opts_;
  int64_t d_model_, n_heads_, n_kv_heads_, head_dim_;
  uint32_t hooks_;
  std::shared_ptr<PositionScheme> scheme_;
  AttentionAblation ablation_;
  AttentionProbe probe_;
  AttendPath attend_path_ = AttendPath::kAuto;
  /// Whether attend() takes the tiled path for these inputs (see attend()).
  bool use_tiled(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                 const SeparableBias& separable, const PathTerms& path) const;
  /// The positional hooks and the window in effect (the trained ones unless ablated).
  uint32_t active_hooks() const { return ablation_.no_position ? 0u : hooks_; }
  int64_t active_window() const;
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  std::shared_ptr<RMSNorm> q_norm, k_norm;
  torch::Tensor q_conv, k_conv, v_conv;   ///< short-convolution weights [C,1,conv_size]
  torch::nn::Sequential w_proj{nullptr};  ///< PaTH's w projection (low-rank with MHA)
  torch::nn::Linear bt_proj{nullptr};     ///< PaTH's β projection, one per kv head
  torch::Tensor w_conv1d;                 ///< PaTH's short convolution on w [Hkv*Dh,1,3]
  /// PaTH's w [B,Hkv,T,Dh] and β [B,Hkv,T] for x [B,T,d_model], continuing the cache's
  /// convolution history when `cache` is set.
  PathTerms path_terms(const torch::Tensor& x, AttentionCache* cache);
  /// One query block of attend()'s reference path: scores qb·kbᵀ (or `raw_scores` [B,H,bq,bk]
  /// when defined: PaTH's) (+ relative logits), scaled,
  /// + logit bias + `separable_tile` [B,H,bq,bk] (or undefined), masked by `visible`, softmax (the
  /// probe sees it), times vb (+ relative values). qb [B,H,bq,Dh], kb and vb [B,H,bk,Dh] (kv
  /// heads already repeated). Returns [B,H,bq,Dh] in qb's dtype.
  /// One query block of the dense path from its tensors (`in`, undefined where absent) and its
  /// place `g`: the separable tile, PaTH's raw scores and reference_block.
  torch::Tensor dense_block(const DenseBlockGeometry& g, const DenseBlockInputs& in);
  /// dense_block through recompute_in_backward (layers/kernels/recompute.h): its scores are not
  /// kept for the backward but computed again there.
  torch::Tensor recomputed_block(const DenseBlockGeometry& g, const DenseBlockInputs& in);
  /// Whether attend()'s dense path recomputes its blocks in the backward: in training, fp32 or
  /// fp64, no probe, and AttendPath::kTiled, or kAuto on the CPU from kRecomputeMinQueries queries.
  bool use_recompute(const torch::Tensor& q) const;
  torch::Tensor reference_block(const torch::Tensor& qb, const torch::Tensor& kb,
                                const torch::Tensor& vb, const torch::Tensor& qpb,
                                const torch::Tensor& kpb, const torch::Tensor& visible,
                                const torch::Tensor& separable_tile,
                                const torch::Tensor& raw_scores);
  /// q [B,T,H*Dh], k and v [B,T,Hkv*Dh] through the short convolution (a no-op without it),
  /// continuing and updating the cache's convolution history when `cache` is set.
  void convolve(torch::Tensor& q, torch::Tensor& k, torch::Tensor& v, AttentionCache* cache);
};

}  // namespace hybridlab
