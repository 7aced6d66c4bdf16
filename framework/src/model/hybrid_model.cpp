#include "model/hybrid_model.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include "hybridlab/error.h"
#include "hybridlab/interop.h"
#include "hybridlab/mixer.h"
#include "hybridlab/position_hooks.h"
#include "layers/kernels/linear_cpu.h"
#include "model/layer_positions.h"
#include "util/fault_context.h"

namespace hybridlab {

DecodeCache::~DecodeCache() = default;
LanguageModel::~LanguageModel() = default;

torch::Device model_device(const LanguageModel& model) {
  const auto params = model.parameters();
  return params.empty() ? torch::Device(torch::kCPU) : params[0].device();
}

Mixer& LanguageModel::layer_mixer(int64_t i) const {
  throw std::out_of_range(
      fmt::format("layer_mixer: no layer {} (the model has {} layers)", i, num_layers()));
}

std::string LanguageModel::layer_mixer_name(int64_t i) const {
  throw std::out_of_range(
      fmt::format("layer_mixer_name: no layer {} (the model has {} layers)", i, num_layers()));
}

void LanguageModel::advance(const torch::Tensor&, DecodeCache&) {
  throw std::logic_error("advance: the model has no layers to feed");
}

void LanguageModel::set_ablation(const ModelAblation& a) {
  if (a.no_input_position || !a.layers.empty())
    throw std::invalid_argument("set_ablation: the model has no layers to knock out");
}

namespace {

struct HybridCache : DecodeCache {
  std::vector<std::unique_ptr<MixerCache>> layers;
  int64_t nbytes() const override {
    int64_t n = 0;
    for (const auto& l : layers) n += l->nbytes();
    return n;
  }
};

int64_t count_parameters(const torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

// A plugin mixer's output must be what the layer graph adds to the residual stream: a wrong
// shape would broadcast or fail deep inside LibTorch without naming the plugin.
void check_plugin_output(const Block& b, const torch::Tensor& x, const torch::Tensor& y) {
  if (y.defined() && y.sizes() == x.sizes() && y.scalar_type() == x.scalar_type()) return;
  throw PluginError(fmt::format(
      "{}: its forward returned {}, expected a {} tensor {} (the shape and dtype of its input)",
      b.label,
      y.defined() ? fmt::format("{} {}", c10::toString(y.scalar_type()), c10::str(y.sizes()))
                  : std::string("no tensor"),
      c10::toString(x.scalar_type()), c10::str(x.sizes())));
}

// The first line of an exception's message (LibTorch's what() carries a C++ backtrace).
std::string first_line(const std::exception& e) {
  const auto* c10e = dynamic_cast<const c10::Error*>(&e);
  const std::string why = c10e ? c10e->what_without_backtrace() : e.what();
  return why.substr(0, std::min(why.find('\n'), size_t{600}));
}

bool all_finite(const torch::Tensor& t) { return torch::isfinite(t).all().item<bool>(); }

}  // namespace

Block::Block(std::shared_ptr<Mixer> mixer_in, int64_t d_model, int64_t mlp_hidden, double eps,
             bool fused_kernels) {
  mixer = register_module("mixer", std::move(mixer_in));
  mixer_norm =
      register_module("mixer_norm", std::make_shared<RMSNorm>(d_model, eps, fused_kernels));
  mlp_norm = register_module("mlp_norm", std::make_shared<RMSNorm>(d_model, eps, fused_kernels));
  mlp = register_module("mlp", std::make_shared<SwiGLU>(d_model, mlp_hidden, fused_kernels));
}

torch::Tensor Block::mix(const torch::Tensor& x, const torch::Tensor& positions, MixerCache* cache,
                         const PackedDocuments* documents) {
  const int64_t w = ablation.state_window;
  const int64_t B = x.size(0), T = x.size(1);
  PackedDocuments windowed;
  if (w > 0 && w < T) {
    // The state-reset knock-out: a piece every w tokens (and at every document start).
    torch::Tensor starts = window_starts(B, T, w, x.device());
    if (documents) starts = starts | documents->starts;
    windowed = packed_documents(starts);
    documents = &windowed;
  }
  const auto call = [this](const torch::Tensor& in, const torch::Tensor& pos, MixerCache* c) {
    torch::Tensor y = mixer->forward(in, pos, c);
    if (!plugin_file.empty()) check_plugin_output(*this, in, y);
    return y;
  };
  if (!documents) return call(x, positions, cache);
  TORCH_CHECK(cache == nullptr,
              "Block: packed documents and state windows apply to whole-sequence calls only");
  // Each piece runs as its own row from position 0 and an empty state. The zero padding after a
  // short piece is harmless: a causal mixer's earlier outputs never see it (mixers that are not
  // causal say so through document_boundaries() and are refused before training).
  return documents->map(x, [&call](const torch::Tensor& pieces, const torch::Tensor& from_zero) {
    return call(pieces, from_zero, nullptr);
  });
}

torch::Tensor Block::forward(const torch::Tensor& x, const torch::Tensor& positions,
                             MixerCache* cache, const PackedDocuments* documents) {
  const torch::Tensor h =
      ablation.mixer_off ? x : x + mix(mixer_norm->forward(x), positions, cache, documents);
  return h + mlp->forward(mlp_norm->forward(h));
}

HybridModel::HybridModel(const ModelOptions& opts, PluginHost& host, const ModelBuildContext& ctx)
    : opts_(opts) {
  const int64_t D = opts.d_model, V = opts.vocab_size;
  embedding = register_module("embedding", torch::nn::Embedding(V, D));
  {
    torch::NoGradGuard no_grad;
    embedding->weight.normal_(0.0, opts.init_std);
  }
  if (!opts.tie_embeddings) {
    head_weight = register_parameter("head_weight", torch::randn({V, D}) * opts.init_std);
  }
  if (opts.position) {
    PositionContext pc;
    pc.d_model = D;
    pc.train_length = ctx.train_length;
    pc.max_length = ctx.max_length;
    pc.layer_index = -1;
    std::shared_ptr<PositionScheme> scheme = build_position_scheme(*opts.position, host, pc);
    // A scheme without hooks (nope) adds nothing: the same model as no input scheme, so a sweep
    // can list "no input positions" beside sinusoidal or learned ones.
    if (scheme->hooks() != kHookNone) {
      if (!(scheme->hooks() & kHookEmbed)) {
        throw ConfigError(opts.position->where.str() + ": " + opts.position->path +
                          ".scheme: scheme '" + scheme->name() +
                          "' has no embed hook (it has: " + hook_names(scheme->hooks()) +
                          "); set it under model.attention.position instead");
      }
      input_position = scheme;
      check_scheme_length(*input_position, *opts.position, ctx);
      register_module("input_position", input_position);
    }
  }
  LayerPositions positions(host, ctx);
  const auto mixer_context = [&](size_t index) {
    MixerContext mc;
    mc.d_model = D;
    mc.layer_index = static_cast<int64_t>(index);
    mc.train_length = ctx.train_length;
    mc.max_length = ctx.max_length;
    mc.fused_kernels = opts.fused_kernels;
    mc.position = &positions;
    return mc;
  };
  const int64_t hidden = mlp_hidden_size(opts.mlp, D);
  for (size_t i = 0; i < opts.layers.size(); ++i) {
    const LayerSpec& spec = opts.layers[i];
    Section params = spec.settings;
    std::shared_ptr<Mixer> mixer = build_mixer(*spec.type, params, mixer_context(i), host);
    blocks_.push_back(register_module(
        "layers_" + std::to_string(i),
        std::make_shared<Block>(mixer, D, hidden, opts.norm_eps, opts.fused_kernels)));
  }
  label_blocks();
  if (!ctx.packed_documents.empty()) check_document_boundaries(ctx.packed_documents);
  // A plugin mixer's settings are read by its factory: build each unused section once, at the
  // index past the last layer, so that its mistakes are reported as a used section's are.
  for (const LayerSpec& spec : opts.unused_plugin_mixers) {
    Section params = spec.settings;
    build_mixer(*spec.type, params, mixer_context(opts.layers.size()), host);
  }
  // Schemes shared across layers are registered once, here, so the optimizer sees them once.
  for (const auto& [key, scheme] : positions.shared()) {
    shared_schemes_.push_back(
        register_module("shared_position_" + std::to_string(shared_schemes_.size()), scheme));
  }
  if (opts.head == ModelHead::kAutoEncoder) {
    autoencoder = register_module(
        "autoencoder_head",
        std::make_shared<AutoEncoderHead>(D, V, opts.norm_eps, opts.init_std, opts.fused_kernels));
  } else {
    final_norm = register_module("final_norm",
                                 std::make_shared<RMSNorm>(D, opts.norm_eps, opts.fused_kernels));
  }
}

void HybridModel::label_blocks() {
  for (size_t i = 0; i < blocks_.size(); ++i) {
    Block& b = *blocks_[i];
    const MixerType& type = *opts_.layers[i].type;
    const PositionScheme* scheme = b.mixer->position_scheme();
    const bool hooked = scheme && scheme->hooks() != kHookNone;
    b.plugin_file = type.plugin_file;
    b.runs_plugin = !type.plugin_file.empty() || hooked;
    b.label = fmt::format("layer {} (mixer '{}'{}{})", i, type.name,
                          type.plugin_file.empty() ? "" : ", plugin '" + type.plugin_file + "'",
                          hooked ? ", positional scheme '" + scheme->name() + "'" : "");
  }
}

void HybridModel::check_document_boundaries(const std::string& setting) const {
  for (size_t i = 0; i < blocks_.size(); ++i) {
    if (blocks_[i]->mixer->document_boundaries() != DocumentBoundaries::kUnsupported) continue;
    throw ConfigError(fmt::format(
        "{}: training rows pack documents, but layer {} ({}) cannot model each document alone: "
        "it reads later tokens (bidirectional) or its rows interact (Mixer::document_boundaries); "
        "set task.packing to none or concatenated, or change the layer",
        setting, i, opts_.layers[i].type->name));
  }
}

torch::Tensor HybridModel::run(const torch::Tensor& tokens, int64_t start, DecodeCache* cache,
                               const PackedDocuments* documents, NonFiniteLayer* locate,
                               bool head) {
  TORCH_CHECK(tokens.dim() == 2, "model: tokens must be [B,T], got ", tokens.sizes());
  const int64_t T = tokens.size(1);
  const torch::Tensor positions = torch::arange(
      start, start + T, torch::TensorOptions().dtype(torch::kLong).device(tokens.device()));
  torch::Tensor x = embedding(tokens);
  // Non-finite embeddings are the weights' own divergence: nothing to name.
  if (locate && !all_finite(x)) return x;
  if (input_position && !no_input_position_) {
    if (documents) {
      // Input positions restart at every document, as if each were alone.
      x = documents->map(x, [this](const torch::Tensor& pieces, const torch::Tensor& from_zero) {
        return checked_embed(*input_position, pieces, from_zero);
      });
    } else {
      x = checked_embed(*input_position, x, positions);
    }
  }
  if (locate && !all_finite(x)) {
    *locate = {"the input positional scheme '" + input_position->name() + "'", true};
    return x;
  }
  auto* hc = static_cast<HybridCache*>(cache);
  for (size_t i = 0; i < blocks_.size(); ++i) {
    x = run_block(i, x, positions, hc ? hc->layers[i].get() : nullptr, documents);
    if (locate && !all_finite(x)) {
      *locate = {blocks_[i]->label, blocks_[i]->runs_plugin};
      return x;
    }
  }
  if (!head) return x;
  if (autoencoder) return autoencoder->forward(x, positions);
  x = final_norm->forward(x);
  const torch::Tensor& w = head_weight.defined() ? head_weight : embedding->weight;
  return opts_.fused_kernels && cpu_linear_applies(x, w) ? linear_cpu(x, w) : torch::linear(x, w);
}

torch::Tensor HybridModel::run_block(size_t i, const torch::Tensor& x,
                                     const torch::Tensor& positions, MixerCache* cache,
                                     const PackedDocuments* documents) {
  Block& b = *blocks_[i];
  // The fatal-signal report of the in-process commands reads this label (util/fault_context.h).
  const LayerFaultScope scope(b.label);
  if (!b.runs_plugin) return b.forward(x, positions, cache, documents);
  try {
    return b.forward(x, positions, cache, documents);
  } catch (const UserError&) {
    throw;  // already names what is wrong
  } catch (const std::exception& e) {
    throw PluginError(fmt::format("{}: its forward failed: {}", b.label, first_line(e)));
  }
}

torch::Tensor HybridModel::forward(const torch::Tensor& tokens) {
  return run(tokens, 0, nullptr, nullptr);
}

LanguageModel::NonFiniteLayer HybridModel::first_non_finite_layer(
    const torch::Tensor& tokens, const torch::Tensor& document_starts) {
  torch::NoGradGuard no_grad;
  NonFiniteLayer found;
  if (document_starts.defined()) {
    const PackedDocuments documents = packed_documents(document_starts);
    run(tokens, 0, nullptr, &documents, &found);
  } else {
    run(tokens, 0, nullptr, nullptr, &found);
  }
  return found;
}

torch::Tensor HybridModel::forward_packed(const torch::Tensor& tokens,
                                          const torch::Tensor& document_starts) {
  TORCH_CHECK(document_starts.sizes() == tokens.sizes(), "model: document_starts ",
              document_starts.sizes(), " must match tokens ", tokens.sizes());
  const PackedDocuments documents = packed_documents(document_starts);
  return run(tokens, 0, nullptr, &documents);
}

torch::Tensor HybridModel::forward(const torch::Tensor& tokens, DecodeCache& cache) {
  if (autoencoder) {
    throw UserError(
        "model.head is autoencoder: every position is decoded from the row's last one, so the "
        "model has no token-by-token decoding (generate, eval.scoring generated)");
  }
  auto* hc = dynamic_cast<HybridCache*>(&cache);
  TORCH_CHECK(hc && hc->layers.size() == blocks_.size(),
              "model: the cache was not made by this model's new_cache()");
  torch::Tensor logits = run(tokens, cache.length, hc, nullptr);
  cache.length += tokens.size(1);
  return logits;
}

void HybridModel::advance(const torch::Tensor& tokens, DecodeCache& cache) {
  auto* hc = dynamic_cast<HybridCache*>(&cache);
  TORCH_CHECK(hc && hc->layers.size() == blocks_.size(),
              "model: the cache was not made by this model's new_cache()");
  run(tokens, cache.length, hc, nullptr, nullptr, false);
  cache.length += tokens.size(1);
}

void HybridModel::set_ablation(const ModelAblation& a) {
  if (!a.layers.empty() && a.layers.size() != blocks_.size()) {
    throw std::invalid_argument("set_ablation: " + std::to_string(a.layers.size()) +
                                " layer entries for a model of " + std::to_string(blocks_.size()) +
                                " layers");
  }
  if (a.no_input_position && !input_position) {
    throw std::invalid_argument("set_ablation: the model has no input positional scheme");
  }
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const LayerAblation& l = a.layers[i];
    const bool pairwise = blocks_[i]->mixer->info(1).pairwise;
    if (l.state_window > 0 && pairwise) {
      throw std::invalid_argument("set_ablation: layer " + std::to_string(i) +
                                  " has pairwise attention; a state window is for recurrent "
                                  "mixers (restrict attention with a window instead)");
    }
    if (!pairwise && (l.attention.no_position || l.attention.window > 0)) {
      throw std::invalid_argument("set_ablation: layer " + std::to_string(i) +
                                  " is not an attention layer");
    }
  }
  no_input_position_ = a.no_input_position;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    blocks_[i]->ablation = a.layers.empty() ? LayerAblation{} : a.layers[i];
    blocks_[i]->mixer->set_ablation(blocks_[i]->ablation.attention);
  }
}

