// algorithmic: copy, reverse, sort and addition as prompt -> answer for a decoder-only model
// (Kazemnejad et al. 2023, "The Impact of Positional Encoding on Length Generalization in
// Transformers", arXiv 2305.19466, Table 1 and App. D.1; McGill-NLP/length-generalization@40f8a44;
// reference/order_and_state.md §3).
//
// An example is `BOS x_1 .. x_n SEP y_1 .. y_m EOS` then PAD, with x over `alphabet` symbols:
//   copy     y = x
//   reverse  y = x reversed
//   sort     y = x sorted ascending (symbols drawn with repetition, as the paper's sort over a
//            50-symbol alphabet)
//   addition x = `a_1 .. a_n + b_1 .. b_n` (two n-digit operands, most significant digit first,
//            leading zeros allowed), y = the n + 1 digits of a + b (a leading 0 when no carry
//            leaves the top digit), so the answer's length is fixed by n, as the paper's bucket
//            is digits per operand.
// Only the answer and EOS are scored (each predicted from the token before it); `exact_match` is
// the fraction of answers right at every scored position (the paper's metric; teacher forced, or
// decoded greedily with `eval.scoring: generated`), `token_accuracy` per answer token.
//
// Sizes: training examples have n uniform in [1, n_max(seq_len)]; the eval set at length L has n
// uniform in [n_max(L)/2 + 1, n_max(L)], the upper half of what L holds (as the copy task), so an
// eval length of 2 x seq_len holds only sizes never trained on. The paper trains U(1, L) and tests
// U(1, 2L); its plots bucket by size, which the eval lengths stand for here.
//
// Token ids: symbols 0 .. alphabet-1 (digits for addition), then BOS, SEP, PLUS, EOS, PAD.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tasks/registry.h"
#include "tasks/synthetic.h"

namespace hybridlab::tasks {
namespace {

enum class AlgorithmicOp { kCopy, kReverse, kSort, kAddition };

struct AlgorithmicOptions {
  AlgorithmicOp op = AlgorithmicOp::kReverse;
  std::string op_name = "reverse";
  int64_t seq_len = 64;   ///< tokens
  int64_t alphabet = 16;  ///< symbols (10 digits for addition)
};

class AlgorithmicTask : public SyntheticTask {
 public:
  explicit AlgorithmicTask(AlgorithmicOptions o) : o_(std::move(o)) {}
  std::string name() const override { return "algorithmic"; }
  int64_t vocab_size() const override { return symbols() + 5; }
  int64_t seq_len() const override { return o_.seq_len; }
  bool answer_span() const override { return true; }
  std::string length_problem(int64_t L) const override {
    return short_length_problem(L, tokens_for(1),
                                fmt::format("one symbol and its answer in `{}`", o_.op_name));
  }

  /// Tokens an example of size n takes: BOS, the prompt, SEP, the answer and EOS.
  int64_t tokens_for(int64_t n) const {
    return o_.op == AlgorithmicOp::kAddition ? 3 * n + 5 : 2 * n + 3;
  }
  /// The largest size whose example fits `L` tokens.
  int64_t max_size(int64_t L) const {
    return o_.op == AlgorithmicOp::kAddition ? (L - 5) / 3 : (L - 3) / 2;
  }

  Batch generate(at::Generator& gen, int64_t n, int64_t L, Split split) override {
    const int64_t nmax = max_size(L);
    const int64_t lo = split == Split::kEval ? nmax / 2 + 1 : 1;
    const torch::Tensor sizes = torch::randint(lo, nmax + 1, {n}, gen, torch::kLong);
    const torch::Tensor draws = torch::randint(0, symbols(), {n, 2 * nmax}, gen, torch::kLong);
    torch::Tensor seq = torch::full({n, L}, pad(), torch::kLong);
    torch::Tensor targets = torch::full({n, L}, kIgnoreIndex, torch::kLong);
    const int64_t* szp = sizes.data_ptr<int64_t>();
    const int64_t* dp = draws.data_ptr<int64_t>();
    int64_t* sp = seq.data_ptr<int64_t>();
    int64_t* tp = targets.data_ptr<int64_t>();
    std::vector<int64_t> prompt, answer;
    for (int64_t b = 0; b < n; ++b) {
      example(dp + b * 2 * nmax, szp[b], prompt, answer);
      int64_t* row = sp + b * L;
      int64_t t = 0;
      row[t++] = bos();
      for (int64_t x : prompt) row[t++] = x;
      row[t++] = sep();
      const int64_t first_scored = t - 1;
      for (int64_t y : answer) row[t++] = y;
      row[t++] = eos();
      for (int64_t i = first_scored; i < t - 1; ++i) tp[b * L + i] = row[i + 1];
    }
    return {seq, targets};
  }

