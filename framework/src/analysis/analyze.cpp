// `hybridlab analyze`: knock-outs and head statistics of one trained run.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <stdexcept>

#include <unistd.h>

#include "analysis/head_stats.h"
#include "analysis/knockouts.h"
#include "analysis/write.h"
#include "hybridlab/analysis.h"
#include "hybridlab/config.h"
#include "hybridlab/error.h"
#include "hybridlab/evaluator.h"
#include "hybridlab/run_build.h"
#include "hybridlab/run_record.h"
#include "util/clock.h"
#include "util/progress.h"

namespace hybridlab {

namespace {

using Clock = std::chrono::steady_clock;

void check_options(const AnalyzeOptions& o) {
  for (const std::string& k : o.kinds) {
    const auto& kinds = knockout_kinds();
    if (std::find(kinds.begin(), kinds.end(), k) != kinds.end()) continue;
    const std::string near = nearest_key(k, kinds);
    throw UserError(fmt::format("unknown knock-out kind '{}'{}; the kinds are {}", k,
                                near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near),
                                fmt::join(kinds, ", ")));
  }
  for (int64_t L : o.lengths) {
    if (L <= 0) throw UserError(fmt::format("--lengths: {} is not a length (tokens > 0)", L));
  }
  for (int64_t w : o.reach_windows) {
    if (w <= 0) throw UserError(fmt::format("--windows: {} is not a window (tokens > 0)", w));
  }
  if (o.examples < 0) throw UserError("--examples must be > 0");
  if (o.state_window < 0) throw UserError("--state-window must be > 0");
  if (!(o.reach_tolerance >= 0)) throw UserError("--tolerance must be >= 0");
}

// Candidate windows: the user's, or 16, 64, 256, ... below the longest length.
std::vector<int64_t> reach_windows(const AnalyzeOptions& o, int64_t longest) {
  std::vector<int64_t> w = o.reach_windows;
  if (w.empty()) {
    for (int64_t x = 16; x < longest; x *= 4) w.push_back(x);
  }
  std::sort(w.begin(), w.end());
  w.erase(std::unique(w.begin(), w.end()), w.end());
  return w;
}

double primary(const LengthResult& r, const std::string& metric) {
  const auto it = r.metrics.find(metric);
  if (it == r.metrics.end()) throw std::logic_error("analyze: no metric " + metric);
  return it->second;
}

// Attention weights and gate values of every layer at `length`, and the Gated DeltaNet states'
// norms after each eighth of the sequence (read from a decoding cache filled piece by piece).
// Recurrent state norms: the first `rows` sequences of `tokens`, fed in eight pieces through a
// decoding cache. Returns layer -> per piece [Hv] (Frobenius norm per head, mean over the batch)
// and the positions after each piece.
std::pair<std::map<size_t, std::vector<torch::Tensor>>, std::vector<int64_t>> state_norms(
    LanguageModel& model, const torch::Tensor& first, int64_t length) {
  std::map<size_t, std::vector<torch::Tensor>> norms;
  std::vector<int64_t> positions;
  auto cache = model.new_cache();
  const int64_t pieces = std::min<int64_t>(8, length);
  for (int64_t s = 0; s < pieces; ++s) {
    const int64_t t0 = s * length / pieces, t1 = (s + 1) * length / pieces;
    model.advance(first.slice(1, t0, t1), *cache);
    positions.push_back(t1);
    for (int64_t i = 0; i < model.num_layers(); ++i) {
      const MixerCache* c = model.layer_cache(*cache, i);
      const torch::Tensor state = c ? model.layer_mixer(i).recurrent_state(*c) : torch::Tensor();
      if (!state.defined()) continue;
      norms[i].push_back(state.to(torch::kCPU, torch::kDouble).flatten(2).norm(2, {2}).mean(0));
    }
  }
  return {norms, positions};
}

// The per-head rows of the probes' sums (attention weights and gates) of every layer.
std::vector<HeadStats> head_rows(const LanguageModel& model, int64_t length,
                                 const std::vector<analysis::AttentionSums>& att,
                                 const std::vector<analysis::GateSums>& gates,
                                 std::map<size_t, std::vector<torch::Tensor>>& norms,
                                 const std::vector<int64_t>& positions) {
  std::vector<HeadStats> out;
  const auto head = [&model, length](size_t layer, int64_t h, HeadStatsKind kind) {
    HeadStats s;
    s.layer = static_cast<int64_t>(layer);
    s.head = h;
    s.length = length;
    s.mixer = model.layer_mixer_name(static_cast<int64_t>(layer));
    s.kind = kind;
    return s;
  };
  for (size_t i = 0; i < att.size(); ++i) {
    if (att[i].rows.defined()) {
      const torch::Tensor r = att[i].rows;
      for (int64_t h = 0; h < r.size(0); ++h) {
        HeadStats s = head(i, h, HeadStatsKind::kAttentionWeights);
        const double rows_h = r[h].item<double>();
        s.mean_distance = att[i].distance[h].item<double>() / rows_h;
        s.entropy = att[i].entropy[h].item<double>() / rows_h;
        s.sink_mass = att[i].sink[h].item<double>() / rows_h;
        s.local_mass = att[i].local[h].item<double>() / rows_h;
        out.push_back(s);
      }
    }
    if (!gates[i].tokens.defined()) continue;
    const torch::Tensor t = gates[i].tokens;
    for (int64_t h = 0; h < t.size(0); ++h) {
      HeadStats s = head(i, h, HeadStatsKind::kGates);
      s.mean_alpha = gates[i].alpha[h].item<double>() / t[h].item<double>();
      s.memory_length = s.mean_alpha < 1 ? 1.0 / (1.0 - s.mean_alpha) : INFINITY;
      s.mean_beta = gates[i].beta[h].item<double>() / t[h].item<double>();
      for (const torch::Tensor& piece : norms[i]) s.state_norms.push_back(piece[h].item<double>());
      s.state_positions = positions;
      out.push_back(s);
    }
  }
  return out;
}

std::vector<HeadStats> head_stats_at(LanguageModel& model, Task& task, const EvalOptions& eval,
                                     int64_t length, int64_t examples) {
  torch::NoGradGuard no_grad;
  model.eval();
  const size_t n = static_cast<size_t>(model.num_layers());
  std::vector<analysis::AttentionSums> att(n);
  std::vector<analysis::GateSums> gates(n);
  for (size_t i = 0; i < n; ++i) {
    MixerProbes probes;
    probes.attention = [&att, i](const torch::Tensor& p, const torch::Tensor& qp,
                                 const torch::Tensor& kp) {
      analysis::add_attention(att[i], p, qp, kp);
    };
    probes.gates = [&gates, i](const torch::Tensor& gg, const torch::Tensor& b) {
      analysis::add_gates(gates[i], gg, b);
    };
    model.layer_mixer(static_cast<int64_t>(i)).set_probes(probes);
  }
  const Batch set = task.eval_set(length, examples, static_cast<uint64_t>(eval.seed));
  const torch::Device device = model_device(model);
  const int64_t bs = eval.batch_rows(length, model.vocab_size());
  const int64_t rows = set.tokens.size(0);
  for (int64_t b0 = 0; b0 < rows; b0 += bs) {
    model.forward(set.tokens.slice(0, b0, std::min(rows, b0 + bs)).to(device));
  }
  for (int64_t i = 0; i < model.num_layers(); ++i) model.layer_mixer(i).set_probes({});
  auto [norms, positions] =
      state_norms(model, set.tokens.slice(0, 0, std::min(rows, bs)).to(device), length);
  return head_rows(model, length, att, gates, norms, positions);
}

// A window or segment as long as the sequence removes nothing: not evaluated.
bool knockout_applies(const analysis::Knockout& k, int64_t length) {
  return !((k.kind == "reach" || k.kind == "state_reset") && k.setting >= length);
}

// Progress of the evaluations: one updating line on a terminal, a line per finished length in a
// log.
class AnalyzeProgress {
 public:
  AnalyzeProgress(int64_t total, bool quiet, Clock::time_point start)
      : total_(total), quiet_(quiet), tty_(::isatty(2) != 0), start_(start) {}
  void tick(int64_t length, bool length_done) {
    ++done_;
    if (quiet_ || (!tty_ && !length_done)) return;
    const double el = seconds_since(start_);
    const double eta = el / static_cast<double>(done_) * static_cast<double>(total_ - done_);
    std::fprintf(stderr, "%sanalyze: length %lld, %lld/%lld evaluations, %s elapsed, ETA %s%s",
                 tty_ ? "\r" : "", static_cast<long long>(length), static_cast<long long>(done_),
                 static_cast<long long>(total_), format_duration(el).c_str(),
                 format_duration(eta).c_str(), tty_ ? "   " : "\n");
    std::fflush(stderr);
  }
  void finish() const {
    if (!quiet_ && tty_) std::fprintf(stderr, "\n");
  }

