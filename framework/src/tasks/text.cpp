// text: language modelling on a real corpus (default: the Brown corpus, fetched by
// scripts/fetch_brown.sh), on bytes or on BPE tokens (`tokenizer`: bytes, gpt2 or a tokenizer
// file; tasks/tokenizer_option.h). Documents are kept intact: train windows of seq_len+1 tokens
// start uniformly at random among all window starts inside train documents; eval at length L
// uses non-overlapping windows inside validation documents (the ALiBi paper's "nonoverlapping"
// evaluation, Press et al. 2022 §4 / fairseq --context-window 0), every position scored, plus a
// per-position loss curve (fla-org/flash-linear-attention evals/ppl.py protocol). Lengths count
// tokens. Metrics: loss (nats/token), perplexity = exp(loss), bits_per_byte = the summed loss
// over the bytes the scored tokens stand for / ln 2 (the per-byte rate that compares across
// tokenizers: Gao et al. 2020, "The Pile", §5 "bits per UTF-8 encoded byte"), and with a BPE
// tokenizer bits_per_token = loss / ln 2. On bytes the two rates are one.
//
// Corpus layout: `path` is a folder with train/ and validation/ subfolders (every regular file
// below is one document), a folder of documents (split by a hash of each file's relative path,
// `eval_fraction` to validation), or one file whose documents are separated by
// `document_separator`. Every document must be UTF-8.
//
// `packing` (training rows only; eval is unchanged): `none` keeps every train window inside one
// document; `documents` draws windows from the train documents laid end to end, so rows hold
// several documents, and marks where each begins (Batch::document_starts) for the model to model
// each alone (fla's varlen / `cu_seqlens` semantics); `concatenated` draws the same rows without
// the marks, so context and state flow across documents (packing without document masking). In
// both packed modes the target that crosses into the next document is not scored.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "tasks/registry.h"
#include "tasks/synthetic.h"
#include "tasks/text_corpus.h"
#include "tasks/tokenizer_option.h"

namespace hybridlab::tasks {
namespace {
namespace fs = std::filesystem;

enum class Packing { kNone, kDocuments, kConcatenated };

struct TextOptions {
  int64_t seq_len = 512;
  Packing packing = Packing::kNone;
  std::string packing_where;  // file:line:col of task.packing ("" when not written)
  std::string path = "data/brown";
  double eval_fraction = 0.1;
  std::string document_separator = "\n\n\n";
  std::string config_dir;
  std::string where;  // file:line:col of task.path (or of the task section)
  std::shared_ptr<const tokenizer::BpeTokenizer> tokenizer;  // null: bytes
};

class TextTask : public Task {
 public:
  explicit TextTask(TextOptions o) : o_(std::move(o)) {}
  std::string name() const override { return "text"; }
  int64_t vocab_size() const override { return o_.tokenizer ? o_.tokenizer->vocab_size() : 256; }
  int64_t seq_len() const override { return o_.seq_len; }
  bool byte_level() const override { return !o_.tokenizer; }
  std::shared_ptr<const tokenizer::BpeTokenizer> text_tokenizer() const override {
    return o_.tokenizer;
  }
  torch::Tensor token_bytes() const override {
    return o_.tokenizer ? token_byte_lengths(*o_.tokenizer) : torch::Tensor();
  }
  bool higher_is_better() const override { return false; }
  bool per_position_curve() const override { return true; }
  std::string primary_metric() const override { return "bits_per_byte"; }
  std::map<std::string, double> chance_levels() const override {
    if (!corpus_) return {};
    // A unigram model of the training tokens: its entropy H bits per token, H over the bytes per
    // token per byte; its accuracy is the frequency of the most common token.
    const auto& train = corpus_->train;
    const torch::Tensor counts =
        torch::bincount(train.tokens.to(torch::kLong), {}, vocab_size()).to(torch::kDouble);
    const torch::Tensor p = counts / counts.sum();
    const torch::Tensor nz = p.masked_select(p > 0);
    const double h = -(nz * nz.log2()).sum().item<double>();
    const double bytes_per_token =
        static_cast<double>(train.text_bytes) / static_cast<double>(train.tokens.numel());
    std::map<std::string, double> out = {{"bits_per_byte", h / bytes_per_token},
                                         {"loss", h * std::log(2.0)},
                                         {"perplexity", std::exp2(h)},
                                         {"accuracy", p.max().item<double>()}};
    if (o_.tokenizer) out["bits_per_token"] = h;
    return out;
  }

