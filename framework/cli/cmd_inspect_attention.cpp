// `hybridlab inspect attention RUN_DIR`: the attention weights of a trained run's pairwise layers
// on one example of its task, per head, beside the same with each layer's position knocked out,
// as CSV and heatmaps. It is how a position method without tables of its own (PaTH, CoPE,
// stick-breaking) is seen: by the weights it makes.

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli_numbers.h"
#include "commands.h"
#include "hybridlab/attention_maps.h"
#include "hybridlab/error.h"
#include "hybridlab/inspect.h"
#include "hybridlab/run_build.h"
#include "plot/gnuplot.h"
#include "util/atomic_file.h"

namespace hybridlab::cli {

namespace {

struct InspectAttentionArgs {
  std::string run_dir;
  int64_t layer = -1;
  int64_t length = 0;
  int64_t example = 0;
  std::string out;
  bool no_plots = false;
};

// Each table is [T,T] per head and layer, twice: at 1024 tokens a heatmap's cells are already
// finer than its pixels, and 8 heads of 4 layers hold 64M floats.
constexpr int64_t kMaxLength = 1024;

PositionTable weight_table(const LayerAttentionMap& m, int64_t head, bool knocked_out) {
  PositionTable t;
  t.name = fmt::format("layer{}_head{}{}", m.layer, head, knocked_out ? "_no_position" : "");
  t.description = fmt::format("{} head {}: weights{}", m.target, head,
                              knocked_out ? " without its position" : "");
  t.values = (knocked_out ? m.without_position : m.weights)[head];
  t.row_label = "query position i";
  t.column_label = "key position j";
  return t;
}

std::string distances(const torch::Tensor& w) {
  const torch::Tensor d = mean_key_distance(w);
  std::string out;
  for (int64_t h = 0; h < d.size(0); ++h)
    out += fmt::format("{}{:.1f}", h ? " " : "", d[h].item<double>());
  return out;
}

void run_inspect_attention(const InspectAttentionArgs& a) {
  // runs/<experiment>/<run>, however it is typed ("runs/x/run/", ".", an absolute path).
  std::filesystem::path dir = std::filesystem::absolute(a.run_dir).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();
  const std::string run_name = dir.filename().string();
  const std::string out =
      a.out.empty() ? "inspect_attention_" + dir.parent_path().filename().string() + "_" + run_name
                    : a.out;
  // Before any work: where the tables go must be new, and the plots drawable.
  require_new_folder(out, "inspect attention");
  if (!a.no_plots && !plot::gnuplot_available()) {
    throw UserError(
        "cannot draw the heatmaps: 'gnuplot' is not on PATH (install the Debian package "
        "gnuplot-nox, or pass --no-plots for the CSV tables alone)");
  }
  std::vector<int64_t> lengths;
  if (a.length > 0) lengths.push_back(a.length);
  TrainedRun t = load_trained_run(RunFolder(a.run_dir), lengths, 0, "--length");
  BuiltRun& b = t.built;
  Task& task = *b.exp.task;
  const int64_t length = a.length > 0 ? a.length : task.seq_len();
  if (const std::string p = length_memory_problem(b.exp, length); !p.empty())
    throw UserError(fmt::format("--length {}: {}", length, p));
  if (length > kMaxLength) {
    throw UserError(fmt::format("task.seq_len is {}; inspect at most {} tokens: give --length",
                                length, kMaxLength));
  }
  // The eval set analyze and eval score (eval.examples), longer when --example asks for more.
  const int64_t examples = std::max(b.exp.eval.examples, a.example + 1);
  const Batch set = task.eval_set(length, examples, static_cast<uint64_t>(b.exp.eval.seed));
  if (set.tokens.size(0) <= a.example) {
    throw UserError(fmt::format("--example {}: the eval set at length {} has {} examples",
                                a.example, length, set.tokens.size(0)));
  }
  const torch::Tensor tokens =
      set.tokens.slice(0, a.example, a.example + 1).to(model_device(*b.model));
  const std::vector<LayerAttentionMap> maps = attention_maps(*b.model, tokens, a.layer);

  std::cout << fmt::format("{}: example {} of the eval set at length {}\n", a.run_dir, a.example,
                           length);
  std::vector<PositionTable> tables;
  for (const LayerAttentionMap& m : maps) {
    std::cout << fmt::format("{}: mean key distance per head {}", m.target, distances(m.weights));
    if (m.without_position.defined())
      std::cout << fmt::format("; without its position {}", distances(m.without_position));
    std::cout << "\n";
    for (int64_t h = 0; h < m.weights.size(0); ++h) {
      tables.push_back(weight_table(m, h, false));
      if (m.without_position.defined()) tables.push_back(weight_table(m, h, true));
    }
  }
  size_t files = 0;
  write_folder_atomic(out, "inspect attention", [&](const std::string& tmp) {
    files = inspect::write_position_tables(tables, tmp, run_name, !a.no_plots).size();
  });
  std::cout << fmt::format("wrote {} files ({} tables{}) to {}\n", files, tables.size(),
                           a.no_plots ? "" : " and heatmaps", out);
}

}  // namespace

void add_inspect_attention_command(CLI::App& inspect) {
  auto args = std::make_shared<InspectAttentionArgs>();
  auto* c = inspect.add_subcommand(
      "attention",
      "Write the attention weights of a trained run's attention layers on one example of its "
      "task (eval set, eval.seed), per head, as CSV and heatmaps, and the same weights with the "
      "layer's position knocked out (no scheme hooks, no PaTH transforms). Prints each head's mean "
      "key distance. Shows the position methods that have no tables of their own: PaTH, CoPE, "
      "stick-breaking.\n"
      "Exit code: 0 done, 2 bad input (not a trained run, a layer without attention, a length "
      "too long).");
  c->add_option("run_dir", args->run_dir,
                "Run folder, e.g. runs/flip_flop_path_small/layers-AA_..._seed-0")
      ->required();
  c->add_option("--layer", args->layer, "Only this layer (default: every attention layer)")
      ->check(integer_in(0, 1 << 20));
  c->add_option("--length", args->length, "Sequence length (default task.seq_len)")
      ->check(integer_in(1, kMaxLength));
  c->add_option("--example", args->example, "Which example of the eval set")
      ->check(integer_in(0, 4095))
      ->capture_default_str();
  c->add_option("--out", args->out,
                "New (or empty) output folder (default inspect_attention_<experiment>_<run>)");
  c->add_flag("--no-plots", args->no_plots, "Write the CSV tables only");
  c->callback([args] { run_inspect_attention(*args); });
}

}  // namespace hybridlab::cli
