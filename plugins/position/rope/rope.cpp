// Rotary position embedding (Su et al., "RoFormer", 2021) and its context-extension scalings.
//
// Pair k of the first d = int(head_dim·partial_rotary_factor) channels of q and k is rotated by
// the angle p·θ_k, θ_k = rope_theta^(−2k/d):  x_a' = x_a cos − x_b sin,  x_b' = x_b cos + x_a sin.
// Pairs are (k, k + d/2) in layout `half` (rotate_half: GPT-NeoX, HF Llama) or (2k, 2k+1) in
// layout `interleaved` (RoFormer, Meta Llama, GPT-J); the other head_dim − d channels pass
// through unchanged. ⟨R_m q, R_n k⟩ depends only on m − n.
//
// rope_scaling.type changes θ (and an attention factor that multiplies cos and sin, so logits
// scale by its square), as in transformers' modeling_rope_utils.py:
//   default   θ_k
//   linear    θ_k / factor                                  (position interpolation, kaiokendev)
//   ntk       θ_k with base·factor^(d/(d−2))                (bloc97 NTK-aware; HF rev 0044e3b)
//   dynamic   θ_k with base·(factor·L/M − (factor−1))^(d/(d−2)), L = max(current length, M),
//             recomputed from max(position)+1 on every call (stateless, unlike HF's cache)
//   yarn      ramp between θ_k (k ≤ low) and θ_k/factor (k ≥ high), low/high from beta_fast /
//             beta_slow; attention factor 0.1·ln(factor) + 1 (or mscale/mscale_all_dim)
//   longrope  1/(ext_k·base^(2k/d)), ext = long_factor past original_max_position_embeddings
//             else short_factor; attention factor √(1 + ln f / ln original_max)
//   llama3    three wavelength bands: keep θ (short), θ/factor (long), smooth mix in between
// M / original_max_position_embeddings defaults to the training length (task.seq_len).
//
// rotate_num_heads = n rotates only the last n query heads and leaves the others as NoPE
// (x-transformers' `rotate_num_heads`, which refuses grouped-query attention). With GQA the key
// heads follow their query groups: query head h reads key head h / G (G = n_heads / n_kv_heads),
// so n must be a multiple of G and the last n / G key heads are rotated.

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "hybridlab/position.h"
#include "hybridlab/rotary.h"

namespace {

using hybridlab::PositionContext;
using hybridlab::PositionTable;
using hybridlab::Section;

enum class Scaling { kDefault, kLinear, kNtk, kDynamic, kYarn, kLongrope, kLlama3 };

const std::vector<std::pair<std::string, Scaling>>& scaling_names() {
  static const std::vector<std::pair<std::string, Scaling>> names = {
      {"default", Scaling::kDefault}, {"linear", Scaling::kLinear},
      {"ntk", Scaling::kNtk},         {"dynamic", Scaling::kDynamic},
      {"yarn", Scaling::kYarn},       {"longrope", Scaling::kLongrope},
      {"llama3", Scaling::kLlama3}};
  return names;
}

struct RopeSettings {
  double theta = 10000.0;
  int64_t head_dim = 0;
  int64_t rot_dim = 0;  // d: rotated channels
  bool interleaved = false;
  Scaling type = Scaling::kDefault;
  std::string type_name = "default";
  double factor = 1.0;
  int64_t original_max = 0;
  double beta_fast = 32.0, beta_slow = 1.0;
  bool truncate = true;
  double attention_factor = std::numeric_limits<double>::quiet_NaN();  // NaN: derive
  double mscale = 0.0, mscale_all_dim = 0.0;
  std::vector<double> short_factor, long_factor;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;
  int64_t n_heads = 0, n_kv_heads = 0;  // of the layer
  int64_t rotate_heads = 0;             // query heads rotated (the last ones); 0 = all
};

// θ_k = base^(−2k/d), k = 0 … d/2 − 1 (HF: 1/base^(arange(0,d,2)/d)).
std::vector<double> default_inv_freq(double base, int64_t d) {
  std::vector<double> out(static_cast<size_t>(d / 2));
  for (int64_t k = 0; k < d / 2; ++k) out[size_t(k)] = 1.0 / std::pow(base, 2.0 * k / double(d));
  return out;
}

// YaRN's get_mscale(s, m) = 0.1·m·ln s + 1 for s > 1, else 1.
double yarn_mscale(double s, double m = 1.0) { return s <= 1 ? 1.0 : 0.1 * m * std::log(s) + 1.0; }

class Rope : public hybridlab::PositionScheme {
 public:
  explicit Rope(RopeSettings s) : s_(std::move(s)) {}

