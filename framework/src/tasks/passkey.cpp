// passkey: passkey retrieval (Mohtashami & Jaggi 2023, "Landmark Attention"), byte level.
// Template of epfml/landmark-attention@d963e50 llama/run_test.py (also jquesnelle/yarn
// eval/passkey.py): lines joined by "\n": the task description, a filler prefix, "The pass key is
// K. Remember it. K is the pass key.", a filler suffix, "What is the pass key? The pass key is",
// followed here by " K". The filler sentence is repeated and cut by characters; the prefix length
// is uniform in [0, budget] so the key lands at a uniformly random depth; K is uniform in
// [1, max_key]. Scored: K's digits (teacher forced); exact match of all digits = accuracy.

#include <fmt/format.h>

#include "tasks/registry.h"
#include "tasks/synthetic.h"

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
};

class PasskeyTask : public SyntheticTask {
 public:
  explicit PasskeyTask(PasskeyOptions o) : o_(o) {}
  std::string name() const override { return "passkey"; }
  int64_t vocab_size() const override { return 256; }
  int64_t seq_len() const override { return o_.seq_len; }
  bool byte_level() const override { return true; }
  bool answer_span() const override { return true; }
  /// Bytes without filler for the longest key.
  int64_t fixed_bytes() const {
    return static_cast<int64_t>(frame(std::to_string(o_.max_key), "", "").size());
  }
  std::string length_problem(int64_t L) const override {
    return short_length_problem(
        L, fixed_bytes(),
        fmt::format("the template without filler is {} bytes{}", fixed_bytes(),
                    o_.intro ? " (task.intro: false drops the 151-byte description)" : ""));
  }

  std::string frame(const std::string& key, const std::string& prefix,
                    const std::string& suffix) const {
    std::string t;
    if (o_.intro) t += std::string(kPasskeyIntro) + "\n";
    t += prefix + "\nThe pass key is " + key + ". Remember it. " + key + " is the pass key.\n" +
         suffix + "\n" + kQuestion + " " + key;
    return t;
  }

  Batch generate(at::Generator& gen, int64_t n, int64_t L, Split) override {
    const torch::Tensor keys = torch::randint(1, o_.max_key + 1, {n}, gen, torch::kLong);
    const torch::Tensor depth = torch::rand({n}, gen, torch::kDouble);
    std::string filler;
    while (static_cast<int64_t>(filler.size()) < L) filler += kHaystackFiller;
    std::vector<std::string> texts(n);
    std::vector<int64_t> begin(n);
    for (int64_t i = 0; i < n; ++i) {
      const std::string key = std::to_string(keys[i].item<int64_t>());
      const int64_t budget = L - static_cast<int64_t>(frame(key, "", "").size());
      const auto a =
          static_cast<int64_t>(depth[i].item<double>() * static_cast<double>(budget + 1));
      const int64_t pre = std::min(a, budget);
      texts[i] = frame(key, filler.substr(0, pre), filler.substr(0, budget - pre));
      begin[i] = L - static_cast<int64_t>(key.size());
    }
    return byte_examples(texts, begin);
  }

  std::map<std::string, double> metrics(const ScoreSums& s) const override {
    return retrieval_metrics(s);
  }
  std::string primary_metric() const override { return "accuracy"; }
  std::map<std::string, double> chance_levels() const override { return retrieval_chance(); }

 private:
  PasskeyOptions o_;
};

}  // namespace

TaskType passkey_task_type() {
  return {"passkey",
          "passkey retrieval in filler text (Mohtashami & Jaggi 2023, Landmark Attention)",
          [](Section& s, const TaskContext&) -> std::shared_ptr<Task> {
            PasskeyOptions o;
            o.seq_len = s.get<int64_t>("seq_len", o.seq_len);
            o.max_key = s.get<int64_t>("max_key", o.max_key);
            o.intro = s.get<bool>("intro", o.intro);
            s.check(o.max_key >= 1, "max_key", "must be >= 1 (50000 in the paper)");
            auto task = std::make_shared<PasskeyTask>(o);
            s.check(o.seq_len >= task->fixed_bytes(), "seq_len",
                    fmt::format("must be >= {} bytes (the template without filler){}",
                                task->fixed_bytes(), o.intro ? "; or set intro: false" : ""));
            s.finish();
            return task;
          }};
}

}  // namespace hybridlab::tasks
