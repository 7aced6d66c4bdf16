// Every way a value enters, through the CLI as a user types it: command-line numbers, eval
// variants given as --variant and in the file, prompt files and sizes. Each bad input is one
// error naming where it came from, exit code 2, and nothing written.

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli_support.h"

namespace fs = std::filesystem;
using clitest::cli;
using clitest::q;
using clitest::Result;
using clitest::slurp;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace inputs_cli_test {
namespace {

struct Tmp : clitest::TempDir {
  Tmp() : clitest::TempDir("inputscli") {}
};

// A tiny RoPE hybrid on 4-pair MQAR at 32 tokens, with `eval_extra` inside its eval map.
void write_experiment(const fs::path& file, const std::string& eval_extra = "") {
  std::ofstream(file) << "name: inputs\n"
                         "model: {d_model: 16, vocab_size: 64, layers: GA,\n"
                         "        attention: {n_heads: 2, position: {scheme: rope}},\n"
                         "        gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 16}}\n"
                         "task: {name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}\n"
                         "train: {steps: 2, batch_size: 2, warmup_steps: 1}\n"
                         "eval: {lengths: [32], examples: 4"
                      << eval_extra
                      << "}\n"
                         "runtime: {threads: 1}\n"
                         "plugins: {paths: ['" HYBRIDLAB_TEST_PLUGIN_DIR "']}\n";
}

// Trains the tiny experiment in `dir` and returns its run folder.
fs::path trained_run(const fs::path& dir) {
  write_experiment(dir / "exp.yaml");
  const Result r =
      cli("run " + q(dir / "exp.yaml") + " -q --no-report --runs-dir " + q(dir / "runs"));
  REQUIRE(r.code == 0);
  return dir / "runs" / "inputs" / "main";
}

void refused(const std::string& args, const std::string& message) {
  INFO(args);
  const Result r = cli(args, 120);  // a hang fails the test, not the suite
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains(message));
}

}  // namespace

TEST_CASE("cli numbers: each is read as the config reads it, within its range, or refused",
          "[integration][inputs]") {
  Tmp tmp;
  const std::string dir = q(tmp.path);
  // Digits past int64 were clamped to 9223372036854775807, -1 wrapped to an unsigned seed.
  refused("eval " + dir + " --lengths 99999999999999999999",
          "--lengths: '99999999999999999999' is not an integer >= 1");
  refused("eval " + dir + " --lengths 64,0", "--lengths: '0' is not an integer >= 1");
  refused("generate " + dir + " --prompt x --seed -1", "--seed: '-1' is not an integer >= 0");
  refused("generate " + dir + " --prompt x -n 1e9",
          "--max-new-tokens: '1e9' is not an integer from 1 to 1048576");
  refused("generate " + dir + " --prompt x --temperature 1e999",
          "--temperature: '1e999' is not a number >= 0");
  refused("generate " + dir + " --prompt x --top-k 0x10", "--top-k: '0x10' is not an integer >= 0");
  write_experiment(tmp.path / "exp.yaml");
  refused("run " + q(tmp.path / "exp.yaml") + " --jobs 0",
          "--jobs: '0' is not an integer from 1 to 1024");
  // An empty --runs-dir wrote run folders into the working directory.
  refused("run " + q(tmp.path / "exp.yaml") + " --runs-dir ''",
          "--runs-dir: an empty folder name (use '.' for the working directory)");
  refused("sweep list " + q(tmp.path / "exp.yaml") + " --runs-dir ''", "an empty folder name");
  refused("analyze " + dir + " --examples -5", "--examples: '-5' is not an integer >= 1");
  refused("analyze " + dir + " --tolerance nan", "--tolerance: 'nan' is not a number >= 0");
  refused("inspect position --scheme rope --length 99999999999",
          "--length: '99999999999' is not an integer from 1 to 1073741824");
  // A length whose [L, L] tables cannot be held: refused before any allocation.
  refused("inspect position --scheme fox --length 20000 --heads 2 --no-plots --out " +
              q(tmp.path / "insp"),
          "--length 20000 with --heads 2 makes [L, L] tables of 8e+08 values");
  CHECK_FALSE(fs::exists(tmp.path / "insp"));
  // A pasted megabyte is quoted short.
  const Result r = cli("eval " + dir + " --lengths " + std::string(5000, '9'));
  CHECK(r.code == 2);
  CHECK(r.out.size() < 400);
}