  void prepare(const std::vector<int64_t>& lengths) override {
    try {
      prepare_corpus(lengths);
    } catch (const DataError& e) {
      // Name the setting that chose the corpus, so the message leads to the file and line.
      throw DataError(o_.where + ": task.path: " + e.what());
    }
  }

  void prepare_corpus(const std::vector<int64_t>& lengths) {
    if (!corpus_) {
      corpus_ = std::make_unique<TextCorpus>(
          load_text_corpus(o_.path, o_.config_dir, o_.eval_fraction, o_.document_separator));
      if (o_.tokenizer) {
        corpus_->train = tokenize_documents(corpus_->train, *o_.tokenizer);
        corpus_->validation = tokenize_documents(corpus_->validation, *o_.tokenizer);
      }
    }
    const char* unit = o_.tokenizer ? "tokens" : "bytes";
    const char* unit_one = o_.tokenizer ? "token" : "byte";
    if (o_.packing != Packing::kNone) {
      // The target into the next document is not scored: a 1-byte document scores nothing, and
      // rows of only such documents would have no target at all.
      const auto& lengths = corpus_->train.lengths;
      const auto shortest = std::min_element(lengths.begin(), lengths.end());
      if (shortest != lengths.end() && *shortest < 2) {
        throw DataError(fmt::format(
            "task text: task.packing {} needs train documents of at least 2 {} (one scored "
            "target each); '{}' has {} {}",
            o_.packing == Packing::kDocuments ? "documents" : "concatenated", unit,
            corpus_->train.names[static_cast<size_t>(shortest - lengths.begin())], *shortest,
            *shortest == 1 ? unit_one : unit));
      }
      if (corpus_->train.tokens.numel() < o_.seq_len + 1) {
        throw DataError(fmt::format(
            "task text: task.seq_len {} needs at least {} train {}; the train documents of "
            "'{}' hold {} {} in all",
            o_.seq_len, o_.seq_len + 1, unit, corpus_->root, corpus_->train.tokens.numel(), unit));
      }
    } else if (corpus_->train.longest < o_.seq_len + 1) {
      throw DataError(fmt::format(
          "task text: task.seq_len {} needs train documents of at least {} {}; the longest train "
          "document of '{}' is {} {}",
          o_.seq_len, o_.seq_len + 1, unit, corpus_->root, corpus_->train.longest, unit));
    }
    for (int64_t L : lengths) {
      if (corpus_->validation.longest < L + 1) {
        throw DataError(fmt::format(
            "task text: eval length {} needs a validation document of at least {} {}; the "
            "longest validation document of '{}' is {} {} (the document limit); lower "
            "eval.lengths to at most {}",
            L, L + 1, unit, corpus_->root, corpus_->validation.longest, unit,
            corpus_->validation.longest - 1));
      }
    }
  }

  std::string packed_documents_setting() const override {
    return o_.packing == Packing::kDocuments ? o_.packing_where + ": task.packing" : "";
  }

  Batch train_batch(int64_t step, int64_t batch_size, uint64_t seed) override {
    prepare({});
    if (o_.packing != Packing::kNone) return packed_batch(step, batch_size, seed);
    const int64_t T = o_.seq_len;
    const torch::Tensor& starts = train_starts();  // cumulative valid starts per document
    at::Generator g = make_generator(derive_seed(seed, 1, static_cast<uint64_t>(step)));
    const int64_t total = starts[-1].item<int64_t>();
    const torch::Tensor r = torch::randint(0, total, {batch_size}, g, torch::kLong);
    // Document of each draw, then its offset inside the document.
    const torch::Tensor doc = torch::searchsorted(starts, r, false, /*right=*/true) - 1;
    const torch::Tensor off =
        corpus_->train.offsets.index_select(0, doc) + (r - starts.index_select(0, doc));
    return window(corpus_->train.tokens, off, T);
  }