  std::string name() const override { return "rope"; }
  uint32_t hooks() const override { return hybridlab::kHookRotate | hybridlab::kHookFlops; }

  /// The rotated channels of one token's q and k (rot_dim of each rotated head; with
  /// rotate_num_heads, n of the query heads and their share of the key heads): 3 per channel.
  double flops_per_token(int64_t, double) const override {
    const int64_t q_heads = s_.rotate_heads == 0 ? s_.n_heads : s_.rotate_heads;
    const int64_t kv_heads = s_.n_heads > 0 ? q_heads * s_.n_kv_heads / s_.n_heads : 0;
    return 3.0 * static_cast<double>((q_heads + kv_heads) * s_.rot_dim);
  }

  bool length_dependent() const {
    return s_.type == Scaling::kDynamic || s_.type == Scaling::kLongrope;
  }

  /// θ_k (after scaling) when the current sequence length is `seq_len`.
  std::vector<double> inv_freq(int64_t seq_len) const {
    const int64_t d = s_.rot_dim;
    std::vector<double> inv = default_inv_freq(s_.theta, d);
    switch (s_.type) {
      case Scaling::kDefault:
        break;
      case Scaling::kLinear:
        for (double& v : inv) v /= s_.factor;
        break;
      case Scaling::kNtk:
        inv = default_inv_freq(s_.theta * std::pow(s_.factor, double(d) / double(d - 2)), d);
        break;
      case Scaling::kDynamic: {
        const double m = double(s_.original_max);
        const double l = std::max(double(seq_len), m);
        const double base =
            s_.theta * std::pow(s_.factor * l / m - (s_.factor - 1), double(d) / double(d - 2));
        inv = default_inv_freq(base, d);
        break;
      }
      case Scaling::kYarn: {
        auto corr = [&](double r) {
          return double(d) * std::log(double(s_.original_max) / (r * 2 * M_PI)) /
                 (2 * std::log(s_.theta));
        };
        double low = corr(s_.beta_fast), high = corr(s_.beta_slow);
        if (s_.truncate) {
          low = std::floor(low);
          high = std::ceil(high);
        }
        low = std::max(low, 0.0);
        high = std::min(high, double(d - 1));
        if (low == high) high += 0.001;
        for (int64_t k = 0; k < d / 2; ++k) {
          const double ramp = std::clamp((double(k) - low) / (high - low), 0.0, 1.0);
          const double t = inv[size_t(k)];
          inv[size_t(k)] = t / s_.factor * ramp + t * (1 - ramp);
        }
        break;
      }
      case Scaling::kLongrope: {
        const auto& ext = seq_len > s_.original_max ? s_.long_factor : s_.short_factor;
        for (int64_t k = 0; k < d / 2; ++k) inv[size_t(k)] /= ext[size_t(k)];
        break;
      }
      case Scaling::kLlama3: {
        const double orig = double(s_.original_max);
        const double low_wavelen = orig / s_.low_freq_factor;
        const double high_wavelen = orig / s_.high_freq_factor;
        for (double& t : inv) {
          const double wavelen = 2 * M_PI / t;
          if (wavelen < high_wavelen) continue;
          if (wavelen > low_wavelen) {
            t /= s_.factor;
          } else {
            const double smooth =
                (orig / wavelen - s_.low_freq_factor) / (s_.high_freq_factor - s_.low_freq_factor);
            t = (1 - smooth) * t / s_.factor + smooth * t;
          }
        }
        break;
      }
    }
    return inv;
  }

