// The validation split that `sweep.tune` chooses on: disjoint from every eval set the report
// scores, deterministic, and eval-like.

#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <set>

#include "hybridlab/error.h"
#include "hybridlab/task.h"
#include "support/task_support.h"

using namespace hybridlab;
using hybridlab::test::make_task;
using hybridlab::test::row_text;
using hybridlab::test::row_vec;
using hybridlab::test::task_error;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace validation_split_test {
namespace {}  // namespace

TEST_CASE("validation split: synthetic tasks draw from the train buckets, never an eval row",
          "[job][tasks][tuning]") {
  for (const char* yaml : {"task: {name: mqar, seq_len: 32, vocab_size: 32, num_kv_pairs: 4}",
                           "task: {name: copy, seq_len: 32, alphabet: 4}"}) {
    INFO(yaml);
    auto t = make_task(yaml);
    t->prepare({32});
    const Batch ev = t->eval_set(32, 64, 7);
    const Batch val = t->validation_set(32, 64, 7, {32}, 64);
    REQUIRE(val.tokens.size(0) == 64);
    REQUIRE((split_bucket(val.tokens) != 0).all().item<bool>());
    std::set<std::vector<int64_t>> eval_rows;
    for (int64_t i = 0; i < ev.tokens.size(0); ++i) eval_rows.insert(row_vec(ev.tokens[i]));
    for (int64_t i = 0; i < val.tokens.size(0); ++i) {
      REQUIRE(eval_rows.count(row_vec(val.tokens[i])) == 0);
    }
    // A pure function of its arguments, and not the train stream.
    REQUIRE(torch::equal(val.tokens, t->validation_set(32, 64, 7, {32}, 64).tokens));
    REQUIRE_FALSE(torch::equal(val.tokens.slice(0, 0, 16), t->train_batch(0, 16, 7).tokens));
  }
  // Copy's validation strings are eval-like: the upper half of what the length holds,
  // U[(32-3)/4+1, (32-3)/2] = U[8, 14]; the separator '|' sits right after the string.
  auto copy = make_task("task: {name: copy, seq_len: 32, alphabet: 4}");
  const Batch v = copy->validation_set(32, 64, 3, {32}, 64);
  for (int64_t i = 0; i < v.tokens.size(0); ++i) {
    const auto row = row_vec(v.tokens[i]);
    const auto bar = std::find(row.begin(), row.end(), int64_t{'|'}) - row.begin();
    REQUIRE(bar - 1 >= 8);
    REQUIRE(bar - 1 <= 14);
  }
}

TEST_CASE("validation split: text windows no eval window at any length touches",
          "[job][tasks][tuning]") {
  const std::string dir = std::string(HYBRIDLAB_SOURCE_DIR) + "/tests/fixtures/text_corpus";
  auto t = make_task("task: {name: text, seq_len: 64, path: '" + dir + "'}");
  t->prepare({64, 128});
  std::ifstream in(dir + "/validation/station.txt");
  const std::string station((std::istreambuf_iterator<char>(in)), {});
  // 546 bytes. Eval, 2 examples: at 64, windows 0,64,...,448 -> picks 0 and 256 (bytes [0,64],
  // [256,320]); at 128, windows 0,128,256,384 -> picks 0 and 256 ([0,128], [256,384]). The only
  // 64-byte window reading none of those bytes starts at 448.
  const Batch val = t->validation_set(64, 8, 0, {64, 128}, 2);
  REQUIRE(val.tokens.size(0) == 1);
  std::string text;
  for (int64_t i = 0; i < 64; ++i) text += static_cast<char>(val.tokens[0][i].item<int64_t>());
  REQUIRE(text == station.substr(448, 64));
  // Only 64-byte eval: 256's neighbours are free too -> windows at 128 (its [128,192] misses
  // [0,64] and [256,320]) and 384, 448.
  const Batch only64 = t->validation_set(64, 8, 0, {64}, 2);
  REQUIRE(only64.tokens.size(0) == 3);
  // Eval sets that read every window leave nothing to tune on: a DataError saying what to lower.
  REQUIRE_THROWS_WITH(t->validation_set(64, 8, 0, {64}, 100),
                      Catch::Contains("lower eval.examples"));
}

}  // namespace validation_split_test
