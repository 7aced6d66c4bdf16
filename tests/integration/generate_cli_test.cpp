// `hybridlab generate` end to end, and generated scoring through `run` into results.json and the
// report: trained tiny runs (a byte-level passkey run with a learned position table, a token-id
// MQAR run), then every bad input: one error line, exit code 2.

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli_support.h"

namespace fs = std::filesystem;
using clitest::cli;
using clitest::q;
using clitest::Result;
using clitest::slurp;
using json = nlohmann::json;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace generate_cli_test {
namespace {

struct Tmp : clitest::TempDir {
  Tmp() : clitest::TempDir("generatecli") {}
};

// The one run folder under `dir` (a folder holding status.json).
fs::path run_folder(const fs::path& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().filename() == "status.json") return e.path().parent_path();
  }
  return {};
}

void write_passkey_experiment(const fs::path& file) {
  std::ofstream(file) << "name: pk\n"
                         "model: {d_model: 16, vocab_size: 256, layers: GA,\n"
                         "        position: {scheme: learned, max_position_embeddings: 128},\n"
                         "        attention: {n_heads: 2, position: {scheme: nope}},\n"
                         "        gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 16}}\n"
                         "task: {name: passkey, seq_len: 128, intro: false}\n"
                         "train: {steps: 3, batch_size: 2, warmup_steps: 1}\n"
                         "eval: {lengths: [128], examples: 4,\n"
                         "       variants: {generated: {eval.scoring: generated}}}\n"
                         "runtime: {threads: 1}\n"
                         "plugins: {paths: ['" HYBRIDLAB_TEST_PLUGIN_DIR "']}\n";
}

void write_mqar_experiment(const fs::path& file) {
  std::ofstream(file)
      << "name: mq\n"
         "model: {d_model: 16, vocab_size: 64, layers: GA, attention: {n_heads: 2},\n"
         "        gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 16}}\n"
         "task: {name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}\n"
         "train: {steps: 2, batch_size: 2, warmup_steps: 1}\n"
         "eval: {lengths: [32], examples: 4}\n"
         "runtime: {threads: 1}\n"
         "plugins: {paths: ['" HYBRIDLAB_TEST_PLUGIN_DIR "']}\n";
}

// What `hybridlab generate` printed on stdout: the output without its last line, the timing
// line from stderr (cli() merges the two streams; stdout is flushed first).
std::string continuation(const Result& r) {
  // stderr is merged in: drop hybridlab's own diagnostic lines (a note on the BLAS kernels, say).
  std::istringstream lines(r.out);
  std::string out, line;
  while (std::getline(lines, line)) {
    if (line.rfind("hybridlab: note: ", 0) == 0 || line.rfind("hybridlab: warning: ", 0) == 0) {
      continue;
    }
    out += line + "\n";
  }
  if (!out.empty() && !r.out.empty() && r.out.back() != '\n') out.pop_back();
  const size_t stats = out.rfind(" tokens generated after a ");
  if (stats == std::string::npos) return out;
  const size_t end = out.rfind('\n', stats);
  return end == std::string::npos ? "" : out.substr(0, end + 1);
}

// A copy of `run` under `to` (a folder the tests may break).
fs::path copy_run(const fs::path& run, const fs::path& to) {
  fs::create_directories(to.parent_path());
  fs::copy(run, to, fs::copy_options::recursive);
  fs::remove(to / "lock");
  return to;
}

}  // namespace

