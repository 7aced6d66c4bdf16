// Scoring, seeding, split hashing and the task registry.

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "hybridlab/error.h"
#include "hybridlab/task.h"
#include "tasks/mixture.h"
#include "tasks/piece_encoder.h"
#include "tasks/registry.h"
#include "tasks/synthetic.h"

namespace hybridlab {

Task::~Task() = default;

Batch Task::validation_set(int64_t, int64_t, uint64_t, const std::vector<int64_t>&, int64_t) {
  throw DataError(
      fmt::format("task {} has no validation split, so `sweep.tune` cannot choose "
                  "values for it",
                  name()));
}

void score_batch(const torch::Tensor& logits, const torch::Tensor& targets, ScoreSums& sums,
                 bool per_position, const torch::Tensor& token_bytes) {
  const int64_t B = logits.size(0), T = logits.size(1), V = logits.size(2);
  const torch::Tensor mask = targets != kIgnoreIndex;
  const torch::Tensor safe = targets.masked_fill(~mask, 0);
  const torch::Tensor logp = torch::log_softmax(logits.to(torch::kFloat), -1);
  const torch::Tensor nll = -logp.gather(-1, safe.unsqueeze(-1)).squeeze(-1) * mask;  // [B,T]
  const torch::Tensor correct = (logits.argmax(-1) == safe) & mask;                   // [B,T]
  const torch::Tensor per_ex_n = mask.sum(1);
  const torch::Tensor per_ex_c = correct.sum(1);
  const torch::Tensor has = per_ex_n > 0;
  (void)V;
  (void)B;
  sums.loss_sum += nll.sum().item<double>();
  sums.tokens += per_ex_n.sum().item<int64_t>();
  sums.correct_tokens += per_ex_c.sum().item<int64_t>();
  if (token_bytes.defined()) {
    const torch::Tensor lengths = token_bytes.to(safe.device()).index({safe});
    sums.target_bytes += (lengths * mask).sum().item<int64_t>();
  }
  sums.examples += has.sum().item<int64_t>();
  sums.correct_examples += ((per_ex_c == per_ex_n) & has).sum().item<int64_t>();
  sums.example_accuracy_sum +=
      (per_ex_c.to(torch::kDouble) / per_ex_n.clamp_min(1).to(torch::kDouble) * has)
          .sum()
          .item<double>();
  if (per_position) {
    if (static_cast<int64_t>(sums.position_loss_sum.size()) < T) {
      sums.position_loss_sum.resize(T, 0.0);
      sums.position_count.resize(T, 0);
      sums.position_correct.resize(T, 0);
    }
    const torch::Tensor pl = nll.sum(0).to(torch::kDouble).contiguous();
    const torch::Tensor pc = mask.sum(0).to(torch::kLong).contiguous();
    const torch::Tensor pk = correct.sum(0).to(torch::kLong).contiguous();
    const double* plp = pl.data_ptr<double>();
    const int64_t* pcp = pc.data_ptr<int64_t>();
    const int64_t* pkp = pk.data_ptr<int64_t>();
    for (int64_t t = 0; t < T; ++t) {
      sums.position_loss_sum[t] += plp[t];
      sums.position_count[t] += pcp[t];
      sums.position_correct[t] += pkp[t];
    }
  }
}

uint64_t derive_seed(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  // splitmix64 over the stream ids: nearby seeds/steps give unrelated streams.
  auto mix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  uint64_t h = mix(seed);
  h = mix(h ^ a);
  h = mix(h ^ b);
  h = mix(h ^ c);
  return h;
}

torch::Tensor split_bucket(const torch::Tensor& tokens) {
  // Polynomial row hash modulo a prime: each term < 2^31 and rows up to 2^20 long keep the sum
  // inside int64. Weights come from a fixed generator so the split never changes between runs.
  constexpr int64_t P = 2147483647;  // 2^31 - 1
  const int64_t T = tokens.size(1);
  at::Generator g = tasks::make_generator(0x5eed5eedULL);
  const torch::Tensor w = torch::randint(1, P, {T}, g, torch::kLong);
  const torch::Tensor terms = ((tokens.to(torch::kLong) + 1) * w) % P;
  const torch::Tensor h = terms.sum(1) % P;
  return (h * 40503 % P) % kSplitBuckets;
}

namespace tasks {

at::Generator make_generator(uint64_t seed) { return at::detail::createCPUGenerator(seed); }

int64_t uniform_int(at::Generator& gen, int64_t lo, int64_t hi) {
  return torch::randint(lo, hi + 1, {1}, gen, torch::kLong).item<int64_t>();
}

int64_t BlockDraws::next(int64_t lo, int64_t hi) {
  if (left_ == 0) return uniform_int(gen_, lo, hi);
  --left_;
  return lo + *p_++ % (hi - lo + 1);
}

torch::Tensor BlockDraws::block(at::Generator& gen, int64_t n, int64_t per_row) {
  return torch::randint(0, int64_t{1} << 31, {n, per_row}, gen, torch::kLong).contiguous();
}

torch::Tensor bytes_tensor(const std::string& text) {
  torch::Tensor t = torch::empty({static_cast<int64_t>(text.size())}, torch::kLong);
  int64_t* p = t.data_ptr<int64_t>();
  for (size_t i = 0; i < text.size(); ++i) p[i] = static_cast<unsigned char>(text[i]);
  return t;
}

std::map<std::string, double> token_metrics(const ScoreSums& s) {
  return {{"accuracy", s.tokens ? double(s.correct_tokens) / s.tokens : 0.0},
          {"sequence_accuracy", s.examples ? double(s.correct_examples) / s.examples : 0.0},
          {"loss", s.tokens ? s.loss_sum / s.tokens : 0.0}};
}

std::map<std::string, double> retrieval_metrics(const ScoreSums& s) {
  return {{"accuracy", s.examples ? double(s.correct_examples) / s.examples : 0.0},
          {"digit_accuracy", s.tokens ? double(s.correct_tokens) / s.tokens : 0.0},
          {"loss", s.tokens ? s.loss_sum / s.tokens : 0.0}};
}

std::map<std::string, double> answer_metrics(const ScoreSums& s) {
  return {{"accuracy", s.examples ? double(s.correct_examples) / s.examples : 0.0},
          {"byte_accuracy", s.tokens ? double(s.correct_tokens) / s.tokens : 0.0},
          {"loss", s.tokens ? s.loss_sum / s.tokens : 0.0}};
}

std::vector<std::string> distinct_words(BlockDraws& d, int64_t count, int64_t letters,
                                        bool capitals) {
  std::set<std::string> seen;
  std::vector<std::string> out;
  while (static_cast<int64_t>(out.size()) < count) {
    std::string w(static_cast<size_t>(letters), 'a');
    for (char& c : w) c = static_cast<char>((capitals ? 'A' : 'a') + d.next(0, 25));
    if (seen.insert(w).second) out.push_back(w);
  }
  return out;
}

std::map<std::string, double> retrieval_chance() {
  return {{"accuracy", 0.0}, {"digit_accuracy", 0.1}, {"loss", std::log(10.0)}};
}

Batch byte_examples(const std::vector<std::string>& texts,
                    const std::vector<int64_t>& answer_begin) {
  std::vector<PieceRow> rows(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    for (char c : texts[i]) rows[i].tokens.push_back(static_cast<unsigned char>(c));
    rows[i].answer_begin = answer_begin[i];
  }
  return token_examples(rows);
}

std::string short_length_problem(int64_t L, int64_t min_length, const std::string& why, bool even) {
  if (L < min_length) {
    return fmt::format(
        "length {} is too short: {} (at least {} tokens); raise task.seq_len / "
        "eval.lengths",
        L, why, min_length);
  }
  if (even && L % 2 != 0) return fmt::format("length {} must be even (key/value pairs)", L);
  return "";
}

void SyntheticTask::prepare(const std::vector<int64_t>& lengths) {
  for (int64_t L : lengths) {
    if (const std::string p = length_problem(L); !p.empty()) {
      throw ConfigError("task " + name() + ": " + p);
    }
  }
}

Batch SyntheticTask::draw(at::Generator& gen, int64_t n, int64_t length, Split split,
                          bool eval_bucket) {
  std::vector<torch::Tensor> toks, tgts;
  int64_t have = 0;
  for (int attempt = 0; have < n; ++attempt) {
    if (attempt > 1000) {
      throw DataError(
          fmt::format("task {}: cannot draw {} distinct {} examples of length {}: the "
                      "task has too few distinct examples; raise the vocabulary or length",
                      name(), n, eval_bucket ? "eval" : "train", length));
    }
    // Eval keeps 1 row in 16: draw more candidates per round.
    const int64_t need = n - have;
    const int64_t m = eval_bucket ? need * kSplitBuckets + 8 : need + need / 8 + 1;
    Batch raw = generate(gen, m, length, split);
    const torch::Tensor bucket = split_bucket(raw.tokens);
    const torch::Tensor keep = eval_bucket ? bucket == 0 : bucket != 0;
    torch::Tensor idx = keep.nonzero().squeeze(1);
    if (idx.size(0) > need) idx = idx.slice(0, 0, need);
    toks.push_back(raw.tokens.index_select(0, idx));
    tgts.push_back(raw.targets.index_select(0, idx));
    have += idx.size(0);
  }
  return {torch::cat(toks), torch::cat(tgts)};
}

Batch SyntheticTask::train_batch(int64_t step, int64_t batch_size, uint64_t seed) {
  at::Generator g = make_generator(derive_seed(seed, 1, static_cast<uint64_t>(step)));
  return draw(g, batch_size, seq_len(), Split::kTrain, false);
}

Batch SyntheticTask::eval_set(int64_t length, int64_t wanted, uint64_t seed) {
  at::Generator g = make_generator(derive_seed(seed, 2, static_cast<uint64_t>(length)));
  return draw(g, wanted, length, Split::kEval, true);
}

Batch SyntheticTask::validation_set(int64_t length, int64_t wanted, uint64_t seed,
                                    const std::vector<int64_t>&, int64_t) {
  // Stream 3: neither the train stream (1) nor the eval stream (2).
  at::Generator g = make_generator(derive_seed(seed, 3, static_cast<uint64_t>(length)));
  return draw(g, wanted, length, Split::kEval, false);
}

}  // namespace tasks

int64_t longest_train_length(const Task& task) {
  int64_t longest = 0;
  for (int64_t L : task.train_lengths()) longest = std::max(longest, L);
  return longest;
}

const std::vector<TaskType>& task_types() {
  static const std::vector<TaskType> types = [] {
    std::vector<TaskType> t;
    for (const TaskType* type : tasks::task_registry().entries()) t.push_back(*type);
    return t;
  }();
  return types;
}

std::shared_ptr<Task> read_task(Section s, const TaskContext& ctx) {
  const std::string name = s.required<std::string>("name");
  const Registry<TaskType>& registry = tasks::task_registry();
  if (const TaskType* t = registry.find(name)) {
    return s.has("mixture") ? tasks::read_mixture(s, *t, ctx) : t->read(s, ctx);
  }
  std::string list;
  for (const auto& n : registry.names()) list += (list.empty() ? "" : ", ") + n;
  if (!name.empty()) {
    s.error("name", registry.unknown(name));
  } else if (s.has("name")) {
    // `required` has already reported a missing name; an empty one must not pass as "no task".
    s.error("name", "is empty; name a task (tasks: " + list + ")");
  }
  // Keep the reader strict even without a task: mark nothing else, report unknown keys later.
  return nullptr;
}

}  // namespace hybridlab
