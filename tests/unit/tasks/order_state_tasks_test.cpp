// The order-and-state tasks (flip_flop, word_problem, algorithmic): hand cases from
// reference/order_and_state.md §11, each example checked by an independent re-derivation of its
// labels, disjoint splits, determinism and the readers' refusals.

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "hybridlab/error.h"
#include "hybridlab/task.h"
#include "support/task_support.h"
#include "tasks/finite_group.h"

using namespace hybridlab;
using hybridlab::test::make_task;
using hybridlab::test::row_text;
using hybridlab::test::row_vec;
using hybridlab::test::task_error;

namespace order_state_tasks_test {
namespace {

void check_splits(Task& t, int64_t length) {
  const Batch ev = t.eval_set(length, 32, 7);
  REQUIRE(ev.tokens.size(1) == length);
  REQUIRE((split_bucket(ev.tokens) == 0).all().item<bool>());
  std::set<std::vector<int64_t>> eval_rows;
  for (int64_t i = 0; i < ev.tokens.size(0); ++i) eval_rows.insert(row_vec(ev.tokens[i]));
  for (int64_t step = 0; step < 10; ++step) {
    const Batch b = t.train_batch(step, 16, 7);
    REQUIRE((split_bucket(b.tokens) != 0).all().item<bool>());
    for (int64_t i = 0; i < b.tokens.size(0); ++i)
      REQUIRE(eval_rows.count(row_vec(b.tokens[i])) == 0);
  }
  const Batch a = t.train_batch(3, 4, 11), a2 = t.train_batch(3, 4, 11);
  REQUIRE(torch::equal(a.tokens, a2.tokens));
  REQUIRE(torch::equal(a.targets, a2.targets));
  REQUIRE_FALSE(torch::equal(a.tokens, t.train_batch(4, 4, 11).tokens));
}

// Flip-flop labels re-derived by walking the row: the bit after each read equals the last write,
// and exactly the read positions are scored with that bit.
void check_flip_flop_row(const std::vector<int64_t>& seq, const std::vector<int64_t>& tgt) {
  REQUIRE(seq[0] == 2);               // starts with w
  REQUIRE(seq[seq.size() - 2] == 3);  // ends with a read
  int64_t memory = -1;
  for (size_t t = 0; t + 1 < seq.size(); t += 2) {
    REQUIRE((seq[t] >= 2 && seq[t] <= 4));
    REQUIRE((seq[t + 1] == 0 || seq[t + 1] == 1));
    REQUIRE(tgt[t + 1] == kIgnoreIndex);
    if (seq[t] == 2) memory = seq[t + 1];
    if (seq[t] == 3) {
      REQUIRE(seq[t + 1] == memory);
      REQUIRE(tgt[t] == memory);
    } else {
      REQUIRE(tgt[t] == kIgnoreIndex);
    }
  }
}

// Fraction of instructions that are `i` over the eval set at `length`.
double ignore_share(Task& t, int64_t length) {
  const Batch b = t.eval_set(length, 64, 3);
  return (b.tokens.slice(1, 0, length, 2) == 4).to(torch::kDouble).mean().item<double>();
}

}  // namespace

TEST_CASE("flip_flop: reads scored with the last written bit, the card's splits", "[job][tasks]") {
  auto t = make_task("task: {name: flip_flop, seq_len: 64}");
  t->prepare({64, 256});
  REQUIRE(t->vocab_size() == 5);
  REQUIRE_FALSE(t->higher_is_better());
  check_splits(*t, 256);
  for (const Batch& b : {t->train_batch(0, 16, 1), t->eval_set(256, 16, 1)}) {
    for (int64_t i = 0; i < b.tokens.size(0); ++i)
      check_flip_flop_row(row_vec(b.tokens[i]), row_vec(b.targets[i]));
  }
  // FFL(0.8) in training and in the id split; the sparse and dense splits move only eval. Of the
  // 128 instructions at 256 tokens the first (w) and last (r) are fixed: p · 126/128 are `i`.
  const double free_share = 126.0 / 128;
  CHECK(ignore_share(*t, 256) == Approx(0.8 * free_share).margin(0.02));
  auto sparse = make_task("task: {name: flip_flop, seq_len: 64, eval_split: sparse}");
  auto dense = make_task("task: {name: flip_flop, seq_len: 64, eval_split: dense}");
  CHECK(ignore_share(*sparse, 256) == Approx(0.98 * free_share).margin(0.005));
  CHECK(ignore_share(*dense, 256) == Approx(0.1 * free_share).margin(0.02));
  REQUIRE(torch::equal(sparse->train_batch(2, 8, 5).tokens, t->train_batch(2, 8, 5).tokens));
  // The reference's hand case: after `w 1 r 1 w 0 i 1`, the next read is followed by 0.
  const std::vector<int64_t> hand = {2, 1, 3, 1, 2, 0, 4, 1, 3, 0};
  std::vector<int64_t> tgt(hand.size(), kIgnoreIndex);
  tgt[2] = 1;
  tgt[8] = 0;
  check_flip_flop_row(hand, tgt);
}

TEST_CASE("flip_flop: error rate is the share of wrong reads", "[job][tasks]") {
  auto t = make_task("task: {name: flip_flop, seq_len: 8}");
  ScoreSums s;
  // Two rows of 8; reads at positions 2 and 6 in row 0 (right, wrong), 6 in row 1 (right).
  torch::Tensor targets = torch::full({2, 8}, kIgnoreIndex, torch::kLong);
  targets[0][2] = 1;
  targets[0][6] = 0;
  targets[1][6] = 1;
  torch::Tensor logits = torch::zeros({2, 8, 5});
  logits[0][2][1] = 5;
  logits[0][6][1] = 5;  // wrong: predicts 1 where 0 is written
  logits[1][6][1] = 5;
  score_batch(logits, targets, s, false);
  const auto m = t->metrics(s);
  CHECK(m.at("error_rate") == Approx(1.0 / 3));
  CHECK(m.at("sequence_accuracy") == Approx(0.5));
}

TEST_CASE("finite groups: S3 composition order and tables of S5, A5, Z_m", "[job][tasks]") {
  const tasks::FiniteGroup s3 = tasks::make_group("S3");
  REQUIRE(s3.order == 6);
  REQUIRE(s3.permutations[0] == std::vector<int>{0, 1, 2});
  // The reference's pin, 1-based: a = (1 2) = [2,1,3], b = (2 3) = [1,3,2];
  // "a then b" = [3,1,2], "b then a" = [2,3,1].
  auto index_of = [&](std::vector<int> p) {
    for (int& x : p) --x;
    return static_cast<int32_t>(std::find(s3.permutations.begin(), s3.permutations.end(), p) -
                                s3.permutations.begin());
  };
  const int32_t a = index_of({2, 1, 3}), b = index_of({1, 3, 2});
  CHECK(s3.then(a, b) == index_of({3, 1, 2}));
  CHECK(s3.then(b, a) == index_of({2, 3, 1}));
  CHECK(tasks::make_group("S5").order == 120);
  CHECK(tasks::make_group("A5").order == 60);
  CHECK(tasks::make_group("A4").order == 12);
  const tasks::FiniteGroup z5 = tasks::make_group("Z5");
  CHECK(z5.then(3, 4) == 2);
  CHECK(tasks::make_group("parity").order == 2);
  for (const char* bad : {"", "S", "S2", "S7", "A3", "Z1", "Z01", "Q8", "z5", "S3x"})
    CHECK(tasks::make_group(bad).order == 0);
  // A group: identity, closure and an inverse for every element (the table is a Latin square).
  for (const char* name : {"A5", "S4", "Z7"}) {
    const tasks::FiniteGroup g = tasks::make_group(name);
    for (int32_t x = 0; x < g.order; ++x) {
      REQUIRE(g.then(0, x) == x);
      REQUIRE(g.then(x, 0) == x);
      std::set<int32_t> row;
      for (int32_t y = 0; y < g.order; ++y) row.insert(g.then(x, y));
      REQUIRE(static_cast<int64_t>(row.size()) == g.order);
    }
  }
}

TEST_CASE("word_problem: the running product at every position, or final only", "[job][tasks]") {
  auto t = make_task("task: {name: word_problem, group: S3, seq_len: 16}");
  t->prepare({16, 64});
  REQUIRE(t->vocab_size() == 8);
  REQUIRE(t->position_accuracy_curve());
  check_splits(*t, 64);
  const tasks::FiniteGroup g = tasks::make_group("S3");
  const Batch b = t->eval_set(64, 8, 2);
  for (int64_t i = 0; i < 8; ++i) {
    const auto seq = row_vec(b.tokens[i]), tgt = row_vec(b.targets[i]);
    REQUIRE(seq[0] == 6);  // BOS
    REQUIRE(tgt[0] == kIgnoreIndex);
    // Re-derived through the permutations themselves, not the table.
    std::vector<int> state = {0, 1, 2};
    for (size_t p = 1; p < seq.size(); ++p) {
      const auto& x = g.permutations[static_cast<size_t>(seq[p])];
      std::vector<int> next(3);
      for (int k = 0; k < 3; ++k) next[static_cast<size_t>(k)] = x[static_cast<size_t>(state[k])];
      state = next;
      REQUIRE(g.permutations[static_cast<size_t>(tgt[p])] == state);
    }
  }
  // Parity: the label is the number of 1s so far, mod 2 (the reference's bits [1,0,1,1] -> 1).
  auto par =
      make_task("task: {name: word_problem, group: parity, seq_len: 32, supervision: final}");
  const Batch pb = par->train_batch(0, 64, 3);
  std::set<int64_t> lengths;
  for (int64_t i = 0; i < 64; ++i) {
    const auto seq = row_vec(pb.tokens[i]), tgt = row_vec(pb.targets[i]);
    int64_t ones = 0, scored = 0, last = 0;
    for (size_t p = 1; p < seq.size(); ++p) {
      if (seq[p] == 3) break;  // PAD
      ones += seq[p];
      last = static_cast<int64_t>(p);
    }
    for (size_t p = 0; p < seq.size(); ++p) {
      if (tgt[p] == kIgnoreIndex) continue;
      ++scored;
      REQUIRE(static_cast<int64_t>(p) == last);
      REQUIRE(tgt[p] == ones % 2);
    }
    REQUIRE(scored == 1);
    lengths.insert(last);
  }
  CHECK(lengths.size() > 10);  // training words of many lengths
  const Batch pe = par->eval_set(128, 8, 3);
  REQUIRE((pe.targets.select(1, 127) != kIgnoreIndex).all().item<bool>());
  REQUIRE((pe.targets.slice(1, 0, 127) == kIgnoreIndex).all().item<bool>());
}

TEST_CASE("word_problem: final accuracy and the per-position accuracy curve", "[job][tasks]") {
  auto t = make_task("task: {name: word_problem, group: Z5, seq_len: 4}");
  torch::Tensor targets = torch::tensor({{-100, 1, 2, 3}, {-100, 4, 0, 0}}, torch::kLong);
  torch::Tensor logits = torch::zeros({2, 4, 7});
  logits[0][1][1] = 1;  // right
  logits[0][2][2] = 1;  // right
  logits[0][3][0] = 1;  // wrong (3 expected)
  logits[1][1][4] = 1;  // right
  logits[1][2][1] = 1;  // wrong
  logits[1][3][0] = 1;  // right
  ScoreSums s;
  score_batch(logits, targets, s, true);
  REQUIRE(s.position_correct == std::vector<int64_t>{0, 2, 1, 1});
  REQUIRE(s.position_count == std::vector<int64_t>{0, 2, 2, 2});
  const auto m = t->metrics(s);
  CHECK(m.at("final_accuracy") == Approx(0.5));
  CHECK(m.at("accuracy") == Approx(4.0 / 6));
  CHECK(m.at("sequence_accuracy") == Approx(0.0));
  CHECK(t->chance_levels().at("final_accuracy") == Approx(0.2));
}

TEST_CASE("algorithmic: copy, reverse, sort and addition, only the answer scored", "[job][tasks]") {
  for (const char* op : {"copy", "reverse", "sort", "addition"}) {
    INFO(op);
    auto t = make_task(fmt::format("task: {{name: algorithmic, op: {}, seq_len: 24}}", op));
    t->prepare({24, 48});
    check_splits(*t, 48);
    const bool add = std::string(op) == "addition";
    const int64_t A = add ? 10 : 16, bos = A, sep = A + 1, plus = A + 2, eos = A + 3, pad = A + 4;
    REQUIRE(t->vocab_size() == A + 5);
    for (const Batch& b : {t->train_batch(1, 16, 4), t->eval_set(48, 16, 4)}) {
      const int64_t L = b.tokens.size(1), nmax = add ? (L - 5) / 3 : (L - 3) / 2;
      for (int64_t i = 0; i < b.tokens.size(0); ++i) {
        const auto seq = row_vec(b.tokens[i]), tgt = row_vec(b.targets[i]);
        REQUIRE(seq[0] == bos);
        const size_t s = static_cast<size_t>(std::find(seq.begin(), seq.end(), sep) - seq.begin());
        const size_t e = static_cast<size_t>(std::find(seq.begin(), seq.end(), eos) - seq.begin());
        REQUIRE(s < e);
        REQUIRE(e < seq.size());
        std::vector<int64_t> prompt(seq.begin() + 1, seq.begin() + long(s));
        const std::vector<int64_t> answer(seq.begin() + long(s) + 1, seq.begin() + long(e));
        std::vector<int64_t> want;
        if (add) {
          const size_t n = (prompt.size() - 1) / 2;
          REQUIRE(prompt[n] == plus);
          int64_t a = 0, c = 0;
          for (size_t k = 0; k < n; ++k) a = a * 10 + prompt[k];
          for (size_t k = n + 1; k < prompt.size(); ++k) c = c * 10 + prompt[k];
          int64_t sum = a + c;
          want.assign(n + 1, 0);
          for (size_t k = n + 1; k-- > 0; sum /= 10) want[k] = sum % 10;
          REQUIRE(int64_t(n) <= nmax);
          if (L == 48) REQUIRE(int64_t(n) > nmax / 2);  // eval: the upper half of the sizes
        } else {
          want = prompt;
          if (std::string(op) == "reverse") std::reverse(want.begin(), want.end());
          if (std::string(op) == "sort") std::sort(want.begin(), want.end());
          if (L == 48) REQUIRE(int64_t(prompt.size()) > nmax / 2);
        }
        REQUIRE(answer == want);
        for (size_t p = 0; p < seq.size(); ++p) {
          const bool scored = p + 1 > s && p < e;  // predicts answer[0..] and EOS
          REQUIRE(tgt[p] == (scored ? seq[p + 1] : kIgnoreIndex));
          if (p > e) REQUIRE(seq[p] == pad);
        }
      }
    }
  }
}

TEST_CASE("order-and-state tasks refuse bad settings at their key", "[job][tasks]") {
  CHECK_THAT(task_error("task: {name: flip_flop, p_ignore: 1.5}"),
             Catch::Contains("exp.yaml:1") && Catch::Contains("task.p_ignore") &&
                 Catch::Contains("[0, 1]"));
  CHECK_THAT(task_error("task: {name: flip_flop, eval_split: sparce}"),
             Catch::Contains("task.eval_split") && Catch::Contains("'sparce' is not"));
  CHECK_THAT(task_error("task: {name: flip_flop, seq_len: 7}"),
             Catch::Contains("task.seq_len") && Catch::Contains("even"));
  CHECK_THAT(task_error("task: {name: word_problem, group: S9}"),
             Catch::Contains("task.group") && Catch::Contains("'S9' is not a group"));
  CHECK_THAT(task_error("task: {name: word_problem, supervision: last}"),
             Catch::Contains("task.supervision"));
  CHECK_THAT(task_error("task: {name: word_problem, seq_len: 2}"), Catch::Contains("task.seq_len"));
  CHECK_THAT(task_error("task: {name: algorithmic, op: multiply}"),
             Catch::Contains("task.op") && Catch::Contains("copy, reverse, sort or addition"));
  CHECK_THAT(task_error("task: {name: algorithmic, op: addition, alphabet: 12}"),
             Catch::Contains("task.alphabet") && Catch::Contains("10 decimal digits"));
  CHECK_THAT(task_error("task: {name: algorithmic, op: addition, seq_len: 7}"),
             Catch::Contains("task.seq_len") && Catch::Contains(">= 8"));
  CHECK_THAT(task_error("task: {name: algorithmic, alphabet: 1}"),
             Catch::Contains("task.alphabet"));
  // Lengths an eval cannot fill are named by length_problem (read_experiment reports them).
  CHECK_THAT(make_task("task: {name: flip_flop, seq_len: 8}")->length_problem(9),
             Catch::Contains("even"));
  CHECK(make_task("task: {name: algorithmic, op: addition, seq_len: 8}")->length_problem(7) != "");
}

}  // namespace order_state_tasks_test