  /// The factor multiplying cos and sin (logits scale by its square).
  double attention_factor() const {
    if (!std::isnan(s_.attention_factor)) return s_.attention_factor;
    if (s_.type == Scaling::kYarn) {
      if (s_.mscale != 0 && s_.mscale_all_dim != 0) {
        return yarn_mscale(s_.factor, s_.mscale) / yarn_mscale(s_.factor, s_.mscale_all_dim);
      }
      return yarn_mscale(s_.factor);
    }
    if (s_.type == Scaling::kLongrope) {
      return s_.factor <= 1
                 ? 1.0
                 : std::sqrt(1 + std::log(s_.factor) / std::log(double(s_.original_max)));
    }
    return 1.0;
  }

  // θ as a float64 tensor on `device`, cached per (length variant, device).
  torch::Tensor inv_freq_tensor(int64_t seq_len, const torch::Device& device) {
    int64_t key = 0;
    if (s_.type == Scaling::kDynamic) key = std::max(seq_len, s_.original_max);
    if (s_.type == Scaling::kLongrope) key = seq_len > s_.original_max ? 1 : 0;
    if (!cached_.defined() || cached_key_ != key || cached_.device() != device) {
      cached_ = torch::tensor(inv_freq(seq_len), torch::kDouble).to(device);
      cached_key_ = key;
    }
    return cached_;
  }

  // cos and sin [T, d/2] of pos·θ (angles in float64), times the attention factor, in `dtype`.
  std::pair<torch::Tensor, torch::Tensor> cos_sin(const torch::Tensor& pos,
                                                  const torch::Tensor& inv,
                                                  torch::ScalarType dtype) const {
    const torch::Tensor angle = pos.to(torch::kDouble).unsqueeze(1) * inv.unsqueeze(0);
    const double a = attention_factor();
    return {(angle.cos() * a).to(dtype), (angle.sin() * a).to(dtype)};
  }

  // Rotates the first rot_dim channels of x [..., T, head_dim] with cos/sin [T, rot_dim/2].
  torch::Tensor apply(const torch::Tensor& x, const torch::Tensor& c,
                      const torch::Tensor& s) const {
    return hybridlab::rotate_pairs(x, c, s, s_.interleaved);
  }

  std::pair<torch::Tensor, torch::Tensor> rotate(const torch::Tensor& q, const torch::Tensor& k,
                                                 const torch::Tensor& q_pos,
                                                 const torch::Tensor& k_pos) override {
    int64_t seq_len = 0;
    if (length_dependent()) {
      // The current length is the furthest position seen (keys are cached unrotated, so every
      // key is re-rotated with the frequencies of this length, as HF's dynamic update does).
      seq_len = torch::max(q_pos.max(), k_pos.max()).item<int64_t>() + 1;
    }
    const torch::Tensor inv = inv_freq_tensor(seq_len, q.device());
    const auto [cq, sq] = cos_sin(q_pos, inv, q.scalar_type());
    torch::Tensor ck = cq, sk = sq;
    if (!q_pos.is_same(k_pos) || q.scalar_type() != k.scalar_type()) {
      std::tie(ck, sk) = cos_sin(k_pos, inv, k.scalar_type());
    }
    if (s_.rotate_heads == 0 || s_.rotate_heads >= q.size(1))
      return {apply(q, cq, sq), apply(k, ck, sk)};
    // Only the last rotate_heads query heads and the key heads of their groups.
    auto last = [&](const torch::Tensor& x, int64_t n, const torch::Tensor& c,
                    const torch::Tensor& s) {
      const int64_t keep = x.size(1) - n;
      return torch::cat({x.narrow(1, 0, keep), apply(x.narrow(1, keep, n), c, s)}, 1);
    };
    const int64_t group = q.size(1) / k.size(1);
    return {last(q, s_.rotate_heads, cq, sq), last(k, s_.rotate_heads / group, ck, sk)};
  }

