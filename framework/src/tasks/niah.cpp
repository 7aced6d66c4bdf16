// niah: multi-key needle in a haystack, RULER style (Hsieh et al. 2024; NVIDIA/RULER@c3f5e3b
// scripts/data/synthetic/niah.py, niah_multikey_1 with the "noise" haystack), on bytes or tokens.
// `num_needles` needles "One of the special magic numbers for {key} is: {value}." with distinct
// adjective-noun keys and 7-digit values are inserted at uniformly random depths of the repeated
// grass filler; the question asks for one of them: "What is the special magic number for {key}
// mentioned in the provided text? The special magic number for {key} mentioned in the provided
// text is" + " {value}". Scored: the 7 digits; exact match of all = accuracy. On BPE tokens
// (task.tokenizer) the same text is built from pieces (tasks/piece_encoder.h), the haystack cut by
// tokens, and the value's tokens from the first one holding a digit are scored.

#include <fmt/format.h>

#include <algorithm>

#include "tasks/piece_encoder.h"
#include "tasks/registry.h"
#include "tasks/synthetic.h"
#include "tasks/tokenizer_option.h"

namespace hybridlab::tasks {
namespace {

const char* const kNiahIntro =
    "Some special magic numbers are hidden within the following text. Make sure to memorize it. "
    "I will quiz you about the numbers afterwards.";
const char* const kAdjectives[] = {"amber",  "brave",  "calm", "dusty", "eager", "frosty",
                                   "gentle", "hollow", "icy",  "jolly", "kind",  "lucky",
                                   "misty",  "noble",  "odd",  "proud"};
const char* const kNouns[] = {"apple",  "badger", "cactus", "dragon", "eagle",  "falcon",
                              "garden", "harbor", "island", "jungle", "kettle", "lantern",
                              "meadow", "needle", "ocean",  "pepper"};
constexpr int64_t kKeys = 16 * 16;

struct NiahOptions {
  int64_t seq_len = 512;
  int64_t num_needles = 4;
  bool intro = true;
  std::shared_ptr<const tokenizer::BpeTokenizer> tokenizer;  ///< task.tokenizer; null: bytes
};

std::string key_name(int64_t k) { return std::string(kAdjectives[k / 16]) + "-" + kNouns[k % 16]; }

// The pieces of the template: a needle is "One of the special magic numbers for {key} is:" " {v}"
// ". ", the question ends "... mentioned in the provided text is" and the answer is " {v}".
std::string needle_head(int64_t key) {
  return fmt::format("One of the special magic numbers for {} is:", key_name(key));
}
std::string question(int64_t key) {
  return fmt::format(
      "\nWhat is the special magic number for {0} mentioned in the provided text? The special "
      "magic number for {0} mentioned in the provided text is",
      key_name(key));
}

class NiahTask : public SyntheticTask {
 public:
  explicit NiahTask(NiahOptions o)
      : o_(std::move(o)),
        enc_(o_.tokenizer, kHaystackFiller),
        head_(enc_.encode(o_.intro ? std::string(kNiahIntro) + "\n" : "")),
        stop_(enc_.encode(". ")) {
    for (int64_t k = 0; k < kKeys; ++k) {
      needle_heads_.push_back(enc_.encode(needle_head(k)));
      questions_.push_back(enc_.encode(question(k)));
    }
  }
  std::string name() const override { return "niah"; }
  int64_t vocab_size() const override { return enc_.vocab_size(); }
  int64_t seq_len() const override { return o_.seq_len; }
  bool byte_level() const override { return enc_.bytes(); }
  std::shared_ptr<const tokenizer::BpeTokenizer> text_tokenizer() const override {
    return o_.tokenizer;
  }
  bool answer_span() const override { return true; }
  const char* unit() const { return enc_.bytes() ? "bytes" : "tokens"; }

  /// Tokens besides filler, at most: the longest needles and question, each 7-digit value " v"
  /// taken as one token per byte (exact on bytes).
  int64_t fixed_tokens() const {
    size_t longest_needle = 0, longest_question = 0;
    for (int64_t k = 0; k < kKeys; ++k) {
      longest_needle = std::max(longest_needle, needle_heads_[k].size());
      longest_question = std::max(longest_question, questions_[k].size());
    }
    const int64_t value = PieceEncoder::most_tokens(8);
    return static_cast<int64_t>(head_.size()) +
           o_.num_needles * (static_cast<int64_t>(longest_needle + stop_.size()) + value) +
           static_cast<int64_t>(longest_question) + value;
  }
  std::string length_problem(int64_t L) const override {
    return short_length_problem(L, fixed_tokens(),
                                fmt::format("{} needles and the question take {} {}",
                                            o_.num_needles, fixed_tokens(), unit()));
  }

