// Checked calls of the positional-scheme hooks.

#include "hybridlab/position_hooks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "hybridlab/error.h"

namespace hybridlab {
namespace {

std::string describe(const torch::Tensor& t) {
  if (!t.defined()) return "an undefined tensor";
  return fmt::format("[{}] {} on {}", fmt::join(t.sizes(), ","), c10::toString(t.scalar_type()),
                     t.device().str());
}

// Throws unless `got` is `want` in shape, one of the two dtypes, on `device`.
void check(const PositionScheme& s, const char* hook, const torch::Tensor& got,
           const std::vector<int64_t>& want, c10::ScalarType dtype, c10::ScalarType alt,
           const torch::Device& device, const char* shape_names) {
  if (got.defined() && got.sizes() == at::IntArrayRef(want) &&
      (got.scalar_type() == dtype || got.scalar_type() == alt) && got.device() == device) {
    return;
  }
  const std::string dtypes =
      dtype == alt ? c10::toString(dtype)
                   : fmt::format("{} or {}", c10::toString(dtype), c10::toString(alt));
  throw PluginError(fmt::format(
      "positional scheme '{}': its {} hook returned {}, expected [{}] ({}) {} on {}", s.name(),
      hook, describe(got), fmt::join(want, ","), shape_names, dtypes, device.str()));
}

}  // namespace

torch::Tensor checked_embed(PositionScheme& s, const torch::Tensor& x, const torch::Tensor& pos) {
  torch::Tensor out = s.embed(x, pos);
  check(s, "embed", out, x.sizes().vec(), x.scalar_type(), x.scalar_type(), x.device(), "B,T,D");
  return out;
}

std::pair<torch::Tensor, torch::Tensor> checked_rotate(PositionScheme& s, const torch::Tensor& q,
                                                       const torch::Tensor& k,
                                                       const torch::Tensor& q_pos,
                                                       const torch::Tensor& k_pos) {
  auto out = s.rotate(q, k, q_pos, k_pos);
  check(s, "rotate (q)", out.first, q.sizes().vec(), q.scalar_type(), q.scalar_type(), q.device(),
        "B,H,Tq,Dh");
  check(s, "rotate (k)", out.second, k.sizes().vec(), k.scalar_type(), k.scalar_type(), k.device(),
        "B,Hkv,Tk,Dh");
  return out;
}

torch::Tensor checked_logit_bias(PositionScheme& s, const torch::Tensor& q_pos,
                                 const torch::Tensor& k_pos, int64_t heads, c10::ScalarType dtype,
                                 c10::ScalarType alt, const torch::Device& device) {
  torch::Tensor out = s.logit_bias(q_pos, k_pos);
  check(s, "logit_bias", out, {heads, q_pos.size(0), k_pos.size(0)}, dtype, alt, device, "H,Tq,Tk");
  return out;
}

torch::Tensor checked_relative_logits(PositionScheme& s, const torch::Tensor& q,
                                      const torch::Tensor& q_pos, const torch::Tensor& k_pos,
                                      c10::ScalarType alt) {
  torch::Tensor out = s.relative_logits(q, q_pos, k_pos);
  check(s, "relative_logits", out, {q.size(0), q.size(1), q.size(2), k_pos.size(0)},
        q.scalar_type(), alt, q.device(), "B,H,Tq,Tk");
  return out;
}

torch::Tensor checked_relative_values(PositionScheme& s, const torch::Tensor& probs,
                                      const torch::Tensor& q_pos, const torch::Tensor& k_pos,
                                      int64_t head_dim, c10::ScalarType alt) {
  torch::Tensor out = s.relative_values(probs, q_pos, k_pos);
  if (!out.defined()) return out;  // a scheme without a value table
  check(s, "relative_values", out, {probs.size(0), probs.size(1), probs.size(2), head_dim},
        probs.scalar_type(), alt, probs.device(), "B,H,Tq,Dh");
  return out;
}

DataBias checked_data_bias(PositionScheme& s, const torch::Tensor& x, const torch::Tensor& pos,
                           const torch::Tensor& state, int64_t heads) {
  DataBias out = s.data_bias(x, pos, state);
  const std::vector<int64_t> want = {x.size(0), heads, x.size(1)};
  check(s, "data_bias (query)", out.query, want, x.scalar_type(), torch::kFloat, x.device(),
        "B,H,T");
  check(s, "data_bias (key)", out.key, want, x.scalar_type(), torch::kFloat, x.device(), "B,H,T");
  if (out.state.defined() && out.state.device() != x.device()) {
    throw PluginError(fmt::format(
        "positional scheme '{}': its data_bias hook returned a state on {}, expected {}", s.name(),
        out.state.device().str(), x.device().str()));
  }
  return out;
}

torch::Tensor checked_content_bias(PositionScheme& s, const torch::Tensor& q,
                                   const torch::Tensor& logits, const torch::Tensor& q_pos,
                                   const torch::Tensor& k_pos, const torch::Tensor& visible) {
  torch::Tensor out = s.content_bias(q, logits, q_pos, k_pos, visible);
  check(s, "content_bias", out, logits.sizes().vec(), logits.scalar_type(), logits.scalar_type(),
        logits.device(), "B,H,Tq,Tk");
  return out;
}

}  // namespace hybridlab
