#include "analysis/knockouts.h"

#include <algorithm>
#include <stdexcept>

namespace hybridlab {

namespace analysis {

namespace {

bool wanted(const std::vector<std::string>& kinds, const std::string& kind) {
  return kinds.empty() || std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
}

const Mixer& mixer_of(const LanguageModel& model, size_t layer) {
  return model.layer_mixer(static_cast<int64_t>(layer));
}

}  // namespace

std::string layer_label(const LanguageModel& model, size_t layer) {
  std::string out =
      "layer " + std::to_string(layer) + " (" + model.layer_mixer_name(static_cast<int64_t>(layer));
  const std::string position = mixer_of(model, layer).info(1).position;
  if (position != "-") out += ", " + position;
  return out + ")";
}

std::vector<Knockout> plan_knockouts(const LanguageModel& model,
                                     const std::vector<std::string>& kinds, int64_t state_window,
                                     const std::vector<int64_t>& windows) {
  for (const std::string& k : kinds) {
    if (!wanted(knockout_kinds(), k))
      throw std::invalid_argument("unknown knock-out kind '" + k + "'");
  }
  const size_t n = static_cast<size_t>(model.num_layers());
  const auto none = [&] {
    ModelAblation a;
    a.layers.assign(n, LayerAblation{});
    return a;
  };
  // A knock-out of layer i, named by its label and its mixer type.
  const auto at_layer = [&](const char* kind, size_t i, int64_t setting) {
    return Knockout{kind,
                    static_cast<int64_t>(i),
                    layer_label(model, i),
                    setting,
                    none(),
                    model.layer_mixer_name(static_cast<int64_t>(i))};
  };
  std::vector<Knockout> out;
  if (wanted(kinds, "mixer")) {
    for (size_t i = 0; i < n; ++i) {
      Knockout k = at_layer("mixer", i, 0);
      k.ablation.layers[i].mixer_off = true;
      out.push_back(k);
    }
  }
  if (wanted(kinds, "state_reset")) {
    for (size_t i = 0; i < n; ++i) {
      const int64_t natural = mixer_of(model, i).state_reset_window();
      if (natural == 0) continue;  // no recurrent state
      const int64_t w = state_window > 0 ? state_window : natural;
      Knockout k = at_layer("state_reset", i, w);
      k.ablation.layers[i].state_window = w;
      out.push_back(k);
    }
  }
  if (wanted(kinds, "position")) {
    Knockout all{"position", -2, "all positions", 0, none(), ""};
    int64_t sources = 0;
    for (size_t i = 0; i < n; ++i) {
      const Mixer& m = mixer_of(model, i);
      if (!m.info(1).pairwise || !carries_position(m)) continue;
      Knockout k = at_layer("position", i, 0);
      k.ablation.layers[i].attention.no_position = true;
      all.ablation.layers[i].attention.no_position = true;
      out.push_back(k);
      ++sources;
    }
    if (!model.input_scheme().empty()) {
      Knockout k{"position", -1, "input (" + model.input_scheme() + ")", 0, none(), ""};
      k.ablation.no_input_position = true;
      all.ablation.no_input_position = true;
      out.push_back(k);
      ++sources;
    }
    if (sources > 1) out.push_back(all);
  }
  if (wanted(kinds, "reach")) {
    for (size_t i = 0; i < n; ++i) {
      if (!mixer_of(model, i).info(1).pairwise) continue;
      for (int64_t w : windows) {
        Knockout k = at_layer("reach", i, w);
        k.ablation.layers[i].attention.window = w;
        out.push_back(k);
      }
    }
  }
  return out;
}

}  // namespace analysis
}  // namespace hybridlab