MixerCache* HybridModel::layer_cache(DecodeCache& cache, size_t layer) {
  auto* hc = dynamic_cast<HybridCache*>(&cache);
  return hc && layer < hc->layers.size() ? hc->layers[layer].get() : nullptr;
}

const MixerCache* HybridModel::layer_cache(const DecodeCache& cache, int64_t layer) const {
  const auto* hc = dynamic_cast<const HybridCache*>(&cache);
  return hc && layer >= 0 && static_cast<size_t>(layer) < hc->layers.size()
             ? hc->layers[static_cast<size_t>(layer)].get()
             : nullptr;
}

Mixer& HybridModel::layer_mixer(int64_t i) const {
  if (i < 0 || i >= num_layers()) return LanguageModel::layer_mixer(i);
  return *blocks_[static_cast<size_t>(i)]->mixer;
}

std::string HybridModel::layer_mixer_name(int64_t i) const {
  if (i < 0 || i >= num_layers()) return LanguageModel::layer_mixer_name(i);
  return opts_.layers[static_cast<size_t>(i)].type->name;
}

std::string HybridModel::input_scheme() const {
  return input_position && opts_.position ? opts_.position->scheme : "";
}

std::unique_ptr<DecodeCache> HybridModel::new_cache() const {
  auto cache = std::make_unique<HybridCache>();
  for (const auto& block : blocks_) cache->layers.push_back(block->mixer->make_cache());
  return cache;
}