 private:
  int64_t total_, done_ = 0;
  bool quiet_, tty_;
  Clock::time_point start_;
};

// Every length of res.lengths without and with each knock-out of `plan`, into res.knockouts.
void run_knockouts(LanguageModel& model, Task& task, const EvalOptions& eval,
                   const std::vector<analysis::Knockout>& plan, bool quiet, Clock::time_point start,
                   AnalysisResult& res) {
  int64_t total = 0;
  for (int64_t L : res.lengths) {
    total += 1;
    for (const auto& k : plan) total += knockout_applies(k, L) ? 1 : 0;
  }
  AnalyzeProgress progress(total, quiet, start);
  for (int64_t L : res.lengths) {
    model.set_ablation({});
    const double base = primary(evaluate_length(model, task, eval, L, eval.examples), res.metric);
    int64_t left = 0;
    for (const auto& k : plan) left += knockout_applies(k, L) ? 1 : 0;
    progress.tick(L, left == 0);
    for (const auto& k : plan) {
      if (!knockout_applies(k, L)) continue;
      model.set_ablation(k.ablation);
      KnockoutResult r;
      r.kind = k.kind;
      r.layer = k.layer;
      r.target = k.target;
      r.mixer = k.mixer;
      r.setting = k.setting;
      r.length = L;
      r.baseline = base;
      r.value = primary(evaluate_length(model, task, eval, L, eval.examples), res.metric);
      r.damage = res.higher_is_better ? base - r.value : r.value - base;
      res.knockouts.push_back(r);
      progress.tick(L, --left == 0);
    }
  }
  model.set_ablation({});
  progress.finish();
}

}  // namespace

