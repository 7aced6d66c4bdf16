// RULER's tasks at byte level: each example re-derived from its own text (the assignments
// followed to their values), the scored span, disjoint splits and the readers' refusals.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "hybridlab/error.h"
#include "hybridlab/task.h"
#include "support/task_support.h"

using namespace hybridlab;
using hybridlab::test::make_task;
using hybridlab::test::row_text;
using hybridlab::test::row_vec;
using hybridlab::test::task_error;

namespace ruler_tasks_test {
namespace {

// What one example says: each variable's value, found by following its assignments.
struct Tracked {
  std::map<std::string, int64_t> value;
  std::vector<std::string> order;  // names in the order they are assigned
  int64_t statements = 0;
};

Tracked follow(const std::string& text) {
  Tracked t;
  const std::regex statement("VAR ([A-Z]{5}) = (VAR ([A-Z]{5})|([0-9]{5}))\\. ");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), statement);
       it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    REQUIRE(t.value.count(m[1]) == 0);  // every name is assigned once
    if (m[4].matched) {
      t.value[m[1]] = std::stoll(m[4]);
    } else {
      REQUIRE(t.value.count(m[3]) == 1);  // assigned from a name already seen
      t.value[m[1]] = t.value[m[3]];
    }
    t.order.push_back(m[1]);
    ++t.statements;
  }
  return t;
}

}  // namespace

TEST_CASE("ruler_vt: the chain of the asked value, in order, is the scored answer",
          "[job][tasks]") {
  auto t = make_task("task: {name: ruler_vt, seq_len: 600, num_chains: 3, num_hops: 4}");
  REQUIRE(t->vocab_size() == 256);
  t->prepare({600, 1200});
  const Batch b = t->train_batch(0, 12, 5);
  for (int64_t r = 0; r < 12; ++r) {
    const std::string s = row_text(b.tokens[r]);
    INFO(s);
    REQUIRE(s.size() == 600u);
    const Tracked tr = follow(s);
    REQUIRE(tr.statements == 15);  // 3 chains of a first assignment and 4 hops
    std::set<int64_t> values;
    for (const auto& [name, v] : tr.value) values.insert(v);
    REQUIRE(values.size() == 3u);  // each chain its own value
    const std::regex q(
        "assigned the value ([0-9]{5}) in the text above.*, ([0-9]+) variables are "
        "assigned the value ([0-9]{5}), they are: ");
    std::smatch m;
    REQUIRE(std::regex_search(s, m, q));
    const int64_t asked = std::stoll(m[1]);
    REQUIRE(std::stoll(m[3]) == asked);
    REQUIRE(m[2] == "5");
    std::string expected;
    for (const auto& name : tr.order)
      if (tr.value.at(name) == asked) expected += (expected.empty() ? "" : " ") + name;
    REQUIRE(expected.size() == 29u);
    REQUIRE(s.substr(m.position(0) + m.length(0)) == expected);
    // Scored: exactly the answer's bytes, each predicted from the byte before it.
    for (int64_t p = 0; p < 600; ++p) {
      const int64_t tgt = b.targets[r][p].item<int64_t>();
      if (p >= 600 - 29 - 1 && p < 599) {
        REQUIRE(tgt == static_cast<unsigned char>(s[static_cast<size_t>(p + 1)]));
      } else {
        REQUIRE(tgt == kIgnoreIndex);
      }
    }
  }
  // Evaluation past the training length: the same task at twice the bytes, apart from training.
  const Batch ev = t->eval_set(1200, 8, 5);
  REQUIRE(ev.tokens.size(1) == 1200);
  REQUIRE((split_bucket(ev.tokens) == 0).all().item<bool>());
  REQUIRE((split_bucket(b.tokens) != 0).all().item<bool>());
  REQUIRE(follow(row_text(ev.tokens[0])).statements == 15);
  REQUIRE(torch::equal(t->train_batch(3, 4, 11).tokens, t->train_batch(3, 4, 11).tokens));
  REQUIRE_FALSE(torch::equal(t->train_batch(3, 4, 11).tokens, t->train_batch(4, 4, 11).tokens));
  // Metrics: the whole answer, and its bytes; a uniform letter guess is the chance level.
  ScoreSums sums;
  sums.examples = 4, sums.correct_examples = 1, sums.tokens = 116, sums.correct_tokens = 87;
  const auto metrics = t->metrics(sums);
  REQUIRE(metrics.at("accuracy") == 0.25);
  REQUIRE(metrics.at("byte_accuracy") == 0.75);
  REQUIRE(t->chance_levels().at("byte_accuracy") == Approx(1.0 / 26));
}

TEST_CASE("ruler_vt: bad settings are refused at their key", "[job][tasks]") {
  CHECK_THAT(task_error("task: {name: ruler_vt, seq_len: 200}"),
             Catch::Contains("exp.yaml:1") && Catch::Contains("task.seq_len: must be >= ") &&
                 Catch::Contains("1 chain(s) of 4 hops and the question"));
  CHECK_THAT(task_error("task: {name: ruler_vt, num_hops: 0}"),
             Catch::Contains("task.num_hops: must be in [1, 64]"));
  CHECK_THAT(task_error("task: {name: ruler_vt, num_chains: 0}"),
             Catch::Contains("task.num_chains: must be in [1, 64]"));
  CHECK_THAT(task_error("task: {name: ruler_vt, num_chain: 2}"),
             Catch::Contains("did you mean 'num_chains'"));
}

