#pragma once
// Reading byte-level BPE vocabularies from the files the field ships them in:
//  - Hugging Face `tokenizer.json` (huggingface/tokenizers, bindings/python docs "The tokenizer
//    file"): model.type "BPE" with `vocab` and `merges` in GPT-2's byte-level alphabet, a
//    ByteLevel pre-tokenizer (GPT-2's pattern) or a Sequence of one regex Split (behavior
//    "Isolated") and a ByteLevel without its own regex (Qwen, Llama 3), and added special tokens;
//  - js-tiktoken rank files (npm js-tiktoken@1.0.21 dist/ranks/<name>.js, or the same object as
//    JSON): {pat_str, special_tokens, bpe_ranks}, where bpe_ranks holds lines
//    "<name> <offset> <base64 token> <base64 token> ..." and the i-th token of a line has rank
//    offset + i.

#include <memory>
#include <string>

#include "tokenizer/bpe.h"

namespace hybridlab::tokenizer {

/// Reads `path`: a tokenizer.json, a folder holding one, or a js-tiktoken rank file (.js or
/// .json). Throws DataError "PATH: key: problem" for an unreadable file, invalid JSON, and
/// anything this reader does not support, naming the key: a model other than BPE, a normalizer,
/// a pre-tokenizer other than the two above, add_prefix_space, byte_fallback, dropout, a
/// continuing_subword_prefix or end_of_word_suffix, vocabulary text outside the byte-level
/// alphabet, a merge that is not two tokens, a rank line without an offset or with bad base64.
BpeVocabulary read_tokenizer_file(const std::string& path);

/// read_tokenizer_file and the tokenizer built from it (BpeTokenizer's refusals as DataError).
std::shared_ptr<const BpeTokenizer> load_tokenizer(const std::string& path);

}  // namespace hybridlab::tokenizer