TEST_CASE("an override of a key the sweep varies is refused at the sweep's line",
          "[integration][inputs]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "exp.yaml";
  write_experiment(exp);
  std::ofstream(exp, std::ios::app)
      << "sweep:\n  grid:\n    model.layers: [GA, AA]\n"
         "  zip:\n    model.attention.position: [{scheme: rope}, {scheme: nope}]\n"
         "  seeds: [0, 1]\n";
  const std::string base = "sweep list " + q(exp) + " --runs-dir " + q(tmp.path / "runs") + " ";
  // The override would be set again by every variant: refused, naming the sweep's line.
  refused(base + "model.layers=GG",
          "exp.yaml:12:5: override 'model.layers=GG': model.layers is "
          "varied by the sweep");
  refused(base + "model.attention.position.scheme=alibi",
          "exp.yaml:14:5: override 'model.attention.position.scheme=alibi'");
  refused(base + "model.attention={n_heads: 4}", "model.attention.position is varied");
  refused(base + "train.seed=7", "train.seed is varied by the sweep");
  refused("run " + q(exp) + " --runs-dir " + q(tmp.path / "runs") + " model.layers=GG",
          "would be discarded");
  CHECK_FALSE(fs::exists(tmp.path / "runs"));
  // Keys the sweep leaves alone are fine.
  const Result ok = cli(base + "train.steps=3");
  INFO(ok.out);
  CHECK(ok.code == 0);
  CHECK_THAT(ok.out, Catch::Contains("8 run(s)"));
}

TEST_CASE("eval --variant: values are read as the file reads them", "[integration][inputs]") {
  Tmp tmp;
  const fs::path run = trained_run(tmp.path);
  const std::string before = slurp(run / "results.json");
  const std::string e = "eval " + q(run) + " --variant ";
  refused(e + "'a=model.attention.window=!!str 4'",
          "--variant a override 'model.attention.window=!!str 4'");
  refused(e + "'a=model.attention.window=!!str 4'", "YAML tag 'tag:yaml.org,2002:str'");
  refused(e + "'a=model.attention.position={scheme: rope, scheme: nope}'", "duplicate key");
  refused(e + "'a=model.attention.window=4,model.attention.window=8'",
          "model.attention.window is set twice");
  refused(e + "a=model.attention.window=4 --variant a=model.attention.window=8",
          "--variant: 'a' is given twice");
  // What the variant's plugin reads is checked before anything is evaluated.
  refused(e + "'a=model.attention.position.rope_scaling={type: ntk, factor: .inf}'",
          "--variant a: model.attention.position.rope_scaling.factor: expected a finite number");
  refused(e + "'a=model.attention.position.rope_thet=5'", "rope_thet");
  // Which keys may change is the mixers' to say, against the run's own configuration.
  refused(e + "'a=model.attention.n_heads=4'",
          "variant 'a': 'model.attention.n_heads' cannot change after training");
  refused(e + "'a=model.deltanet.d_state=4'", "model.deltanet.chunk_size");
  CHECK(slurp(run / "results.json") == before);
}

TEST_CASE("config show and model summary refuse the eval variants run would refuse",
          "[integration][inputs]") {
  Tmp tmp;
  const fs::path file = tmp.path / "exp.yaml";
  const auto check = [&](const std::string& variant, const std::string& message) {
    write_experiment(file, ", variants: {bad: " + variant + "}");
    refused("config show " + q(file), message);
    refused("model summary " + q(file), message);
  };
  check("{model.attention.position: {scheme: nosuch}}", "unknown positional scheme 'nosuch'");
  check("{model.attention.position.rope_thet: 5}", "rope_thet");
  check("{model.attention.position.rope_scaling: {type: ntx, factor: 4}}", "ntx");
  check("{model.attention.position.rope_scaling: {type: ntk, factor: .inf}}",
        ".inf and .nan are refused");
  check("{model.attention.position: {scheme: t5}}", "adds the parameter");
  // The messages name the variant and its line.
  write_experiment(file, ", variants: {bad: {model.attention.position: {scheme: nosuch}}}");
  refused("config show " + q(file), "in eval variant 'bad' (" + file.string() + ":7:");
  write_experiment(file,
                   ", variants: {ntk: {model.attention.position.rope_scaling: "
                   "{type: ntk, factor: 4}}}");
  CHECK(cli("config show " + q(file)).code == 0);
  CHECK(cli("model summary " + q(file)).code == 0);
}

