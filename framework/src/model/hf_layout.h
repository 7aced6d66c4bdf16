#pragma once
// The Hugging Face checkpoint layouts hybridlab imports (`model.from`), one registry entry per
// config.json `model_type`: how its config becomes `model:` keys and how its tensors become the
// built model's parameters. The entries live beside their layouts (hf_fla_import.cpp,
// hf_qwen_import.cpp); expand_model_from and load_hf_weights (hybridlab/interop.h) dispatch here.

#include <torch/types.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/safetensors.h"
#include "hybridlab/config.h"
#include "model/hybrid_model.h"
#include "util/registry.h"

namespace hybridlab {

/// A checkpoint's config.json, read with fla/transformers defaults for absent or null keys.
struct HfConfig {
  nlohmann::json doc;
  std::string file;  ///< the config.json path, for messages
  /// Throws ConfigError "FILE: KEY: WHY".
  [[noreturn]] void bad(const std::string& key, const std::string& why) const;
  /// The value of `key`, or `fallback` when absent or null; ConfigError for a wrong type.
  template <class T>
  T get(const std::string& key, const T& fallback) const {
    if (!doc.contains(key) || doc[key].is_null()) return fallback;
    try {
      return doc[key].get<T>();
    } catch (const nlohmann::json::exception&) {
      bad(key, "unexpected value " + doc[key].dump());
    }
  }
  /// Refuses each of `keys` that is present and not null (or not false / 0 / empty), naming it
  /// with `why`.
  void refuse_set(const std::vector<std::string>& keys, const std::string& why) const;
};

/// `model:` keys (dotted below `model.`) with their values.
using HfModelKeys = std::vector<std::pair<std::string, YAML::Node>>;

/// Reads a checkpoint's tensors for one model, one at a time, and remembers which were read.
class HfTensorSource {
 public:
  explicit HfTensorSource(const std::string& dir) : ck_(dir), dir_(dir) {}
  /// Tensor `name` as float at `shape`. Throws DataError naming the file and the tensor when it
  /// is absent, has another shape, or is not floating point; `needed_by` names the parameter.
  torch::Tensor load(const std::string& name, const std::vector<int64_t>& shape,
                     const std::string& needed_by);
  /// Tensor `name` straight into parameter `parameter` of `model` (same shape; the dtype
  /// converted chunk by chunk, no tensor-sized temporary). Errors as load().
  void load_into(const std::string& name, HybridModel& model, const std::string& parameter);
  bool contains(const std::string& name) const { return ck_.contains(name); }
  /// Throws DataError naming the first tensor never read, except those in `unused_ok` and those
  /// whose name starts with one of `unused_prefixes` (parts of a checkpoint the model does not
  /// take, e.g. a vision tower or a multi-token-prediction head).
  void finish(const std::set<std::string>& unused_ok = {},
              const std::vector<std::string>& unused_prefixes = {}) const;

 private:
  // Throws DataError when `name` is absent, has another shape, or is not floating point.
  void check(const std::string& name, const std::vector<int64_t>& shape,
             const std::string& needed_by) const;
  SafetensorsCheckpoint ck_;
  std::string dir_;
  std::set<std::string> read_;
};

/// One importable layout.
struct HfLayout {
  std::string description;
  /// The model keys of a config (ConfigError naming config.json and the key for what the layout
  /// cannot be read as).
  std::function<HfModelKeys(const HfConfig&)> model_keys;
  /// Fills every parameter of `model` (built from those keys) from `tensors`, then calls
  /// tensors.finish(). Throws DataError.
  std::function<void(HybridModel& model, HfTensorSource& tensors, const HfConfig& config)> load;
};

/// The layouts by model_type ("gated_deltanet", "qwen3_next", "qwen3_5", "qwen3_5_text").
const Registry<HfLayout>& hf_layouts();

HfLayout fla_gated_deltanet_layout();  // hf_fla_import.cpp
HfLayout qwen3_next_layout();          // hf_qwen_import.cpp
HfLayout qwen3_5_layout();             // hf_qwen_import.cpp

/// Copies `value` into parameter `name` of `model` (no gradient).
void set_parameter(HybridModel& model, const std::string& name, const torch::Tensor& value);

}  // namespace hybridlab
