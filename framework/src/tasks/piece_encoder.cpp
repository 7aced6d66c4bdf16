#include "tasks/piece_encoder.h"

#include <cctype>
#include <stdexcept>

namespace hybridlab::tasks {

PieceEncoder::PieceEncoder(std::shared_ptr<const tokenizer::BpeTokenizer> tok,
                           const std::string& filler)
    : tok_(std::move(tok)) {
  filler_ = encode(filler);
}

std::vector<int64_t> PieceEncoder::encode(const std::string& piece) const {
  if (!tok_) {
    std::vector<int64_t> out(piece.size());
    for (size_t i = 0; i < piece.size(); ++i) out[i] = static_cast<unsigned char>(piece[i]);
    return out;
  }
  const std::vector<int32_t> ids = tok_->encode(piece);
  return std::vector<int64_t>(ids.begin(), ids.end());
}

std::vector<int64_t> PieceEncoder::filler(int64_t n) const {
  std::vector<int64_t> out(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (size_t i = 0; i < out.size(); ++i) out[i] = filler_[i % filler_.size()];
  return out;
}

Batch token_examples(const std::vector<PieceRow>& rows) {
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t L = n ? static_cast<int64_t>(rows[0].tokens.size()) : 0;
  torch::Tensor seq = torch::empty({n, L}, torch::kLong);
  torch::Tensor targets = torch::full({n, L}, kIgnoreIndex, torch::kLong);
  int64_t* sp = seq.data_ptr<int64_t>();
  int64_t* tp = targets.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const PieceRow& r = rows[static_cast<size_t>(i)];
    if (static_cast<int64_t>(r.tokens.size()) != L || r.answer_begin < 1 || r.answer_begin > L)
      throw std::logic_error("token_examples: rows of different lengths or a bad answer_begin");
    std::copy(r.tokens.begin(), r.tokens.end(), sp + i * L);
    // Position p predicts token p+1: the answer is predicted from [begin-1, L-1).
    for (int64_t j = r.answer_begin; j < L; ++j) tp[i * L + j - 1] = sp[i * L + j];
  }
  return {seq, targets};
}

int64_t first_digit_token(const PieceEncoder& enc, const std::vector<int64_t>& answer) {
  for (size_t i = 0; i < answer.size(); ++i) {
    const std::string text = enc.bytes()
                                 ? std::string(1, static_cast<char>(answer[i]))
                                 : enc.tokenizer()->decode({static_cast<int32_t>(answer[i])});
    for (char c : text)
      if (std::isdigit(static_cast<unsigned char>(c))) return static_cast<int64_t>(i);
  }
  return static_cast<int64_t>(answer.size());
}

}  // namespace hybridlab::tasks