AnalysisResult analyze_run(const std::string& run_dir, const AnalyzeOptions& opts) {
  const auto t_start = Clock::now();
  check_options(opts);
  const RunFolder folder(run_dir);
  folder_config(folder);  // not a run: say so before taking a lock
  RunLock lock(run_dir);
  TrainedRun t = load_trained_run(folder, opts.lengths, opts.examples);
  LanguageModel* model = t.built.model.get();
  Task& task = *t.built.exp.task;
  const EvalOptions& eval = t.built.exp.eval;

  AnalysisResult res;
  res.options = opts;
  res.run = run_dir;
  res.task = task.name();
  res.metric = task.primary_metric();
  res.higher_is_better = task.higher_is_better();
  res.train_length = longest_train_length(task);
  res.lengths = eval.lengths;
  std::sort(res.lengths.begin(), res.lengths.end());
  const int64_t examples = eval.examples;  // --examples, read into eval.examples
  const std::vector<int64_t> windows = reach_windows(opts, res.lengths.back());
  const std::vector<analysis::Knockout> plan =
      analysis::plan_knockouts(*model, opts.kinds, opts.state_window, windows);

  run_knockouts(*model, task, eval, plan, opts.quiet, t_start, res);
  if (opts.head_stats) {
    for (int64_t L : res.lengths) {
      for (HeadStats& s : head_stats_at(*model, task, eval, L, std::min<int64_t>(examples, 32)))
        res.heads.push_back(std::move(s));
    }
  }
  res.summary = analysis::summarize(res, opts.reach_tolerance);
  res.seconds = seconds_since(t_start);
  res.files = analysis::write_analysis((std::filesystem::path(run_dir) / "analysis").string(), res,
                                       opts.reach_tolerance, opts.plots);
  return res;
}

}  // namespace hybridlab
