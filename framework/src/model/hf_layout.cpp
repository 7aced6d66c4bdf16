#include "model/hf_layout.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>

#include "hybridlab/error.h"
#include "hybridlab/interop.h"
#include "util/atomic_file.h"

namespace hybridlab {
namespace fs = std::filesystem;
using nlohmann::json;

void HfConfig::bad(const std::string& key, const std::string& why) const {
  throw ConfigError(fmt::format("{}: {}: {}", file, key, why));
}

void HfConfig::refuse_set(const std::vector<std::string>& keys, const std::string& why) const {
  for (const auto& key : keys) {
    if (!doc.contains(key)) continue;
    const json& v = doc[key];
    const bool unset = v.is_null() || v == false || v == 0 || (v.is_array() && v.empty()) ||
                       (v.is_object() && v.empty());
    if (!unset) bad(key, fmt::format("is set ({}): {}", v.dump(), why));
  }
}

void HfTensorSource::load_into(const std::string& name, HybridModel& model,
                               const std::string& parameter) {
  auto params = model.named_parameters(/*recurse=*/true);
  torch::Tensor* p = params.find(parameter);
  TORCH_CHECK(p, "HfTensorSource::load_into: the model has no parameter '", parameter, "'");
  check(name, p->sizes().vec(), parameter);
  torch::NoGradGuard no_grad;
  torch::Tensor data = p->detach();
  ck_.load_into(name, data);
  read_.insert(name);
}

void HfTensorSource::check(const std::string& name, const std::vector<int64_t>& shape,
                           const std::string& needed_by) const {
  if (!ck_.contains(name)) {
    throw DataError(fmt::format("{}: no tensor '{}', which the model's parameter '{}' needs", dir_,
                                name, needed_by));
  }
  const SafetensorsEntry& e = ck_.entry(name);
  if (e.shape != shape) {
    throw DataError(fmt::format("{}: tensor '{}' is {} where the config makes it {}",
                                ck_.file_of(name), name, json(e.shape).dump(), json(shape).dump()));
  }
  if (e.dtype != "F64" && e.dtype != "F32" && e.dtype != "F16" && e.dtype != "BF16") {
    throw DataError(fmt::format("{}: tensor '{}' is {}, not a floating-point dtype",
                                ck_.file_of(name), name, e.dtype));
  }
}

torch::Tensor HfTensorSource::load(const std::string& name, const std::vector<int64_t>& shape,
                                   const std::string& needed_by) {
  check(name, shape, needed_by);
  torch::Tensor t = ck_.load(name);
  read_.insert(name);
  return t;
}

void HfTensorSource::finish(const std::set<std::string>& unused_ok,
                            const std::vector<std::string>& unused_prefixes) const {
  for (const std::string& name : ck_.names()) {
    if (read_.count(name) || unused_ok.count(name)) continue;
    if (std::any_of(unused_prefixes.begin(), unused_prefixes.end(),
                    [&](const std::string& p) { return name.rfind(p, 0) == 0; })) {
      continue;
    }
    throw DataError(
        fmt::format("{}: tensor '{}' has no place in the model its config.json "
                    "describes (a part this importer does not read?)",
                    ck_.file_of(name), name));
  }
}

void set_parameter(HybridModel& model, const std::string& name, const torch::Tensor& value) {
  auto params = model.named_parameters(/*recurse=*/true);  // p points into it: keep it alive
  torch::Tensor* p = params.find(name);
  TORCH_CHECK(p, "set_parameter: the model has no parameter '", name, "'");
  TORCH_CHECK(p->sizes() == value.sizes(), "set_parameter: '", name, "' is ", p->sizes(),
              ", the value ", value.sizes());
  torch::NoGradGuard no_grad;
  p->copy_(value);  // converts the dtype in place: no parameter-sized temporary
}

const Registry<HfLayout>& hf_layouts() {
  static const Registry<HfLayout> registry = [] {
    Registry<HfLayout> r("checkpoint layout");
    r.add("gated_deltanet", fla_gated_deltanet_layout(), "hf_fla_import.cpp");
    r.add("qwen3_next", qwen3_next_layout(), "hf_qwen_import.cpp");
    r.add("qwen3_5", qwen3_5_layout(), "hf_qwen_import.cpp");
    r.add("qwen3_5_text", qwen3_5_layout(), "hf_qwen_import.cpp");
    return r;
  }();
  return registry;
}

namespace {

HfConfig read_hf_config(const std::string& dir) {
  HfConfig c;
  c.file = (fs::path(dir) / "config.json").string();
  try {
    c.doc = json::parse(read_file(c.file));
  } catch (const json::exception& e) {
    throw ConfigError(fmt::format("{}: not valid JSON ({})", c.file, e.what()));
  }
  if (!c.doc.is_object()) throw ConfigError(c.file + ": not a JSON object");
  return c;
}

const HfLayout& layout_of(const HfConfig& c) {
  const std::string type = c.get<std::string>("model_type", "");
  const HfLayout* layout = hf_layouts().find(type);
  if (!layout) c.bad("model_type", hf_layouts().unknown(type));
  return *layout;
}

}  // namespace

std::vector<std::pair<std::string, YAML::Node>> hf_model_keys(const std::string& dir) {
  const HfConfig c = read_hf_config(dir);
  return layout_of(c).model_keys(c);
}

void expand_model_from(Config& cfg, const std::string& base_dir) {
  const YAML::Node from = cfg.lookup("model.from");
  if (!from.IsDefined() || from.IsNull() || (from.IsScalar() && from.Scalar().empty())) return;
  const Location at = cfg.location("model.from");
  if (!from.IsScalar()) throw ConfigError(at.str() + ": model.from: expected a folder path");
  fs::path dir = from.as<std::string>();
  const fs::path base = !base_dir.empty()     ? fs::path(base_dir)
                        : !cfg.file().empty() ? fs::path(cfg.file()).parent_path()
                                              : fs::path();
  if (dir.is_relative() && !base.empty() && fs::exists(base / dir)) dir = base / dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || !fs::exists(dir / "config.json", ec)) {
    throw ConfigError(
        fmt::format("{}: model.from: '{}' is not a folder holding config.json "
                    "(a Hugging Face checkpoint)",
                    at.str(), from.as<std::string>()));
  }
  dir = fs::absolute(dir).lexically_normal();
  cfg.set("model.from", YAML::Node(dir.string()), at);
  std::vector<std::pair<std::string, YAML::Node>> keys;
  try {
    keys = hf_model_keys(dir.string());
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{} (model.from at {})", e.what(), at.str()));
  }
  const Location origin{(dir / "config.json").string(), 0, 0};
  // The file's keys fill what the experiment leaves unset; a key it sets wins (an ablation of an
  // imported model), and so does a position map it sets (model.attention.position).
  for (const auto& [key, value] : keys) {
    if (!cfg.lookup("model." + key).IsDefined()) cfg.set("model." + key, value, origin);
  }
}

void load_hf_weights(LanguageModel& model, const std::string& dir) {
  auto* hybrid = dynamic_cast<HybridModel*>(&model);
  if (!hybrid) throw UserError("model.from: the model is not a hybridlab layer graph");
  const HfConfig c = read_hf_config(dir);
  HfTensorSource tensors(dir);
  layout_of(c).load(*hybrid, tensors, c);
}

}  // namespace hybridlab
