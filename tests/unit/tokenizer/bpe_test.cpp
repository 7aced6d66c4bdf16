// BPE merges on a hand-made vocabulary (ids and merge orders worked out by hand), the byte-level
// alphabet, and the tokenizer.json reader's refusals.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hybridlab/error.h"
#include "support/job_support.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_file.h"

using namespace hybridlab::tokenizer;
using Ids = std::vector<int32_t>;
using nlohmann::json;

namespace {

// A tokenizer.json whose byte b has id b, with `merges` (in the alphabet) after them at 256, ...
json tiny_tokenizer(const std::vector<std::pair<std::string, std::string>>& merges) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level_encode(std::string(1, char(b)))] = b;
  json m = json::array();
  int next = 256;
  for (const auto& [a, b] : merges) {
    m.push_back(a + " " + b);
    if (!vocab.contains(a + b)) vocab[a + b] = next++;
  }
  return {
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"added_tokens", json::array({{{"id", 300}, {"content", "<|end|>"}, {"special", true}}})},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", m}}}};
}

std::string write(const jobtest::TempDir& dir, const json& j, const std::string& name) {
  const std::string path = (dir.path / name).string();
  std::ofstream(path) << j.dump();
  return path;
}

}  // namespace

TEST_CASE("the byte-level alphabet is GPT-2's bytes_to_unicode", "[tokenizer]") {
  CHECK(byte_level_code_point('!') == 0x21);
  CHECK(byte_level_code_point(' ') == 0x120);   // 'Ġ': the 33rd byte that does not show itself
  CHECK(byte_level_code_point('\n') == 0x10A);  // 'Ċ'
  CHECK(byte_level_code_point(0) == 0x100);
  CHECK(byte_level_code_point(127) == 0x121);  // DEL follows the 33 control bytes and space
  CHECK(byte_level_code_point(173) == 0x143);  // the soft hyphen is the last
  CHECK(byte_level_encode(" the") == "\xc4\xa0the");
  for (int b = 0; b < 256; ++b) {
    std::string back;
    size_t bad = 0;
    REQUIRE(byte_level_decode(byte_level_encode(std::string(1, char(b))), back, bad));
    CHECK(back == std::string(1, char(b)));
  }
  std::string out;
  size_t bad = 0;
  CHECK_FALSE(byte_level_decode("a\xc5\x90", out, bad));  // U+0150 is past the alphabet
  CHECK(bad == 1);
}

TEST_CASE("BPE merges the lowest-priority pair first, leftmost on ties", "[tokenizer]") {
  jobtest::TempDir dir;
  const std::string G = byte_level_encode(" ");
  // 256 "Ġt", 257 "he", 258 "Ġthe", 259 "er", 260 "aa"
  const auto tok = load_tokenizer(
      write(dir, tiny_tokenizer({{G, "t"}, {"h", "e"}, {G + "t", "he"}, {"e", "r"}, {"a", "a"}}),
            "tokenizer.json"));
  CHECK(tok->vocab_size() == 301);  // the special token's id 300 is the largest
  // " the": Ġ t h e -> (Ġ,t) first -> Ġt h e -> (h,e) -> Ġt he -> Ġthe.
  CHECK(tok->encode(" the") == Ids{258});
  // " her": (h,e) has priority 1 and beats (e,r) at 3, after which 'r' cannot join "he".
  CHECK(tok->encode(" her") == Ids{32, 257, 114});
  CHECK(tok->encode("the") == Ids{116, 257});
  // "aaa": two equal pairs; the leftmost merges.
  CHECK(tok->encode("aaa") == Ids{260, 97});
  CHECK(tok->encode("aaaa") == Ids{260, 260});
  // Special tokens' text is ordinary text; their id decodes to it.
  CHECK(tok->encode("<|end|>").size() > 1);
  CHECK(tok->special_id("<|end|>") == 300);
  CHECK(tok->decode({300}) == "<|end|>");
  CHECK(tok->decode(tok->encode(" the her aaa\n")) == " the her aaa\n");
  CHECK(tok->token_lengths()[258] == 4);
  CHECK(tok->token_lengths()[300] == 7);
  CHECK_THROWS_AS(tok->decode({301}), std::out_of_range);
  CHECK_THROWS_AS(tok->decode({280}), std::out_of_range);  // an id no token uses
  // A folder holding tokenizer.json is read too.
  CHECK(load_tokenizer(dir.path.string())->encode(" the") == Ids{258});
}

