// passkey: passkey retrieval (Mohtashami & Jaggi 2023, "Landmark Attention"), on bytes or tokens.
// Template of epfml/landmark-attention@d963e50 llama/run_test.py (also jquesnelle/yarn
// eval/passkey.py): lines joined by "\n": the task description, a filler prefix, "The pass key is
// K. Remember it. K is the pass key.", a filler suffix, "What is the pass key? The pass key is",
// followed here by " K". The filler sentence is repeated and cut by characters; the prefix length
// is uniform in [0, budget] so the key lands at a uniformly random depth; K is uniform in
// [1, max_key]. Scored: K's digits (teacher forced); exact match of all digits = accuracy.
// On BPE tokens (task.tokenizer) the same text is built from pieces (tasks/piece_encoder.h), the
// filler cut by tokens, and the key's tokens from the first one holding a digit are scored.

#include <fmt/format.h>

#include "tasks/piece_encoder.h"
#include "tasks/registry.h"
#include "tasks/synthetic.h"
#include "tasks/tokenizer_option.h"

namespace hybridlab::tasks {
namespace {

const char* const kPasskeyIntro =
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize "
    "them. I will quiz you about the important information there.";
const char* const kQuestion = "What is the pass key? The pass key is";

struct PasskeyOptions {
  int64_t seq_len = 256;
  int64_t max_key = 50000;
  bool intro = true;
  std::shared_ptr<const tokenizer::BpeTokenizer> tokenizer;  ///< task.tokenizer; null: bytes
};

class PasskeyTask : public SyntheticTask {
 public:
  explicit PasskeyTask(PasskeyOptions o)
      : o_(std::move(o)),
        enc_(o_.tokenizer, kHaystackFiller),
        head_(enc_.encode(o_.intro ? std::string(kPasskeyIntro) + "\n" : "")),
        is_(enc_.encode("\nThe pass key is")),
        remember_(enc_.encode(". Remember it.")),
        is_key_(enc_.encode(" is the pass key.\n")),
        question_(enc_.encode(std::string("\n") + kQuestion)) {}
  std::string name() const override { return "passkey"; }
  int64_t vocab_size() const override { return enc_.vocab_size(); }
  int64_t seq_len() const override { return o_.seq_len; }
  bool byte_level() const override { return enc_.bytes(); }
  std::shared_ptr<const tokenizer::BpeTokenizer> text_tokenizer() const override {
    return o_.tokenizer;
  }
  bool answer_span() const override { return true; }
  const char* unit() const { return enc_.bytes() ? "bytes" : "tokens"; }
  /// Tokens without filler, at most (the longest key taken as one token per byte: exact on
  /// bytes).
  int64_t fixed_tokens() const {
    const int64_t key = PieceEncoder::most_tokens(
        1 + static_cast<int64_t>(std::to_string(o_.max_key).size()));  // " K"
    return fixed_text_tokens() + 3 * key;
  }
  std::string length_problem(int64_t L) const override {
    return short_length_problem(
        L, fixed_tokens(),
        fmt::format("the template without filler is {} {}{}", fixed_tokens(), unit(),
                    o_.intro ? fmt::format(" (task.intro: false drops the {}-{} description)",
                                           head_.size(), enc_.bytes() ? "byte" : "token")
                             : ""));
  }

  Batch generate(at::Generator& gen, int64_t n, int64_t L, Split) override {
    const torch::Tensor keys = torch::randint(1, o_.max_key + 1, {n}, gen, torch::kLong);
    const torch::Tensor depth = torch::rand({n}, gen, torch::kDouble);
    std::vector<PieceRow> rows(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      // The lines of the template, with " K" its own piece: "\nThe pass key is" " K" ". Remember
      // it." " K" " is the pass key.\n", and " K" again after the question.
      const std::vector<int64_t> key = enc_.encode(" " + std::to_string(keys[i].item<int64_t>()));
      const int64_t fixed = fixed_text_tokens() + 3 * static_cast<int64_t>(key.size());
      const int64_t budget = L - fixed;
      const auto a =
          static_cast<int64_t>(depth[i].item<double>() * static_cast<double>(budget + 1));
      const int64_t pre = std::min(a, budget);
      const std::vector<int64_t> prefix = enc_.filler(pre), suffix = enc_.filler(budget - pre);
      PieceRow& r = rows[static_cast<size_t>(i)];
      for (const auto* piece :
           {&head_, &prefix, &is_, &key, &remember_, &key, &is_key_, &suffix, &question_})
        r.add(*piece);
      r.answer_begin = static_cast<int64_t>(r.tokens.size()) + first_digit_token(enc_, key);
      r.add(key);
    }
    return token_examples(rows);
  }

  std::map<std::string, double> metrics(const ScoreSums& s) const override {
    return retrieval_metrics(s);
  }
  std::string primary_metric() const override { return "accuracy"; }
  std::map<std::string, double> chance_levels() const override {
    // On BPE tokens an answer token holds several digits: only the whole key's chance is known.
    return enc_.bytes() ? retrieval_chance() : std::map<std::string, double>{{"accuracy", 0.0}};
  }

 private:
  /// Tokens of the template's text pieces, without the filler and the three " K".
  int64_t fixed_text_tokens() const {
    return static_cast<int64_t>(head_.size() + is_.size() + remember_.size() + is_key_.size() +
                                question_.size());
  }
  PasskeyOptions o_;
  PieceEncoder enc_;
  const std::vector<int64_t> head_, is_, remember_, is_key_, question_;
};

}  // namespace

TaskType passkey_task_type() {
  return {"passkey",
          "passkey retrieval in filler text (Mohtashami & Jaggi 2023, Landmark Attention)",
          [](Section& s, const TaskContext& ctx) -> std::shared_ptr<Task> {
            PasskeyOptions o;
            o.seq_len = s.get<int64_t>("seq_len", o.seq_len);
            o.max_key = s.get<int64_t>("max_key", o.max_key);
            o.intro = s.get<bool>("intro", o.intro);
            o.tokenizer = read_tokenizer_option(s, ctx);
            const bool tokenizer_failed =
                !o.tokenizer && s.get<std::string>("tokenizer", "bytes") != "bytes";
            // Up to 10^15: the key is drawn as max_key + 1 exclusive, in int64, and read as digits.
            s.check(o.max_key >= 1 && o.max_key <= 1000000000000000, "max_key",
                    "must be in [1, 10^15] (50000 in the paper)");
            auto task = std::make_shared<PasskeyTask>(o);
            s.check(tokenizer_failed || o.seq_len >= task->fixed_tokens(), "seq_len",
                    fmt::format("must be >= {} {} (the template without filler){}",
                                task->fixed_tokens(), task->unit(),
                                o.intro ? "; or set intro: false" : ""));
            s.finish();
            return task;
          }};
}

}  // namespace hybridlab::tasks
