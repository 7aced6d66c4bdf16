// Trainer: the learning-rate schedule, resume equality, divergence, checkpoint contents.

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "hybridlab/evaluator.h"
#include "hybridlab/experiment.h"
#include "hybridlab/model.h"
#include "hybridlab/plugin_host.h"
#include "hybridlab/runtime.h"
#include "hybridlab/trainer.h"
#include "model/model_options.h"
#include "support/job_support.h"

using namespace hybridlab;
namespace fs = std::filesystem;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace trainer_test {
namespace {

Experiment tiny(const std::string& train_yaml) {
  return read_experiment(Config::parse(jobtest::tiny_experiment(
      "{name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}",
      "train: " + train_yaml + "\neval: {lengths: [32, 64], examples: 8}\n")));
}

std::shared_ptr<LanguageModel> model_for(const Experiment& e, std::unique_ptr<PluginHost>& host) {
  host = make_plugin_host(e.config);
  torch::manual_seed(static_cast<uint64_t>(e.train.seed));
  return build_model(*e.model, *host, ModelBuildContext{32, 64});
}

std::vector<std::string> loss_lines(const std::string& dir) {
  std::ifstream in(fs::path(dir) / "metrics.jsonl");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss"))
      out.push_back(std::to_string(j["step"].get<int64_t>()) + ":" + j["loss"].dump());
  }
  return out;
}

}  // namespace

TEST_CASE("learning rate: linear warmup then cosine to min_lr_ratio", "[job][train]") {
  TrainOptions o;
  o.lr = 1e-3;
  o.steps = 110;
  o.warmup_steps = 10;
  o.min_lr_ratio = 0.1;
  REQUIRE(learning_rate(o, 0) == Approx(1e-4));   // (0+1)/10 * lr
  REQUIRE(learning_rate(o, 9) == Approx(1e-3));   // end of warmup
  REQUIRE(learning_rate(o, 10) == Approx(1e-3));  // cosine at progress 0
  REQUIRE(learning_rate(o, 60) == Approx(1e-4 + 0.5 * 9e-4 * (1 + std::cos(M_PI * 0.5))));
  REQUIRE(learning_rate(o, 110) == Approx(1e-4));  // the floor
}

TEST_CASE("resume: a killed run resumed equals an uninterrupted run", "[job][train]") {
  jobtest::TempDir a, b;
  const Experiment e =
      tiny("{steps: 12, batch_size: 4, lr: 0.01, warmup_steps: 2, checkpoint_every: 4, seed: 3}");
  TrainerHooks quiet;
  quiet.quiet = true;
  std::unique_ptr<PluginHost> ha, hb, hc;
  auto ma = model_for(e, ha);
  e.task->prepare({32, 64});
  const TrainSummary full = train(*ma, *e.task, e, RunFolder(a.str()), quiet);
  REQUIRE(full.steps == 12);

  auto mb = model_for(e, hb);
  TrainerHooks kill = quiet;
  kill.stop_after = 5;  // "killed" after 5 steps (the stop path writes a checkpoint at step 5)
  REQUIRE_THROWS_AS(train(*mb, *e.task, e, RunFolder(b.str()), kill), Interrupted);
  REQUIRE(fs::exists(b.path / "checkpoint" / "state.pt"));
  // A fresh process: a new model with a different init, resumed from the checkpoint.
  torch::manual_seed(999);
  auto mc = build_model(*e.model, *(hc = make_plugin_host(e.config)), ModelBuildContext{32, 64});
  const TrainSummary resumed = train(*mc, *e.task, e, RunFolder(b.str()), quiet);
  REQUIRE(resumed.resumed_from == 5);
  REQUIRE(resumed.steps == 12);
  const auto pa = ma->named_parameters(), pc = mc->named_parameters();
  REQUIRE(pa.size() == pc.size());
  for (const auto& item : pa) {
    INFO(item.key());
    REQUIRE(torch::equal(item.value(), pc[item.key()]));
  }
  REQUIRE(loss_lines(a.str()) == loss_lines(b.str()));
  REQUIRE(loss_lines(a.str()).size() == 12u);
  // Same final eval numbers.
  const auto ra = evaluate(*ma, *e.task, e), rc = evaluate(*mc, *e.task, e);
  REQUIRE(ra[1].metrics.at("loss") == rc[1].metrics.at("loss"));
  // The saved model loads back: from the weights file the end of training wrote (every
  // parameter, bit for bit), and from state.pt when that file is absent.
  REQUIRE(fs::exists(a.path / "checkpoint" / "weights.safetensors"));
  for (const bool weights_file : {true, false}) {
    INFO("from the weights file: " << weights_file);
    if (!weights_file) fs::remove(a.path / "checkpoint" / "weights.safetensors");
    torch::manual_seed(7);
    auto md = build_model(*e.model, *hc, ModelBuildContext{32, 64});
    REQUIRE(load_model_checkpoint(*md, a.str()) == 12);
    for (const auto& item : ma->named_parameters()) {
      INFO(item.key());
      CHECK(torch::equal(item.value(), md->named_parameters()[item.key()]));
    }
  }
}