// Checks that row r of `b` scores exactly its last `answer` bytes, each from the byte before.
void check_answer_scored(const Batch& b, int64_t r, size_t answer) {
  const std::string s = row_text(b.tokens[r]);
  const int64_t L = static_cast<int64_t>(s.size());
  for (int64_t p = 0; p < L; ++p) {
    const int64_t tgt = b.targets[r][p].item<int64_t>();
    if (p >= L - static_cast<int64_t>(answer) - 1 && p < L - 1) {
      REQUIRE(tgt == static_cast<unsigned char>(s[static_cast<size_t>(p + 1)]));
    } else {
      REQUIRE(tgt == kIgnoreIndex);
    }
  }
}

TEST_CASE("ruler_cwe: the words repeated most, in order of first appearance", "[job][tasks]") {
  auto t = make_task("task: {name: ruler_cwe, seq_len: 900, num_common: 4, common_repeats: 5}");
  t->prepare({900, 1800});
  for (const int64_t L : {900, 1800}) {
    const Batch b = L == 900 ? t->train_batch(0, 8, 3) : t->eval_set(L, 8, 3);
    for (int64_t r = 0; r < 8; ++r) {
      const std::string s = row_text(b.tokens[r]);
      INFO(s);
      REQUIRE(static_cast<int64_t>(s.size()) == L);
      // The numbered list, re-read: items 1, 2, ... in order, and each word's count.
      const std::regex item("([0-9]+)\\. ([a-z]{5}) ");
      std::map<std::string, int64_t> count;
      std::vector<std::string> seen;
      int64_t expect_index = 1;
      const size_t question = s.find("\nQuestion: What are the 4 most common words");
      REQUIRE(question != std::string::npos);
      const std::string list = s.substr(0, question);
      for (auto it = std::sregex_iterator(list.begin(), list.end(), item);
           it != std::sregex_iterator(); ++it) {
        REQUIRE(std::stoll((*it)[1]) == expect_index++);
        if (count[(*it)[2]]++ == 0) seen.push_back((*it)[2]);
      }
      std::string expected;
      int64_t common = 0, uncommon = 0;
      for (const auto& w : seen) {
        REQUIRE((count[w] == 5 || count[w] == 1));
        if (count[w] == 5) {
          ++common;
          expected += (expected.empty() ? "" : " ") + w;
        } else {
          ++uncommon;
        }
      }
      REQUIRE(common == 4);
      REQUIRE(uncommon >= 1);
      if (L == 1800) REQUIRE(uncommon > 60);  // the uncommon set grows with the length
      REQUIRE(s.substr(s.size() - expected.size()) == expected);
      REQUIRE(s.substr(s.size() - expected.size() - 2, 2) == ": ");
      check_answer_scored(b, r, expected.size());
    }
  }
  CHECK_THAT(task_error("task: {name: ruler_cwe, seq_len: 300}"),
             Catch::Contains("task.seq_len: must be >= ") &&
                 Catch::Contains("10 common words 6 times each"));
  CHECK_THAT(task_error("task: {name: ruler_cwe, common_repeats: 2, uncommon_repeats: 2}"),
             Catch::Contains("task.common_repeats: must be in (2, 1000]"));
}

TEST_CASE("ruler_fwe: ranks 2 to 4 of a Zeta(2) text, most frequent first", "[job][tasks]") {
  auto t = make_task("task: {name: ruler_fwe, seq_len: 1024}");
  t->prepare({1024, 2048});
  for (const int64_t L : {1024, 2048}) {
    const Batch b = L == 1024 ? t->train_batch(0, 8, 3) : t->eval_set(L, 8, 3);
    for (int64_t r = 0; r < 8; ++r) {
      const std::string s = row_text(b.tokens[r]);
      INFO(s);
      REQUIRE(static_cast<int64_t>(s.size()) == L);
      const size_t question = s.find("\nQuestion: Do not provide any explanation.");
      REQUIRE(question != std::string::npos);
      const size_t start = s.find("coded words.\n") + 13;
      std::map<std::string, int64_t> count;
      int64_t n = 0;
      std::istringstream words(s.substr(start, question - start));
      for (std::string w; words >> w; ++n) ++count[w];
      // Zeta(2): the word of rank k appears floor(n / (k^2 zeta(2))) times; rank 1 is "...".
      std::vector<std::pair<int64_t, std::string>> by_count;
      for (const auto& [w, c] : count) by_count.emplace_back(c, w);
      std::sort(by_count.rbegin(), by_count.rend());
      REQUIRE(by_count[0].second == "...");
      // Some whole N gives every count: rank k's count c bounds N to [c k² ζ, (c+1) k² ζ), and
      // the next rank's count 0 to N < (K+1)² ζ.
      const double zeta2 = 1.6449340668482264;
      double lo = 0, hi = 1e18;
      for (size_t k = 0; k < by_count.size(); ++k) {
        const double k2 = double((k + 1) * (k + 1));
        lo = std::max(lo, double(by_count[k].first) * k2 * zeta2);
        hi = std::min(hi, double(by_count[k].first + 1) * k2 * zeta2);
      }
      const double next = double((by_count.size() + 1) * (by_count.size() + 1));
      hi = std::min(hi, next * zeta2);
      REQUIRE(std::ceil(lo) < hi);
      REQUIRE(n <= std::ceil(lo));                     // the floors drop a little of N
      REQUIRE(by_count[3].first > by_count[4].first);  // ranks 2-4 are well defined
      const std::string expected =
          by_count[1].second + " " + by_count[2].second + " " + by_count[3].second;
      REQUIRE(s.substr(s.size() - expected.size()) == expected);
      check_answer_scored(b, r, expected.size());
    }
  }
  CHECK_THAT(task_error("task: {name: ruler_fwe, seq_len: 300}"),
             Catch::Contains("task.seq_len: length 300 is too short"));
}

}  // namespace ruler_tasks_test
