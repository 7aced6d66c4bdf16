// ruler_cwe and ruler_fwe: RULER's aggregation tasks (Hsieh et al. 2024, arXiv 2404.06654;
// NVIDIA/RULER scripts/data/synthetic/{common_words_extraction,freq_words_extraction}.py), byte
// level, trained from scratch (no one-shot example; reference/order_and_state.md §4).
//
// ruler_cwe: a numbered list "1. w 2. w ..." of `num_common` words repeated `common_repeats`
// times and as many uncommon words, `uncommon_repeats` times each, as the length holds (RULER's
// uncommon set grows with the context; its counts below 4K tokens are 6 and 1), shuffled. The
// answer names the common words in the order they first appear.
//
// ruler_fwe: words drawn from a Zeta(2) law: with N words in all, the word of rank k appears
// floor(N k^-2 / zeta(2)) times, the rank-1 word written as "..." (RULER's noise), shuffled.
// The answer names ranks 2 to 4, most frequent first.
//
// Scored in both: the answer's bytes (accuracy = all of them, byte_accuracy = each).

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tasks/registry.h"
#include "tasks/synthetic.h"

namespace hybridlab::tasks {
namespace {

// Fisher-Yates with the example's draws.
template <class T>
void shuffle(std::vector<T>& v, BlockDraws& d) {
  for (int64_t k = static_cast<int64_t>(v.size()) - 1; k > 0; --k)
    std::swap(v[static_cast<size_t>(k)], v[static_cast<size_t>(d.next(0, k))]);
}

// A byte-level task whose example is a prompt padded with spaces to the length, then an answer.
class WordsTask : public SyntheticTask {
 public:
  int64_t vocab_size() const override { return 256; }
  bool byte_level() const override { return true; }
  bool answer_span() const override { return true; }
  std::map<std::string, double> metrics(const ScoreSums& s) const override {
    return answer_metrics(s);
  }
  std::string primary_metric() const override { return "accuracy"; }
  // A uniform guess of each letter of the answer's words.
  std::map<std::string, double> chance_levels() const override {
    return {{"accuracy", 0.0}, {"byte_accuracy", 1.0 / 26}, {"loss", std::log(26.0)}};
  }

  Batch generate(at::Generator& gen, int64_t n, int64_t L, Split) override {
    const int64_t per_example = draws_per_example(L);
    const torch::Tensor block = BlockDraws::block(gen, n, per_example);
    std::vector<std::string> texts(static_cast<size_t>(n));
    std::vector<int64_t> begin(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      BlockDraws d(block.data_ptr<int64_t>() + i * per_example, per_example, gen);
      const Example e = example(d, L);
      const int64_t pad =
          L - static_cast<int64_t>(e.context.size() + e.question.size() + e.answer.size());
      texts[static_cast<size_t>(i)] =
          e.context + std::string(static_cast<size_t>(pad), ' ') + e.question + e.answer;
      begin[static_cast<size_t>(i)] = L - static_cast<int64_t>(e.answer.size());
    }
    return byte_examples(texts, begin);
  }

 protected:
  // One example's parts, together at most L bytes; spaces pad the context to L.
  struct Example {
    std::string context, question, answer;
  };
  virtual Example example(BlockDraws& d, int64_t L) const = 0;
  virtual int64_t draws_per_example(int64_t L) const = 0;
};

// Bytes of items 1..n of a numbered list of `letters`-letter words: "i. word " each.
int64_t numbered_bytes(int64_t n, int64_t letters) {
  int64_t total = 0;
  for (int64_t i = 1; i <= n; ++i)
    total += static_cast<int64_t>(std::to_string(i).size()) + 3 + letters;
  return total;
}

struct CweOptions {
  int64_t seq_len = 1024;
  int64_t num_common = 10;
  int64_t common_repeats = 6;
  int64_t uncommon_repeats = 1;
  int64_t word_letters = 5;
};

const char* const kCweIntro =
    "Below is a numbered list of words. In these words, some appear more often than others. "
    "Memorize the ones that appear most often.\n";

class RulerCweTask : public WordsTask {
 public:
  explicit RulerCweTask(CweOptions o) : o_(o) {}
  std::string name() const override { return "ruler_cwe"; }
  int64_t seq_len() const override { return o_.seq_len; }

