// read_model_options: the `model:` section, the layer pattern and the per-layer overrides.

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "model/model_options.h"

namespace hybridlab {

namespace {

// Parses an override key: a layer index, negative from the end (-1 = last layer).
bool parse_index(const std::string& text, int64_t& out) {
  if (text.empty()) return false;
  size_t used = 0;
  try {
    out = std::stoll(text, &used);
  } catch (const std::exception&) {
    return false;
  }
  return used == text.size();
}

// The keys of `model:` itself (besides mixer sections).
bool is_model_key(const std::string& key) {
  static const char* const keys[] = {"d_model",  "vocab_size", "norm_eps",      "tie_embeddings",
                                     "init_std", "mlp",        "position",      "layers",
                                     "head",     "overrides",  "fused_kernels", "from"};
  for (const char* k : keys)
    if (key == k) return true;
  return false;
}

// Unknown letters (letter -> (count, first position)) in the order the pattern first has them.
std::vector<std::pair<char, std::pair<size_t, size_t>>> by_first_position(
    const std::map<char, std::pair<size_t, size_t>>& unknown) {
  std::vector<std::pair<char, std::pair<size_t, size_t>>> out(unknown.begin(), unknown.end());
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.second.second < b.second.second; });
  return out;
}

// More layers than any model here needs; a typo in `repeat` (1000000) must not build them.
constexpr int64_t kMaxLayers = 4096;

// "letter 'X' (at 19,999 of 20,000 positions, first at 3) names no mixer".
std::string letter_error(char letter, size_t count, size_t first, size_t length) {
  std::string shown = std::isprint(static_cast<unsigned char>(letter))
                          ? std::string(1, letter)
                          : fmt::format("\\x{:02x}", static_cast<unsigned char>(letter));
  if (count == 1) {
    return fmt::format("letter '{}' (character {} of {}) names no mixer", shown, first, length);
  }
  return fmt::format("letter '{}' (at {} of {} positions, first at {}) names no mixer", shown,
                     count, length, first);
}

// Mixer types by letter or name: the built-ins first, the registry with the mixer plugins only
// for a key no built-in has, so that a model of built-in mixers runs no plugin code while it is
// read.
class MixerLookup {
 public:
  explicit MixerLookup(Config cfg) : cfg_(std::move(cfg)) {}
  const MixerRegistry& builtin() const { return MixerRegistry::builtin(); }

  const MixerType* find(const std::string& key) {
    if (const MixerType* t = builtin().find(key)) return t;
    if (!all_) all_ = &MixerRegistry::of(cfg_);
    // Kept across lookups: the message for an unknown letter is composed after all of them.
    const std::string aside = all_->set_aside(key);
    if (!aside.empty() && set_aside_.find(aside) == std::string::npos)
      set_aside_ += (set_aside_.empty() ? "" : "; ") + aside;
    return all_->find(key);
  }

  // "A (attention), G (gated_deltanet), D (deltanet, plugin)" and what is amiss among plugins.
  std::string known() const {
    std::string k = all_ ? all_->names() : builtin().names();
    if (all_ && !all_->note().empty()) k += " (" + all_->note() + ")";
    if (!set_aside_.empty()) k += "; " + set_aside_;
    return k;
  }

  // "; letters are case-sensitive: 'D' is deltanet" for a letter whose other case names a mixer.
  std::string case_hint(char letter) {
    const unsigned char c = static_cast<unsigned char>(letter);
    const char other = static_cast<char>(std::islower(c) ? std::toupper(c) : std::tolower(c));
    if (other == letter) return "";
    const MixerType* t = find(std::string(1, other));
    return t ? fmt::format("; letters are case-sensitive: '{}' is {}", other, t->name) : "";
  }

 private:
  Config cfg_;
  const MixerRegistry* all_ = nullptr;  // MixerRegistry::of(cfg_), once a key needs the plugins
  std::string set_aside_;               // set-aside libraries that had a key looked up, and why
};

// The types of `letters`, each unknown letter reported once at `where`.`key` (however often it
// occurs: a long pattern with a typo would otherwise print one line per character). `complete`
// is set to whether every letter was known.
std::vector<const MixerType*> read_letters(const std::string& letters, Section& where,
                                           const std::string& key, MixerLookup& lookup,
                                           bool& complete) {
  std::vector<const MixerType*> types;
  std::map<char, std::pair<size_t, size_t>> unknown;  // letter -> (count, first position)
  for (size_t i = 0; i < letters.size(); ++i) {
    if (const MixerType* t = lookup.find(std::string(1, letters[i]))) {
      types.push_back(t);
    } else {
      auto [it, fresh] = unknown.emplace(letters[i], std::make_pair(size_t{0}, i + 1));
      ++it->second.first;
    }
  }
  for (const auto& [letter, seen] : by_first_position(unknown)) {
    where.error(key, letter_error(letter, seen.first, seen.second, letters.size()) +
                         lookup.case_hint(letter) + "; known letters: " + lookup.known());
  }
  complete = unknown.empty();
  return types;
}

