// niah: multi-key needle in a haystack, RULER style (Hsieh et al. 2024; NVIDIA/RULER@c3f5e3b
// scripts/data/synthetic/niah.py, niah_multikey_1 with the "noise" haystack), byte level.
// `num_needles` needles "One of the special magic numbers for {key} is: {value}." with distinct
// adjective-noun keys and 7-digit values are inserted at uniformly random depths of the repeated
// grass filler; the question asks for one of them: "What is the special magic number for {key}
// mentioned in the provided text? The special magic number for {key} mentioned in the provided
// text is" + " {value}". Scored: the 7 digits; exact match of all = accuracy.

#include <fmt/format.h>

#include <algorithm>

#include "tasks/registry.h"
#include "tasks/synthetic.h"

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
};

std::string key_name(int64_t k) { return std::string(kAdjectives[k / 16]) + "-" + kNouns[k % 16]; }

class NiahTask : public SyntheticTask {
 public:
  explicit NiahTask(NiahOptions o) : o_(o) {}
  std::string name() const override { return "niah"; }
  int64_t vocab_size() const override { return 256; }
  int64_t seq_len() const override { return o_.seq_len; }
  bool byte_level() const override { return true; }
  bool answer_span() const override { return true; }

  static std::string needle(int64_t key, int64_t value) {
    return fmt::format("One of the special magic numbers for {} is: {}. ", key_name(key), value);
  }
  std::string question(int64_t key, int64_t value) const {
    return fmt::format(
        "\nWhat is the special magic number for {0} mentioned in the provided text? The special "
        "magic number for {0} mentioned in the provided text is {1}",
        key_name(key), value);
  }
  /// Longest bytes besides filler.
  int64_t fixed_bytes() const {
    int64_t longest_needle = 0, longest_question = 0;
    for (int64_t k = 0; k < kKeys; ++k) {
      longest_needle = std::max<int64_t>(longest_needle, needle(k, 1000000).size());
      longest_question = std::max<int64_t>(longest_question, question(k, 1000000).size());
    }
    return (o_.intro ? static_cast<int64_t>(std::string(kNiahIntro).size()) + 1 : 0) +
           o_.num_needles * longest_needle + longest_question;
  }
  std::string length_problem(int64_t L) const override {
    return short_length_problem(
        L, fixed_bytes(),
        fmt::format("{} needles and the question take {} bytes", o_.num_needles, fixed_bytes()));
  }

  Batch generate(at::Generator& gen, int64_t n, int64_t L, Split) override {
    using torch::indexing::Slice;
    const int64_t m = o_.num_needles;
    const torch::Tensor keys =
        torch::rand({n, kKeys}, gen).argsort(int64_t{1}).index({Slice(), Slice(0, m)});
    const torch::Tensor values = torch::randint(1000000, 10000000, {n, m}, gen, torch::kLong);
    const torch::Tensor asked = torch::randint(0, m, {n}, gen, torch::kLong);
    const torch::Tensor depths = torch::rand({n, m}, gen, torch::kDouble);
    std::string filler;
    while (static_cast<int64_t>(filler.size()) < L) filler += kHaystackFiller;
    std::vector<std::string> texts(n);
    std::vector<int64_t> begin(n);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t q = asked[i].item<int64_t>();
      const int64_t qk = keys[i][q].item<int64_t>(), qv = values[i][q].item<int64_t>();
      std::vector<std::string> needles(m);
      int64_t used = o_.intro ? static_cast<int64_t>(std::string(kNiahIntro).size()) + 1 : 0;
      for (int64_t j = 0; j < m; ++j) {
        needles[j] = needle(keys[i][j].item<int64_t>(), values[i][j].item<int64_t>());
        used += static_cast<int64_t>(needles[j].size());
      }
      const std::string tail = question(qk, qv);
      const int64_t budget = L - used - static_cast<int64_t>(tail.size());
      std::vector<int64_t> cut(m);
      for (int64_t j = 0; j < m; ++j) {
        cut[j] = std::min(budget, static_cast<int64_t>(depths[i][j].item<double>() * (budget + 1)));
      }
      std::sort(cut.begin(), cut.end());
      const std::string hay = filler.substr(0, budget);
      std::string t = o_.intro ? std::string(kNiahIntro) + "\n" : "";
      int64_t at = 0;
      for (int64_t j = 0; j < m; ++j) {
        t += hay.substr(at, cut[j] - at) + needles[j];
        at = cut[j];
      }
      t += hay.substr(at) + tail;
      texts[i] = t;
      begin[i] = L - 7;
    }
    return byte_examples(texts, begin);
  }

  std::map<std::string, double> metrics(const ScoreSums& s) const override {
    return retrieval_metrics(s);
  }
  std::string primary_metric() const override { return "accuracy"; }
  std::map<std::string, double> chance_levels() const override { return retrieval_chance(); }

 private:
  NiahOptions o_;
};

}  // namespace

TaskType niah_task_type() {
  return {"niah", "multi-key needle in a haystack, RULER niah_multikey_1 style (Hsieh et al. 2024)",
          [](Section& s, const TaskContext&) -> std::shared_ptr<Task> {
            NiahOptions o;
            o.seq_len = s.get<int64_t>("seq_len", o.seq_len);
            o.num_needles = s.get<int64_t>("num_needles", o.num_needles);
            o.intro = s.get<bool>("intro", o.intro);
            s.check(o.num_needles >= 1 && o.num_needles <= kKeys, "num_needles",
                    fmt::format("must be in [1, {}]", kKeys));
            auto task = std::make_shared<NiahTask>(o);
            s.check(o.seq_len >= task->fixed_bytes(), "seq_len",
                    fmt::format("must be >= {} bytes ({} needles and the question){}",
                                task->fixed_bytes(), o.num_needles,
                                o.intro ? "; or set intro: false" : ""));
            s.finish();
            return task;
          }};
}

}  // namespace hybridlab::tasks