TEST_CASE("weights file: a model of another shape or a damaged file is refused by name",
          "[job][train]") {
  jobtest::TempDir a;
  const Experiment e = tiny("{steps: 2, batch_size: 4, lr: 0.01, warmup_steps: 0}");
  TrainerHooks quiet;
  quiet.quiet = true;
  std::unique_ptr<PluginHost> h;
  auto m = model_for(e, h);
  e.task->prepare({32, 64});
  train(*m, *e.task, e, RunFolder(a.str()), quiet);
  const fs::path weights = a.path / "checkpoint" / "weights.safetensors";
  REQUIRE(fs::exists(weights));
  // A wider model: the first parameter that differs is named with both shapes.
  ModelOptions wider = *e.model;
  wider.d_model = 2 * e.model->d_model;
  auto mw = build_model(wider, *h, ModelBuildContext{32, 64});
  CHECK_THROWS_WITH(load_model_checkpoint(*mw, a.str()),
                    Catch::Contains("checkpoint " + weights.string() + " does not fit") &&
                        Catch::Contains("in the checkpoint,"));
  fs::resize_file(weights, fs::file_size(weights) - 8);
  auto mm = build_model(*e.model, *h, ModelBuildContext{32, 64});
  CHECK_THROWS_AS(load_model_checkpoint(*mm, a.str()), CheckpointUnreadable);
}

TEST_CASE("training learns: mqar loss falls on a tiny model", "[job][train]") {
  jobtest::TempDir dir;
  const Experiment e = tiny("{steps: 30, batch_size: 8, lr: 0.01, warmup_steps: 3}");
  std::unique_ptr<PluginHost> h;
  auto m = model_for(e, h);
  e.task->prepare({32, 64});
  TrainerHooks q;
  q.quiet = true;
  train(*m, *e.task, e, RunFolder(dir.str()), q);
  const auto lines = loss_lines(dir.str());
  auto loss_of = [](const std::string& s) { return std::stod(s.substr(s.find(':') + 1)); };
  REQUIRE(loss_of(lines.back()) < loss_of(lines.front()) - 0.3);
  std::ifstream in(dir.path / "metrics.jsonl");
  std::string first;
  std::getline(in, first);
  const auto j = nlohmann::json::parse(first);
  for (const char* k : {"step", "loss", "lr", "grad_norm", "tokens_per_s"}) REQUIRE(j.contains(k));
}