  std::map<std::string, double> metrics(const ScoreSums& s) const override {
    return {{"exact_match", s.examples ? double(s.correct_examples) / s.examples : 0.0},
            {"token_accuracy", s.tokens ? double(s.correct_tokens) / s.tokens : 0.0},
            {"loss", s.tokens ? s.loss_sum / s.tokens : 0.0}};
  }
  std::string primary_metric() const override { return "exact_match"; }
  std::map<std::string, double> chance_levels() const override {
    // An answer symbol guessed uniformly; EOS is one scored token in n + 1 or more, so the token
    // level is slightly above this and a whole answer is never guessed.
    const double a = static_cast<double>(symbols());
    return {{"token_accuracy", 1.0 / a}, {"exact_match", 0.0}};
  }

 private:
  int64_t symbols() const { return o_.op == AlgorithmicOp::kAddition ? 10 : o_.alphabet; }
  int64_t bos() const { return symbols(); }
  int64_t sep() const { return symbols() + 1; }
  int64_t plus() const { return symbols() + 2; }
  int64_t eos() const { return symbols() + 3; }
  int64_t pad() const { return symbols() + 4; }

  // The prompt and answer of size `n` from the uniform symbols `d` (2n available).
  void example(const int64_t* d, int64_t n, std::vector<int64_t>& prompt,
               std::vector<int64_t>& answer) const {
    prompt.assign(d, d + n);
    switch (o_.op) {
      case AlgorithmicOp::kCopy:
        answer = prompt;
        break;
      case AlgorithmicOp::kReverse:
        answer.assign(prompt.rbegin(), prompt.rend());
        break;
      case AlgorithmicOp::kSort:
        answer = prompt;
        std::sort(answer.begin(), answer.end());
        break;
      case AlgorithmicOp::kAddition: {
        const std::vector<int64_t> a(d, d + n), b(d + n, d + 2 * n);
        answer.assign(static_cast<size_t>(n + 1), 0);
        int64_t carry = 0;
        for (int64_t i = n - 1; i >= 0; --i) {
          const int64_t sum = a[size_t(i)] + b[size_t(i)] + carry;
          answer[size_t(i + 1)] = sum % 10;
          carry = sum / 10;
        }
        answer[0] = carry;
        prompt = a;
        prompt.push_back(plus());
        prompt.insert(prompt.end(), b.begin(), b.end());
        break;
      }
    }
  }

  AlgorithmicOptions o_;
};

bool read_op(Section& s, AlgorithmicOptions& o) {
  o.op_name = s.get<std::string>("op", o.op_name);
  if (o.op_name == "copy")
    o.op = AlgorithmicOp::kCopy;
  else if (o.op_name == "reverse")
    o.op = AlgorithmicOp::kReverse;
  else if (o.op_name == "sort")
    o.op = AlgorithmicOp::kSort;
  else if (o.op_name == "addition")
    o.op = AlgorithmicOp::kAddition;
  else {
    s.error("op", fmt::format("'{}' is not an op: copy, reverse, sort or addition", o.op_name));
    return false;
  }
  return true;
}

}  // namespace

TaskType algorithmic_task_type() {
  return {"algorithmic",
          "copy, reverse, sort, addition as prompt -> answer (Kazemnejad et al. 2023, length "
          "generalisation)",
          [](Section& s, const TaskContext&) -> std::shared_ptr<Task> {
            AlgorithmicOptions o;
            const bool op_ok = read_op(s, o);
            o.seq_len = s.get<int64_t>("seq_len", o.seq_len);
            if (o.op == AlgorithmicOp::kAddition) {
              if (s.has("alphabet")) {
                s.accept("alphabet");
                s.error("alphabet", "addition uses the 10 decimal digits; remove task.alphabet");
              }
            } else if (s.has("alphabet")) {
              // Read only when given: the resolved config then holds no default alphabet, so a
              // sweep over task.op that reaches addition reloads it (addition refuses the key).
              o.alphabet = s.get<int64_t>("alphabet", o.alphabet);
              s.check(o.alphabet >= 2 && o.alphabet <= 4096, "alphabet", "must be in [2, 4096]");
            }
            const int64_t need = o.op == AlgorithmicOp::kAddition ? 8 : 5;
            s.check(!op_ok || o.seq_len >= need, "seq_len",
                    fmt::format("must be >= {} (one symbol of `{}` with BOS, SEP, answer and EOS)",
                                need, o.op_name));
            s.finish();
            return std::make_shared<AlgorithmicTask>(o);
          }};
}

}  // namespace hybridlab::tasks