// `model.layers` in its three spellings ({pattern, repeat}, a string of letters, a list of
// letters or names), at most kMaxLayers of them.
std::vector<const MixerType*> read_layer_types(Section& s, MixerLookup& lookup) {
  std::vector<const MixerType*> types;
  double requested = 0;  // layers asked for ({pattern, repeat} stops building past the limit)
  bool complete = true;
  const YAML::Node layers_node = s.node().IsMap() ? s.node()["layers"] : YAML::Node();
  if (!s.has("layers")) {
    types = read_letters(s.get<std::string>("layers", "GGGA"), s, "layers", lookup, complete);
  } else if (layers_node.IsSequence()) {
    for (const std::string& item : s.get<std::vector<std::string>>("layers", {})) {
      if (const MixerType* t = lookup.find(item)) {
        types.push_back(t);
      } else {
        s.error("layers", "'" + item + "' names no mixer; known: " + lookup.known());
      }
    }
  } else if (layers_node.IsScalar()) {
    types = read_letters(s.get<std::string>("layers", ""), s, "layers", lookup, complete);
  } else {
    Section ls = s.child("layers");
    const std::string pattern = ls.required<std::string>("pattern");
    const int64_t repeat = ls.get<int64_t>("repeat", 1);
    ls.check(repeat >= 1, "repeat", "must be >= 1");
    ls.finish();
    const std::vector<const MixerType*> once =
        read_letters(pattern, ls, "pattern", lookup, complete);
    const int64_t copies = complete ? std::max<int64_t>(repeat, 1) : 1;
    requested = static_cast<double>(once.size()) * static_cast<double>(copies);
    for (int64_t r = 0; r < copies && static_cast<int64_t>(types.size()) <= kMaxLayers; ++r)
      types.insert(types.end(), once.begin(), once.end());
  }
  s.check(!types.empty() || !s.config().errors().empty(), "layers",
          "the model needs at least one layer");
  if (static_cast<int64_t>(types.size()) > kMaxLayers) {
    s.error("layers",
            fmt::format("the model has {:.0f} layers; at most {} are supported",
                        std::max(requested, static_cast<double>(types.size())), kMaxLayers));
    types.resize(kMaxLayers);
  }
  return types;
}

// The settings of each mixer type the layers use or the section configures (a built-in type's
// checked here), one LayerSpec per layer, and the sections of plugin mixers no layer uses (built
// once with the model).
void read_mixer_options(Section& s, const std::vector<const MixerType*>& types, MixerLookup& lookup,
                        ModelOptions& o) {
  const MixerContext ctx = mixer_read_context(o);
  std::map<const MixerType*, Section> base;
  const auto read = [&](const MixerType* t) {
    Section settings = s.child(t->name);
    if (t->check) t->check(settings, ctx);
    return base.emplace(t, settings).first->second;
  };
  for (const MixerType* t : lookup.builtin().types()) {
    const bool used = std::find(types.begin(), types.end(), t) != types.end();
    if (used || s.has(t->name)) read(t);
  }
  for (const MixerType* t : types) {  // plugin mixers the layers use
    if (!base.count(t)) read(t);
  }
  for (const std::string& key : s.keys()) {  // sections of plugin mixers no layer uses
    if (key.size() < 2 || is_model_key(key) || lookup.builtin().find(key)) continue;
    if (const MixerType* t = lookup.find(key); t && !base.count(t)) {
      o.unused_plugin_mixers.push_back(LayerSpec{t, read(t), false});
    }
  }
  for (const MixerType* t : types) {
    o.layers.push_back(LayerSpec{t, base.at(t), false});
    o.layers_text += t->letter;
  }
}

// `model.overrides`: per layer index (negative from the end), that layer's mixer settings read
// over its base settings.
void read_overrides(Section ov, ModelOptions& o) {
  const MixerContext ctx = mixer_read_context(o);
  const int64_t n = static_cast<int64_t>(o.layers.size());
  std::map<int64_t, std::string> claimed;  // layer index -> the key that named it first
  for (const std::string& key : ov.keys()) {
    int64_t index = 0;
    if (!parse_index(key, index)) {
      ov.accept(key);
      ov.error(key, "override keys are layer indices (0.." + std::to_string(n - 1) +
                        ", or negative from the end), got '" + key + "'");
      continue;
    }
    const int64_t at = index < 0 ? n + index : index;
    if (at < 0 || at >= n) {
      ov.accept(key);
      ov.error(key, "override index " + key + " is past the last layer: the model has " +
                        std::to_string(n) + " layers (indices 0.." + std::to_string(n - 1) + ")");
      continue;
    }
    if (auto [it, fresh] = claimed.emplace(at, key); !fresh) {
      ov.accept(key);
      ov.error(key, "names layer " + std::to_string(at) + ", which the override '" + it->second +
                        "' at " + ov.location(it->second).str() +
                        " already names; merge the two into one override");
      continue;
    }
    LayerSpec& layer = o.layers[static_cast<size_t>(at)];
    layer.settings = ov.child(key).over(layer.settings);
    if (layer.type->check) layer.type->check(layer.settings, ctx);
    layer.overridden = true;
  }
  ov.finish();
}