  Batch generate(at::Generator& gen, int64_t n, int64_t L, Split) override {
    using torch::indexing::Slice;
    const int64_t m = o_.num_needles;
    const torch::Tensor keys =
        torch::rand({n, kKeys}, gen).argsort(int64_t{1}).index({Slice(), Slice(0, m)});
    const torch::Tensor values = torch::randint(1000000, 10000000, {n, m}, gen, torch::kLong);
    const torch::Tensor asked = torch::randint(0, m, {n}, gen, torch::kLong);
    const torch::Tensor depths = torch::rand({n, m}, gen, torch::kDouble);
    std::vector<PieceRow> rows(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t q = asked[i].item<int64_t>();
      std::vector<std::vector<int64_t>> needles(m);
      int64_t used = static_cast<int64_t>(head_.size());
      for (int64_t j = 0; j < m; ++j) {
        needles[j] = needle_heads_[keys[i][j].item<int64_t>()];
        const std::vector<int64_t> value =
            enc_.encode(" " + std::to_string(values[i][j].item<int64_t>()));
        needles[j].insert(needles[j].end(), value.begin(), value.end());
        needles[j].insert(needles[j].end(), stop_.begin(), stop_.end());
        used += static_cast<int64_t>(needles[j].size());
      }
      const std::vector<int64_t>& ask = questions_[keys[i][q].item<int64_t>()];
      const std::vector<int64_t> answer =
          enc_.encode(" " + std::to_string(values[i][q].item<int64_t>()));
      const int64_t budget =
          L - used - static_cast<int64_t>(ask.size()) - static_cast<int64_t>(answer.size());
      std::vector<int64_t> cut(m);
      for (int64_t j = 0; j < m; ++j) {
        cut[j] = std::min(budget, static_cast<int64_t>(depths[i][j].item<double>() * (budget + 1)));
      }
      std::sort(cut.begin(), cut.end());
      const std::vector<int64_t> hay = enc_.filler(budget);
      PieceRow& r = rows[static_cast<size_t>(i)];
      r.add(head_);
      int64_t at = 0;
      for (int64_t j = 0; j < m; ++j) {
        r.tokens.insert(r.tokens.end(), hay.begin() + at, hay.begin() + cut[j]);
        r.add(needles[j]);
        at = cut[j];
      }
      r.tokens.insert(r.tokens.end(), hay.begin() + at, hay.end());
      r.add(ask);
      r.answer_begin = static_cast<int64_t>(r.tokens.size()) + first_digit_token(enc_, answer);
      r.add(answer);
    }
    return token_examples(rows);
  }

  std::map<std::string, double> metrics(const ScoreSums& s) const override {
    return retrieval_metrics(s);
  }
  std::string primary_metric() const override { return "accuracy"; }
  std::map<std::string, double> chance_levels() const override {
    // On BPE tokens an answer token holds several digits: only the whole value's chance is known.
    return enc_.bytes() ? retrieval_chance() : std::map<std::string, double>{{"accuracy", 0.0}};
  }

 private:
  NiahOptions o_;
  PieceEncoder enc_;
  std::vector<int64_t> head_, stop_;
  std::vector<std::vector<int64_t>> needle_heads_, questions_;  ///< per key
};

}  // namespace

TaskType niah_task_type() {
  return {"niah", "multi-key needle in a haystack, RULER niah_multikey_1 style (Hsieh et al. 2024)",
          [](Section& s, const TaskContext& ctx) -> std::shared_ptr<Task> {
            NiahOptions o;
            o.seq_len = s.get<int64_t>("seq_len", o.seq_len);
            o.num_needles = s.get<int64_t>("num_needles", o.num_needles);
            o.intro = s.get<bool>("intro", o.intro);
            o.tokenizer = read_tokenizer_option(s, ctx);
            const bool tokenizer_failed =
                !o.tokenizer && s.get<std::string>("tokenizer", "bytes") != "bytes";
            s.check(o.num_needles >= 1 && o.num_needles <= kKeys, "num_needles",
                    fmt::format("must be in [1, {}]", kKeys));
            auto task = std::make_shared<NiahTask>(o);
            s.check(tokenizer_failed || o.seq_len >= task->fixed_tokens(), "seq_len",
                    fmt::format("must be >= {} {} ({} needles and the question){}",
                                task->fixed_tokens(), task->unit(), o.num_needles,
                                o.intro ? "; or set intro: false" : ""));
            s.finish();
            return task;
          }};
}

}  // namespace hybridlab::tasks
