// `hybridlab inspect position`: build one positional scheme the way a model would, and write its
// tables (PE matrix, bias per head, inverse frequencies, relative indices, ...) as CSV and PNG.

#include <fmt/core.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "cli_numbers.h"
#include "commands.h"
#include "hybridlab/inspect.h"
#include "hybridlab/plugin_host.h"

namespace hybridlab::cli {

namespace {

struct InspectPositionArgs {
  std::string scheme;
  std::vector<std::string> params;  // key=value, relative to the scheme's `position:` map
  int64_t length = 128;
  int64_t heads = 8;
  int64_t head_dim = 0;
  int64_t d_model = 0;
  int64_t train_length = 0;
  bool causal = true;
  std::string out;
  bool no_plots = false;
  std::vector<std::string> plugin_paths;
};

void run_inspect_position(const InspectPositionArgs& a) {
  // d_model and head_dim default to each other through the head count (64 per head).
  int64_t head_dim = a.head_dim, d_model = a.d_model;
  if (head_dim <= 0 && d_model <= 0) head_dim = 64;
  if (d_model <= 0) d_model = a.heads * head_dim;
  if (head_dim <= 0) {
    if (d_model % a.heads != 0) {
      throw UserError(
          fmt::format("--d-model {} is not divisible by --heads {}; give --head-dim explicitly",
                      d_model, a.heads));
    }
    head_dim = d_model / a.heads;
  }
  PositionContext ctx;
  ctx.d_model = d_model;
  ctx.n_heads = a.heads;
  ctx.n_kv_heads = a.heads;
  ctx.head_dim = head_dim;
  ctx.causal = a.causal;
  ctx.train_length = a.train_length > 0 ? a.train_length : a.length;
  ctx.max_length = std::max(ctx.train_length, a.length);
  ctx.layer_index = 0;

  Config cfg = Config::parse("position: {}\n", "command line");
  cfg.set("position.scheme", YAML::Node(a.scheme), Location{"--scheme", 0, 0});
  for (const auto& kv : a.params) cfg.apply_override("position." + kv, "command line");
  Section params = cfg.section("position");
  PluginHost host(a.plugin_paths);
  std::shared_ptr<PositionScheme> scheme = host.create(a.scheme, params, ctx);
  // A bias scheme's tables are [L, L] per head, in memory and as CSV text (~10 bytes a value):
  // refuse sizes that cannot be held or read rather than fail inside an allocation.
  constexpr double kMaxTableValues = double(int64_t{1} << 28);
  const double values = double(a.heads) * double(a.length) * double(a.length);
  if ((scheme->hooks() & (kHookLogitBias | kHookRelative | kHookDataBias)) &&
      values > kMaxTableValues) {
    throw UserError(fmt::format(
        "--length {} with --heads {} makes [L, L] tables of {:.3g} values in all ({:.1f} GiB of "
        "floats, about {:.0f} GiB of CSV); inspect at most {:.3g} values: lower --length or "
        "--heads",
        a.length, a.heads, values, values * 4 / double(1 << 30), values * 10 / double(1 << 30),
        kMaxTableValues));
  }

  const std::string out = a.out.empty() ? "inspect_" + scheme->name() : a.out;
  std::vector<PositionTable> tables;
  {
    torch::NoGradGuard no_grad;
    tables = scheme->inspect(a.length);
  }
  std::cout << fmt::format("scheme {} (hooks: {}), length {}, d_model {}, {} heads of {}, {}\n",
                           scheme->name(), hook_names(scheme->hooks()), a.length, d_model, a.heads,
                           head_dim, a.causal ? "causal" : "bidirectional");
  if (tables.empty()) {
    std::cout << "this scheme has no tables to show\n";
    return;
  }
  const auto written = inspect::write_position_tables(tables, out, scheme->name(), !a.no_plots);
  for (const auto& path : written) std::cout << "wrote " << path << "\n";
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto* inspect = app.add_subcommand("inspect", "Look inside a component");
  inspect->require_subcommand(1);
  auto args = std::make_shared<InspectPositionArgs>();
  auto* pos = inspect->add_subcommand(
      "position",
      "Write a positional scheme's tables (PE matrix, bias per head, inverse frequencies, "
      "relative indices: whichever it has) as CSV with a header row, and gnuplot PNGs "
      "(heatmaps for matrices, line plots for vectors). PaTH and stick-breaking are attention "
      "options, not schemes: `inspect attention` shows them on a trained run");
  pos->add_option("--scheme", args->scheme,
                  "Scheme name (as in YAML `position: {scheme: ...}`) or a .so path")
      ->required();
  pos->add_option("params", args->params,
                  "Scheme parameters as key=value, e.g. rope_theta=500000 rope_scaling.type=yarn "
                  "rope_scaling.factor=4");
  pos->add_option("--length", args->length, "Sequence length of the tables")
      ->check(integer_in(1, 1 << 30))
      ->capture_default_str();
  pos->add_option("--heads", args->heads, "Attention heads (n_heads)")
      ->check(integer_in(1, 1 << 30))
      ->capture_default_str();
  pos->add_option("--head-dim", args->head_dim, "Channels per head (default d_model/heads, or 64)")
      ->check(integer_in(1, 1 << 30));
  pos->add_option("--d-model", args->d_model, "Model width (default heads*head_dim)")
      ->check(integer_in(1, 1 << 30));
  pos->add_option("--train-length", args->train_length,
                  "Training length the scheme is told (default --length)")
      ->check(integer_in(1, 1 << 30));
  pos->add_flag("--causal,!--bidirectional", args->causal,
                "Causal (default) or bidirectional attention");
  pos->add_option("--out", args->out, "Output folder (default inspect_<scheme>)");
  pos->add_flag("--no-plots", args->no_plots, "Write the CSV tables only");
  pos->add_option("--plugin-path", args->plugin_paths, "Extra plugin folder(s) to search first");
  pos->callback([args] { run_inspect_position(*args); });
  add_inspect_attention_command(*inspect);
}

}  // namespace hybridlab::cli