TEST_CASE("generate cli: continuation, seeds, generated scoring in results and report, errors",
          "[generate][cli]") {
  Tmp tmp;
  write_passkey_experiment(tmp.path / "pk.yaml");
  const Result trained =
      cli("run " + q(tmp.path / "pk.yaml") + " --runs-dir " + q(tmp.path / "runs") + " -q");
  INFO(trained.out);
  REQUIRE(trained.code == 0);
  const fs::path run = run_folder(tmp.path / "runs");
  REQUIRE(!run.empty());

  // results.json: the variant scored by generation says so; the trained setting is as before.
  const json res = json::parse(slurp(run / "results.json"));
  CHECK_FALSE(res["eval"]["128"].contains("scoring"));
  CHECK(res["eval"]["128"].contains("loss"));
  REQUIRE(res["eval_variants"].size() == 1);
  CHECK(res["eval_variants"][0]["set"] == "eval.scoring=generated");
  CHECK(res["eval_variants"][0]["eval"]["128"]["scoring"] == "generated");
  CHECK_FALSE(res["eval_variants"][0]["eval"]["128"].contains("loss"));
  const std::string md = slurp(tmp.path / "runs" / "pk" / "summary.md");
  CHECK_THAT(md, Catch::Contains("eval=generated scoring=generated") &&
                     Catch::Contains("eval=trained scoring=teacher_forced"));
  CHECK_THAT(slurp(tmp.path / "runs" / "pk" / "summary.csv"), Catch::Contains(",scoring,"));

  // Greedy continuation: 6 bytes, shown as text (at least 6 characters: escapes are longer);
  // timing on stderr.
  const Result g = cli("generate " + q(run) + " --prompt 'The pass key is' -n 6");
  INFO(g.out);
  REQUIRE(g.code == 0);
  const std::string greedy = continuation(g);
  CHECK(greedy.size() >= 7);
  CHECK(greedy.back() == '\n');
  CHECK_THAT(g.out, Catch::Contains("6 tokens generated after a 15-token prompt") &&
                        Catch::Contains("tokens/s"));
  // The same prompt from a file, byte for byte: the same continuation.
  std::ofstream(tmp.path / "prompt.txt") << "The pass key is";
  CHECK(continuation(cli("generate " + q(run) + " --prompt-file " + q(tmp.path / "prompt.txt") +
                         " -n 6")) == greedy);
  // Sampling: the same seed, the same bytes; another seed, others.
  const std::string sample = " --prompt 'The pass key is' -n 24 --temperature 1.5 --seed ";
  const std::string s4 = continuation(cli("generate " + q(run) + sample + "4"));
  CHECK(s4.size() >= 25);
  CHECK(continuation(cli("generate " + q(run) + sample + "4")) == s4);
  CHECK(continuation(cli("generate " + q(run) + sample + "5")) != s4);

  // Bad input: exit 2 and the problem named.
  const auto bad = [](const std::string& args, const std::string& needle) {
    const Result r = cli(args);
    INFO(args << "\n" << r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains(needle));
  };
  bad("generate " + q(tmp.path / "runs" / "pk") + " --prompt x", "is not a run folder");
  bad("generate " + q(tmp.path / "nowhere") + " --prompt x", "is not a run folder");
  bad("generate " + q(run), "give the prompt: --prompt TEXT or --prompt-file FILE");
  bad("generate " + q(run) + " --prompt x --prompt-file " + q(tmp.path / "prompt.txt"), "not both");
  bad("generate " + q(run) + " --prompt-file " + q(tmp.path / "missing.txt"), "cannot read");
  bad("generate " + q(run) + " --prompt x -n 0",
      "--max-new-tokens: '0' is not an integer from 1 to 1048576");
  bad("generate " + q(run) + " --prompt x --temperature -1",
      "--temperature: '-1' is not a number >= 0");
  // 120 prompt bytes + 9 new ones need 129 positions; the learned table has 128.
  bad("generate " + q(run) + " --prompt " + std::string(120, 'a') + " -n 9",
      "'learned' positional scheme encodes at most 128");
  CHECK(cli("generate " + q(run) + " --prompt " + std::string(120, 'a') + " -n 8").code == 0);

  // A run that is not trained to the end, one without its checkpoint, one whose plugins are gone.
  const fs::path broken = tmp.path / "broken";
  const fs::path interrupted = copy_run(run, broken / "interrupted");
  json st = json::parse(slurp(interrupted / "status.json"));
  st["state"] = "interrupted";
  std::ofstream(interrupted / "status.json") << st.dump();
  bad("generate " + q(interrupted) + " --prompt x", "is interrupted");
  const fs::path no_ckpt = copy_run(run, broken / "no_checkpoint");
  fs::remove_all(no_ckpt / "checkpoint");
  bad("generate " + q(no_ckpt) + " --prompt x", "holds no checkpoint");
  // The run's plugin folder is gone; a scheme its plugins provided is no longer found.
  const fs::path no_plugins = copy_run(run, broken / "no_plugins");
  REQUIRE(clitest::retrain_source_as(no_plugins, HYBRIDLAB_TEST_PLUGIN_DIR,
                                     (broken / "gone").string()));
  bad("generate " + q(no_plugins) + " --prompt x", "plugin folder '" + (broken / "gone").string());
  const fs::path no_scheme = copy_run(run, broken / "no_scheme");
  REQUIRE(clitest::retrain_source_as(no_scheme, "scheme: learned", "scheme: learned_elsewhere"));
  bad("generate " + q(no_scheme) + " --prompt x", "unknown positional scheme 'learned_elsewhere'");

  const Result help = cli("generate --help");
  CHECK(help.code == 0);
  CHECK_THAT(help.out, Catch::Contains("--prompt-file") && Catch::Contains("--top-k") &&
                           Catch::Contains("Exit code"));
}

