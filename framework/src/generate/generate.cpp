// Autoregressive generation: prefill the prompt into a DecodeCache, then one token per step.
// NoGradGuard rather than InferenceMode, as in the evaluator: generated scoring also runs between
// training steps, and a scheme that caches tables built under InferenceMode could not use them in
// training afterwards.

#include "hybridlab/generate.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <chrono>
#include <limits>
#include <vector>

#include "hybridlab/error.h"
#include "hybridlab/position.h"
#include "util/clock.h"

namespace hybridlab {
namespace {

using Clock = std::chrono::steady_clock;

// Restores the model's training flag however generation ends.
class EvalModeGuard {
 public:
  explicit EvalModeGuard(torch::nn::Module& m) : m_(m), was_training_(m.is_training()) {
    m_.eval();
  }
  ~EvalModeGuard() {
    if (was_training_) m_.train();
  }
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  torch::nn::Module& m_;
  bool was_training_;
};

void check(const LanguageModel& model, const torch::Tensor& prompt, const GenerateOptions& o) {
  if (o.max_new_tokens < 1)
    throw UserError(fmt::format("max_new_tokens must be >= 1, got {}", o.max_new_tokens));
  if (!(o.temperature >= 0))
    throw UserError(fmt::format("temperature must be >= 0 (0 = greedy), got {}", o.temperature));
  if (o.top_k < 0) throw UserError(fmt::format("top_k must be >= 0 (0 = all), got {}", o.top_k));
  if (!prompt.defined() || prompt.dim() != 2 || prompt.size(1) < 1 || prompt.size(0) < 1)
    throw UserError("the prompt must hold at least one token ([B,T] with B, T >= 1)");
  if (prompt.scalar_type() != torch::kLong) throw UserError("the prompt must hold int64 token ids");
  const int64_t lo = prompt.min().item<int64_t>(), hi = prompt.max().item<int64_t>();
  if (lo < 0 || hi >= model.vocab_size()) {
    throw UserError(fmt::format("the prompt holds token id {}; the model's vocabulary is [0, {})",
                                lo < 0 ? lo : hi, model.vocab_size()));
  }
}

// The next token of each row ([B,1] int64 on the logits' device) from its logits [B,V].
torch::Tensor pick(const torch::Tensor& logits, const GenerateOptions& o, at::Generator& gen) {
  if (o.temperature == 0) return logits.argmax(-1, /*keepdim=*/true);
  // Sampling on the CPU in double: the draw depends only on the seed, not on the device.
  torch::Tensor l = logits.to(torch::kCPU, torch::kDouble) / o.temperature;  // [B,V]
  if (o.top_k > 0 && o.top_k < l.size(-1)) {
    const torch::Tensor kth = std::get<0>(l.topk(o.top_k, -1)).narrow(-1, o.top_k - 1, 1);  // [B,1]
    l = l.masked_fill(l < kth, -std::numeric_limits<double>::infinity());
  }
  return torch::multinomial(torch::softmax(l, -1), 1, /*replacement=*/false, gen)
      .to(logits.device());
}

}  // namespace

double Generation::decode_tokens_per_s() const {
  const int64_t steps = tokens.defined() ? tokens.size(0) * (tokens.size(1) - 1) : 0;
  return steps > 0 && decode_s > 0 ? static_cast<double>(steps) / decode_s : 0.0;
}

double Generation::tokens_per_s() const {
  const double s = prefill_s + decode_s;
  return tokens.defined() && s > 0 ? static_cast<double>(tokens.numel()) / s : 0.0;
}

int64_t max_positions(torch::nn::Module& model, std::string* scheme) {
  int64_t limit = 0;
  if (scheme) scheme->clear();
  // Submodules only: modules(true) needs the model to be owned by a shared_ptr, which a model
  // made on the stack is not (and a LanguageModel is never itself a scheme).
  for (const auto& m : model.modules(/*include_self=*/false)) {
    const auto* p = dynamic_cast<const PositionScheme*>(m.get());
    if (!p || p->max_length() <= 0) continue;
    if (limit == 0 || p->max_length() < limit) {
      limit = p->max_length();
      if (scheme) *scheme = p->name();
    }
  }
  return limit;
}

Generation generate(LanguageModel& model, const torch::Tensor& prompt, const GenerateOptions& o) {
  check(model, prompt, o);
  const int64_t T = prompt.size(1);
  std::string scheme;
  if (const int64_t limit = max_positions(model, &scheme);
      limit > 0 && T + o.max_new_tokens > limit) {
    throw UserError(fmt::format(
        "the prompt ({} tokens) + {} new tokens need {} positions, but the '{}' positional "
        "scheme encodes at most {}; shorten the prompt or lower max_new_tokens",
        T, o.max_new_tokens, T + o.max_new_tokens, scheme, limit));
  }
  torch::NoGradGuard no_grad;
  EvalModeGuard eval_mode(model);
  const torch::Device device = model_device(model);
  at::Generator gen = at::detail::createCPUGenerator(o.seed);
  std::unique_ptr<DecodeCache> cache = model.new_cache();

  Generation g;
  g.prompt_tokens = T;
  std::vector<torch::Tensor> out;
  out.reserve(static_cast<size_t>(o.max_new_tokens));
  auto t0 = Clock::now();
  // Prefill: the logits of the last prompt position give the first new token.
  torch::Tensor next = pick(model.forward(prompt.to(device), *cache).select(1, T - 1), o, gen);
  out.push_back(next.to(torch::kCPU));  // also waits for the device: the timing is honest
  g.prefill_s = seconds_since(t0);
  t0 = Clock::now();
  for (int64_t i = 1; i < o.max_new_tokens; ++i) {
    next = pick(model.forward(next, *cache).select(1, 0), o, gen);  // [B,1] -> logits [B,V]
    out.push_back(next.to(torch::kCPU));
  }
  g.decode_s = seconds_since(t0);
  g.tokens = torch::cat(out, 1);  // [B, max_new_tokens]
  return g;
}

}  // namespace hybridlab
