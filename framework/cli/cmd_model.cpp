// `hybridlab model summary EXP.yaml [key=value ...]`: the layer table of the model an experiment
// describes, its totals, its attention and position shares, its decoding state and its FLOPs.

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli_numbers.h"
#include "commands.h"
#include "hybridlab/experiment.h"
#include "hybridlab/model.h"
#include "hybridlab/plugin_host.h"
#include "hybridlab/position.h"
#include "hybridlab/run.h"
#include "hybridlab/run_build.h"
#include "hybridlab/task.h"

namespace hybridlab::cli {

namespace {

// task.seq_len and the longest eval length, read without validating the rest of the file.
ModelBuildContext lengths_from(const Config& cfg) {
  // A malformed value is left to the full read (`config show`) to report with its location.
  ModelBuildContext ctx;
  Config probe = cfg.clone();
  Section task = probe.section("task");
  ctx.train_length = std::max<int64_t>(task.get<int64_t>("seq_len", 0), 0);
  ctx.max_length = ctx.train_length;
  for (int64_t n : probe.section("eval").get<std::vector<int64_t>>("lengths", {}))
    ctx.max_length = std::max(ctx.max_length, n);
  return ctx;
}

// An unset model.vocab_size follows the task's vocabulary, as `run` sets it (read_experiment):
// set here in `cfg` before the model is read. A task section that cannot be read leaves the
// model's default, for the full read (`config show`, `run`) to report.
void follow_task_vocab(Config& cfg) {
  if (cfg.lookup("model.vocab_size").IsDefined() || !cfg.lookup("task").IsDefined()) return;
  Config probe = cfg.clone();
  TaskContext tc;
  tc.config_dir =
      cfg.file().empty() ? "" : std::filesystem::path(cfg.file()).parent_path().string();
  try {
    const std::shared_ptr<Task> task = read_task(probe.section("task"), tc);
    if (task && probe.errors().empty())
      cfg.set("model.vocab_size", YAML::Node(task->vocab_size()), cfg.location("task"));
  } catch (const std::exception&) {
  }
}

std::string count(double v) {
  if (v >= 1e9) return fmt::format("{:.2f}G", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
  if (v >= 1e4) return fmt::format("{:.1f}K", v / 1e3);
  return fmt::format("{:.0f}", v);
}

std::string bytes(double floats) {
  const double b = floats * 4;
  if (b >= 1 << 30) return fmt::format("{:.2f} GiB", b / (1 << 30));
  if (b >= 1 << 20) return fmt::format("{:.2f} MiB", b / (1 << 20));
  return fmt::format("{:.1f} KiB", b / 1024);
}

void print_summary(const ModelSummary& s, const ModelBuildContext& ctx, std::ostream& out) {
  std::string letters;
  for (const auto& l : s.layers) letters += l.letter;
  out << fmt::format(
      "model: d_model {}, vocab_size {}, {} layers \"{}\", {} embeddings, input "
      "position: {}\n\n",
      s.d_model, s.vocab_size, s.layers.size(), letters, s.tied_embeddings ? "tied" : "untied",
      s.input_position.empty() ? "none" : s.input_position);
  // The mixer column fits its longest entry ("P gated_deltaproduct"), at least 17 wide.
  size_t mixer_width = 17;
  for (const auto& l : s.layers) mixer_width = std::max(mixer_width, l.mixer.size() + 2);
  out << fmt::format("{:>5}  {:<{}} {:<10} {:<16} {:>10} {:>10} {:>10} {:>11}  {}\n", "layer",
                     "mixer", mixer_width, "position", "hooks", "params", "state", "kv/token",
                     "FLOP/token", "details");
  for (const auto& l : s.layers) {
    out << fmt::format("{:>5}  {:<{}} {:<10} {:<16} {:>10} {:>10} {:>10} {:>11}  {}{}\n", l.index,
                       std::string(1, l.letter) + " " + l.mixer, mixer_width, l.position,
                       l.pairwise || l.position_hooks ? hook_names(l.position_hooks) : "-",
                       count(static_cast<double>(l.parameters)),
                       count(static_cast<double>(l.state_floats)),
                       count(static_cast<double>(l.kv_floats_per_token)), count(l.flops_per_token),
                       l.details, l.overridden ? " (override)" : "");
  }
  const size_t n = s.layers.size();
  size_t attention = 0, positional = 0;
  for (const auto& l : s.layers) {
    attention += l.pairwise ? 1 : 0;
    positional += l.carries_position ? 1 : 0;
  }
  out << "\n";
  out << fmt::format("parameters        {} ({} total; embedding{} {}; shared position {})\n",
                     count(static_cast<double>(s.total_parameters)), s.total_parameters,
                     s.tied_embeddings ? " (tied head)" : " + head", s.embedding_parameters,
                     s.shared_position_parameters);
  out << fmt::format("attention share   {:.1f}% ({} of {} layers use pairwise attention)\n",
                     100 * s.attention_share, attention, n);
  out << fmt::format(
      "position share    {:.1f}% ({} of {} layers carry position: a hook or PaTH){}\n",
      100 * s.position_share, positional, n,
      s.input_position.empty() ? "" : "; input scheme " + s.input_position);
  out << fmt::format("recurrent state   {} floats per sequence ({} fp32), fixed\n",
                     s.recurrent_state_floats,
                     bytes(static_cast<double>(s.recurrent_state_floats)));
  out << fmt::format("KV cache          {} floats per token per sequence ({} per 1K tokens fp32)\n",
                     s.kv_floats_per_token, bytes(1024.0 * s.kv_floats_per_token));
  out << fmt::format("FLOPs per token   {} forward at length {}{} (training ~3x: {})\n",
                     count(s.flops_per_token), s.length,
                     ctx.train_length > 0 && s.length == ctx.train_length ? " (task.seq_len)" : "",
                     count(3 * s.flops_per_token));
}

}  // namespace

void add_model_command(CLI::App& app) {
  auto* model = app.add_subcommand("model", "Inspect the model an experiment describes");
  model->require_subcommand(1);
  struct Args {
    std::string file;
    std::vector<std::string> overrides;
    int64_t length = 0;
  };
  auto args = std::make_shared<Args>();
  auto* summary = model->add_subcommand(
      "summary",
      "Per-layer table (mixer, positional scheme, parameters, state, FLOPs), totals, attention "
      "share, position share, recurrent state size and FLOPs per token at the training length");
  summary->add_option("experiment", args->file, "Experiment YAML file")->required();
  summary->add_option("overrides", args->overrides, "Dotted overrides, e.g. model.d_model=512");
  summary
      ->add_option("--length", args->length,
                   "Count FLOPs at this length (default: task.seq_len, else 2048)")
      ->check(integer_in(1, int64_t{1} << 40));
  summary->callback([args] {
    Config cfg = load_experiment_config(args->file, args->overrides);
    // The whole experiment as `run` reads it (task, train, eval, sweep, corpus), not only the
    // model: a summary of a file that cannot run would describe nothing.
    check_experiment(cfg, args->file);
    follow_task_vocab(cfg);
    auto opts = read_model_options(cfg.section("model"));
    cfg.raise_errors();
    const ModelBuildContext ctx = lengths_from(cfg);
    auto host = make_plugin_host(cfg);
    auto built = build_model(*opts, *host, ctx);
    // The eval variants' models, refused here as `run` would refuse them.
    Config probe = cfg.clone();
    const std::vector<EvalVariant> variants =
        read_eval_variants(probe.section("eval").child("variants"));
    probe.raise_errors();
    check_eval_variant_models(cfg, variants, *built, [&](const Config& vc) {
      auto vo = read_model_options(vc.section("model"));  // the vocabulary set above
      vc.raise_errors();
      return build_model(*vo, *host, lengths_from(vc));
    });
    const int64_t length =
        args->length > 0 ? args->length : (ctx.train_length > 0 ? ctx.train_length : 2048);
    print_summary(built->summary(length), ctx, std::cout);
  });
}

}  // namespace hybridlab::cli
