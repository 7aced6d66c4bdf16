// build_run: one way to turn a run's config into a model and a task.

#include "hybridlab/run_build.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "hybridlab/runtime.h"

namespace hybridlab {

namespace {

// build_run with the model's lengths given (`lengths`) or, when null, the config's own.
BuiltRun build_with_lengths(const Config& cfg, const std::string& config_dir, int64_t threads,
                            const ModelBuildContext* lengths) {
  BuiltRun b;
  b.exp = read_experiment(cfg, false, config_dir);
  if (threads > 0) b.exp.runtime.threads = threads;
  apply_runtime(b.exp.runtime);
  torch::manual_seed(static_cast<uint64_t>(b.exp.train.seed));
  b.host = make_plugin_host(cfg);
  try {
    ModelBuildContext ctx = model_build_context(b.exp);
    if (lengths) {
      ctx.train_length = lengths->train_length;
      ctx.max_length = std::max(ctx.max_length, lengths->max_length);
    }
    b.model = build_model(*b.exp.model, *b.host, ctx);
    b.model->to(runtime_device(b.exp.runtime));
  } catch (const c10::Error& e) {
    const std::string reason = e.what_without_backtrace();
    throw UserError(fmt::format("cannot build the model: {}", reason.substr(0, reason.find('\n'))));
  }
  for (const auto& p : b.model->parameters()) b.params += p.numel();
  std::vector<int64_t> eval_lengths = b.exp.eval.lengths;
  eval_lengths.push_back(b.exp.task->seq_len());
  b.exp.task->prepare(eval_lengths);
  return b;
}

}  // namespace

BuiltRun build_run(const Config& cfg, const std::string& config_dir, int64_t threads) {
  return build_with_lengths(cfg, config_dir, threads, nullptr);
}

BuiltRun build_eval_variant(const BuiltRun& trained, const Config& trained_cfg,
                            const EvalVariant& v, const std::string& config_dir) {
  const ModelBuildContext lengths = model_build_context(trained.exp);
  BuiltRun vb = build_with_lengths(eval_variant_config(trained_cfg, v), config_dir, 0, &lengths);
  adopt_trained_weights(*trained.model, *vb.model, v);
  return vb;
}

void in_eval_variant(const EvalVariant& v, const std::function<void()>& check) {
  const auto prefixed = [&](const std::exception& e) {
    return fmt::format("in eval variant '{}' ({}): {}", v.name, v.where.str(), e.what());
  };
  try {
    check();
  } catch (const ConfigError& e) {
    throw ConfigError(prefixed(e));
  } catch (const PluginError& e) {
    throw PluginError(prefixed(e));
  } catch (const DataError& e) {
    throw DataError(prefixed(e));
  } catch (const UserError& e) {
    throw UserError(prefixed(e));
  }
}

void check_eval_variant_models(
    const Config& cfg, const std::vector<EvalVariant>& variants, LanguageModel& trained,
    const std::function<std::shared_ptr<LanguageModel>(const Config&)>& build) {
  for (const EvalVariant& v : variants) {
    in_eval_variant(
        v, [&] { adopt_trained_weights(trained, *build(eval_variant_config(cfg, v)), v); });
  }
}

void adopt_trained_weights(LanguageModel& trained, LanguageModel& variant, const EvalVariant& v) {
  torch::NoGradGuard no_grad;
  const auto refuse = [&](const std::string& what) {
    return UserError(
        fmt::format("eval variant '{}' ({}) {}; an evaluation variant may only change "
                    "settings that leave the parameters as trained",
                    v.name, eval_variant_text(v), what));
  };
  auto from = trained.named_parameters(true);
  auto to = variant.named_parameters(true);
  for (const auto& item : from) {
    if (!to.contains(item.key()))
      throw refuse(fmt::format("drops the trained parameter '{}'", item.key()));
  }
  for (auto& item : to) {
    const torch::Tensor* src = from.find(item.key());
    if (!src) throw refuse(fmt::format("adds the parameter '{}'", item.key()));
    if (src->sizes() != item.value().sizes()) {
      throw refuse(fmt::format("changes the shape of '{}' from {} to {}", item.key(),
                               fmt::join(src->sizes(), "×"), fmt::join(item.value().sizes(), "×")));
    }
    item.value().copy_(*src);
  }
}

}  // namespace hybridlab
