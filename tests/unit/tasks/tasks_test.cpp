// Task generators: layout, scored positions, determinism by seed, disjoint train/eval splits.

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "hybridlab/error.h"
#include "hybridlab/task.h"
#include "support/job_support.h"
#include "support/task_support.h"
#include "tasks/text_corpus.h"

using namespace hybridlab;
using hybridlab::test::make_task;
using hybridlab::test::row_text;
using hybridlab::test::row_vec;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace tasks_test {
namespace {

// Every row of `eval` is in the eval bucket, every train row outside it, and no row is shared.
void check_disjoint(Task& t, int64_t length) {
  const Batch ev = t.eval_set(length, 32, 7);
  REQUIRE((split_bucket(ev.tokens) == 0).all().item<bool>());
  std::set<std::vector<int64_t>> eval_rows;
  for (int64_t i = 0; i < ev.tokens.size(0); ++i) eval_rows.insert(row_vec(ev.tokens[i]));
  for (int64_t step = 0; step < 20; ++step) {
    const Batch b = t.train_batch(step, 16, 7);
    REQUIRE((split_bucket(b.tokens) != 0).all().item<bool>());
    for (int64_t i = 0; i < b.tokens.size(0); ++i)
      REQUIRE(eval_rows.count(row_vec(b.tokens[i])) == 0);
  }
}

void check_deterministic(Task& t) {
  const Batch a = t.train_batch(3, 4, 11), b = t.train_batch(3, 4, 11), c = t.train_batch(4, 4, 11);
  const Batch d = t.train_batch(3, 4, 12);
  REQUIRE(torch::equal(a.tokens, b.tokens));
  REQUIRE(torch::equal(a.targets, b.targets));
  REQUIRE_FALSE(torch::equal(a.tokens, c.tokens));
  REQUIRE_FALSE(torch::equal(a.tokens, d.tokens));
  REQUIRE(torch::equal(t.eval_set(t.seq_len(), 8, 5).tokens, t.eval_set(t.seq_len(), 8, 5).tokens));
}

// The ConfigError that reading `yaml`'s task section records (empty when it records none).
std::string task_error(const std::string& yaml) {
  Config cfg = Config::parse(yaml, "exp.yaml");
  REQUIRE(read_task(cfg.section("task"), {}) == nullptr);
  try {
    cfg.raise_errors();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("mqar: Zoology layout, only query keys scored with their values", "[job][tasks]") {
  auto t = make_task("task: {name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}");
  t->prepare({32, 64});
  const Batch b = t->train_batch(0, 16, 1);
  REQUIRE(b.tokens.sizes() == torch::IntArrayRef({16, 32}));
  const int64_t k = 4;
  for (int64_t r = 0; r < 16; ++r) {
    const auto tok = row_vec(b.tokens[r]), tgt = row_vec(b.targets[r]);
    std::map<int64_t, int64_t> kv;
    for (int64_t i = 0; i < k; ++i) {
      const int64_t key = tok[2 * i], value = tok[2 * i + 1];
      REQUIRE(key >= 1);
      REQUIRE(key < 32);
      REQUIRE(value >= 32);
      REQUIRE(value < 64);
      REQUIRE(kv.count(key) == 0);  // distinct keys
      kv[key] = value;
    }
    std::set<int64_t> values;
    for (auto& [key, v] : kv) values.insert(v);
    REQUIRE(values.size() == static_cast<size_t>(k));  // distinct values
    std::set<int64_t> queried;
    for (int64_t p = 0; p < 32; ++p) {
      if (tgt[p] == kIgnoreIndex) continue;
      REQUIRE(p >= 2 * k);
      REQUIRE((p - 2 * k) % 2 == 0);
      REQUIRE(kv.count(tok[p]) == 1);
      REQUIRE(tgt[p] == kv[tok[p]]);
      queried.insert(tok[p]);
    }
    REQUIRE(queried.size() == static_cast<size_t>(k));  // every key queried exactly once
  }
  check_deterministic(*t);
  check_disjoint(*t, 32);
  // Longer eval lengths keep the layout: k scored positions.
  const Batch e = t->eval_set(64, 8, 3);
  REQUIRE(e.tokens.size(1) == 64);
  REQUIRE(((e.targets != kIgnoreIndex).sum(1) == k).all().item<bool>());
  REQUIRE_THROWS_AS(t->prepare({14}), ConfigError);  // < 4k
  REQUIRE_THROWS_AS(t->prepare({33}), ConfigError);  // odd
}

TEST_CASE("mqar: values appear only in the key-value block, never after a query", "[job][tasks]") {
  // zoology multiquery_ar.py: the query region holds the query keys and filler only; the value of
  // a query is its label. Without random filler every non-query slot there is 0.
  auto t = make_task(
      "task: {name: mqar, seq_len: 64, vocab_size: 64, num_kv_pairs: 4, random_non_queries: "
      "false}");
  t->prepare({64});
  const Batch b = t->train_batch(0, 32, 4);
  const int64_t k = 4;
  for (int64_t r = 0; r < 32; ++r) {
    const auto tok = row_vec(b.tokens[r]), tgt = row_vec(b.targets[r]);
    int64_t queries = 0;
    for (int64_t p = 2 * k; p < 64; ++p) {
      if (tgt[p] != kIgnoreIndex) {
        ++queries;
        REQUIRE(tok[p] >= 1);
        REQUIRE(tok[p] < 32);  // a key
      } else {
        REQUIRE(tok[p] == 0);  // filler, also right after a query
      }
    }
    REQUIRE(queries == k);
    for (int64_t p = 0; p < 64; ++p) {
      if (tok[p] >= 32) REQUIRE(p < 2 * k);  // values only in the key-value block
    }
  }
}

TEST_CASE("mqar: power_a concentrates queries near the key-value block", "[job][tasks]") {
  // P(g) ∝ (g+1)^(a-1): with a = 0.01 the first gap is far likelier than the last; with a = 1 the
  // gaps are uniform. Mean query gap over many rows, compared with the exact expectation of the
  // first draw of a multinomial without replacement is hard; compare the two settings instead.
  auto skewed = make_task(
      "task: {name: mqar, seq_len: 256, vocab_size: 512, num_kv_pairs: 2, power_a: 0.01}");
  auto uniform =
      make_task("task: {name: mqar, seq_len: 256, vocab_size: 512, num_kv_pairs: 2, power_a: 1.0}");
  auto mean_pos = [](Task& t) {
    const Batch b = t.train_batch(0, 256, 5);
    const torch::Tensor pos = (b.targets != kIgnoreIndex).nonzero().select(1, 1).to(torch::kDouble);
    return pos.mean().item<double>();
  };
  const double s = mean_pos(*skewed), u = mean_pos(*uniform);
  // Uniform gaps over 126 slots: mean position ≈ 4 + 2*62.5 = 129; skewed: far lower.
  REQUIRE(u == Approx(129).margin(8));
  REQUIRE(s < 60);
}

TEST_CASE("passkey: landmark template, key digits scored, uniform depth", "[job][tasks]") {
  auto t = make_task("task: {name: passkey, seq_len: 300, intro: false}");
  t->prepare({300, 600});
  const Batch b = t->train_batch(0, 64, 2);
  double depth_sum = 0;
  for (int64_t r = 0; r < 64; ++r) {
    const std::string s = row_text(b.tokens[r]);
    REQUIRE(s.size() == 300u);
    const size_t q = s.rfind("What is the pass key? The pass key is ");
    REQUIRE(q != std::string::npos);
    const std::string key = s.substr(q + 38);
    REQUIRE(!key.empty());
    REQUIRE(key.find_first_not_of("0123456789") == std::string::npos);
    const long k = std::stol(key);
    REQUIRE(k >= 1);
    REQUIRE(k <= 50000);
    const std::string needle =
        "The pass key is " + key + ". Remember it. " + key + " is the pass key.";
    const size_t at = s.find(needle);
    REQUIRE(at != std::string::npos);
    // Bytes besides filler: "\n" needle "\n" ... "\n" question " " key; the prefix is at - 1 bytes.
    const size_t budget = 300 - (needle.size() + 3 + 37 + 1 + key.size());
    depth_sum += static_cast<double>(at - 1) / static_cast<double>(budget);
    // Scored: exactly the key's digits, predicted from the position before each.
    const auto tgt = row_vec(b.targets[r]);
    int64_t scored = 0;
    for (int64_t p = 0; p < 300; ++p) {
      if (tgt[p] == kIgnoreIndex) continue;
      ++scored;
      REQUIRE(p + 1 >= static_cast<int64_t>(300 - key.size()));
      REQUIRE(tgt[p] == static_cast<unsigned char>(s[p + 1]));
    }
    REQUIRE(scored == static_cast<int64_t>(key.size()));
  }
  REQUIRE(depth_sum / 64 == Approx(0.5).margin(0.12));
  check_deterministic(*t);
  check_disjoint(*t, 300);
  REQUIRE_THROWS_AS(t->prepare({40}), ConfigError);
}

TEST_CASE("copy: $ s | s . layout, only the copy scored, longer strings at eval", "[job][tasks]") {
  auto t = make_task("task: {name: copy, seq_len: 41, alphabet: 4}");
  t->prepare({41, 81});
  const Batch b = t->train_batch(0, 32, 3);
  for (int64_t r = 0; r < 32; ++r) {
    const std::string s = row_text(b.tokens[r]);
    REQUIRE(s[0] == '$');
    const size_t bar = s.find('|');
    REQUIRE(bar != std::string::npos);
    const std::string src = s.substr(1, bar - 1);
    REQUIRE(!src.empty());
    REQUIRE(src.find_first_not_of("abcd") == std::string::npos);
    REQUIRE(s.substr(bar + 1, src.size()) == src);
    REQUIRE(s[bar + 1 + src.size()] == '.');
    const auto tgt = row_vec(b.targets[r]);
    int64_t scored = 0;
    for (int64_t p = 0; p < 41; ++p) {
      if (tgt[p] == kIgnoreIndex) continue;
      REQUIRE(p >= static_cast<int64_t>(bar));
      REQUIRE(p < static_cast<int64_t>(bar + src.size()));
      REQUIRE(tgt[p] == src[p - bar]);
      ++scored;
    }
    REQUIRE(scored == static_cast<int64_t>(src.size()));
  }
  const Batch e = t->eval_set(81, 16, 1);
  const torch::Tensor n = (e.targets != kIgnoreIndex).sum(1);
  REQUIRE((n >= 20).all().item<bool>());  // (81-3)/4+1
  REQUIRE((n <= 39).all().item<bool>());  // (81-3)/2
  check_deterministic(*t);
  check_disjoint(*t, 41);
}

TEST_CASE("selective_copy: data tokens among noise, emitted in order after the copy token",
          "[job][tasks]") {
  auto t = make_task("task: {name: selective_copy, seq_len: 40, vocab_size: 8, num_tokens: 4}");
  t->prepare({40, 80});
  const Batch b = t->train_batch(0, 16, 4);
  for (int64_t r = 0; r < 16; ++r) {
    const auto tok = row_vec(b.tokens[r]), tgt = row_vec(b.targets[r]);
    std::vector<int64_t> data;
    for (int64_t p = 0; p < 35; ++p) {
      if (tok[p] != 0) data.push_back(tok[p]);
      REQUIRE(tok[p] != 7);
    }
    REQUIRE(data.size() == 4u);
    REQUIRE(tok[35] == 7);  // copy token at L - n - 1
    for (int64_t i = 0; i < 4; ++i) {
      REQUIRE(tgt[35 + i] == data[i]);
      REQUIRE(tok[36 + i] == data[i]);
    }
    for (int64_t p = 0; p < 35; ++p) REQUIRE(tgt[p] == kIgnoreIndex);
    REQUIRE(tgt[39] == kIgnoreIndex);
  }
  check_deterministic(*t);
  check_disjoint(*t, 40);
}

TEST_CASE("niah: needles in filler, the asked key's value scored", "[job][tasks]") {
  auto t = make_task("task: {name: niah, seq_len: 700, num_needles: 3, intro: false}");
  t->prepare({700});
  const Batch b = t->train_batch(0, 16, 5);
  for (int64_t r = 0; r < 16; ++r) {
    const std::string s = row_text(b.tokens[r]);
    REQUIRE(s.size() == 700u);
    std::map<std::string, std::string> needles;
    size_t at = 0;
    const std::string marker = "One of the special magic numbers for ";
    while ((at = s.find(marker, at)) != std::string::npos) {
      const size_t is = s.find(" is: ", at);
      const std::string key = s.substr(at + marker.size(), is - at - marker.size());
      needles[key] = s.substr(is + 5, 7);
      at = is;
    }
    REQUIRE(needles.size() == 3u);
    const size_t q = s.rfind("What is the special magic number for ");
    REQUIRE(q != std::string::npos);
    const std::string asked = s.substr(q + 37, s.find(' ', q + 37) - q - 37);
    REQUIRE(needles.count(asked) == 1);
    REQUIRE(s.substr(693) == needles[asked]);
    const auto tgt = row_vec(b.targets[r]);
    for (int64_t p = 0; p < 700; ++p) {
      if (p >= 692 && p < 699) {
        REQUIRE(tgt[p] == static_cast<unsigned char>(s[p + 1]));
      } else {
        REQUIRE(tgt[p] == kIgnoreIndex);
      }
    }
  }
  check_deterministic(*t);
}

TEST_CASE("text: windows inside documents, non-overlapping eval windows, splits by document",
          "[job][tasks]") {
  const std::string dir = std::string(HYBRIDLAB_SOURCE_DIR) + "/tests/fixtures/text_corpus";
  auto t = make_task("task: {name: text, seq_len: 64, path: '" + dir + "'}");
  t->prepare({64, 128});
  auto slurp = [](const std::string& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string harbor = slurp(dir + "/train/harbor.txt"),
                    garden = slurp(dir + "/train/garden.txt");
  const std::string station = slurp(dir + "/validation/station.txt");
  for (int64_t step = 0; step < 5; ++step) {
    const Batch b = t->train_batch(step, 8, 1);
    REQUIRE(b.tokens.sizes() == torch::IntArrayRef({8, 64}));
    for (int64_t r = 0; r < 8; ++r) {
      const std::string w =
          row_text(b.tokens[r]) + static_cast<char>(b.targets[r][63].item<int64_t>());
      REQUIRE(torch::equal(b.tokens[r].slice(0, 1), b.targets[r].slice(0, 0, 63)));
      const bool inside =
          harbor.find(w) != std::string::npos || garden.find(w) != std::string::npos;
      REQUIRE(inside);  // never across documents, never from validation
      REQUIRE(station.find(w) == std::string::npos);
    }
  }
  // Validation: 546 bytes -> (546-1)/128 = 4 windows of 128 at offsets 0,128,256,384.
  const Batch e = t->eval_set(128, 100, 0);
  REQUIRE(e.tokens.size(0) == 4);
  for (int64_t i = 0; i < 4; ++i) REQUIRE(row_text(e.tokens[i]) == station.substr(i * 128, 128));
  // Eval length past the longest validation document names the limit.
  try {
    t->prepare({1024});
    FAIL("expected DataError");
  } catch (const DataError& err) {
    const std::string m = err.what();
    REQUIRE(m.find("546 bytes") != std::string::npos);
    REQUIRE(m.find("document limit") != std::string::npos);
  }
  // Metrics: bits per byte = loss / ln 2, perplexity = exp(loss).
  ScoreSums s;
  s.loss_sum = 2.0;
  s.tokens = 2;
  const auto m = t->metrics(s);
  REQUIRE(m.at("bits_per_byte") == Approx(1.0 / std::log(2.0)));
  REQUIRE(m.at("perplexity") == Approx(std::exp(1.0)));
}

TEST_CASE("text: missing, empty and non-UTF-8 corpora are DataErrors", "[job][tasks]") {
  jobtest::TempDir tmp;
  // Missing default corpus: names the setup step.
  auto missing = make_task("task: {name: text, path: " + tmp.str() + "/data/brown}");
  try {
    missing->prepare({});
    FAIL("expected DataError");
  } catch (const DataError& e) {
    REQUIRE(std::string(e.what()).find("scripts/fetch_brown.sh") != std::string::npos);
  }
  // A relative path names every place looked: the current folder and the experiment's folder.
  auto relative = make_task("task: {name: text, path: no_such_corpus}", tmp.str());
  try {
    relative->prepare({});
    FAIL("expected DataError");
  } catch (const DataError& e) {
    const std::string m = e.what();
    INFO(m);
    REQUIRE(m.find("'" + (std::filesystem::current_path() / "no_such_corpus").string() + "'") !=
            std::string::npos);
    REQUIRE(m.find("'" + (tmp.path / "no_such_corpus").string() + "'") != std::string::npos);
  }
  std::filesystem::create_directories(tmp.path / "empty");
  std::ofstream(tmp.path / "empty" / "a.txt").close();
  auto empty = make_task("task: {name: text, path: " + tmp.str() + "/empty}");
  REQUIRE_THROWS_WITH(empty->prepare({}), Catch::Contains("is empty"));
  std::filesystem::create_directories(tmp.path / "latin1");
  std::ofstream(tmp.path / "latin1" / "a.txt") << "caf\xe9 au lait, and more text here";
  std::ofstream(tmp.path / "latin1" / "b.txt") << "plain ascii text";
  auto bad = make_task("task: {name: text, path: " + tmp.str() + "/latin1}");
  try {
    bad->prepare({});
    FAIL("expected DataError");
  } catch (const DataError& e) {
    const std::string m = e.what();
    REQUIRE(m.find("not UTF-8") != std::string::npos);
    REQUIRE(m.find("offset 3") != std::string::npos);
    REQUIRE(m.find("a.txt") != std::string::npos);
  }
  size_t off = 0;
  REQUIRE(tasks::is_utf8("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", off));
  REQUIRE_FALSE(tasks::is_utf8("\xc0\xaf", off));  // overlong '/'
  REQUIRE(off == 0);
  REQUIRE_FALSE(tasks::is_utf8("ab\xed\xa0\x80", off));  // surrogate
  REQUIRE(off == 2);
}

TEST_CASE("unknown task name lists the valid ones with a suggestion", "[job][tasks]") {
  const std::string m = task_error("task: {name: mqr}");
  REQUIRE(m.find("exp.yaml:1") != std::string::npos);
  REQUIRE(m.find("did you mean 'mqar'") != std::string::npos);
  REQUIRE(m.find("algorithmic, compression, copy, flip_flop, fuzzy_recall, in_context_recall, "
                 "memorization, "
                 "mqar, niah, "
                 "noisy_recall, passkey, ruler_cwe, ruler_fwe, ruler_vt, selective_copy, text, "
                 "word_problem") != std::string::npos);
}

TEST_CASE("an empty task name is an error at its line, not a missing task", "[job][tasks]") {
  // Without this error the experiment reader went on with no task and `config show` crashed.
  const std::string m = task_error("model: {d_model: 8}\ntask: {name: \"\"}");
  REQUIRE(m.find("exp.yaml:2") != std::string::npos);
  REQUIRE(m.find("task.name") != std::string::npos);
  REQUIRE(m.find("empty") != std::string::npos);
  REQUIRE(m.find("algorithmic, compression, copy, flip_flop, fuzzy_recall, in_context_recall, "
                 "memorization, "
                 "mqar, niah, "
                 "noisy_recall, passkey, ruler_cwe, ruler_fwe, ruler_vt, selective_copy, text, "
                 "word_problem") != std::string::npos);
}

TEST_CASE("score_batch: cross-entropy and accuracies against a hand computation", "[job][tasks]") {
  // Two sequences of three positions over a vocabulary of 2.
  const torch::Tensor logits = torch::tensor({0.0f, 1.0f, 2.0f, 0.0f, 0.5f, 0.5f,  //
                                              3.0f, 0.0f, 0.0f, 0.0f, 1.0f, 2.0f})
                                   .reshape({2, 3, 2});
  const torch::Tensor targets =
      torch::tensor({1L, 1L, kIgnoreIndex, 0L, kIgnoreIndex, kIgnoreIndex}).reshape({2, 3});
  ScoreSums s;
  score_batch(logits, targets, s, true);
  auto nll = [](double a, double b, int t) {
    return -((t == 0 ? a : b) - std::log(std::exp(a) + std::exp(b)));
  };
  const double expected = nll(0, 1, 1) + nll(2, 0, 1) + nll(3, 0, 0);
  REQUIRE(s.loss_sum == Approx(expected));
  REQUIRE(s.tokens == 3);
  REQUIRE(s.correct_tokens == 2);  // argmax 1 ok, argmax 0 wrong, argmax 0 ok
  REQUIRE(s.examples == 2);
  REQUIRE(s.correct_examples == 1);
  REQUIRE(s.example_accuracy_sum == Approx(0.5 + 1.0));
  REQUIRE(s.position_count == std::vector<int64_t>{2, 1, 0});
  REQUIRE(s.position_loss_sum[1] == Approx(nll(2, 0, 1)));
}

}  // namespace tasks_test

namespace tasks_test {
using Catch::Matchers::Contains;

TEST_CASE("text packing: rows cross documents, starts marked, the crossing target unscored",
          "[job][tasks][packing]") {
  const std::string dir = std::string(HYBRIDLAB_SOURCE_DIR) + "/tests/fixtures/text_corpus";
  auto slurp = [](const std::string& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string garden = slurp(dir + "/train/garden.txt"),
                    harbor = slurp(dir + "/train/harbor.txt");
  // 600 > the longest train document (562 bytes): only packing can make such rows.
  auto none = make_task("task: {name: text, seq_len: 600, path: '" + dir + "'}");
  REQUIRE_THROWS_AS(none->prepare({64}), DataError);
  auto packed =
      make_task("task: {name: text, seq_len: 600, packing: documents, path: '" + dir + "'}");
  auto concat =
      make_task("task: {name: text, seq_len: 600, packing: concatenated, path: '" + dir + "'}");
  packed->prepare({64});
  concat->prepare({64});
  CHECK_THAT(packed->packed_documents_setting(), Contains("task.packing"));
  CHECK(concat->packed_documents_setting().empty());
  CHECK(none->packed_documents_setting().empty());
  // The train documents end to end, in either order of the corpus.
  const std::string ab = garden + harbor, ba = harbor + garden;
  for (int64_t step = 0; step < 3; ++step) {
    const Batch b = packed->train_batch(step, 4, 7);
    const Batch c = concat->train_batch(step, 4, 7);
    CHECK(torch::equal(b.tokens, c.tokens));
    CHECK(torch::equal(b.targets, c.targets));
    CHECK_FALSE(c.document_starts.defined());
    REQUIRE(b.document_starts.sizes() == torch::IntArrayRef({4, 600}));
    for (int64_t r = 0; r < 4; ++r) {
      const std::string w = row_text(b.tokens[r]);
      // Every 600-byte row crosses from one document into the other.
      const bool garden_first = ab.find(w) != std::string::npos;
      const std::string& stream = garden_first ? ab : ba;
      const int64_t second = static_cast<int64_t>(garden_first ? garden.size() : harbor.size());
      const size_t at = stream.find(w);
      REQUIRE(at != std::string::npos);
      // The second document starts at stream offset `second`; inside this row at second - at.
      const int64_t t = second - static_cast<int64_t>(at);
      const torch::Tensor expect_starts = torch::zeros({600}, torch::kBool);
      if (t > 0 && t < 600) expect_starts[t] = true;
      CHECK(torch::equal(b.document_starts[r], expect_starts));
      for (int64_t j = 0; j < 600; ++j) {
        const int64_t target = b.targets[r][j].item<int64_t>();
        if (j + 1 == t) {
          CHECK(target == kIgnoreIndex);  // the last byte of one document, the first of the next
        } else if (static_cast<size_t>(at + j + 1) < stream.size()) {
          CHECK(target == static_cast<unsigned char>(stream[at + j + 1]));
        }
      }
    }
  }
  // Eval is unchanged by packing: windows inside validation documents.
  auto short_none = make_task("task: {name: text, seq_len: 64, path: '" + dir + "'}");
  CHECK(
      torch::equal(packed->eval_set(128, 100, 0).tokens, short_none->eval_set(128, 100, 0).tokens));
  // A 1-byte train document scores nothing when packed (its only target crosses into the next).
  jobtest::TempDir tmp;
  for (const char* split : {"train", "validation"})
    std::filesystem::create_directories(tmp.path / split);
  std::ofstream(tmp.path / "train" / "a.txt") << "x";
  std::ofstream(tmp.path / "train" / "b.txt") << "a longer train document of many bytes";
  std::ofstream(tmp.path / "validation" / "v.txt") << "a validation document";
  auto one_byte =
      make_task("task: {name: text, seq_len: 8, packing: documents, path: '" + tmp.str() + "'}");
  REQUIRE_THROWS_WITH(one_byte->prepare({8}),
                      Contains("at least 2 bytes") && Contains("a.txt") && Contains("has 1 byte"));
  {
    Config c = Config::parse("task: {name: text, seq_len: 1, packing: concatenated}", "exp.yaml");
    TaskContext tc;
    read_task(c.section("task"), tc);
    REQUIRE_THROWS_WITH(c.raise_errors(), Contains("task.seq_len") && Contains(">= 2"));
  }
  // A bad value names its key and the choices.
  Config cfg = Config::parse("task: {name: text, packing: yes}", "exp.yaml");
  TaskContext ctx;
  read_task(cfg.section("task"), ctx);
  try {
    cfg.raise_errors();
    FAIL("expected ConfigError");
  } catch (const ConfigError& e) {
    CHECK_THAT(e.what(), Contains("exp.yaml:1:") && Contains("packing") && Contains("none") &&
                             Contains("concatenated"));
  }
}

}  // namespace tasks_test
