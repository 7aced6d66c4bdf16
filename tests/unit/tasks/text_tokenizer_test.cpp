// The text task on GPT-2 tokens (task.tokenizer): windows are runs of each document's own ids,
// lengths count tokens, and bits per byte divides by the bytes the scored tokens stand for.
// Needs data/tokenizers/gpt2.js (scripts/fetch_gpt2.sh; scripts/test.sh runs it).

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "hybridlab/error.h"
#include "hybridlab/task.h"
#include "support/task_support.h"
#include "tokenizer/tokenizer_file.h"

using namespace hybridlab;
using hybridlab::test::make_task;
using hybridlab::test::row_vec;

namespace text_tokenizer_test {
namespace {

const std::string kSource = HYBRIDLAB_SOURCE_DIR;
const std::string kCorpus = kSource + "/tests/fixtures/text_corpus";
const std::string kRanks = kSource + "/data/tokenizers/gpt2.js";

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Whether `run` occurs contiguously in `ids`.
bool contains_run(const std::vector<int32_t>& ids, const std::vector<int64_t>& run) {
  return std::search(ids.begin(), ids.end(), run.begin(), run.end(),
                     [](int32_t a, int64_t b) { return a == b; }) != ids.end();
}

}  // namespace

TEST_CASE("text on GPT-2 tokens: windows are runs of a document's ids, lengths count tokens",
          "[job][tasks][tokenizer]") {
  INFO("GPT-2's ranks are fetched by scripts/fetch_gpt2.sh");
  REQUIRE(std::filesystem::exists(kRanks));
  const auto gpt2 = tokenizer::load_tokenizer(kRanks);
  auto t = make_task("task: {name: text, seq_len: 16, path: '" + kCorpus + "', tokenizer: '" +
                     kRanks + "'}");
  CHECK(t->vocab_size() == 50257);
  CHECK_FALSE(t->byte_level());
  const torch::Tensor lengths = t->token_bytes();
  REQUIRE(lengths.numel() == 50257);
  CHECK(lengths[15496].item<int64_t>() == 5);  // "Hello"
  CHECK(lengths[995].item<int64_t>() == 6);    // " world"
  t->prepare({16, 32});
  const std::vector<int32_t> harbor = gpt2->encode(slurp(kCorpus + "/train/harbor.txt"));
  const std::vector<int32_t> garden = gpt2->encode(slurp(kCorpus + "/train/garden.txt"));
  const std::vector<int32_t> station = gpt2->encode(slurp(kCorpus + "/validation/station.txt"));
  for (int64_t step = 0; step < 5; ++step) {
    const Batch b = t->train_batch(step, 8, 1);
    REQUIRE(b.tokens.sizes() == torch::IntArrayRef({8, 16}));
    for (int64_t r = 0; r < 8; ++r) {
      std::vector<int64_t> w = row_vec(b.tokens[r]);
      w.push_back(b.targets[r][15].item<int64_t>());
      REQUIRE((contains_run(harbor, w) || contains_run(garden, w)));
      REQUIRE_FALSE(contains_run(station, w));
    }
  }
  // Validation windows of 32 tokens at 0, 32, ...: (tokens - 1) / 32 of them.
  const Batch e = t->eval_set(32, 100, 0);
  const int64_t windows = (static_cast<int64_t>(station.size()) - 1) / 32;
  REQUIRE(e.tokens.size(0) == windows);
  for (int64_t i = 0; i < windows; ++i) {
    const std::vector<int64_t> row = row_vec(e.tokens[i]);
    REQUIRE(std::equal(row.begin(), row.end(), station.begin() + i * 32));
  }
  // The limit is named in tokens.
  CHECK_THROWS_WITH(
      t->prepare({static_cast<int64_t>(station.size())}),
      Catch::Contains("is " + std::to_string(station.size()) + " tokens (the document limit)"));
}

TEST_CASE("text on GPT-2 tokens: bits per byte over the bytes the scored targets stand for",
          "[job][tasks][tokenizer]") {
  REQUIRE(std::filesystem::exists(kRanks));
  auto t = make_task("task: {name: text, seq_len: 16, path: '" + kCorpus + "', tokenizer: '" +
                     kRanks + "'}");
  // Targets "Hello" (5 bytes) and " world" (6 bytes) scored, the third position not.
  const torch::Tensor logits = torch::zeros({1, 3, 50257});
  const torch::Tensor targets = torch::tensor({15496L, 995L, kIgnoreIndex}).reshape({1, 3});
  ScoreSums s;
  score_batch(logits, targets, s, false, t->token_bytes());
  CHECK(s.target_bytes == 11);
  CHECK(s.loss_sum == Approx(2 * std::log(50257.0)));  // uniform logits
  const auto m = t->metrics(s);
  CHECK(m.at("loss") == Approx(std::log(50257.0)));
  CHECK(m.at("bits_per_token") == Approx(std::log2(50257.0)));
  CHECK(m.at("bits_per_byte") == Approx(2 * std::log2(50257.0) / 11));
  // Without token lengths nothing is added (byte tasks).
  ScoreSums bytes;
  score_batch(logits, targets, bytes, false);
  CHECK(bytes.target_bytes == 0);
  // Chance: the unigram entropy of the train tokens, per token and per byte.
  t->prepare({16});
  const auto c = t->chance_levels();
  CHECK(c.at("bits_per_byte") < c.at("bits_per_token"));
  CHECK(c.at("bits_per_byte") * 3.0 < c.at("bits_per_token"));  // over 3 bytes per token
}

TEST_CASE("task.tokenizer: a missing or foreign tokenizer is an error at its line",
          "[job][tasks][tokenizer]") {
  using hybridlab::test::task_error;
  CHECK_THAT(task_error("task: {name: text, tokenizer: /no/such/tokenizer.json}"),
             Catch::Contains("exp.yaml:1:20: task.tokenizer: '/no/such/tokenizer.json' does not "
                             "exist: give bytes, gpt2, or the path"));
  // A WordPiece tokenizer.json: the reader's message names the file and the key.
  const auto dir = std::filesystem::temp_directory_path() / "hybridlab_text_tokenizer_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << R"({"model": {"type": "WordPiece", "vocab": {}}})";
  CHECK_THAT(task_error("task: {name: text, tokenizer: " + dir.string() + "}"),
             Catch::Contains("task.tokenizer: " + (dir / "tokenizer.json").string() +
                             ": model.type: 'WordPiece' is not supported"));
  std::filesystem::remove_all(dir);
  // `gpt2` is found below the experiment's folder (here: the repository's experiments/).
  TaskContext ctx;
  ctx.config_dir = kSource + "/experiments";
  Config cfg = Config::parse("task: {name: text, tokenizer: gpt2}");
  const auto t = read_task(cfg.section("task"), ctx);
  cfg.raise_errors();
  CHECK(t->vocab_size() == 50257);
}

}  // namespace text_tokenizer_test
