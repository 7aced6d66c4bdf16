// read_experiment: the strict read of every top-level section of an experiment file.

#include "hybridlab/experiment.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "experiment/report_section.h"
#include "hybridlab/claims.h"
#include "hybridlab/interop.h"
#include "hybridlab/model.h"
#include "hybridlab/sweep.h"

namespace hybridlab {
namespace {
namespace fs = std::filesystem;

TrainOptions read_train_options(Section s) {
  TrainOptions o;
  o.steps = s.get<int64_t>("steps", o.steps);
  o.batch_size = s.get<int64_t>("batch_size", o.batch_size);
  o.lr = s.get<double>("lr", o.lr);
  o.min_lr_ratio = s.get<double>("min_lr_ratio", o.min_lr_ratio);
  o.warmup_steps = s.get<int64_t>("warmup_steps", o.warmup_steps);
  o.weight_decay = s.get<double>("weight_decay", o.weight_decay);
  std::vector<double> betas = s.get<std::vector<double>>("betas", {o.beta1, o.beta2});
  if (betas.size() == 2) {
    o.beta1 = betas[0];
    o.beta2 = betas[1];
  } else {
    s.error("betas", "expected two values [beta1, beta2], e.g. [0.9, 0.95]");
  }
  o.eps = s.get<double>("eps", o.eps);
  o.grad_clip = s.get<double>("grad_clip", o.grad_clip);
  o.seed = s.get<int64_t>("seed", o.seed);
  o.eval_every = s.get<int64_t>("eval_every", o.eval_every);
  o.checkpoint_every = s.get<int64_t>("checkpoint_every", o.checkpoint_every);
  o.log_every = s.get<int64_t>("log_every", o.log_every);
  o.init_from = s.get<std::string>("init_from", "");
  o.init_from_partial = s.get<bool>("init_from_partial", false);
  s.check(o.steps >= 0, "steps", "must be >= 0 (0: evaluate the model as built, e.g. model.from)");
  s.check(o.batch_size >= 1, "batch_size", "must be >= 1");
  s.check(o.lr > 0, "lr", "must be > 0");
  s.check(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1, "min_lr_ratio", "must be in [0, 1]");
  s.check(o.warmup_steps >= 0, "warmup_steps", "must be >= 0");
  s.check(o.weight_decay >= 0, "weight_decay", "must be >= 0");
  s.check(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, "betas", "must be in [0, 1)");
  s.check(o.eps > 0, "eps", "must be > 0");
  s.check(o.grad_clip >= 0, "grad_clip", "must be >= 0 (0 = no clipping)");
  s.check(o.eval_every >= 0, "eval_every", "must be >= 0 (0 = only the final eval)");
  s.check(o.checkpoint_every >= 0, "checkpoint_every",
          "must be >= 0 (0 = at the end and on Ctrl-C)");
  s.check(o.log_every >= 1, "log_every", "must be >= 1");
  s.check(o.seed >= 0, "seed", "must be >= 0");
  s.finish();
  return o;
}

}  // namespace

const char* eval_scoring_name(EvalScoring s) {
  return s == EvalScoring::kGenerated ? "generated" : "teacher_forced";
}

int64_t EvalOptions::batch_rows(int64_t length, int64_t vocab_size) const {
  constexpr int64_t kMaxLogitFloats = (int64_t{256} << 20) / 4;
  const int64_t tokens =
      std::min(max_batch_tokens, kMaxLogitFloats / std::max<int64_t>(1, vocab_size));
  return std::max<int64_t>(1, std::min(batch_size, tokens / std::max<int64_t>(1, length)));
}

namespace {

EvalOptions read_eval_options(Section s, int64_t seq_len) {
  EvalOptions o;
  o.lengths = s.get<std::vector<int64_t>>("lengths", {seq_len > 0 ? seq_len : 256});
  o.examples = s.get<int64_t>("examples", o.examples);
  o.batch_size = s.get<int64_t>("batch_size", o.batch_size);
  o.max_batch_tokens = s.get<int64_t>("max_batch_tokens", o.max_batch_tokens);
  o.seed = s.get<int64_t>("seed", o.seed);
  o.examples_during_training =
      s.get<int64_t>("examples_during_training", o.examples_during_training);
  o.stride = s.get<int64_t>("stride", o.stride);
  const std::string scoring =
      s.get<std::string>("scoring", eval_scoring_name(EvalScoring::kTeacherForced));
  if (scoring == eval_scoring_name(EvalScoring::kGenerated)) {
    o.scoring = EvalScoring::kGenerated;
  } else if (scoring != eval_scoring_name(EvalScoring::kTeacherForced)) {
    s.error("scoring", fmt::format("expected teacher_forced (one forward, the reference answer fed "
                                   "in) or generated (the answer greedily decoded, exact match), "
                                   "got '{}'",
                                   scoring));
  }
  s.check(!o.lengths.empty(), "lengths", "must list at least one length, e.g. [256, 512, 1024]");
  for (int64_t L : o.lengths) s.check(L >= 1, "lengths", fmt::format("length {} must be >= 1", L));
  std::vector<int64_t> sorted = o.lengths;
  std::sort(sorted.begin(), sorted.end());
  s.check(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(), "lengths",
          "must not repeat a length");
  s.check(o.examples >= 1, "examples", "must be >= 1");
  s.check(o.seed >= 0, "seed", "must be >= 0");
  s.check(o.batch_size >= 1, "batch_size", "must be >= 1");
  s.check(o.max_batch_tokens >= 1, "max_batch_tokens", "must be >= 1");
  s.check(o.examples_during_training >= 1, "examples_during_training", "must be >= 1");
  s.check(o.stride >= 0, "stride",
          "must be >= 0 (0 = score every token of each window; N = only its last N tokens)");
  if (s.has("variants")) {
    o.variants = read_eval_variants(s.child("variants"));
    // Shown as written in the resolved config (config.yaml, `config show`).
    YAML::Node resolved = s.config().resolved();
    resolved["eval"]["variants"] = YAML::Clone(s.node()["variants"]);
  }
  s.finish();
  return o;
}

// Physical memory of this machine in bytes (0 if unknown).
double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

std::string gib(double bytes) { return fmt::format("{:.1f} GiB", bytes / (1ull << 30)); }

// Lower bounds of a model's size: its parameters, the floats one layer keeps per token, its layer
// count and vocabulary.
struct ModelSize {
  double params, layer_floats, layers, vocab;
};

ModelSize model_size(const ModelOptions& opts) {
  const ModelShape m = model_shape(opts);
  const double d = static_cast<double>(m.d_model);
  const double hidden = static_cast<double>(m.mlp_hidden);
  const double layers = static_cast<double>(m.layers);
  const double vocab = static_cast<double>(m.vocab_size);
  return {vocab * d * (m.tie_embeddings ? 1 : 2) + layers * (4 * d * d + 3 * d * hidden),
          4 * d + 2 * hidden, layers, vocab};
}

// Sizes no run can hold are refused here, at the key, rather than by LibTorch mid-run. The
// figures are lower bounds from the quantities `model summary` reports (parameters; floats kept
// per token: residual stream, mixer and MLP activations, logits), in float32: parameters with
// gradients and Adam's two moments take 16 bytes each; training keeps every layer's activations
// for the backward pass; evaluation holds one layer at a time plus the logits. A bound below
// what is really needed never refuses a run that fits.
void check_sizes(Section root, const Experiment& e) {
  if (!e.model || !e.task) return;
  // What the task can generate, known without loading data.
  if (const std::string p = e.task->length_problem(e.task->seq_len()); !p.empty()) {
    root.child("task").error("seq_len", "task " + e.task->name() + ": " + p);
  }
  for (int64_t L : e.eval.lengths) {
    if (const std::string p = e.task->length_problem(L); !p.empty()) {
      root.child("eval").error("lengths", "task " + e.task->name() + ": " + p);
    }
  }
  const double memory = physical_memory_bytes();
  if (memory <= 0) return;
  const auto [params, layer_floats, layers, vocab] = model_size(*e.model);
  Section model = root.child("model");
  if (params * 16 > memory) {
    model.error("d_model",
                fmt::format("the model has at least {:.3g} parameters: training needs at least {} "
                            "(weights, gradients, Adam moments), this machine has {}",
                            params, gib(params * 16), gib(memory)));
    return;
  }
  const int64_t longest = longest_train_length(*e.task);
  const double seq = static_cast<double>(longest);
  const double train_bytes =
      4 * static_cast<double>(e.train.batch_size) * seq * (layers * layer_floats + vocab);
  if (params * 16 + train_bytes > memory) {
    Section task = root.child("task");
    task.error("seq_len",
               fmt::format("training at seq_len {} with train.batch_size {} needs at least {} of "
                           "activations (about {} floats per token), this machine has {}; lower "
                           "task.seq_len or train.batch_size",
                           longest, e.train.batch_size, gib(train_bytes),
                           fmt::format("{:.3g}", layers * layer_floats + vocab), gib(memory)));
  }
  Section eval = root.child("eval");
  for (int64_t L : e.eval.lengths) {
    if (const std::string p = length_memory_problem(e, L); !p.empty()) eval.error("lengths", p);
    // The eval set is made whole before it is batched: its inputs and targets (int64 each).
    const double set_bytes = 16.0 * static_cast<double>(e.eval.examples) * static_cast<double>(L);
    if (set_bytes > memory) {
      eval.error("examples", fmt::format("{} examples of length {} are {} of inputs and targets, "
                                         "this machine has {}; lower eval.examples",
                                         e.eval.examples, L, gib(set_bytes), gib(memory)));
    }
  }
}

// The eval variants a variant's config lists (a sweep may set eval.variants per variant).
std::vector<EvalVariant> listed_eval_variants(const Config& vc) {
  Section eval = vc.section("eval");
  return eval.has("variants") ? read_eval_variants(eval.child("variants"))
                              : std::vector<EvalVariant>{};
}

// What the claims and plots of `e` may name: its variants (without the seed), its tasks' metrics,
// its eval lengths (eval variants' included), and the keys its eval variants set.
struct SweepCatalog {
  ClaimCatalog claims;
  std::vector<std::string> eval_keys;
  bool eval_variants = false;
};

SweepCatalog sweep_catalog(const Experiment& e, const TaskContext& ctx) {
  SweepCatalog out;
  ClaimCatalog& cat = out.claims;
  std::set<int64_t> lengths;
  for (const Variant& v : expand_sweep(e.sweep)) {
    std::set<std::string> drop = {"seed"};
    for (const auto& [k, grid] : v.tuned) drop.insert(k);
    Config vc = variant_config(e.config, v, e.sweep);
    const std::vector<EvalVariant> evs = listed_eval_variants(vc);
    // With eval variants, each trained variant is reported once per evaluation setting.
    std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> rows = {
        {v.name, v.labels}};
    if (!evs.empty()) {
      out.eval_variants = true;
      rows = {eval_variant_run(v.name, v.labels, "trained")};
      for (const EvalVariant& ev : evs) {
        rows.push_back(eval_variant_run(v.name, v.labels, ev.name));
        for (const auto& [key, value] : ev.set) {
          if (std::find(out.eval_keys.begin(), out.eval_keys.end(), key) == out.eval_keys.end())
            out.eval_keys.push_back(key);
        }
      }
    }
    for (const auto& [name, labels] : rows) {
      ClaimVariant cv{variant_name(name, labels, drop), {}, ""};
      // The first row is the run's own evaluation: its folder name names it too.
      if (!evs.empty() && &name == &rows.front().first)
        cv.run_name = variant_name(v.name, v.labels, drop);
      for (const auto& [k, val] : labels) {
        if (!drop.count(k)) cv.labels.emplace_back(k, val);
      }
      bool seen = false;
      for (const auto& o : cat.variants) seen |= o.name == cv.name;
      if (!seen) cat.variants.push_back(cv);
    }
    // The metrics and eval lengths of every variant (a sweep may vary the task or the lengths).
    if (const auto task = read_task(vc.section("task"), ctx)) {
      for (const auto& [m, value] : task->metrics(ScoreSums{})) {
        if (std::find(cat.metrics.begin(), cat.metrics.end(), m) == cat.metrics.end())
          cat.metrics.push_back(m);
      }
      for (int64_t L : vc.section("eval").get<std::vector<int64_t>>("lengths", {task->seq_len()}))
        lengths.insert(L);
      // An eval variant may score other lengths (eval.lengths).
      for (const EvalVariant& ev : evs) {
        Section ve = eval_variant_config(vc, ev).section("eval");
        for (int64_t L : ve.get<std::vector<int64_t>>("lengths", {task->seq_len()}))
          lengths.insert(L);
      }
    }
  }
  cat.lengths.assign(lengths.begin(), lengths.end());
  return out;
}

// What `report.plots` may name: the sweep's axes and labels, the eval variants' keys, and the
// metrics and lengths the claims may name.
PlotCatalog plot_catalog(const Experiment& e, const SweepCatalog& sweep) {
  PlotCatalog cat;
  std::vector<SweepAxis> axes = e.sweep.grid;
  for (const auto& g : e.sweep.zip) axes.insert(axes.end(), g.begin(), g.end());
  axes.insert(axes.end(), e.sweep.tune.begin(), e.sweep.tune.end());
  const std::vector<Variant> variants = expand_sweep(e.sweep);
  for (const Variant& v : variants) {
    for (const auto& [label, value] : v.labels) {
      if (std::find(cat.labels.begin(), cat.labels.end(), label) == cat.labels.end())
        cat.labels.push_back(label);
    }
  }
  // A swept key's label is its last components (sweep.h): the label the key ends with.
  for (const SweepAxis& a : axes) {
    for (const std::string& label : cat.labels) {
      if (a.key == label ||
          (a.key.size() > label.size() &&
           a.key.compare(a.key.size() - label.size() - 1, std::string::npos, "." + label) == 0)) {
        cat.swept.emplace_back(a.key, label);
        break;
      }
    }
  }
  if (sweep.eval_variants) cat.labels.push_back("eval");
  cat.variant_keys = sweep.eval_keys;
  cat.metrics = sweep.claims.metrics;
  cat.lengths = sweep.claims.lengths;
  return cat;
}

// Parses and resolves every `expect:` claim against the experiment's variants, metrics and eval
// lengths; throws one ConfigError listing each bad claim at file:line:col inside its text.
void check_claims(const Experiment& e, const ClaimCatalog& cat) {
  if (e.expect.empty() || !e.task) return;
  std::string problems;
  for (size_t i = 0; i < e.expect.size(); ++i) {
    try {
      Claim c = parse_claim(e.expect[i]);
      resolve_claim(c, cat);
    } catch (const ClaimError& err) {
      const std::string key = "expect." + std::to_string(i);
      Location where = e.config.location(key);
      // A quoted claim starts one column after its quote.
      const YAML::Node all = e.config.lookup("expect");
      const int quote = all.IsSequence() && i < all.size() && all[i].Tag() == "!" ? 1 : 0;
      if (where.line > 0) where.column += quote + static_cast<int>(err.column);
      problems += fmt::format("{}{}: expect[{}]: {} (in \"{}\")", problems.empty() ? "" : "\n",
                              where.str(), i, err.what(), e.expect[i]);
    }
  }
  if (!problems.empty()) throw ConfigError(problems);
}

}  // namespace

std::string experiment_name(const Config& cfg) {
  const YAML::Node n = cfg.lookup("name");
  if (n.IsDefined() && n.IsScalar()) return n.Scalar();
  const std::string stem = fs::path(cfg.file()).stem().string();
  return stem.empty() ? "experiment" : folder_name(stem);
}

namespace {

// An unset model.vocab_size follows the task, so every task works with the default model; a
// task whose token ids pass the model's vocabulary is refused at whichever key was set.
void check_vocabulary(Section& root, const Config& cfg, Experiment& e) {
  if (e.task && e.model && !root.child("model").has("vocab_size")) {
    // Unset model.vocab_size follows the task, so every task works with the default model.
    set_vocab_size(*e.model, e.task->vocab_size());
    YAML::Node resolved = cfg.resolved();
    resolved["model"]["vocab_size"] = e.task->vocab_size();
  }
  const int64_t model_vocab = e.model ? model_shape(*e.model).vocab_size : 0;
  if (e.task && e.model && e.task->vocab_size() > model_vocab) {
    // Token ids past the embedding table fail deep inside LibTorch ("index out of range").
    Section task_s = root.child("task");
    Section model_s = root.child("model");
    // Only a task that reads task.vocab_size (its default is then in the resolved config) can
    // lower it; passkey's bytes or a tokenizer's ids cannot.
    const bool task_key = cfg.resolved()["task"]["vocab_size"].IsDefined();
    const std::string msg = fmt::format(
        "task '{}' uses token ids up to {} ({} ids) but model.vocab_size is {}; set "
        "model.vocab_size to at least {}{}",
        e.task->name(), e.task->vocab_size() - 1, e.task->vocab_size(), model_vocab,
        e.task->vocab_size(), task_key ? " or lower task.vocab_size" : "");
    if (model_s.has("vocab_size") || !task_s.has("vocab_size")) {
      model_s.error("vocab_size", msg);
    } else {
      task_s.error("vocab_size", msg);
    }
  }
}

// A sequence autoencoder task (compression) and the model's head go together: a causal LM cannot
// see the row it must reproduce, and an autoencoder's outputs are not next-token predictions.
void check_head(Section& root, const Experiment& e) {
  if (!e.task || !e.model) return;
  const bool wanted = e.task->autoencoder();
  if (wanted == model_shape(*e.model).autoencoder) return;
  Section model_s = root.child("model");
  const std::string msg =
      wanted ? fmt::format(
                   "task {} scores a sequence autoencoder (every position decoded from the "
                   "last); set model.head: autoencoder",
                   e.task->name())
             : fmt::format(
                   "model.head autoencoder serves the compression task only; task {} "
                   "scores next-token predictions, use causal_lm",
                   e.task->name());
  if (model_s.has("head")) {
    model_s.error("head", msg);
  } else {
    root.child("task").error("name", msg);
  }
}

// Evaluation settings the task cannot score (sliding windows, generated scoring).
void check_eval_scoring(Section& root, const Experiment& e) {
  if (e.task && e.eval.stride > 0 && !e.task->per_position_curve()) {
    root.child("eval").error(
        "stride", fmt::format("sliding-window evaluation scores language modelling, where every "
                              "token is a target (task text); task {} scores its own positions",
                              e.task->name()));
  }
  if (e.task && e.eval.scoring == EvalScoring::kGenerated && !e.task->answer_span()) {
    root.child("eval").error(
        "scoring",
        fmt::format("generated scoring decodes one contiguous answer span per example (tasks "
                    "passkey, niah, copy, selective_copy); task {} scores {}, use teacher_forced",
                    e.task->name(),
                    e.task->per_position_curve() ? "every position" : "separate positions"));
  }
}

// `expect:`: a list of claims (strings).
void read_expect(Section& root, Experiment& e) {
  if (root.has("expect")) {
    const YAML::Node ex = root.node()["expect"];
    bool ok = ex.IsSequence();
    for (size_t i = 0; ok && i < ex.size(); ++i) ok = ex[i].IsScalar();
    if (ok) {
      for (const auto& c : ex) e.expect.push_back(c.as<std::string>());
    } else {
      root.error("expect",
                 "expected a list of claims, e.g. [\"GGGA accuracy at 64 >= 0.95\"] (quote a claim "
                 "that starts with '{')");
    }
  }
}

// Every sweep variant read in full: a sweep key that is not a config key, or a value of the wrong
// type, is reported like any other config error, naming the variant and the sweep line.
void check_sweep_variants(const Config& cfg, const Experiment& e) {
  std::vector<std::string> problems;
  std::set<std::string> seen;
  for (const Variant& v : expand_sweep(e.sweep)) {
    try {
      read_experiment(variant_config(cfg, v, e.sweep), false);
    } catch (const ConfigError& err) {
      std::string msg = err.what();
      // Name the sweep line that set the offending key (the reader locates it at its section).
      for (const auto& [key, value] : v.assignments) {
        std::string prefix = key;
        while (!prefix.empty() && msg.find(" " + prefix + ":") == std::string::npos) {
          const size_t dot = prefix.rfind('.');
          prefix = dot == std::string::npos ? "" : prefix.substr(0, dot);
        }
        if (prefix.empty() || prefix.find('.') == std::string::npos) continue;
        Location where = cfg.location("sweep");
        for (const auto& a : e.sweep.grid) {
          if (a.key == key) where = a.where;
        }
        for (const auto& a : e.sweep.tune) {
          if (a.key == key) where = a.where;
        }
        for (const auto& g : e.sweep.zip) {
          for (const auto& a : g) {
            if (a.key == key) where = a.where;
          }
        }
        msg += " (set by the sweep key '" + key + "' at " + where.str() + ")";
      }
      if (seen.insert(msg).second) problems.push_back("in sweep variant '" + v.name + "': " + msg);
    }
  }
  if (!problems.empty()) {
    std::string all;
    for (const auto& p : problems) all += (all.empty() ? "" : "\n") + p;
    throw ConfigError(all);
  }
}

// Every eval variant read as a config, then the claims and the report section against the
// sweep's catalog.
void check_eval_variants_and_claims(Config& cfg, Section& root, Experiment& e,
                                    const std::string& config_dir, const TaskContext& ctx) {
  // Every eval variant must read as a config too (a scheme's own keys, value types).
  std::string problems;
  for (const EvalVariant& v : e.eval.variants) {
    try {
      read_experiment(eval_variant_config(cfg, v), false, config_dir);
    } catch (const ConfigError& err) {
      problems += fmt::format("{}in eval variant '{}' ({}): {}", problems.empty() ? "" : "\n",
                              v.name, v.where.str(), err.what());
    }
  }
  if (!problems.empty()) throw ConfigError(problems);
  if (e.task && (!e.expect.empty() || root.has("report"))) {
    const SweepCatalog cat = sweep_catalog(e, ctx);
    check_claims(e, cat.claims);
    e.report = read_report_section(root.child("report"), plot_catalog(e, cat));
    cfg.raise_errors();
  }
}

}  // namespace

Experiment read_experiment(Config cfg, bool validate_sweep, const std::string& config_dir) {
  expand_model_from(cfg, config_dir);  // model.from: the keys of the checkpoint's config.json
  Experiment e;
  e.config = cfg;
  Section root = cfg.root();
  root.accept("extends");
  e.name = root.get<std::string>("name", experiment_name(cfg));
  e.description = root.get<std::string>("description", "");
  // The name is a folder under the runs folder: "", ".", "..", '/' or spaces would write outside
  // it, into its root, or into another experiment's folder.
  root.check(folder_name(e.name) == e.name, "name",
             fmt::format("'{}' cannot name the runs folder: use letters, digits, '.', '_', '+' or "
                         "'-', not starting with '.' (e.g. '{}')",
                         e.name, folder_name(e.name)));
  root.check(root.has("model"), "model", "required section is missing (see experiments/base.yaml)");
  e.model = read_model_options(root.child("model"));
  TaskContext ctx;
  ctx.config_dir = !config_dir.empty()  ? config_dir
                   : cfg.file().empty() ? ""
                                        : fs::path(cfg.file()).parent_path().string();
  if (root.has("task")) {
    e.task = read_task(root.child("task"), ctx);
  } else {
    std::string names;
    for (const auto& t : task_types()) names += (names.empty() ? "" : ", ") + t.name;
    root.error("task",
               "required section is missing, e.g. task: {name: mqar} (tasks: " + names + ")");
  }
  check_vocabulary(root, cfg, e);
  e.train = read_train_options(root.child("train"));
  e.eval = read_eval_options(root.child("eval"), e.task ? e.task->seq_len() : 0);
  check_eval_scoring(root, e);
  check_head(root, e);
  e.runtime = read_runtime_options(root.child("runtime"));
  if (cfg.errors().empty()) check_sizes(root, e);
  Section plugins = root.child("plugins");  // read again by make_plugin_host
  plugins.get<std::vector<std::string>>("paths", {});
  plugins.finish();
  e.sweep = read_sweep_options(root.child("sweep"));
  e.sweep.where = cfg.location("sweep");
  root.accept("expect");
  root.accept("report");  // read once the sweep is known (read_report_section)
  read_expect(root, e);
  root.finish();
  cfg.raise_errors();

  if (validate_sweep && !e.sweep.empty()) check_sweep_variants(cfg, e);
  if (validate_sweep) check_eval_variants_and_claims(cfg, root, e, config_dir, ctx);
  return e;
}

std::string length_memory_problem(const Experiment& e, int64_t length) {
  const double memory = physical_memory_bytes();
  if (memory <= 0 || !e.model) return "";
  const auto [params, layer_floats, layers, vocab] = model_size(*e.model);
  const double d = static_cast<double>(model_shape(*e.model).d_model);
  const double bytes =
      params * 4 + 4 * static_cast<double>(length) * (layer_floats + vocab + layers * 2 * d);
  if (bytes <= memory) return "";
  return fmt::format(
      "length {} needs at least {} to evaluate one sequence, this machine has {}; "
      "lower it",
      length, gib(bytes), gib(memory));
}

ModelBuildContext model_build_context(const Experiment& exp) {
  ModelBuildContext ctx;
  // A mixture (task.mixture) trains at several lengths: the model serves the longest.
  ctx.train_length = longest_train_length(*exp.task);
  ctx.max_length = ctx.train_length;
  for (int64_t L : exp.eval.lengths) ctx.max_length = std::max(ctx.max_length, L);
  ctx.packed_documents = exp.task->packed_documents_setting();
  return ctx;
}

}  // namespace hybridlab