TEST_CASE("precision bf16: autocast in the forward only, kernels in fp32, loss follows fp32's",
          "[job][train][precision]") {
  // The scope: a linear layer runs in bf16 inside it and fp32 outside; NoAutocast inside it keeps
  // fp32 (the mixers' state and attention scores); fp32 and tf32 scopes change nothing.
  torch::nn::Linear lin(8, 4);
  const torch::Tensor x = torch::randn({2, 8});
  {
    const AutocastScope bf16(Precision::kBf16, torch::kCPU);
    REQUIRE(lin(x).scalar_type() == torch::kBFloat16);
    {
      const NoAutocast fp32;
      REQUIRE(lin(x).scalar_type() == torch::kFloat);
    }
    REQUIRE(lin(x).scalar_type() == torch::kBFloat16);
  }
  REQUIRE(lin(x).scalar_type() == torch::kFloat);
  {
    const AutocastScope fp32(Precision::kFp32, torch::kCPU);
    REQUIRE(lin(x).scalar_type() == torch::kFloat);
  }

  // Training: the tiny GA hybrid on MQAR for 200 steps in fp32 and in bf16 from the same init and
  // data. bf16 rounds the matmuls' inputs to 8 bits of mantissa (relative 2^-9 = 0.002 per
  // operand), so the two losses drift apart but must learn alike (tolerance below).
  auto with_runtime = [](std::string yaml, const std::string& runtime) {
    const std::string plain = "runtime: {threads: 1}";
    return yaml.replace(yaml.find(plain), plain.size(), "runtime: " + runtime);
  };
  auto run = [&](const std::string& precision, const std::string& dir) {
    const Experiment e = read_experiment(Config::parse(with_runtime(
        jobtest::tiny_experiment(
            "{name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}",
            "train: {steps: 200, batch_size: 8, lr: 0.01, warmup_steps: 10, log_every: 10}\n"
            "eval: {lengths: [32], examples: 8}\n"),
        "{threads: 1, precision: " + precision + "}")));
    REQUIRE(precision_name(e.runtime.precision) == precision);
    std::unique_ptr<PluginHost> h;
    auto m = model_for(e, h);
    e.task->prepare({32, 64});
    TrainerHooks q;
    q.quiet = true;
    train(*m, *e.task, e, RunFolder(dir), q);
    std::vector<double> losses;
    for (const std::string& l : loss_lines(dir))
      losses.push_back(std::stod(l.substr(l.find(':') + 1)));
    return losses;
  };
  jobtest::TempDir a, b;
  const std::vector<double> fp32 = run("fp32", a.str()), bf16 = run("bf16", b.str());
  REQUIRE(fp32.size() == bf16.size());
  REQUIRE(fp32.size() >= 10u);
  double worst = 0, mean = 0;
  for (size_t i = 0; i < fp32.size(); ++i) {
    worst = std::max(worst, std::abs(fp32[i] - bf16[i]));
    mean += std::abs(fp32[i] - bf16[i]) / static_cast<double>(fp32.size());
  }
  INFO("fp32 " << fp32.front() << " -> " << fp32.back() << ", bf16 " << bf16.front() << " -> "
               << bf16.back() << ", largest gap " << worst << ", mean gap " << mean);
  REQUIRE(fp32[0] != bf16[0]);                  // bf16 did run: the first losses differ
  REQUIRE(std::abs(fp32[0] - bf16[0]) < 0.01);  // ... by rounding only
  REQUIRE(bf16.back() < bf16.front() - 0.3);    // it learns
  // ... and follows the fp32 curve: the same final loss, and on average within 0.05 nats (MQAR's
  // loss falls in steps, so a step taken a few updates apart shows as one larger gap).
  REQUIRE(std::abs(fp32.back() - bf16.back()) < 0.05);
  REQUIRE(mean < 0.05);
  REQUIRE(worst < 0.25);
}

TEST_CASE("precision: tf32 on the CPU and an unknown precision are errors at their key",
          "[job][train][precision]") {
  auto error = [](const std::string& runtime) {
    std::string yaml =
        jobtest::tiny_experiment("{name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}");
    const std::string plain = "runtime: {threads: 1}";
    yaml.replace(yaml.find(plain), plain.size(), "runtime: " + runtime);
    try {
      read_experiment(Config::parse(yaml, "exp.yaml"));
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK_THAT(error("{precision: tf32}"), Catch::Contains("exp.yaml:") &&
                                             Catch::Contains("runtime.precision") &&
                                             Catch::Contains("tf32 is a CUDA matmul mode"));
  CHECK_THAT(error("{precision: fp16}"),
             Catch::Contains("runtime.precision") && Catch::Contains("expected fp32, tf32"));
  CHECK(error("{precision: bf16}").empty());
}

TEST_CASE("divergence: a NaN loss stops with the step and the last good checkpoint",
          "[job][train]") {
  jobtest::TempDir dir;
  const Experiment e = tiny("{steps: 10, batch_size: 2, checkpoint_every: 0}");
  std::unique_ptr<PluginHost> h;
  auto m = model_for(e, h);
  e.task->prepare({32});
  {
    torch::NoGradGuard ng;
    m->parameters()[0].fill_(std::numeric_limits<float>::quiet_NaN());
  }
  TrainerHooks q;
  q.quiet = true;
  try {
    train(*m, *e.task, e, RunFolder(dir.str()), q);
    FAIL("expected TrainingDiverged");
  } catch (const TrainingDiverged& err) {
    const std::string msg = err.what();
    REQUIRE(msg.find("at step 1") != std::string::npos);
    REQUIRE(msg.find("last good checkpoint is none yet") != std::string::npos);
  }
}

}  // namespace trainer_test
