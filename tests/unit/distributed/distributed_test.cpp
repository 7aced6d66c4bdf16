// Data parallel on c10d Gloo: ranks as threads of this process over loopback. Two ranks on half
// batches train the same parameters as one process on the whole batch; the bucketed gradient
// all-reduce sums exactly; torchrun's variables, rendezvous errors and config agreement.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "hybridlab/distributed.h"
#include "hybridlab/evaluator.h"
#include "hybridlab/experiment.h"
#include "hybridlab/model.h"
#include "hybridlab/plugin_host.h"
#include "hybridlab/run.h"
#include "hybridlab/trainer.h"
#include "support/job_support.h"
#include "support/loopback_port.h"

using namespace hybridlab;
namespace fs = std::filesystem;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace distributed_test {
namespace {

using testsupport::BoundSocket;
using testsupport::unused_port;

DistributedEnv env_of(int64_t rank, int64_t world, int port) {
  DistributedEnv e;
  e.rank = rank;
  e.world_size = world;
  e.local_rank = rank;
  e.local_world_size = world;
  e.master_addr = "127.0.0.1";
  e.master_port = port;
  return e;
}

// Runs body(group) on `world` ranks, one thread each; rethrows the first rank's exception.
void on_ranks(int64_t world, const std::function<void(ProcessGroup&)>& body) {
  const int port = unused_port();
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        ProcessGroup g(env_of(r, world, port), std::chrono::seconds(30));
        body(g);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

Experiment tiny(const std::string& train_yaml) {
  return read_experiment(Config::parse(
      jobtest::tiny_experiment("{name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}",
                               "train: " + train_yaml + "\neval: {lengths: [32], examples: 8}\n")));
}

std::shared_ptr<LanguageModel> model_for(const Experiment& e, std::unique_ptr<PluginHost>& host) {
  host = make_plugin_host(e.config);
  torch::manual_seed(static_cast<uint64_t>(e.train.seed));
  return build_model(*e.model, *host, ModelBuildContext{32, 64});
}

// ||a - b|| / ||b|| over every parameter of two models, the largest.
double max_relative_difference(LanguageModel& a, LanguageModel& b) {
  double worst = 0;
  const auto pb = b.named_parameters();
  for (const auto& item : a.named_parameters()) {
    const torch::Tensor x = item.value().detach().to(torch::kDouble);
    const torch::Tensor y = pb[item.key()].detach().to(torch::kDouble);
    worst = std::max(worst, (x - y).norm().item<double>() / y.norm().item<double>());
  }
  return worst;
}

struct EnvVar {
  std::string name;
  EnvVar(const std::string& n, const std::string& v) : name(n) {
    ::setenv(n.c_str(), v.c_str(), 1);
  }
  ~EnvVar() { ::unsetenv(name.c_str()); }
};

}  // namespace

TEST_CASE("distributed: 2 ranks x batch B/2 train the parameters of 1 process x batch B",
          "[job][distributed]") {
  const Experiment e = tiny("{steps: 20, batch_size: 8, lr: 0.001, warmup_steps: 2, seed: 5}");
  e.task->prepare({32, 64});
  TrainerHooks quiet;
  quiet.quiet = true;

  jobtest::TempDir one_dir, dp_dir;
  std::unique_ptr<PluginHost> h1;
  auto single = model_for(e, h1);
  const TrainSummary s1 = train(*single, *e.task, e, RunFolder(one_dir.str()), quiet);
  REQUIRE(s1.steps == 20);

  std::vector<std::shared_ptr<LanguageModel>> ranks(2);
  std::vector<std::unique_ptr<PluginHost>> hosts(2);
  // Each rank has its own task object, as each process would.
  std::vector<Experiment> exps = {tiny("{steps: 20, batch_size: 8, lr: 0.001, warmup_steps: 2, "
                                       "seed: 5}"),
                                  tiny("{steps: 20, batch_size: 8, lr: 0.001, warmup_steps: 2, "
                                       "seed: 5}")};
  for (int r = 0; r < 2; ++r) {
    exps[r].task->prepare({32, 64});
    ranks[r] = model_for(exps[r], hosts[r]);
  }
  std::vector<TrainSummary> sums(2);
  on_ranks(2, [&](ProcessGroup& g) {
    const auto r = static_cast<size_t>(g.rank());
    sums[r] = train(*ranks[r], *exps[r].task, exps[r], RunFolder(dp_dir.str()), quiet, &g);
  });
  // The ranks agree exactly (identical all-reduced gradients and AdamW steps) ...
  CHECK(max_relative_difference(*ranks[0], *ranks[1]) == 0.0);
  // ... and equal the single process up to the order of fp32 sums (per-rank partial sums of the
  // loss gradient, then the all-reduce, instead of one sum over the batch). AdamW divides by
  // sqrt(v), which turns a rounding difference in a near-zero gradient into a step of up to lr:
  // measured 5.8e-7 here at lr 1e-3, 4.4e-5 at lr 1e-2.
  const double diff = max_relative_difference(*ranks[0], *single);
  INFO("largest relative parameter difference " << diff);
  CHECK(diff < 1e-5);
  CHECK(diff > 0.0);  // (it is a different summation order: not bitwise the same)
  // Rank 0's log carries the whole batch's loss: the single process's to fp32 rounding.
  std::ifstream a(fs::path(one_dir.str()) / "metrics.jsonl"), b(dp_dir.path / "metrics.jsonl");
  std::string la, lb;
  int lines = 0;
  while (std::getline(a, la) && std::getline(b, lb)) {
    const auto ja = nlohmann::json::parse(la), jb = nlohmann::json::parse(lb);
    CHECK(jb["step"] == ja["step"]);
    CHECK(jb["loss"].get<double>() == Approx(ja["loss"].get<double>()).epsilon(1e-5));
    CHECK(jb["ranks"] == 2);
    ++lines;
  }
  CHECK(lines == 20);
  CHECK(sums[0].final_loss == Approx(s1.final_loss).epsilon(1e-5));
  CHECK(sums[0].allreduce_wait_s >= 0.0);
}

TEST_CASE("distributed: a run stopped on 2 ranks resumes on 1 to the same parameters",
          "[job][distributed]") {
  const std::string train_yaml = "{steps: 12, batch_size: 4, lr: 0.001, warmup_steps: 2, seed: 7}";
  const Experiment e = tiny(train_yaml);
  e.task->prepare({32, 64});
  TrainerHooks quiet;
  quiet.quiet = true;
  jobtest::TempDir one_dir, mixed_dir;
  std::unique_ptr<PluginHost> h1, h2;
  auto single = model_for(e, h1);
  train(*single, *e.task, e, RunFolder(one_dir.str()), quiet);

  std::vector<Experiment> exps = {tiny(train_yaml), tiny(train_yaml)};
  std::vector<std::unique_ptr<PluginHost>> hosts(2);
  std::vector<std::shared_ptr<LanguageModel>> ranks(2);
  for (int r = 0; r < 2; ++r) {
    exps[r].task->prepare({32, 64});
    ranks[r] = model_for(exps[r], hosts[r]);
  }
  std::vector<int> stopped(2, 0);  // (Catch's assertions are not thread-safe: checked after)
  on_ranks(2, [&](ProcessGroup& g) {
    const auto r = static_cast<size_t>(g.rank());
    TrainerHooks stop = quiet;
    stop.stop_after = 5;
    try {
      train(*ranks[r], *exps[r].task, exps[r], RunFolder(mixed_dir.str()), stop, &g);
    } catch (const Interrupted&) {
      stopped[r] = 1;
    }
  });
  CHECK(stopped == std::vector<int>{1, 1});
  auto resumed = model_for(e, h2);
  const TrainSummary s = train(*resumed, *e.task, e, RunFolder(mixed_dir.str()), quiet);
  CHECK(s.resumed_from == 5);
  CHECK(max_relative_difference(*resumed, *single) < 1e-5);
}

TEST_CASE("distributed: the bucketed all-reduce sums every gradient, missing ones as zero",
          "[job][distributed]") {
  // Four parameters of 2, 4, 8 and 16 floats in buckets of about 40 bytes: [p3], [p2, p1], [p0]
  // (reverse order, a new bucket once 40 bytes are reached). p1 gets no gradient on rank 1.
  std::vector<std::vector<torch::Tensor>> grads(2);
  std::vector<int64_t> buckets(2);
  on_ranks(2, [&](ProcessGroup& g) {
    const double r = static_cast<double>(g.rank());
    std::vector<torch::Tensor> p = {
        torch::zeros({2}, torch::requires_grad()), torch::zeros({4}, torch::requires_grad()),
        torch::zeros({2, 4}, torch::requires_grad()), torch::zeros({16}, torch::requires_grad())};
    GradientReducer reducer(p, g, 40);
    buckets[static_cast<size_t>(g.rank())] = reducer.bucket_count();
    for (int step = 1; step <= 2; ++step) {
      // d/dp of sum(c_k * p_k) = c_k; p0 is used twice (its gradient is the sum of both uses).
      torch::Tensor loss = (p[0] * (1 + r)).sum() + (p[0] * 2).sum() + (p[2] * (10 + r)).sum() +
                           (p[3] * (100 * step + r)).sum();
      if (g.rank() == 0) loss = loss + (p[1] * 1000).sum();
      loss.backward();
      reducer.finish();
      if (step == 2) {
        for (auto& t : p) grads[static_cast<size_t>(g.rank())].push_back(t.grad().clone());
      }
      for (auto& t : p) t.mutable_grad().zero_();
    }
  });
  CHECK(buckets[0] == 3);
  for (const auto& rank : grads) {
    CHECK(torch::equal(rank[0], torch::full({2}, 1.0 + 2 + 2.0 + 2)));  // (1+r)+2 summed over r
    CHECK(torch::equal(rank[1], torch::full({4}, 1000.0)));             // rank 1 had none
    CHECK(torch::equal(rank[2], torch::full({2, 4}, 21.0)));
    CHECK(torch::equal(rank[3], torch::full({16}, 401.0)));  // step 2: 200 + 201
  }
}

TEST_CASE("distributed: torchrun's variables, rendezvous errors and config agreement",
          "[job][distributed]") {
  SECTION("no WORLD_SIZE is one process") { CHECK_FALSE(read_distributed_env().active()); }
  SECTION("the variables are read") {
    EnvVar w("WORLD_SIZE", "4"), r("RANK", "3"), lw("LOCAL_WORLD_SIZE", "2"), lr("LOCAL_RANK", "1"),
        a("MASTER_ADDR", "10.1.2.3"), p("MASTER_PORT", "29501");
    const DistributedEnv e = read_distributed_env();
    CHECK(e.active());
    CHECK(e.rank == 3);
    CHECK(e.world_size == 4);
    CHECK(e.local_rank == 1);
    CHECK(e.local_world_size == 2);
    CHECK(e.master_addr == "10.1.2.3");
    CHECK(e.master_port == 29501);
  }
  SECTION("bad values name the variable") {
    EnvVar w("WORLD_SIZE", "2"), p("MASTER_PORT", "29501");
    CHECK_THROWS_WITH(read_distributed_env(), Catch::Contains("RANK is not set"));
    EnvVar r("RANK", "2");
    CHECK_THROWS_WITH(read_distributed_env(),
                      Catch::Contains("RANK='2'") && Catch::Contains("0..1"));
  }
  SECTION("a port in use") {
    BoundSocket taken;
    ::listen(taken.fd, 1);
    CHECK_THROWS_WITH(ProcessGroup(env_of(0, 2, taken.port), std::chrono::seconds(2)),
                      Catch::Contains("cannot listen") && Catch::Contains("--master-port"));
  }
  SECTION("an unreachable master") {
    CHECK_THROWS_WITH(ProcessGroup(env_of(1, 2, unused_port()), std::chrono::seconds(1)),
                      Catch::Contains("rank 1: the rendezvous at 127.0.0.1:") &&
                          Catch::Contains("did not complete within 1 s"));
  }
  SECTION("ranks with different configs: every rank stops with the one that differs") {
    std::vector<std::string> seen(3);
    on_ranks(3, [&](ProcessGroup& g) {
      try {
        g.agree("experiment config", g.rank() == 2 ? "a: 1\nb: 3\n" : "a: 1\nb: 2\n");
      } catch (const UserError& e) {
        seen[static_cast<size_t>(g.rank())] = e.what();
      }
    });
    for (const auto& message : seen) {
      CHECK_THAT(message, Catch::Contains("rank 2's experiment config differs from rank 0's") &&
                              Catch::Contains("line 2: 'b: 2' on rank 0, 'b: 3' on rank 2"));
    }
    on_ranks(2, [&](ProcessGroup& g) { g.agree("experiment config", "same"); });  // no throw
  }
}

TEST_CASE("distributed: evaluation split over 2 ranks equals one process's", "[job][distributed]") {
  // Text (a per-position curve) at two lengths, 7 examples: shares of 3 and 4.
  const std::string corpus = std::string(HYBRIDLAB_SOURCE_DIR) + "/tests/fixtures/text_corpus";
  const std::string yaml =
      "model: {d_model: 16, vocab_size: 256, layers: GA, attention: {n_heads: 2},\n"
      "        gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 16}}\n"
      "task: {name: text, seq_len: 32, path: '" +
      corpus + "'}\nplugins: {paths: [" + HYBRIDLAB_TEST_PLUGIN_DIR +
      "]}\nruntime: {threads: 1}\neval: {lengths: [32, 48], examples: 7, batch_size: 2}\n";
  std::vector<Experiment> exps;
  std::vector<std::unique_ptr<PluginHost>> hosts(3);
  std::vector<std::shared_ptr<LanguageModel>> models;
  for (int k = 0; k < 3; ++k) {
    exps.push_back(read_experiment(Config::parse(yaml)));
    exps.back().task->prepare({32, 48});
    models.push_back(model_for(exps.back(), hosts[static_cast<size_t>(k)]));
  }
  const std::vector<LengthResult> whole = evaluate(*models[2], *exps[2].task, exps[2]);
  std::vector<std::vector<LengthResult>> split(2);
  on_ranks(2, [&](ProcessGroup& g) {
    const auto r = static_cast<size_t>(g.rank());
    split[r] = evaluate(*models[r], *exps[r].task, exps[r], &g);
  });
  REQUIRE(whole.size() == 2);
  for (const auto& ranks : split) {
    REQUIRE(ranks.size() == 2);
    for (size_t i = 0; i < 2; ++i) {
      CHECK(ranks[i].examples == 7);
      REQUIRE(ranks[i].metrics.size() == whole[i].metrics.size());
      for (const auto& [name, value] : whole[i].metrics) {
        INFO(name << " at " << whole[i].length);
        CHECK(ranks[i].metrics.at(name) == Approx(value).epsilon(1e-6));
      }
      REQUIRE(ranks[i].position_loss.size() == whole[i].position_loss.size());
      REQUIRE_FALSE(whole[i].position_loss.empty());
      for (size_t t = 0; t < whole[i].position_loss.size(); ++t)
        CHECK(ranks[i].position_loss[t] == Approx(whole[i].position_loss[t]).epsilon(1e-6));
    }
  }
}

TEST_CASE("distributed: the launcher's options are not passed to the ranks", "[job][distributed]") {
  CHECK(rank_command({"hybridlab", "run", "e.yaml", "--nproc-per-node", "2", "--master-port=7",
                      "--nnodes", "1", "train.steps=3", "--node-rank", "0", "--master-addr", "h",
                      "-q"}) ==
        std::vector<std::string>{"hybridlab", "run", "e.yaml", "train.steps=3", "-q"});
}

TEST_CASE("distributed: a world size that does not divide the batch names file:line",
          "[job][distributed]") {
  jobtest::TempDir d;
  const fs::path file = d.path / "dp.yaml";
  std::ofstream(file) << jobtest::tiny_experiment(
      "{name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}",
      "name: dp\ntrain: {steps: 2,\n  batch_size: 6}\n"
      "sweep: {grid: {train.seed: [0, 1]}}\n");
  RunRequest req;
  req.experiment_file = file.string();
  CHECK_NOTHROW(check_data_parallel(req, 3));
  CHECK_THROWS_WITH(check_data_parallel(req, 4),
                    Catch::Contains("dp.yaml:8:") &&
                        Catch::Contains("train.batch_size: 6 (run 'seed-0') is not a multiple "
                                        "of the 4 ranks"));
  req.jobs = 2;
  CHECK_THROWS_WITH(check_data_parallel(req, 3), Catch::Contains("drop --jobs"));
}

}  // namespace distributed_test
