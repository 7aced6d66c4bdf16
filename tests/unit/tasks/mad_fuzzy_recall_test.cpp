// MAD's fuzzy in-context recall: each row parsed back into its key and value motifs (keys and
// values come from the two halves of the vocabulary, so maximal runs separate them), the map
// kept within a row, the probe repeated last, and the scored tokens re-derived.

#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <vector>

#include "hybridlab/task.h"
#include "support/task_support.h"

using namespace hybridlab;
using hybridlab::test::make_task;
using hybridlab::test::row_vec;
using hybridlab::test::task_error;

namespace mad_fuzzy_recall_test {
namespace {

using Motif = std::vector<int64_t>;

// A row after its left padding as (key, value) motifs; keys are ids < `keys`, values the rest.
std::vector<std::pair<Motif, Motif>> pairs_of(const std::vector<int64_t>& row, int64_t keys,
                                              int64_t pad) {
  size_t t = 0;
  while (t < row.size() && row[t] == pad) ++t;
  std::vector<std::pair<Motif, Motif>> out;
  while (t < row.size()) {
    Motif k, v;
    while (t < row.size() && row[t] < keys) k.push_back(row[t++]);
    while (t < row.size() && row[t] >= keys && row[t] != pad) v.push_back(row[t++]);
    REQUIRE(t <= row.size());
    out.emplace_back(k, v);
  }
  return out;
}

}  // namespace

TEST_CASE("fuzzy_recall: motif keys keep their values, shown keys' values scored in eval",
          "[job][tasks]") {
  // vocab 16: keys 0-6, values 7-14, pad 15 (MAD's multi-query setting).
  auto t = make_task("task: {name: fuzzy_recall}");
  REQUIRE(t->vocab_size() == 16);
  REQUIRE(t->seq_len() == 128);
  t->prepare({128, 256});
  for (const bool eval : {false, true}) {
    const Batch b = eval ? t->eval_set(256, 16, 3) : t->train_batch(0, 16, 3);
    const int64_t L = b.tokens.size(1);
    for (int64_t r = 0; r < b.tokens.size(0); ++r) {
      const std::vector<int64_t> seq = row_vec(b.tokens[r]), tgt = row_vec(b.targets[r]);
      // The row as the model reads it plus the one token it predicts last (in eval, the last
      // token of the final probe's value: always scored).
      std::vector<int64_t> full = seq;
      full.push_back(tgt.back());
      const auto pairs = pairs_of(full, 7, 15);
      REQUIRE(pairs.size() >= 3u);
      std::map<Motif, Motif> value_of;
      std::vector<int64_t> expected(static_cast<size_t>(L), kIgnoreIndex);
      size_t at = 0;  // where the pair starts in `full`
      while (full[at] == 15) ++at;
      for (size_t i = 0; i < pairs.size(); ++i) {
        const auto& [k, v] = pairs[i];
        REQUIRE((k.size() >= 1 && k.size() <= 3));
        if (eval) REQUIRE(k.size() == 3u);  // evaluation keys are of the largest motif
        REQUIRE((v.size() >= 1 && v.size() <= 3));
        REQUIRE(std::set<int64_t>(k.begin(), k.end()).size() == k.size());
        REQUIRE(std::set<int64_t>(v.begin(), v.end()).size() == v.size());
        const bool shown = value_of.count(k) > 0;
        if (shown) REQUIRE(value_of[k] == v);
        value_of[k] = v;
        // In eval, the value of a key shown before is scored, and the final probe's always;
        // token j of the value at full[at + |k| + j] is predicted at the position before it.
        if (eval && (shown || i + 1 == pairs.size())) {
          for (size_t j = 0; j < v.size(); ++j) expected[at + k.size() + j - 1] = v[j];
        }
        at += k.size() + v.size();
      }
      REQUIRE(at == static_cast<size_t>(L) + 1);
      if (eval) {
        REQUIRE(tgt == expected);
      } else {
        // Next-token targets at every position.
        for (int64_t p = 0; p + 1 < L; ++p) REQUIRE(tgt[size_t(p)] == seq[size_t(p + 1)]);
      }
    }
  }
  // Splits disjoint, rows a function of (seed, step).
  REQUIRE((split_bucket(t->eval_set(128, 16, 3).tokens) == 0).all().item<bool>());
  REQUIRE((split_bucket(t->train_batch(5, 16, 3).tokens) != 0).all().item<bool>());
  REQUIRE(torch::equal(t->train_batch(5, 4, 3).tokens, t->train_batch(5, 4, 3).tokens));
  REQUIRE(t->chance_levels().at("accuracy") == Approx(1.0 / 8));

  CHECK_THAT(task_error("task: {name: fuzzy_recall, seq_len: 12}"),
             Catch::Contains("task.seq_len: must be >= 13"));
  CHECK_THAT(task_error("task: {name: fuzzy_recall, vocab_size: 6}"),
             Catch::Contains("task.vocab_size: must hold a pad token"));
  CHECK_THAT(task_error("task: {name: fuzzy_recall, k_motif_size: 0}"),
             Catch::Contains("task.k_motif_size: must be >= 1"));
}

}  // namespace mad_fuzzy_recall_test