  std::vector<PositionTable> inspect(int64_t length) override {
    std::vector<PositionTable> out;
    const std::vector<double> scaled = inv_freq(length);
    const std::vector<double> plain = default_inv_freq(s_.theta, s_.rot_dim);
    PositionTable f;
    f.name = "inv_freq";
    f.description = "RoPE inverse frequencies theta_k (" + s_.type_name + " scaling, at length " +
                    std::to_string(length) + ")";
    f.values = torch::stack(
        {torch::tensor(plain, torch::kDouble), torch::tensor(scaled, torch::kDouble)}, 1);
    f.columns = {"default", s_.type_name};
    f.row_label = "pair k";
    f.column_label = "theta_k";
    out.push_back(f);
    PositionTable a;
    a.name = "attention_factor";
    a.description = "factor on cos and sin (logits scale by its square)";
    a.values = torch::tensor({attention_factor()}, torch::kDouble);
    a.columns = {"attention_factor"};
    a.row_label = "index";
    out.push_back(a);
    const torch::Tensor inv = torch::tensor(scaled, torch::kDouble);
    const torch::Tensor pos = torch::arange(length, torch::kLong);
    PositionTable c;
    c.name = "cos";
    c.description = "cos(p theta_k) (times the attention factor)";
    c.values = cos_sin(pos, inv, torch::kFloat).first;
    c.row_label = "position p";
    c.column_label = "pair k";
    out.push_back(c);
    // RoFormer §3.4.3 long-term decay: for q = k = ones, q·k/(|q||k|) at distance r is
    // a²·mean_k cos(r·θ_k) over the rotated pairs.
    PositionTable decay;
    decay.name = "relative_logit";
    decay.description = "a^2 mean_k cos(r theta_k): normalised q.k at distance r for q = k = ones";
    const torch::Tensor r = torch::arange(length, torch::kDouble).unsqueeze(1);
    decay.values =
        (std::pow(attention_factor(), 2) * (r * inv.unsqueeze(0)).cos().mean(1)).to(torch::kFloat);
    decay.columns = {"normalised_qk"};
    decay.row_label = "distance r";
    out.push_back(decay);
    if (s_.n_heads > 0) {
      const int64_t n = s_.rotate_heads == 0 ? s_.n_heads : s_.rotate_heads;
      PositionTable heads;
      heads.name = "rotated_heads";
      heads.description = "1 for a rotated query head, 0 for a NoPE head (rotate_num_heads " +
                          std::to_string(n) + " of " + std::to_string(s_.n_heads) + ")";
      heads.values = (torch::arange(s_.n_heads) >= s_.n_heads - n).to(torch::kFloat);
      heads.columns = {"rotated"};
      heads.row_label = "head";
      out.push_back(heads);
    }
    return out;
  }

  static std::shared_ptr<hybridlab::PositionScheme> create(Section& params,
                                                           const PositionContext& ctx);