TEST_CASE("generate cli: token ids in and out for a task that is not bytes", "[generate][cli]") {
  Tmp tmp;
  write_mqar_experiment(tmp.path / "mq.yaml");
  REQUIRE(
      cli("run " + q(tmp.path / "mq.yaml") + " --runs-dir " + q(tmp.path / "runs") + " -q").code ==
      0);
  const fs::path run = run_folder(tmp.path / "runs");
  const Result g = cli("generate " + q(run) + " --prompt '1 33 2 40' -n 5");
  INFO(g.out);
  REQUIRE(g.code == 0);
  std::istringstream in(continuation(g));
  int64_t id = 0, n = 0;
  while (in >> id) {
    CHECK(id >= 0);
    CHECK(id < 64);
    ++n;
  }
  CHECK(n == 5);
  Result r = cli("generate " + q(run) + " --prompt '1 33 64'");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("token id 64 is out of range") && Catch::Contains("[0, 64)"));
  r = cli("generate " + q(run) + " --prompt '1 x'");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("'x' is not a token id"));
  r = cli("generate " + q(run) + " --prompt=-3");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("token id -3"));
}

TEST_CASE("generate cli: text on GPT-2 tokens takes and prints text", "[generate][cli]") {
  const std::string ranks = HYBRIDLAB_SOURCE_DIR "/data/tokenizers/gpt2.js";
  INFO("the GPT-2 ranks are fetched by scripts/fetch_gpt2.sh (scripts/test.sh runs it)");
  REQUIRE(fs::exists(ranks));
  Tmp tmp;
  std::ofstream(tmp.path / "bpe.yaml")
      << "name: bpe\n"
         "model: {d_model: 16, vocab_size: 50257, layers: GA, attention: {n_heads: 2},\n"
         "        gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 16}}\n"
         "task: {name: text, seq_len: 16, tokenizer: '"
      << ranks
      << "', path: '" HYBRIDLAB_SOURCE_DIR
         "/tests/fixtures/text_corpus'}\n"
         "train: {steps: 1, batch_size: 2, warmup_steps: 1}\n"
         "eval: {lengths: [16], examples: 2}\n"
         "runtime: {threads: 1}\n";
  REQUIRE(
      cli("run " + q(tmp.path / "bpe.yaml") + " --runs-dir " + q(tmp.path / "runs") + " -q").code ==
      0);
  const fs::path run = run_folder(tmp.path / "runs");
  // "Hello world" is GPT-2's [15496, 995]: two tokens, where bytes would be eleven.
  const Result g = cli("generate " + q(run) + " --prompt 'Hello world' -n 4");
  INFO(g.out);
  REQUIRE(g.code == 0);
  CHECK_THAT(g.out, Catch::Contains("4 tokens generated after a 2-token prompt"));
  CHECK_FALSE(continuation(g).empty());
}

}  // namespace generate_cli_test