namespace order_state_tasks_test {
namespace {
// MAD in-context recall re-derived by walking a row: keys from [0, half), values from
// [half, 2 half) or noise pairs from [2 half, V); a key keeps its value; the last pair repeats a
// shown key; eval scores exactly the keys shown before, with their values.
void check_recall_row(const std::vector<int64_t>& seq, const std::vector<int64_t>& tgt,
                      int64_t half, int64_t V, bool eval) {
  std::map<int64_t, int64_t> value_of;
  for (size_t i = 0; i + 1 < seq.size(); i += 2) {
    const int64_t k = seq[i], v = seq[i + 1];
    if (k >= 2 * half) {  // noise pair
      REQUIRE(v >= 2 * half);
      REQUIRE(v < V);
      if (eval) REQUIRE((tgt[i] == kIgnoreIndex && tgt[i + 1] == kIgnoreIndex));
      continue;
    }
    REQUIRE(k < half);
    REQUIRE((v >= half && v < 2 * half));
    const bool seen = value_of.count(k) > 0;
    if (seen) REQUIRE(value_of[k] == v);
    if (i + 2 == seq.size()) REQUIRE(seen);  // the probe
    value_of[k] = v;
    if (eval) {
      REQUIRE(tgt[i] == (seen ? v : kIgnoreIndex));
      REQUIRE(tgt[i + 1] == kIgnoreIndex);
    } else {
      REQUIRE(tgt[i] == v);
      if (i + 2 < seq.size()) REQUIRE(tgt[i + 1] == seq[i + 2]);
    }
  }
}
}  // namespace

TEST_CASE("in_context_recall and noisy_recall: MAD's multi-query layout and scoring",
          "[job][tasks]") {
  auto t = make_task("task: {name: in_context_recall}");
  REQUIRE(t->vocab_size() == 16);
  REQUIRE(t->seq_len() == 128);
  t->prepare({128, 256});
  check_splits(*t, 256);
  for (const bool eval : {false, true}) {
    const Batch b = eval ? t->eval_set(256, 8, 1) : t->train_batch(0, 8, 1);
    for (int64_t i = 0; i < 8; ++i)
      check_recall_row(row_vec(b.tokens[i]), row_vec(b.targets[i]), 8, 16, eval);
  }
  auto noisy = make_task("task: {name: noisy_recall}");
  REQUIRE(noisy->vocab_size() == 32);
  const Batch nb = noisy->eval_set(128, 64, 2);
  double noise_pairs = 0;
  for (int64_t i = 0; i < 64; ++i) {
    const auto seq = row_vec(nb.tokens[i]);
    check_recall_row(seq, row_vec(nb.targets[i]), 8, 32, true);
    for (size_t p = 0; p < seq.size(); p += 2) noise_pairs += seq[p] >= 16;
  }
  // frac_noise 0.2 of the 62 pairs that may be noise (not the probe, not the one kept).
  CHECK(noise_pairs / (64.0 * 64) == Approx(0.2 * 62 / 64).margin(0.02));
  CHECK(t->chance_levels().at("accuracy") == Approx(1.0 / 8));
}

TEST_CASE("memorization: one fixed map, the value scored at each insert token", "[job][tasks]") {
  auto t = make_task("task: {name: memorization}");
  auto again = make_task("task: {name: memorization}");
  std::map<int64_t, int64_t> value_of;
  for (auto* task : {t.get(), again.get()}) {
    for (const Batch& b : {task->train_batch(0, 16, 3), task->eval_set(32, 16, 4)}) {
      for (int64_t i = 0; i < 16; ++i) {
        const auto seq = row_vec(b.tokens[i]), tgt = row_vec(b.targets[i]);
        for (size_t p = 0; p < seq.size(); p += 2) {
          REQUIRE((seq[p] >= 0 && seq[p] < 127));
          REQUIRE(seq[p + 1] == 255);
          REQUIRE(tgt[p] == kIgnoreIndex);
          REQUIRE((tgt[p + 1] >= 127 && tgt[p + 1] < 255));
          auto [it, fresh] = value_of.emplace(seq[p], tgt[p + 1]);
          REQUIRE(it->second == tgt[p + 1]);  // the same map in every row, batch and task
        }
      }
    }
  }
  std::set<int64_t> values;
  for (const auto& [k, v] : value_of) values.insert(v);
  REQUIRE(values.size() == value_of.size());  // no two keys share a value
  CHECK_THAT(task_error("task: {name: noisy_recall, noise_vocab_size: 0}"),
             Catch::Contains("task.frac_noise") && Catch::Contains("noise_vocab_size > 0"));
  CHECK_THAT(task_error("task: {name: in_context_recall, seq_len: 127}"),
             Catch::Contains("task.seq_len") && Catch::Contains("even"));
  CHECK_THAT(task_error("task: {name: in_context_recall, vocab_size: 3}"),
             Catch::Contains("task.vocab_size"));
  CHECK_THAT(task_error("task: {name: memorization, seq_len: 31}"),
             Catch::Contains("task.seq_len"));
}

TEST_CASE("compression: random symbols, the compression token last, every input its own target",
          "[job][tasks]") {
  auto t = make_task("task: {name: compression}");  // MAD: vocab 16, seq 32
  REQUIRE(t->vocab_size() == 16);
  REQUIRE(t->seq_len() == 32);
  REQUIRE(t->autoencoder());
  REQUIRE_FALSE(make_task("task: {name: memorization}")->autoencoder());
  check_splits(*t, 32);
  std::set<int64_t> seen;
  for (const Batch& b : {t->train_batch(0, 16, 3), t->eval_set(48, 16, 4)}) {
    REQUIRE(torch::equal(b.tokens, b.targets));  // the target at t is the input at t
    for (int64_t i = 0; i < b.tokens.size(0); ++i) {
      const auto seq = row_vec(b.tokens[i]);
      REQUIRE(seq.back() == 15);
      for (size_t p = 0; p + 1 < seq.size(); ++p) {
        REQUIRE((seq[p] >= 0 && seq[p] < 15));
        seen.insert(seq[p]);
      }
    }
  }
  REQUIRE(seen.size() == 15);  // every symbol drawn
  // Chance at L = 32: 31 symbols guessed at 1/15, the compression token always right.
  CHECK(t->chance_levels().at("accuracy") == Approx((31.0 / 15 + 1) / 32));
  CHECK_THAT(task_error("task: {name: compression, vocab_size: 2}"),
             Catch::Contains("task.vocab_size") && Catch::Contains(">= 3"));
  CHECK_THAT(task_error("task: {name: compression, seq_len: 1}"), Catch::Contains("task.seq_len"));
}

}  // namespace order_state_tasks_test