  Batch eval_set(int64_t length, int64_t wanted, uint64_t) override {
    prepare({length});
    return window(corpus_->validation.tokens,
                  torch::tensor(eval_offsets(length, wanted), torch::kLong), length);
  }

  Batch validation_set(int64_t length, int64_t wanted, uint64_t,
                       const std::vector<int64_t>& eval_lengths, int64_t eval_examples) override {
    prepare({length});
    // Token ranges [start, start + L] the eval sets read (inputs and targets), sorted.
    std::vector<std::pair<int64_t, int64_t>> used;
    for (int64_t L : eval_lengths) {
      prepare({L});
      for (int64_t o : eval_offsets(L, eval_examples)) used.emplace_back(o, o + L);
    }
    const auto touches = [&](int64_t a, int64_t b) {  // [a, b] meets a used range
      return std::any_of(used.begin(), used.end(),
                         [&](const auto& u) { return u.first <= b && a <= u.second; });
    };
    std::vector<int64_t> free;
    for (int64_t o : all_offsets(length)) {
      if (!touches(o, o + length)) free.push_back(o);
    }
    if (free.empty()) {
      throw DataError(fmt::format(
          "task text: tuning needs validation windows of {} tokens that no eval window reads, but "
          "the eval sets (eval.examples {}) read every one; lower eval.examples",
          length, eval_examples));
    }
    return window(corpus_->validation.tokens, torch::tensor(spread(free, wanted), torch::kLong),
                  length);
  }

  std::map<std::string, double> metrics(const ScoreSums& s) const override {
    const double loss = s.tokens ? s.loss_sum / s.tokens : 0.0;
    std::map<std::string, double> out = {
        {"loss", loss},
        {"perplexity", std::exp(loss)},
        {"bits_per_byte", loss / std::log(2.0)},
        {"accuracy", s.tokens ? double(s.correct_tokens) / s.tokens : 0.0}};
    if (o_.tokenizer) {
      out["bits_per_token"] = loss / std::log(2.0);
      out["bits_per_byte"] = s.target_bytes ? s.loss_sum / s.target_bytes / std::log(2.0) : 0.0;
    }
    return out;
  }