  std::string question() const {
    return fmt::format(
        "\nQuestion: What are the {0} most common words in the above list? Answer: The top {0} "
        "words that appear most often in the list are: ",
        o_.num_common);
  }
  int64_t answer_bytes() const { return o_.num_common * (o_.word_letters + 1) - 1; }
  // Uncommon words the list holds at length L (0 or more).
  int64_t uncommon_words(int64_t L) const {
    const int64_t budget = L -
                           static_cast<int64_t>(std::string(kCweIntro).size() + question().size()) -
                           answer_bytes();
    const int64_t common = o_.num_common * o_.common_repeats;
    int64_t u = 0;
    while (numbered_bytes(common + (u + 1) * o_.uncommon_repeats, o_.word_letters) <= budget) ++u;
    return u;
  }
  int64_t fixed_bytes() const {
    return static_cast<int64_t>(std::string(kCweIntro).size() + question().size()) +
           numbered_bytes(o_.num_common * o_.common_repeats + o_.uncommon_repeats,
                          o_.word_letters) +
           answer_bytes();
  }
  std::string length_problem(int64_t L) const override {
    return short_length_problem(
        L, fixed_bytes(),
        fmt::format("{} common words {} times each, one uncommon word and the question take {} "
                    "bytes",
                    o_.num_common, o_.common_repeats, fixed_bytes()));
  }

 protected:
  int64_t draws_per_example(int64_t L) const override {
    const int64_t words = o_.num_common + uncommon_words(L);
    const int64_t items = o_.num_common * o_.common_repeats + words * o_.uncommon_repeats;
    return words * (o_.word_letters + 1) + items + 16;
  }
  Example example(BlockDraws& d, int64_t L) const override {
    const int64_t u = uncommon_words(L);
    const std::vector<std::string> words = distinct_words(d, o_.num_common + u, o_.word_letters);
    std::vector<int64_t> items;  // word indices; the first num_common are the common words
    for (int64_t w = 0; w < o_.num_common + u; ++w)
      items.insert(items.end(),
                   static_cast<size_t>(w < o_.num_common ? o_.common_repeats : o_.uncommon_repeats),
                   w);
    shuffle(items, d);
    std::string list = kCweIntro;
    std::vector<int64_t> first_seen;
    for (size_t i = 0; i < items.size(); ++i) {
      list += fmt::format("{}. {} ", i + 1, words[static_cast<size_t>(items[i])]);
      if (items[i] < o_.num_common &&
          std::find(first_seen.begin(), first_seen.end(), items[i]) == first_seen.end())
        first_seen.push_back(items[i]);
    }
    std::string answer;
    for (int64_t w : first_seen)
      answer += (answer.empty() ? "" : " ") + words[static_cast<size_t>(w)];
    return {list, question(), answer};
  }

 private:
  CweOptions o_;
};

struct FweOptions {
  int64_t seq_len = 1024;
  int64_t word_letters = 6;
};

const char* const kFweIntro =
    "Read the following coded text and track the frequency of each coded word. Find the three "
    "most frequently appeared coded words.\n";
const char* const kFweQuestion =
    "\nQuestion: Do not provide any explanation. Please ignore the dots '....'. What are the "
    "three most frequently appeared words in the above coded text? Answer: According to the "
    "coded text above, the three most frequently appeared words are: ";
constexpr double kZeta2 = 1.6449340668482264;  // pi^2 / 6

class RulerFweTask : public WordsTask {
 public:
  explicit RulerFweTask(FweOptions o) : o_(o) {}
  std::string name() const override { return "ruler_fwe"; }
  int64_t seq_len() const override { return o_.seq_len; }

  // Occurrences of ranks 1, 2, ... among n words (ranks with none left out).
  static std::vector<int64_t> rank_counts(int64_t n) {
    std::vector<int64_t> out;
    for (int64_t k = 1;; ++k) {
      const auto c = static_cast<int64_t>(std::floor(static_cast<double>(n) / (k * k * kZeta2)));
      if (c < 1) return out;
      out.push_back(c);
    }
  }
  // Bytes of the text of n words: the rank-1 word as "... ", the others as "word ".
  int64_t text_bytes(int64_t n) const {
    const std::vector<int64_t> counts = rank_counts(n);
    int64_t total = 0;
    for (size_t k = 0; k < counts.size(); ++k)
      total += counts[k] * (k == 0 ? 4 : o_.word_letters + 1);
    return total;
  }
  int64_t answer_bytes() const { return 3 * (o_.word_letters + 1) - 1; }
  // The most words the length holds, or 0 when the answer would be ambiguous (ranks 4 and 5
  // equally frequent) at every count that fits.
  int64_t words_at(int64_t L) const {
    const int64_t budget =
        L - static_cast<int64_t>(std::string(kFweIntro).size() + std::string(kFweQuestion).size()) -
        answer_bytes();
    int64_t n = std::max<int64_t>(0, budget / 4);
    while (n > 0 && text_bytes(n) > budget) --n;
    for (; n > 0; --n) {
      const std::vector<int64_t> c = rank_counts(n);
      if (c.size() >= 4 && (c.size() == 4 || c[3] > c[4]) && c[2] > c[3] && c[1] > c[2]) return n;
    }
    return 0;
  }
  // The shortest length whose text's four most frequent words differ in count.
  int64_t min_length() const {
    int64_t L =
        static_cast<int64_t>(std::string(kFweIntro).size() + std::string(kFweQuestion).size()) +
        answer_bytes();
    while (words_at(L) == 0) ++L;
    return L;
  }
  std::string length_problem(int64_t L) const override {
    if (words_at(L) > 0) return "";
    return short_length_problem(L, min_length(),
                                "the coded text, whose four most frequent words must differ in "
                                "count, and the question do not fit");
  }