TEST_CASE("config show, sweep list and model summary refuse what run refuses, at its line",
          "[integration][inputs]") {
  Tmp tmp;
  const fs::path file = tmp.path / "exp.yaml";
  const std::string runs = " --runs-dir " + q(tmp.path / "runs");
  const auto every_reader = [&](const std::string& message) {
    refused("config show " + q(file), message);
    refused("sweep list " + q(file) + runs, message);
    refused("model summary " + q(file), message);
    refused("run " + q(file) + runs, message);
  };
  // A sweep value whose variant cannot be built: 3 heads do not divide d_model 16.
  write_experiment(file);
  std::ofstream(file, std::ios::app) << "sweep:\n  grid:\n    model.attention.n_heads: [2, 3]\n";
  every_reader("exp.yaml:12:5: model.attention.n_heads: n_heads (3) must divide");
  // A key the task does not read, and a number given as a word.
  write_experiment(file);
  std::ofstream(file, std::ios::app) << "sweep:\n  grid:\n    task.bogus: [1]\n";
  every_reader("task.bogus");
  write_experiment(file);
  refused("model summary " + q(file) + " train.lr=fast", "train.lr");
  refused("model summary " + q(file) + " task.name=nosuch", "nosuch");
  refused("config show " + q(file) + " task.name=nosuch", "nosuch");
  CHECK_FALSE(fs::exists(tmp.path / "runs"));
  // The same file without the bad value reads in every command.
  CHECK(cli("sweep list " + q(file) + runs).code == 0);
  CHECK(cli("model summary " + q(file)).code == 0);
}

TEST_CASE("generate and analyze: prompts and sizes are bounded, special files refused",
          "[integration][inputs]") {
  Tmp tmp;
  const fs::path run = trained_run(tmp.path);
  const std::string g = "generate " + q(run);
  refused(g + " --prompt-file " + q(tmp.path),
          "--prompt-file: '" + tmp.path.string() + "' is a folder");
  const auto t0 = std::chrono::steady_clock::now();
  refused(g + " --prompt-file /dev/zero", "'/dev/zero' is not a regular file");
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
  std::ofstream(tmp.path / "big.txt") << std::string((1 << 20) + 1, '1');
  refused(g + " --prompt-file " + q(tmp.path / "big.txt"),
          "is 1048577 bytes; a prompt is at most 1048576 bytes");
  refused(g + " --prompt '1 2 3' -n 1048576",
          "a 3-token prompt and 1048576 new tokens are 1048579 positions; generate takes at most "
          "1048576");
  // An eval set that cannot fit in memory: refused as eval.examples would be in the file.
  refused("analyze " + q(run) + " --examples 100000000",
          "command line: eval.examples: 100000000 examples of length 32 are");
  CHECK_FALSE(fs::exists(run / "analysis"));
}

}  // namespace inputs_cli_test

namespace inputs_cli_test {

TEST_CASE("a run folder whose source.yaml was edited fails cleanly, naming the files",
          "[integration][inputs]") {
  Tmp tmp;
  const fs::path run = trained_run(tmp.path);
  const std::string original = slurp(run / "source.yaml");
  const auto edited = [&](const std::string& from, const std::string& to) {
    std::string text = original;
    REQUIRE(text.find(from) != std::string::npos);
    text.replace(text.find(from), from.size(), to);
    std::ofstream(run / "source.yaml") << text;
  };
  const std::string results = slurp(run / "results.json");
  // run.json's digest notices any edit, also one that builds the same shapes (train.steps was
  // read as if the weights had been trained that long).
  const std::string changed = (run / "source.yaml").string() + "' was changed after the run was";
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"d_model: 16", "d_model: 32"},
                                 {"steps: 2", "steps: 3"}}) {
    edited(from, to);
    refused("eval " + q(run), changed);
    refused("generate " + q(run) + " --prompt '1 2'", changed);
    refused("analyze " + q(run) + " --no-plots", changed);
  }
  // A folder from before the digest: another width than the checkpoint's is named by the
  // checkpoint's shape check (LibTorch would load the tensors and fail in a forward).
  std::string id = slurp(run / "run.json");
  const auto digest = id.find("\"source_sha1\"");
  REQUIRE(digest != std::string::npos);
  id.replace(digest, 13, "\"old_sha1\"");
  std::ofstream(run / "run.json") << id;
  edited("d_model: 16", "d_model: 32");
  const std::string message =
      "checkpoint " + (run / "checkpoint" / "weights.safetensors").string() +
      " does not fit the model built from " + (run / "source.yaml").string() + ": '";
  refused("eval " + q(run), message);
  refused("generate " + q(run) + " --prompt '1 2'", message);
  refused("analyze " + q(run) + " --no-plots", message);
  CHECK(slurp(run / "results.json") == results);
  CHECK_FALSE(fs::exists(run / "analysis"));
}

}  // namespace inputs_cli_test
