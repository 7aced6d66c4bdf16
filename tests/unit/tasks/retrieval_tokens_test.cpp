// passkey and niah on GPT-2 tokens (task.tokenizer): each row is the byte-level template's text
// with the filler cut by tokens, exactly L tokens long, and the answer's tokens are what is scored.
// Needs data/tokenizers/gpt2.js (scripts/fetch_gpt2.sh; scripts/test.sh runs it).

#include <catch2/catch.hpp>

#include <filesystem>
#include <regex>
#include <string>

#include "hybridlab/error.h"
#include "hybridlab/task.h"
#include "support/task_support.h"
#include "tokenizer/tokenizer_file.h"

using namespace hybridlab;
using hybridlab::test::make_task;
using hybridlab::test::row_vec;
using hybridlab::test::task_error;

namespace retrieval_tokens_test {
namespace {

const std::string kRanks = std::string(HYBRIDLAB_SOURCE_DIR) + "/data/tokenizers/gpt2.js";
const std::string kFiller =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. ";

std::vector<int32_t> ids_of(const std::vector<int64_t>& v) { return {v.begin(), v.end()}; }

// Whether `text` is a prefix of the filler sentence repeated.
bool is_filler(const std::string& text) {
  std::string f;
  while (f.size() < text.size()) f += kFiller;
  return f.compare(0, text.size(), text) == 0;
}

// The scored targets of a row: where they start (the position predicting the first) and the ids.
std::pair<int64_t, std::vector<int64_t>> scored(const torch::Tensor& targets) {
  const std::vector<int64_t> t = row_vec(targets);
  std::vector<int64_t> ids;
  int64_t first = -1;
  for (int64_t p = 0; p < static_cast<int64_t>(t.size()); ++p) {
    if (t[p] == kIgnoreIndex) continue;
    if (first < 0) first = p;
    ids.push_back(t[p]);
  }
  return {first, ids};
}

// The smallest seq_len the task's error names ("must be >= N tokens").
int64_t least_length(const std::string& yaml) {
  const std::string e = task_error(yaml);
  std::smatch m;
  REQUIRE(std::regex_search(e, m, std::regex("must be >= ([0-9]+) tokens")));
  return std::stoll(m[1]);
}

}  // namespace

TEST_CASE("passkey on GPT-2 tokens: the template's text, L tokens, the key's tokens scored",
          "[job][tasks][tokenizer]") {
  INFO("GPT-2's ranks are fetched by scripts/fetch_gpt2.sh");
  REQUIRE(std::filesystem::exists(kRanks));
  const auto gpt2 = tokenizer::load_tokenizer(kRanks);
  const std::string task = "task: {name: passkey, intro: false, tokenizer: '" + kRanks + "'";
  auto t = make_task(task + ", seq_len: 128}");
  CHECK(t->vocab_size() == 50257);
  CHECK_FALSE(t->byte_level());
  REQUIRE(t->text_tokenizer());
  t->prepare({128, 256});
  const Batch b = t->eval_set(256, 16, 3);
  REQUIRE(b.tokens.sizes() == torch::IntArrayRef({16, 256}));
  const std::string is = "\nThe pass key is ",
                    question = "\nWhat is the pass key? The pass key is ";
  for (int64_t r = 0; r < 16; ++r) {
    const std::string text = gpt2->decode(ids_of(row_vec(b.tokens[r])));
    // "PREFIX\nThe pass key is K. Remember it. K is the pass key.\nSUFFIX\n<question> K"
    const size_t at = text.find(is);
    REQUIRE(at != std::string::npos);
    const size_t digits = text.find_first_not_of("0123456789", at + is.size());
    const std::string k = text.substr(at + is.size(), digits - at - is.size());
    REQUIRE(!k.empty());
    const std::string needle = ". Remember it. " + k + " is the pass key.\n";
    REQUIRE(text.compare(digits, needle.size(), needle) == 0);
    const size_t q = text.rfind(question);
    REQUIRE(q != std::string::npos);
    CHECK(text.substr(q + question.size()) == k);
    CHECK(is_filler(text.substr(0, at)));
    CHECK(is_filler(text.substr(digits + needle.size(), q - digits - needle.size())));
    // Scored: the tokens of " K", the last of the row, predicted from the position before each.
    const auto [first, ids] = scored(b.targets[r]);
    const std::vector<int32_t> key = gpt2->encode(" " + k);
    CHECK(ids_of(ids) == key);
    CHECK(first == 255 - static_cast<int64_t>(key.size()));
  }
  // The shortest length the task accepts holds the longest key's template.
  const int64_t least = least_length(task + ", seq_len: 8}");
  auto shortest = make_task(task + ", seq_len: " + std::to_string(least) + "}");
  shortest->prepare({least});
  CHECK(shortest->train_batch(0, 8, 1).tokens.size(1) == least);
  CHECK(least < 64);  // tokens, not the template's bytes (104)
}

TEST_CASE("niah on GPT-2 tokens: needles in the haystack, the asked value's tokens scored",
          "[job][tasks][tokenizer]") {
  INFO("GPT-2's ranks are fetched by scripts/fetch_gpt2.sh");
  REQUIRE(std::filesystem::exists(kRanks));
  const auto gpt2 = tokenizer::load_tokenizer(kRanks);
  const std::string task =
      "task: {name: niah, num_needles: 3, intro: false, tokenizer: '" + kRanks + "'";
  auto t = make_task(task + ", seq_len: 300}");
  CHECK(t->vocab_size() == 50257);
  t->prepare({300});
  const Batch b = t->train_batch(0, 12, 5);
  const std::regex needle(
      "One of the special magic numbers for ([a-z]+-[a-z]+) is: ([0-9]{7})\\. ");
  const std::regex question(
      "\nWhat is the special magic number for ([a-z]+-[a-z]+) mentioned in the provided text\\? "
      "The special magic number for \\1 mentioned in the provided text is ([0-9]{7})$");
  for (int64_t r = 0; r < 12; ++r) {
    REQUIRE(b.tokens.size(1) == 300);
    const std::string text = gpt2->decode(ids_of(row_vec(b.tokens[r])));
    std::map<std::string, std::string> needles;
    std::string hay;
    size_t at = 0;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), needle);
         it != std::sregex_iterator(); ++it) {
      hay += text.substr(at, static_cast<size_t>(it->position()) - at);
      at = static_cast<size_t>(it->position() + it->length());
      needles[(*it)[1]] = (*it)[2];
    }
    REQUIRE(needles.size() == 3u);
    std::smatch q;
    const std::string tail = text.substr(at);
    REQUIRE(std::regex_search(tail, q, question));
    hay += tail.substr(0, static_cast<size_t>(q.position()));
    CHECK(is_filler(hay));  // the haystack pieces are the filler, in order
    REQUIRE(needles.count(q[1]) == 1);
    CHECK(q[2] == needles[q[1]]);
    const auto [first, ids] = scored(b.targets[r]);
    const std::vector<int32_t> value = gpt2->encode(" " + q[2].str());
    CHECK(ids_of(ids) == value);
    CHECK(first == 299 - static_cast<int64_t>(value.size()));
  }
  const int64_t least = least_length(task + ", seq_len: 8}");
  auto shortest = make_task(task + ", seq_len: " + std::to_string(least) + "}");
  shortest->prepare({least});
  CHECK(shortest->train_batch(0, 8, 1).tokens.size(1) == least);
}

TEST_CASE("passkey and niah refuse a bad tokenizer once, at its key", "[job][tasks][tokenizer]") {
  for (const char* name : {"passkey", "niah"}) {
    const std::string e =
        task_error(std::string("task: {name: ") + name + ", tokenizer: /nonexistent/t.json}");
    CHECK_THAT(e, Catch::Contains("task.tokenizer") && Catch::Contains("does not exist"));
    CHECK_THAT(e, !Catch::Contains("seq_len"));
    // An empty name is not the experiment's folder.
    CHECK_THAT(task_error(std::string("task: {name: ") + name + ", tokenizer: ''}"),
               Catch::Contains("exp.yaml:1:") && Catch::Contains("task.tokenizer: is empty"));
  }
  // A key past 10^15 would overflow the draw (max_key + 1 in int64).
  CHECK_THAT(task_error("task: {name: passkey, max_key: 9223372036854775807}"),
             Catch::Contains("task.max_key: must be in [1, 10^15]"));
  CHECK(task_error("task: {name: passkey, max_key: 1000000000000000, seq_len: 400}").empty());
}

}  // namespace retrieval_tokens_test
