#pragma once
// The `task.tokenizer` key of the text-holding tasks: `bytes` (the default: one token per byte,
// vocabulary 256), `gpt2` (GPT-2's byte-level BPE, data/tokenizers/gpt2.js from
// scripts/fetch_gpt2.sh), or the path of a Hugging Face tokenizer.json (or its folder) or a
// js-tiktoken rank file (framework/src/tokenizer/tokenizer_file.h).

#include <memory>
#include <string>

#include "hybridlab/config.h"
#include "hybridlab/task.h"
#include "tokenizer/bpe.h"

namespace hybridlab::tasks {

/// Reads `tokenizer` from `s` and loads the tokenizer it names, resolving a path like a corpus
/// path (tasks/text_corpus.h resolve_data_path). Returns nullptr for `bytes`. A missing or
/// unreadable tokenizer is recorded as an error at `tokenizer` (file:line:col: task.tokenizer:
/// and the reader's message naming the file and key), and nullptr returned.
std::shared_ptr<const tokenizer::BpeTokenizer> read_tokenizer_option(Section& s,
                                                                     const TaskContext& ctx);

/// [V] int64: the bytes each id of `tok` stands for (Task::token_bytes).
torch::Tensor token_byte_lengths(const tokenizer::BpeTokenizer& tok);

}  // namespace hybridlab::tasks