 private:
  RopeSettings s_;
  torch::Tensor cached_;
  int64_t cached_key_ = -1;
};

std::string valid_types() {
  std::string out;
  for (const auto& [name, type] : scaling_names()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

std::shared_ptr<hybridlab::PositionScheme> Rope::create(Section& params,
                                                        const PositionContext& ctx) {
  RopeSettings s;
  s.theta = params.get<double>("rope_theta", 10000.0);
  const std::string layout = params.get<std::string>("layout", "half");
  const double partial = params.get<double>("partial_rotary_factor", 1.0);
  s.head_dim = ctx.head_dim;
  s.interleaved = layout == "interleaved";
  params.check(s.theta > 1, "rope_theta", "must be > 1, got " + std::to_string(s.theta));
  params.check(layout == "half" || layout == "interleaved", "layout",
               "expected half (pairs (k, k+d/2): rotate_half, GPT-NeoX, HF Llama) or interleaved "
               "(pairs (2k, 2k+1): RoFormer, Meta Llama, GPT-J), got '" +
                   layout + "'");
  bool dims_ok = false;
  if (ctx.head_dim <= 0 || ctx.head_dim % 2 != 0) {
    params.error("scheme",
                 "RoPE rotates channel pairs, so head_dim must be even and > 0; got "
                 "head_dim " +
                     std::to_string(ctx.head_dim) +
                     " (set the attention head_dim, or d_model/n_heads, to an even number)");
  } else if (!(partial > 0 && partial <= 1)) {
    params.error("partial_rotary_factor",
                 "must be in (0, 1] (the share of head_dim that is rotated), got " +
                     std::to_string(partial));
  } else {
    s.rot_dim = static_cast<int64_t>(double(ctx.head_dim) * partial);  // int() as in HF
    if (s.rot_dim < 2 || s.rot_dim % 2 != 0) {
      params.error("partial_rotary_factor",
                   "head_dim " + std::to_string(ctx.head_dim) + " x partial_rotary_factor " +
                       std::to_string(partial) + " gives " + std::to_string(s.rot_dim) +
                       " rotary channels (int(head_dim*factor), as in HF), but RoPE rotates "
                       "channel pairs: choose a factor that gives an even count >= 2, e.g. " +
                       std::to_string(double(2 * std::max<int64_t>(1, s.rot_dim / 2)) /
                                      double(ctx.head_dim)));
    } else {
      dims_ok = true;
    }
  }

  s.n_heads = ctx.n_heads;
  s.n_kv_heads = ctx.n_kv_heads > 0 ? ctx.n_kv_heads : ctx.n_heads;
  // 0 (the default, and what the resolved config writes) rotates every head.
  s.rotate_heads = params.get<int64_t>("rotate_num_heads", 0);
  if (s.rotate_heads != 0) {
    const int64_t group = s.n_kv_heads > 0 ? ctx.n_heads / s.n_kv_heads : 1;
    if (s.rotate_heads < 0 || s.rotate_heads > ctx.n_heads) {
      params.error("rotate_num_heads", "must be in [0, n_heads = " + std::to_string(ctx.n_heads) +
                                           "] (n rotates the last n heads; 0 rotates all), got " +
                                           std::to_string(s.rotate_heads));
    } else if (group > 1 && s.rotate_heads % group != 0) {
      params.error("rotate_num_heads",
                   "with grouped-query attention (" + std::to_string(ctx.n_heads) +
                       " query heads, " + std::to_string(s.n_kv_heads) +
                       " key heads) a key head serves " + std::to_string(group) +
                       " query heads, so rotate_num_heads must be a multiple of " +
                       std::to_string(group) + ", got " + std::to_string(s.rotate_heads));
    }
  }

  Section rs = params.child("rope_scaling");
  s.type_name = rs.get<std::string>("type", "default");
  if (rs.has("rope_type")) {
    const std::string alias = rs.get<std::string>("rope_type", s.type_name);
    if (rs.has("type") && alias != s.type_name) {
      rs.error("rope_type", "disagrees with type '" + s.type_name + "'; give only one of them");
    }
    s.type_name = alias;
  }
  bool known = false;
  for (const auto& [name, type] : scaling_names()) {
    if (name == s.type_name) {
      s.type = type;
      known = true;
    }
  }
  if (!known) {
    std::vector<std::string> names;
    for (const auto& kv : scaling_names()) names.push_back(kv.first);
    const std::string near = hybridlab::nearest_key(s.type_name, names);
    rs.error(rs.has("type") ? "type" : "rope_type",
             "unknown rope_scaling type '" + s.type_name + "'" +
                 (near.empty() ? "" : "; did you mean '" + near + "'?") +
                 " (valid: " + valid_types() + ")");
  }
  const std::string& t = s.type_name;
  if (known && s.type != Scaling::kDefault) {
    // factor: required everywhere but longrope, where it defaults to max_length / original.
    if (s.type != Scaling::kLongrope) {
      s.factor = rs.required<double>("factor");
      rs.check(!rs.has("factor") || s.factor > 0, "factor",
               "must be > 0 (the context extension ratio), got " + std::to_string(s.factor));
    }
    if (s.type != Scaling::kLinear && s.type != Scaling::kNtk) {
      s.original_max = rs.get<int64_t>("original_max_position_embeddings", ctx.train_length);
      rs.check(s.original_max > 0, "original_max_position_embeddings",
               rs.has("original_max_position_embeddings")
                   ? "must be > 0, got " + std::to_string(s.original_max)
                   : "required for " + t +
                         " scaling: the length the model was trained at (no "
                         "training length to default to)");
    }
    if ((s.type == Scaling::kNtk || s.type == Scaling::kDynamic) && dims_ok && s.rot_dim <= 2) {
      params.error("partial_rotary_factor", t + " scaling needs more than 2 rotary channels "
                                                "(its exponent is d/(d-2))");
    }
    if (s.type == Scaling::kYarn) {
      s.beta_fast = rs.get<double>("beta_fast", 32.0);
      s.beta_slow = rs.get<double>("beta_slow", 1.0);
      s.truncate = rs.get<bool>("truncate", true);
      s.mscale = rs.get<double>("mscale", 0.0);
      s.mscale_all_dim = rs.get<double>("mscale_all_dim", 0.0);
      rs.check(s.beta_slow > 0 && s.beta_fast > s.beta_slow, "beta_fast",
               "need beta_fast > beta_slow > 0 (rotations per original context), got beta_fast " +
                   std::to_string(s.beta_fast) + ", beta_slow " + std::to_string(s.beta_slow));
    }
    if (s.type == Scaling::kYarn || s.type == Scaling::kLongrope) {
      if (rs.has("attention_factor")) {
        s.attention_factor = rs.get<double>("attention_factor", 1.0);
        rs.check(s.attention_factor > 0, "attention_factor",
                 "must be > 0, got " + std::to_string(s.attention_factor));
      } else {
        rs.accept("attention_factor");
      }
    }
    if (s.type == Scaling::kLongrope) {
      s.short_factor = rs.required<std::vector<double>>("short_factor");
      s.long_factor = rs.required<std::vector<double>>("long_factor");
      if (rs.has("factor")) {
        s.factor = rs.get<double>("factor", 1.0);
        rs.check(s.factor > 0, "factor", "must be > 0, got " + std::to_string(s.factor));
      } else {
        rs.accept("factor");
        s.factor = s.original_max > 0 && ctx.max_length > 0
                       ? double(ctx.max_length) / double(s.original_max)
                       : 1.0;
      }
      if (dims_ok) {
        const size_t want = size_t(s.rot_dim / 2);
        for (const char* key : {"short_factor", "long_factor"}) {
          const auto& v = std::string(key) == "short_factor" ? s.short_factor : s.long_factor;
          if (!rs.has(key)) continue;
          if (v.size() != want) {
            rs.error(key, "expected " + std::to_string(want) +
                              " values (one per rotary pair: rotary dim " +
                              std::to_string(s.rot_dim) + " / 2), got " + std::to_string(v.size()));
          } else {
            for (double x : v) {
              if (!(x > 0)) {
                rs.error(key, "every factor must be > 0, got " + std::to_string(x));
                break;
              }
            }
          }
        }
      }
    }
    if (s.type == Scaling::kLlama3) {
      s.low_freq_factor = rs.get<double>("low_freq_factor", 1.0);
      s.high_freq_factor = rs.get<double>("high_freq_factor", 4.0);
      rs.check(s.low_freq_factor > 0 && s.high_freq_factor > s.low_freq_factor, "high_freq_factor",
               "need high_freq_factor > low_freq_factor > 0, got low " +
                   std::to_string(s.low_freq_factor) + ", high " +
                   std::to_string(s.high_freq_factor));
    }
  }
  rs.finish();
  params.done();
  return std::make_shared<Rope>(std::move(s));
}

}  // namespace

HYBRIDLAB_POSITION_PLUGIN("rope", "1.0",
                          "rotary position embedding with linear/ntk/dynamic/yarn/longrope/llama3 "
                          "scaling (Su et al. 2021)",
                          Rope::create)
