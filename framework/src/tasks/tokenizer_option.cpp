#include "tasks/tokenizer_option.h"

#include <fmt/format.h>

#include <filesystem>

#include "hybridlab/error.h"
#include "tasks/text_corpus.h"
#include "tokenizer/tokenizer_file.h"

namespace hybridlab::tasks {

std::shared_ptr<const tokenizer::BpeTokenizer> read_tokenizer_option(Section& s,
                                                                     const TaskContext& ctx) {
  const std::string name = s.get<std::string>("tokenizer", "bytes");
  if (name == "bytes") return nullptr;
  if (name.empty()) {
    s.error("tokenizer",
            "is empty; give bytes, gpt2, or the path of a tokenizer.json, a folder "
            "holding one, or a js-tiktoken rank file");
    return nullptr;
  }
  const bool gpt2 = name == "gpt2";
  const std::string given = gpt2 ? "data/tokenizers/gpt2.js" : name;
  const std::filesystem::path path = resolve_data_path(given, ctx.config_dir);
  if (!std::filesystem::exists(path)) {
    s.error("tokenizer",
            gpt2 ? fmt::format("GPT-2's ranks are not in '{}' (nor below the experiment's "
                               "folder): they are fetched once by `scripts/fetch_gpt2.sh` (run "
                               "by scripts/setup.sh) into the repository's data/tokenizers/; from "
                               "elsewhere, give the file's path as task.tokenizer",
                               given)
                 : fmt::format("'{}' does not exist: give bytes, gpt2, or the path of a "
                               "tokenizer.json, a folder holding one, or a js-tiktoken rank file",
                               name));
    return nullptr;
  }
  try {
    return tokenizer::load_tokenizer(path.string());
  } catch (const DataError& e) {
    s.error("tokenizer", e.what());
  }
  return nullptr;
}

torch::Tensor token_byte_lengths(const tokenizer::BpeTokenizer& tok) {
  const auto& lengths = tok.token_lengths();
  return torch::tensor(torch::ArrayRef<int32_t>(lengths), torch::kInt).to(torch::kLong);
}

}  // namespace hybridlab::tasks