MlpOptions read_mlp_options(Section s) {
  MlpOptions o;
  o.intermediate_size = s.get<int64_t>("intermediate_size", o.intermediate_size);
  o.multiple_of = s.get<int64_t>("multiple_of", o.multiple_of);
  s.check(o.intermediate_size >= 0, "intermediate_size",
          "must be >= 0 (0 = round_up(8*d_model/3, multiple_of))");
  s.check(o.multiple_of > 0, "multiple_of", "must be > 0");
  s.finish();
  return o;
}

ModelHead read_head(Section& s) {
  const std::string name = s.get<std::string>("head", model_head_name(ModelHead::kCausalLM));
  for (ModelHead h : {ModelHead::kCausalLM, ModelHead::kAutoEncoder})
    if (name == model_head_name(h)) return h;
  s.error("head", fmt::format("expected causal_lm (next-token logits at every position) or "
                              "autoencoder (MAD's: every position decoded from the last; task "
                              "compression), got '{}'",
                              name));
  return ModelHead::kCausalLM;
}

}  // namespace

ModelShape model_shape(const ModelOptions& opts) {
  ModelShape s;
  s.d_model = opts.d_model;
  s.vocab_size = opts.vocab_size;
  s.layers = static_cast<int64_t>(opts.layers.size());
  // mlp_hidden_size rounds in int64: keep absurd widths away from its arithmetic.
  s.mlp_hidden =
      opts.d_model < (int64_t{1} << 40) ? mlp_hidden_size(opts.mlp, opts.d_model) : opts.d_model;
  s.tie_embeddings = opts.tie_embeddings;
  s.autoencoder = opts.head == ModelHead::kAutoEncoder;
  return s;
}

void set_vocab_size(ModelOptions& opts, int64_t vocab_size) { opts.vocab_size = vocab_size; }

MixerContext mixer_read_context(const ModelOptions& opts) {
  MixerContext ctx;
  ctx.d_model = opts.d_model;
  ctx.fused_kernels = opts.fused_kernels;
  return ctx;
}

AttentionMixerOptions attention_options(const LayerSpec& layer, const ModelOptions& opts) {
  Section settings = layer.settings;
  return read_attention_options(settings, mixer_read_context(opts));
}

GatedDeltaNetOptions gated_deltanet_options(const LayerSpec& layer, const ModelOptions& opts) {
  Section settings = layer.settings;
  return read_gated_deltanet_options(settings, mixer_read_context(opts));
}

const char* model_head_name(ModelHead h) {
  return h == ModelHead::kAutoEncoder ? "autoencoder" : "causal_lm";
}

std::shared_ptr<ModelOptions> read_model_options(Section s) {
  auto o = std::make_shared<ModelOptions>();
  o->d_model = s.get<int64_t>("d_model", o->d_model);
  o->vocab_size = s.get<int64_t>("vocab_size", o->vocab_size);
  o->norm_eps = s.get<double>("norm_eps", o->norm_eps);
  o->tie_embeddings = s.get<bool>("tie_embeddings", o->tie_embeddings);
  o->init_std = s.get<double>("init_std", o->init_std);
  o->fused_kernels = s.get<bool>("fused_kernels", o->fused_kernels);
  o->head = read_head(s);
  // Read only when given, so that a resolved config does not carry an empty `from`.
  if (s.has("from")) o->from = s.get<std::string>("from", "");
  s.check(o->d_model > 0, "d_model", "must be > 0");
  s.check(o->vocab_size > 0, "vocab_size", "must be > 0");
  s.check(o->norm_eps > 0, "norm_eps", "must be > 0");
  s.check(o->init_std > 0, "init_std", "must be > 0");
  s.check(o->head != ModelHead::kAutoEncoder || o->d_model >= 4, "head",
          "autoencoder needs d_model >= 4 (its decoder positions take two frequencies at least)");
  if (o->d_model <= 0) o->d_model = 1;  // keep the checks below meaningful after an error
  o->mlp = read_mlp_options(s.child("mlp"));
  if (s.has("position")) o->position = read_position_spec(s.child("position"));
  MixerLookup lookup(s.config());
  const std::vector<const MixerType*> types = read_layer_types(s, lookup);
  read_mixer_options(s, types, lookup, *o);
  if (s.has("overrides")) read_overrides(s.child("overrides"), *o);
  s.finish();
  return o;
}

}  // namespace hybridlab
