// Evaluation variants: which settings may change after training, reading `eval.variants`, the
// command-line form, and applying one to a run's config.

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <regex>

#include "hybridlab/error.h"
#include "hybridlab/experiment.h"
#include "hybridlab/model.h"

namespace hybridlab {
namespace {

// Settings outside the mixers that a trained model's parameters do not depend on. Each pattern
// with the text that names it in messages and docs/experiments.md.
const std::vector<std::pair<std::regex, const char*>>& safe_keys() {
  static const std::vector<std::pair<std::regex, const char*>> keys = {
      {std::regex(R"(model\.position(\..+)?)"), "model.position[.KEY]"},
      // The task's settings other than which task and its training mix (the model keeps the
      // trained run's lengths: build_eval_variant):
      // e.g. MQAR at more key-value pairs than trained (Based, Arora et al. 2024, Fig. 2).
      {std::regex(R"(task\.(?!(name|mixture)(\.|$))[^.]+(\..+)?)"),
       "task.KEY (not name or mixture)"},
      {std::regex(R"(eval\.lengths)"), "eval.lengths"},
      {std::regex(R"(eval\.stride)"), "eval.stride"},
      {std::regex(R"(eval\.scoring)"), "eval.scoring"},
  };
  return keys;
}

// model.NAME.KEY[...] and model.overrides.N.KEY[...]: the mixer types decide (mixer_types:
// MixerType::eval_safe_keys of a built-in type, a plugin's record).
const std::regex& mixer_key() {
  static const std::regex re(R"(model\.([a-z_][a-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)(\..+)?)");
  return re;
}
const std::regex& override_key() {
  static const std::regex re(R"(model\.overrides\.-?[0-9]+\.([A-Za-z_][A-Za-z0-9_]*)(\..+)?)");
  return re;
}

bool declares(const MixerTypeInfo& t, const std::string& key) {
  return std::find(t.eval_safe_keys.begin(), t.eval_safe_keys.end(), key) != t.eval_safe_keys.end();
}

// The first mixer type that `match` accepts: the built-in ones first, then the plugins on cfg's
// search path, searched only when no built-in type matches (searching loads every library there).
std::optional<MixerTypeInfo> first_type(const Config& cfg,
                                        const std::function<bool(const MixerTypeInfo&)>& match) {
  for (bool with_plugins : {false, true}) {
    for (const MixerTypeInfo& t : mixer_types(cfg, with_plugins))
      if (match(t)) return t;
  }
  return std::nullopt;
}

// Why `name` cannot name a variant ("" when it can).
std::string name_problem(const std::string& name) {
  if (name == "trained") return "'trained' names the trained setting itself";
  if (folder_name(name) != name)
    return fmt::format("use letters, digits, '.', '_', '+' or '-' (e.g. '{}')", folder_name(name));
  return "";
}

// The value of one `KEY=VALUE` of a --variant, read as a command-line override is (and so as a
// file's value is: no tags, no duplicate keys in a flow map); undefined when it is null.
YAML::Node variant_value(const std::string& assignment, const std::string& key,
                         const std::string& origin) {
  Config c;
  c.apply_override(assignment, origin);
  return c.lookup(key);
}

std::string unsafe_key_message(const Config& cfg, const std::string& key) {
  return fmt::format(
      "'{}' cannot change after training (it changes the model's parameters or how it was "
      "trained); an evaluation variant may set {}",
      key, eval_safe_keys_text(cfg));
}

}  // namespace

bool eval_safe_key(const Config& cfg, const std::string& dotted_key) {
  for (const auto& [re, text] : safe_keys()) {
    if (std::regex_match(dotted_key, re)) return true;
  }
  std::smatch m;
  // model.overrides.N.KEY: a key some type declares (the layer's own reader refuses a key its
  // mixer does not have when the variant is applied).
  if (std::regex_match(dotted_key, m, override_key())) {
    const std::string key = m[1].str();
    return first_type(cfg, [&](const MixerTypeInfo& t) { return declares(t, key); }).has_value();
  }
  if (!std::regex_match(dotted_key, m, mixer_key())) return false;
  const std::string name = m[1].str();
  const auto t = first_type(cfg, [&](const MixerTypeInfo& type) { return type.name == name; });
  return t && declares(*t, m[2].str());
}

std::string eval_safe_keys_text(const Config& cfg) {
  std::string out = safe_keys().front().second;
  std::vector<std::string> any_layer;  // the keys some mixer declares, for model.overrides.N
  for (const MixerTypeInfo& t : mixer_types(cfg, true)) {
    for (const std::string& k : t.eval_safe_keys) {
      out += fmt::format(", model.{}.{}{}", t.name, k, k == "position" ? "[.KEY]" : "");
      if (std::find(any_layer.begin(), any_layer.end(), k) == any_layer.end())
        any_layer.push_back(k);
    }
  }
  for (const std::string& k : any_layer)
    out += fmt::format(", model.overrides.N.{}{}", k, k == "position" ? "[.KEY]" : "");
  for (size_t i = 1; i < safe_keys().size(); ++i) out += std::string(", ") + safe_keys()[i].second;
  return out;
}

void check_eval_variant(const Config& cfg, const EvalVariant& v) {
  for (const auto& [key, value] : v.set) {
    if (!eval_safe_key(cfg, key))
      throw UserError(fmt::format("variant '{}': {}", v.name, unsafe_key_message(cfg, key)));
  }
}

std::vector<EvalVariant> read_eval_variants(Section s) {
  std::vector<EvalVariant> out;
  for (const std::string& name : s.keys()) {
    s.accept(name);
    if (const std::string p = name_problem(name); !p.empty()) {
      s.error(name, fmt::format("'{}' cannot name an evaluation variant: {}", name, p));
      continue;
    }
    const YAML::Node m = s.node()[name];
    if (!m.IsMap() || m.size() == 0) {
      s.error(name,
              "must map to the settings it changes, e.g. {model.attention.position.rope_scaling: "
              "{type: ntk, factor: 4}}");
      continue;
    }
    EvalVariant v{name, {}, s.location(name)};
    Section keys = s.child(name);
    for (const std::string& key : keys.keys()) {
      keys.accept(key);
      if (!eval_safe_key(s.config(), key)) {
        keys.error(key, unsafe_key_message(s.config(), key));
        continue;
      }
      v.set.emplace_back(key, YAML::Clone(m[key]));
    }
    out.push_back(v);
  }
  return out;
}

Config eval_variant_config(const Config& base, const EvalVariant& v) {
  Config c = base.clone();
  for (const auto& [key, value] : v.set) c.set(key, value, v.where);
  return c;
}

std::vector<std::pair<std::string, std::string>> eval_variant_settings(const EvalVariant& v) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, value] : v.set) {
    YAML::Emitter em;
    em << YAML::Flow << value;
    out.emplace_back(key, em.c_str());
  }
  return out;
}

