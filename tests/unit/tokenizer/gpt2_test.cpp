// GPT-2's tokenizer (data/tokenizers/gpt2.js, fetched by scripts/fetch_gpt2.sh) against token ids
// published by others, and encode -> decode identity over the whole Brown corpus (data/brown,
// scripts/fetch_brown.sh). scripts/test.sh fetches both; a missing file fails with its fix.

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "tokenizer/tokenizer_file.h"
#include "util/atomic_file.h"

using hybridlab::tokenizer::BpeTokenizer;
using hybridlab::tokenizer::load_tokenizer;
using Ids = std::vector<int32_t>;
namespace fs = std::filesystem;

namespace {

const fs::path kData = fs::path(HYBRIDLAB_SOURCE_DIR) / "data";

std::shared_ptr<const BpeTokenizer> gpt2() {
  static std::shared_ptr<const BpeTokenizer> tok;
  if (!tok) {
    const fs::path ranks = kData / "tokenizers" / "gpt2.js";
    INFO("the GPT-2 ranks are fetched by scripts/fetch_gpt2.sh (scripts/test.sh runs it)");
    REQUIRE(fs::exists(ranks));
    tok = load_tokenizer(ranks.string());
  }
  return tok;
}

}  // namespace

TEST_CASE("GPT-2: the ids transformers' GPT2Tokenizer documents", "[tokenizer][gpt2]") {
  // huggingface/transformers src/transformers/models/gpt2/tokenization_gpt2.py, the class
  // docstring: "Hello world" -> [15496, 995], " Hello world" -> [18435, 995].
  const auto tok = gpt2();
  CHECK(tok->vocab_size() == 50257);
  CHECK(tok->encode("Hello world") == Ids{15496, 995});
  CHECK(tok->encode(" Hello world") == Ids{18435, 995});
  CHECK(tok->special_id("<|endoftext|>") == 50256);
  CHECK(tok->decode({50256}) == "<|endoftext|>");
  // The 256 byte tokens come first, in bytes_to_unicode's order: '!' is 0, ' ' is 220, '\n' 198.
  CHECK(tok->encode("!") == Ids{0});
  CHECK(tok->encode(" ") == Ids{220});
  CHECK(tok->encode("\n") == Ids{198});
}

TEST_CASE("GPT-2: a published tokenisation of web text re-encodes to the same ids",
          "[tokenizer][gpt2]") {
  // The first row of the Hugging Face dataset semran1/packed-fw-valid (FineWeb text tokenised
  // with GPT-2), from its dataset viewer. decode() reads only the vocabulary; encode() must then
  // find the same merges.
  const Ids published = {
      198,  8164, 994,   284,   4321,  290,  3601,  257,  12960, 2196,  286,   428,   3188,
      13,   198,  42969, 389,   3221,  262,  717,   284,  7564,  326,   511,   1200,  468,
      257,  1917, 351,   10825, 393,   4069, 13,    7831, 11,    262,   2551,  284,   5380,
      4708, 1037, 460,   307,   2408,  290,  12132, 329,  257,   2560,  13,    383,   717,
      2239, 318,  284,   15165, 1949,  284,  1561,  284,  262,   1200,  13,    1052,  5508,
      1280, 1561, 546,   7666,  460,   1690, 1037,  13,   28231, 743,   3853,  284,   5725,
      351,  262,  1200,  338,   17206, 11,   7799,  11,   1866,  286,   262,   26014, 11,
      393,  584,  6490,  508,   760,   262,  1200,  880,  13,    2312,  4831,  743,   10568,
      262,  2761, 329,   262,   1200,  290,  1641,  13,   198,   14291, 389,   257,   1178,
      5895, 543,  743,   7603,  326,   257,  1200,  290,  28680, 19906, 12660, 481,   307,
      4465, 13,   198,   12,    2940,  276,  2121,  287,  1524,  2854,  198};
  const auto tok = gpt2();
  const std::string text = tok->decode(published);
  CHECK(text.rfind("\nClick here to download and print a PDF version", 0) == 0);
  CHECK(tok->encode(text) == published);
}

TEST_CASE("GPT-2: encode -> decode is the identity over the whole Brown corpus",
          "[tokenizer][gpt2]") {
  const fs::path brown = kData / "brown";
  INFO("the Brown corpus is fetched by scripts/fetch_brown.sh (scripts/test.sh runs it)");
  REQUIRE(fs::exists(brown / "train"));
  const auto tok = gpt2();
  int64_t bytes = 0, tokens = 0, documents = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& split : {"train", "validation"}) {
    for (const auto& f : fs::directory_iterator(brown / split)) {
      const std::string text = hybridlab::read_file(f.path().string());
      const Ids ids = tok->encode(text);
      INFO(f.path().string());
      REQUIRE(tok->decode(ids) == text);
      bytes += static_cast<int64_t>(text.size());
      tokens += static_cast<int64_t>(ids.size());
      ++documents;
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  WARN(documents << " documents, " << bytes << " bytes, " << tokens << " tokens ("
                 << double(bytes) / double(tokens) << " bytes per token) in " << s << " s");
  CHECK(documents == 500);
  // English prose under GPT-2's vocabulary: between 3.5 and 5 bytes per token.
  CHECK(double(bytes) / double(tokens) > 3.5);
  CHECK(double(bytes) / double(tokens) < 5.0);
}
