// Learned absolute positions (GPT-2 `wpe`, BERT position_embeddings): a table of
// max_position_embeddings rows × d_model, initialised N(0, initializer_range²) (GPT-2 config:
// 1024 rows, 0.02), whose row p is added to the token embedding at position p.
//
// No row exists past the table. By default a model evaluated beyond it is a configuration error
// (naming the eval length and the table size); `beyond: clamp` reuses the last row for every
// later position, when a researcher asks for that on purpose.

#include "hybridlab/position.h"

namespace {

using hybridlab::PositionContext;
using hybridlab::PositionTable;
using hybridlab::Section;

class Learned : public hybridlab::PositionScheme {
 public:
  Learned(int64_t rows, int64_t d, double init_std, bool clamp) : rows_(rows), clamp_(clamp) {
    wpe_ = register_parameter("wpe", torch::randn({rows, d}) * init_std);
  }

  std::string name() const override { return "learned"; }
  uint32_t hooks() const override { return hybridlab::kHookEmbed; }
  int64_t max_length() const override { return clamp_ ? 0 : rows_; }

  torch::Tensor embed(const torch::Tensor& x, const torch::Tensor& pos) override {
    torch::Tensor idx = pos;
    if (clamp_) {
      idx = pos.clamp(0, rows_ - 1);
    } else if (pos.numel() > 0) {
      // One host sync per forward; an index error inside a CUDA kernel would be far worse.
      const int64_t last = pos.max().item<int64_t>();
      if (last >= rows_ || pos.min().item<int64_t>() < 0) {
        throw hybridlab::UserError(
            "learned positions: position " + std::to_string(last) + " is past the table of " +
            std::to_string(rows_) +
            " rows (max_position_embeddings); raise max_position_embeddings or set beyond: clamp");
      }
    }
    return x + wpe_.index_select(0, idx).to(x.dtype()).unsqueeze(0);
  }

  std::vector<PositionTable> inspect(int64_t length) override {
    PositionTable t;
    t.name = "wpe";
    t.description = "learned position table (first " + std::to_string(std::min(length, rows_)) +
                    " of " + std::to_string(rows_) + " rows)";
    t.values = wpe_.detach().narrow(0, 0, std::min(length, rows_)).to(torch::kCPU).clone();
    t.row_label = "position";
    t.column_label = "channel";
    return {t};
  }

  static std::shared_ptr<hybridlab::PositionScheme> create(Section& params,
                                                           const PositionContext& ctx) {
    const int64_t rows = params.get<int64_t>("max_position_embeddings", 1024);
    const double init_std = params.get<double>("initializer_range", 0.02);
    const std::string beyond = params.get<std::string>("beyond", "error");
    params.check(rows > 0, "max_position_embeddings", "must be > 0, got " + std::to_string(rows));
    params.check(init_std > 0, "initializer_range", "must be > 0");
    params.check(ctx.d_model > 0, "scheme",
                 "learned positions need d_model, got " + std::to_string(ctx.d_model));
    if (beyond != "error" && beyond != "clamp") {
      params.error("beyond",
                   "expected error (refuse lengths past the table) or clamp (reuse the "
                   "last row), got '" +
                       beyond + "'");
    } else if (beyond == "error" && rows > 0 && ctx.max_length > rows) {
      params.error("max_position_embeddings",
                   "the table has " + std::to_string(rows) +
                       " rows but the model is used at length " + std::to_string(ctx.max_length) +
                       " (the longest of the training and eval lengths), and a learned table has "
                       "no row past its end; set max_position_embeddings >= " +
                       std::to_string(ctx.max_length) +
                       ", or beyond: clamp to reuse the last row for later positions");
    }
    params.done();
    return std::make_shared<Learned>(rows, ctx.d_model, init_std, beyond == "clamp");
  }

 private:
  int64_t rows_;
  bool clamp_;
  torch::Tensor wpe_;  // [max_position_embeddings, d_model]
};

}  // namespace

HYBRIDLAB_POSITION_PLUGIN("learned", "1.0",
                          "learned absolute position table added to the embeddings (GPT-2/BERT)",
                          Learned::create)