 protected:
  int64_t draws_per_example(int64_t L) const override {
    const int64_t n = words_at(L);
    return static_cast<int64_t>(rank_counts(n).size()) * (o_.word_letters + 1) + n + 16;
  }
  Example example(BlockDraws& d, int64_t L) const override {
    const std::vector<int64_t> counts = rank_counts(words_at(L));
    const std::vector<std::string> words =
        distinct_words(d, static_cast<int64_t>(counts.size()), o_.word_letters);
    std::vector<int64_t> items;
    for (size_t k = 0; k < counts.size(); ++k)
      items.insert(items.end(), static_cast<size_t>(counts[k]), static_cast<int64_t>(k));
    shuffle(items, d);
    std::string text = kFweIntro;
    for (int64_t k : items)
      text += k == 0 ? std::string("... ") : words[static_cast<size_t>(k)] + " ";
    return {text, kFweQuestion, words[1] + " " + words[2] + " " + words[3]};
  }

 private:
  FweOptions o_;
};

}  // namespace

TaskType ruler_cwe_task_type() {
  return {
      "ruler_cwe",
      "RULER common-words extraction: the most repeated words of a numbered list (Hsieh et al. "
      "2024)",
      [](Section& s, const TaskContext&) -> std::shared_ptr<Task> {
        CweOptions o;
        o.seq_len = s.get<int64_t>("seq_len", o.seq_len);
        o.num_common = s.get<int64_t>("num_common", o.num_common);
        o.common_repeats = s.get<int64_t>("common_repeats", o.common_repeats);
        o.uncommon_repeats = s.get<int64_t>("uncommon_repeats", o.uncommon_repeats);
        o.word_letters = s.get<int64_t>("word_letters", o.word_letters);
        s.check(o.num_common >= 1 && o.num_common <= 100, "num_common", "must be in [1, 100]");
        s.check(o.uncommon_repeats >= 1, "uncommon_repeats", "must be >= 1");
        s.check(o.common_repeats > o.uncommon_repeats && o.common_repeats <= 1000, "common_repeats",
                fmt::format("must be in ({}, 1000]: more than uncommon_repeats, or no word "
                            "is more common than another",
                            o.uncommon_repeats));
        s.check(o.word_letters >= 3 && o.word_letters <= 12, "word_letters", "must be in [3, 12]");
        auto task = std::make_shared<RulerCweTask>(o);
        if (s.config().errors().empty()) {
          s.check(o.seq_len >= task->fixed_bytes(), "seq_len",
                  fmt::format("must be >= {} bytes ({} common words {} times each, one "
                              "uncommon word and the question)",
                              task->fixed_bytes(), o.num_common, o.common_repeats));
        }
        s.finish();
        return task;
      }};
}

TaskType ruler_fwe_task_type() {
  return {"ruler_fwe",
          "RULER frequent-words extraction: the top words of a Zeta(2) coded text (Hsieh et al. "
          "2024)",
          [](Section& s, const TaskContext&) -> std::shared_ptr<Task> {
            FweOptions o;
            o.seq_len = s.get<int64_t>("seq_len", o.seq_len);
            o.word_letters = s.get<int64_t>("word_letters", o.word_letters);
            s.check(o.word_letters >= 3 && o.word_letters <= 12, "word_letters",
                    "must be in [3, 12]");
            auto task = std::make_shared<RulerFweTask>(o);
            if (s.config().errors().empty() && o.seq_len >= 1) {
              const std::string p = task->length_problem(o.seq_len);
              s.check(p.empty(), "seq_len", p);
            }
            s.finish();
            return task;
          }};
}

}  // namespace hybridlab::tasks