 private:
  // A batch of windows drawn uniformly from the train documents laid end to end (packing).
  Batch packed_batch(int64_t step, int64_t batch_size, uint64_t seed) {
    const int64_t T = o_.seq_len;
    const torch::Tensor& tokens = corpus_->train.tokens;
    if (!is_start_.defined()) {
      is_start_ = torch::zeros({tokens.numel()}, torch::kBool);
      is_start_.index_put_({corpus_->train.offsets}, true);
    }
    at::Generator g = make_generator(derive_seed(seed, 1, static_cast<uint64_t>(step)));
    const torch::Tensor off = torch::randint(0, tokens.numel() - T, {batch_size}, g, torch::kLong);
    Batch b = window(tokens, off, T);
    const torch::Tensor first = window_values(is_start_, off, T);
    using torch::indexing::Slice;
    // The last byte of a document does not predict the first of the next one.
    b.targets.masked_fill_(first.index({Slice(), Slice(1, T + 1)}), kIgnoreIndex);
    if (o_.packing == Packing::kDocuments) {
      b.document_starts = first.index({Slice(), Slice(0, T)}).clone();
      b.document_starts.select(1, 0).fill_(false);  // a row's first token starts a piece anyway
    }
    return b;
  }
  // Start of every non-overlapping window of `length` (+1 target byte) in the validation documents.
  std::vector<int64_t> all_offsets(int64_t length) const {
    const auto& v = corpus_->validation;
    std::vector<int64_t> offs;
    for (size_t d = 0; d < v.lengths.size(); ++d) {
      const int64_t nwin = (v.lengths[d] - 1) / length;
      for (int64_t w = 0; w < nwin; ++w) offs.push_back(v.offset_of[d] + w * length);
    }
    return offs;
  }
  // `wanted` evenly spaced entries of `offs` (all of them when there are no more than wanted).
  static std::vector<int64_t> spread(const std::vector<int64_t>& offs, int64_t wanted) {
    const auto n = static_cast<int64_t>(offs.size());
    if (n <= wanted) return offs;
    std::vector<int64_t> pick;
    for (int64_t i = 0; i < wanted; ++i) pick.push_back(offs[i * n / wanted]);
    return pick;
  }
  std::vector<int64_t> eval_offsets(int64_t length, int64_t wanted) const {
    return spread(all_offsets(length), wanted);
  }
  // table[o .. o+T] for each offset o: [offsets, T + 1].
  static torch::Tensor window_values(const torch::Tensor& table, const torch::Tensor& offsets,
                                     int64_t T) {
    const torch::Tensor idx =
        offsets.unsqueeze(1) + torch::arange(T + 1, torch::kLong).unsqueeze(0);
    return table.index({idx.flatten()}).reshape({offsets.size(0), T + 1});
  }
  static Batch window(const torch::Tensor& tokens, const torch::Tensor& offsets, int64_t T) {
    const torch::Tensor w = window_values(tokens, offsets, T).to(torch::kLong);
    using torch::indexing::Slice;
    return {w.index({Slice(), Slice(0, T)}).contiguous(),
            w.index({Slice(), Slice(1, T + 1)}).contiguous()};
  }
  const torch::Tensor& train_starts() {
    if (!starts_.defined()) {
      std::vector<int64_t> c{0};
      for (int64_t len : corpus_->train.lengths)
        c.push_back(c.back() + std::max<int64_t>(0, len - o_.seq_len));
      starts_ = torch::tensor(c, torch::kLong);
    }
    return starts_;
  }

  TextOptions o_;
  std::unique_ptr<TextCorpus> corpus_;
  torch::Tensor starts_;
  torch::Tensor is_start_;  // [N] bool: a train document begins at this byte (packing)
};

Packing read_packing(Section& s) {
  const std::string name = s.get<std::string>("packing", "none");
  if (name == "none") return Packing::kNone;
  if (name == "documents") return Packing::kDocuments;
  if (name == "concatenated") return Packing::kConcatenated;
  s.error("packing",
          fmt::format("'{}' is not a packing: none (each row inside one document), documents "
                      "(documents end to end, each modelled alone) or concatenated (end to end, "
                      "context flowing across documents)",
                      name));
  return Packing::kNone;
}

}  // namespace

TaskType text_task_type() {
  return {
      "text",
      "language modelling on a UTF-8 corpus, on bytes or BPE tokens (default: Brown, "
      "scripts/fetch_brown.sh)",
      [](Section& s, const TaskContext& ctx) -> std::shared_ptr<Task> {
        TextOptions o;
        o.seq_len = s.get<int64_t>("seq_len", o.seq_len);
        o.path = s.get<std::string>("path", o.path);
        o.eval_fraction = s.get<double>("eval_fraction", o.eval_fraction);
        o.document_separator = s.get<std::string>("document_separator", o.document_separator);
        o.packing = read_packing(s);
        o.tokenizer = read_tokenizer_option(s, ctx);
        o.packing_where = s.location("packing").str();
        o.config_dir = ctx.config_dir;
        o.where = s.location("path").str();
        s.check(o.seq_len >= 1, "seq_len", "must be >= 1");
        s.check(o.packing == Packing::kNone || o.seq_len >= 2, "seq_len",
                "must be >= 2 with task.packing (a row of one target may hold only the unscored "
                "one into the next document)");
        s.check(o.eval_fraction > 0 && o.eval_fraction < 1, "eval_fraction", "must be in (0, 1)");
        s.check(!o.document_separator.empty(), "document_separator", "must not be empty");
        s.finish();
        return std::make_shared<TextTask>(o);
      }};
}

}  // namespace hybridlab::tasks
