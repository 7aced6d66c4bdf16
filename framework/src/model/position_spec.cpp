#include "model/position_spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <string>

#include "hybridlab/error.h"

namespace hybridlab {

std::string PositionSpec::key() const {
  std::string k = scheme;
  if (params) {
    YAML::Emitter e;
    e << YAML::Flow << params->node();
    k += "|" + std::string(e.c_str());
  }
  return k;
}

PositionSpec read_position_spec(Section s) {
  PositionSpec spec;
  spec.scheme = s.get<std::string>("scheme", spec.scheme);
  s.check(!spec.scheme.empty(), "scheme",
          "must name a positional scheme (see `hybridlab plugins list`)");
  spec.where = s.location("scheme");
  spec.path = s.path();
  if (s.node().IsDefined() && s.node().IsMap()) spec.params = s;
  spec.section = s;
  // The scheme's own keys are read (and unknown ones reported) by the plugin at build time.
  return spec;
}

std::shared_ptr<PositionScheme> build_position_scheme(const PositionSpec& spec, PluginHost& host,
                                                      const PositionContext& ctx) {
  if (spec.params) {
    Section params = *spec.params;
    return host.create(spec.scheme, params, ctx);
  }
  Section empty =
      Config::parse("{}", spec.where.file.empty() ? "<defaults>" : spec.where.file).root();
  return host.create(spec.scheme, empty, ctx);
}

// A scheme's trained-length limit against the lengths the model must serve.
void check_scheme_length(const PositionScheme& scheme, const PositionSpec& spec,
                         const ModelBuildContext& ctx) {
  const int64_t limit = scheme.max_length();
  const int64_t need = std::max(ctx.max_length, ctx.train_length);
  if (limit > 0 && need > limit) {
    throw ConfigError(spec.where.str() + ": " + spec.path + ".scheme: scheme '" + scheme.name() +
                      "' encodes at most " + std::to_string(limit) +
                      " positions but the model must serve " + std::to_string(need) +
                      " (task.seq_len / eval.lengths); raise the scheme's length or shorten the "
                      "eval lengths");
  }
}

}  // namespace hybridlab