TEST_CASE("ignore_merges takes a piece that is a token whole", "[tokenizer]") {
  jobtest::TempDir dir;
  json j = tiny_tokenizer({{"a", "b"}});
  j["model"]["vocab"]["abc"] = 257;  // no merge makes it
  CHECK(load_tokenizer(write(dir, j, "a.json"))->encode("abc") == Ids{256, 99});
  j["model"]["ignore_merges"] = true;
  CHECK(load_tokenizer(write(dir, j, "b.json"))->encode("abc") == Ids{257});
}

TEST_CASE("a js-tiktoken rank file: ranks are ids and priorities", "[tokenizer]") {
  jobtest::TempDir dir;
  // Bytes 0..255 at ranks 0..255 ("AA==" is byte 0), then "ab" (YWI=) 256, "abc" (YWJj) 257.
  std::string ranks = "! 0";
  for (int b = 0; b < 256; ++b) {
    static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    ranks += std::string(" ") + k[b >> 2] + k[(b & 3) << 4] + "==";
  }
  ranks += "\nx 256 YWI= YWJj";
  const json j = {{"pat_str", kGpt2Pattern},
                  {"special_tokens", {{"<|endoftext|>", 258}}},
                  {"explicit_n_vocab", 259},
                  {"bpe_ranks", ranks}};
  const std::string path = (dir.path / "r.js").string();
  std::ofstream(path) << "export default " << j.dump() << ";";
  const auto tok = load_tokenizer(path);
  CHECK(tok->vocab_size() == 259);
  CHECK(tok->encode("abc abd") == Ids{257, 32, 256, 100});
  CHECK(tok->special_id("<|endoftext|>") == 258);
}

TEST_CASE("tokenizer files this reader does not support are refused naming the key",
          "[tokenizer]") {
  jobtest::TempDir dir;
  const auto refused = [&](json j, const std::string& what) {
    const std::string path = write(dir, j, "bad.json");
    try {
      load_tokenizer(path);
      FAIL("accepted: " << what);
    } catch (const hybridlab::DataError& e) {
      CHECK_THAT(e.what(), Catch::Contains(path) && Catch::Contains(what));
    }
  };
  json j = tiny_tokenizer({});
  j["model"]["type"] = "WordPiece";
  refused(j, "model.type: 'WordPiece' is not supported");
  j = tiny_tokenizer({});
  j["normalizer"] = {{"type", "NFC"}};
  refused(j, "normalizer: is not supported");
  j = tiny_tokenizer({});
  j["pre_tokenizer"] = {{"type", "Metaspace"}};
  refused(j, "pre_tokenizer: 'Metaspace' is not supported");
  j = tiny_tokenizer({});
  j["pre_tokenizer"]["add_prefix_space"] = true;
  refused(j, "pre_tokenizer.add_prefix_space");
  j = tiny_tokenizer({});
  j["model"]["byte_fallback"] = true;
  refused(j, "model.byte_fallback");
  j = tiny_tokenizer({});
  j["model"]["vocab"]["\xe2\x96\x81the"] = 400;  // SentencePiece's '▁': not byte-level
  refused(j, "model.vocab: '\xe2\x96\x81the' is not in GPT-2's byte-level alphabet");
  j = tiny_tokenizer({});
  j["model"]["merges"] = json::array({"a b c"});
  refused(j, "model.merges[0]: 'a b c' is not two tokens");
  j = tiny_tokenizer({});
  j["model"]["merges"] = json::array({"a x"});  // "ax" is not in the vocabulary
  refused(j, "merge 0 joins parts or makes a result that is not a token");
  j = tiny_tokenizer({});
  j["model"]["vocab"].erase(byte_level_encode("\n"));
  refused(j, "the byte 0x0a has no token");
  refused(json{{"vocab_size", 3}}, "neither a tokenizer.json");
  const std::string not_json = (dir.path / "n.json").string();
  std::ofstream(not_json) << "{\"model\": ";
  CHECK_THROWS_WITH(load_tokenizer(not_json), Catch::Contains("not JSON"));
  CHECK_THROWS_WITH(load_tokenizer((dir.path / "none.json").string()),
                    Catch::Contains("no such tokenizer file"));
}