std::string eval_variant_text(const EvalVariant& v) {
  std::string out;
  for (const auto& [key, text] : eval_variant_settings(v))
    out += (out.empty() ? "" : ", ") + key + "=" + text;
  return out;
}

EvalVariant parse_eval_variant(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return UserError(
        fmt::format("--variant '{}': {}; expected NAME=KEY=VALUE[,KEY=VALUE...], e.g. "
                    "ntk=model.attention.position.rope_scaling={{type: ntk, factor: 4}}",
                    text, why));
  };
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) throw bad("no NAME= in front");
  EvalVariant v;
  v.name = text.substr(0, eq);
  v.where = Location{"--variant " + v.name, 0, 0};
  if (const std::string p = name_problem(v.name); !p.empty()) throw bad("bad NAME: " + p);
  // The assignments, split at commas outside [] and {} (flow values keep theirs).
  std::vector<std::string> parts(1);
  int depth = 0;
  for (char c : text.substr(eq + 1)) {
    depth += (c == '[' || c == '{') ? 1 : (c == ']' || c == '}') ? -1 : 0;
    if (c == ',' && depth == 0)
      parts.emplace_back();
    else
      parts.back() += c;
  }
  for (const std::string& part : parts) {
    const size_t at = part.find('=');
    if (at == std::string::npos || at == 0) throw bad("'" + part + "' is not KEY=VALUE");
    const std::string key = part.substr(0, at);
    for (const auto& [k, value] : v.set) {
      if (k == key) throw bad(key + " is set twice; give each key once");
    }
    const YAML::Node value = variant_value(part, key, "--variant " + v.name);
    if (!value.IsDefined() || value.IsNull()) throw bad("the value of " + key + " is empty");
    v.set.emplace_back(key, value);
  }
  return v;
}

}  // namespace hybridlab