ModelSummary HybridModel::summary(int64_t length) const {
  ModelSummary s;
  s.length = length;
  s.d_model = opts_.d_model;
  s.vocab_size = opts_.vocab_size;
  // The autoencoder's decoder is its head: never tied, counted with the embedding.
  s.tied_embeddings = opts_.tie_embeddings && !autoencoder;
  s.input_position = input_position ? input_position->name() : "";
  s.total_parameters = count_parameters(*this);
  s.embedding_parameters = embedding->weight.numel() +
                           (head_weight.defined() ? head_weight.numel() : 0) +
                           (autoencoder ? count_parameters(*autoencoder) : 0);
  for (const auto& scheme : shared_schemes_)
    s.shared_position_parameters += count_parameters(*scheme);
  int64_t pairwise = 0, positional = 0;
  const int64_t hidden = mlp_hidden_size(opts_.mlp, opts_.d_model);
  const double mlp_flops = 2.0 * 3.0 * static_cast<double>(opts_.d_model) * hidden;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = *blocks_[i];
    const MixerInfo info = b.mixer->info(length);
    LayerSummary l;
    l.index = static_cast<int64_t>(i);
    l.letter = opts_.layers[i].type->letter;
    l.mixer = opts_.layers[i].type->name;
    l.overridden = opts_.layers[i].overridden;
    l.position = info.position;
    l.position_hooks = info.position_hooks;
    l.pairwise = info.pairwise;
    l.parameters = count_parameters(b);
    l.mixer_parameters = count_parameters(*b.mixer);
    l.state_floats = info.state_floats;
    l.kv_floats_per_token = info.kv_floats_per_token;
    l.kv_max_tokens = info.kv_max_tokens;
    l.flops_per_token = info.flops_per_token + mlp_flops;
    l.details = info.details;
    pairwise += info.pairwise ? 1 : 0;
    l.carries_position = carries_position(*b.mixer);
    positional += l.carries_position ? 1 : 0;
    s.recurrent_state_floats += l.state_floats;
    s.kv_floats_per_token += l.kv_floats_per_token;
    s.flops_per_token += l.flops_per_token;
    s.layers.push_back(l);
  }
  const double n = static_cast<double>(std::max<size_t>(blocks_.size(), 1));
  s.attention_share = pairwise / n;
  s.position_share = positional / n;
  s.flops_per_token += autoencoder ? autoencoder->flops_per_token()
                                   : 2.0 * opts_.d_model * opts_.vocab_size;  // head
  return s;
}

std::shared_ptr<LanguageModel> build_model(const ModelOptions& opts, PluginHost& host,
                                           const ModelBuildContext& ctx) {
  auto model = std::make_shared<HybridModel>(opts, host, ctx);
  if (!opts.from.empty()) load_hf_weights(*model, opts.from);
  return model;
}

}  // namespace hybridlab
