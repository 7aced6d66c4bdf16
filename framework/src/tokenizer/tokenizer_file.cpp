#include "tokenizer/tokenizer_file.h"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "hybridlab/error.h"
#include "tokenizer/byte_level.h"
#include "util/atomic_file.h"

namespace hybridlab::tokenizer {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

struct Reader {
  std::string file;
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw DataError(fmt::format("{}: {}: {}", file, key, what));
  }
  // The value at `key` of `j`, which must have the type `is` checks.
  const json& need(const json& j, const std::string& key, const std::string& path,
                   bool (json::*is)() const noexcept, const char* type) const {
    const auto it = j.find(key);
    if (it == j.end()) fail(path, "missing");
    if (!((*it).*is)()) fail(path, fmt::format("must be {}", type));
    return *it;
  }
};

// Whether `j[key]` is absent, null, false or "" (a feature left off).
bool off(const json& j, const std::string& key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() || (it->is_boolean() && !it->get<bool>()) ||
         (it->is_string() && it->get<std::string>().empty());
}

std::string decode_base64(const std::string& s, bool& ok) {
  static const std::string alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  size_t pad = 0;
  for (char c : s) {
    if (c == '=') {
      ++pad;
      continue;
    }
    const size_t v = alphabet.find(c);
    if (v == std::string::npos || pad) {
      ok = false;
      return out;
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  ok = (s.size() % 4 == 0) && pad <= 2;
  return out;
}

std::string byte_level_text(const Reader& r, const std::string& shown, const std::string& key) {
  std::string bytes;
  size_t bad = 0;
  if (!byte_level_decode(shown, bytes, bad)) {
    r.fail(key, fmt::format("'{}' is not in GPT-2's byte-level alphabet (at byte {}): not a "
                            "byte-level BPE vocabulary",
                            shown, bad));
  }
  return bytes;
}

void read_pre_tokenizer(const Reader& r, const json& root, BpeVocabulary& v) {
  const auto byte_level = [&](const json& p, const std::string& key, bool regex_allowed) {
    if (!off(p, "add_prefix_space")) {
      r.fail(key + ".add_prefix_space",
             "true is not supported (the added space would not decode back to the text)");
    }
    if (!regex_allowed && !off(p, "use_regex")) {
      r.fail(key + ".use_regex", "must be false after a Split (one pattern only)");
    }
    if (regex_allowed && p.contains("use_regex") && !p["use_regex"].get<bool>()) {
      r.fail(key + ".use_regex", "false without a Split would leave the text in one piece");
    }
  };
  const json& pre = root.contains("pre_tokenizer") ? root["pre_tokenizer"] : json();
  if (!pre.is_object()) r.fail("pre_tokenizer", "missing: byte-level BPE needs one");
  const std::string type = r.need(pre, "type", "pre_tokenizer.type", &json::is_string, "a string");
  if (type == "ByteLevel") {
    byte_level(pre, "pre_tokenizer", true);
    v.pattern = kGpt2Pattern;
    return;
  }
  const json& seq = type == "Sequence" ? r.need(pre, "pretokenizers", "pre_tokenizer.pretokenizers",
                                                &json::is_array, "a list")
                                       : json();
  if (type != "Sequence" || seq.size() != 2 || !seq[0].is_object() || !seq[1].is_object() ||
      seq[0].value("type", "") != "Split" || seq[1].value("type", "") != "ByteLevel") {
    r.fail("pre_tokenizer", fmt::format("'{}' is not supported: ByteLevel, or a Sequence of a "
                                        "Split and a ByteLevel, only",
                                        type));
  }
  const json& split = seq[0];
  if (split.value("behavior", "") != "Isolated" || !off(split, "invert")) {
    r.fail("pre_tokenizer.pretokenizers[0]", "only behavior Isolated without invert is supported");
  }
  const json& pat = r.need(split, "pattern", "pre_tokenizer.pretokenizers[0].pattern",
                           &json::is_object, "an object");
  if (!pat.contains("Regex") || !pat["Regex"].is_string()) {
    r.fail("pre_tokenizer.pretokenizers[0].pattern", "must hold a Regex string");
  }
  v.pattern = pat["Regex"].get<std::string>();
  byte_level(seq[1], "pre_tokenizer.pretokenizers[1]", false);
}

BpeVocabulary read_hf(const Reader& r, const json& root) {
  BpeVocabulary v;
  v.source = r.file;
  const json& model = r.need(root, "model", "model", &json::is_object, "an object");
  const std::string type = model.value("type", "BPE");
  if (type != "BPE") {
    r.fail("model.type", fmt::format("'{}' is not supported: byte-level BPE only", type));
  }
  for (const char* key :
       {"dropout", "byte_fallback", "continuing_subword_prefix", "end_of_word_suffix"}) {
    if (!off(model, key)) r.fail(std::string("model.") + key, "is not supported (leave it unset)");
  }
  if (!off(root, "normalizer")) {
    r.fail("normalizer", "is not supported (a byte-level BPE without a normalizer only)");
  }
  read_pre_tokenizer(r, root, v);
  // Special tokens have ids but are never produced from text (see bpe.h).
  if (root.contains("added_tokens") && root["added_tokens"].is_array()) {
    for (const json& t : root["added_tokens"]) {
      if (t.value("special", false) && t.contains("content") && t.contains("id"))
        v.special[t["content"].get<std::string>()] = t["id"].get<int32_t>();
    }
  }
  const json& vocab = r.need(model, "vocab", "model.vocab", &json::is_object, "an object");
  for (const auto& [shown, id_json] : vocab.items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 ||
        id_json.get<int64_t>() > 100'000'000) {
      r.fail("model.vocab." + shown, "must be an id in [0, 1e8]");
    }
    const auto id = static_cast<size_t>(id_json.get<int64_t>());
    if (v.special.count(shown)) continue;
    if (id >= v.tokens.size()) v.tokens.resize(id + 1);
    v.tokens[id] = byte_level_text(r, shown, "model.vocab");
  }
  const json& merges = r.need(model, "merges", "model.merges", &json::is_array, "a list");
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    std::string a, b;
    if (m.is_string()) {  // "a b" (tokenizers < 0.20)
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        r.fail(fmt::format("model.merges[{}]", i), fmt::format("'{}' is not two tokens", s));
      }
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      r.fail(fmt::format("model.merges[{}]", i), "must be \"a b\" or [a, b]");
    }
    const std::string key = fmt::format("model.merges[{}]", i);
    v.merges.emplace_back(byte_level_text(r, a, key), byte_level_text(r, b, key));
  }
  v.whole_piece_first = model.value("ignore_merges", false);
  return v;
}

BpeVocabulary read_ranks(const Reader& r, const json& root) {
  BpeVocabulary v;
  v.source = r.file;
  v.merges_by_rank = true;
  v.whole_piece_first = true;
  v.pattern = r.need(root, "pat_str", "pat_str", &json::is_string, "a string");
  if (root.contains("special_tokens")) {
    for (const auto& [text, id] : root["special_tokens"].items()) {
      if (!id.is_number_integer()) r.fail("special_tokens." + text, "must be an id");
      v.special[text] = id.get<int32_t>();
    }
  }
  const std::string ranks =
      r.need(root, "bpe_ranks", "bpe_ranks", &json::is_string, "a string").get<std::string>();
  size_t line_no = 0;
  for (size_t at = 0; at < ranks.size(); ++line_no) {
    size_t end = ranks.find('\n', at);
    if (end == std::string::npos) end = ranks.size();
    std::vector<std::string> fields;
    for (size_t f = at; f < end;) {
      size_t sp = ranks.find(' ', f);
      if (sp == std::string::npos || sp > end) sp = end;
      fields.push_back(ranks.substr(f, sp - f));
      f = sp + 1;
    }
    at = end + 1;
    if (fields.empty()) continue;
    const std::string where = fmt::format("bpe_ranks line {}", line_no + 1);
    if (fields.size() < 2 || fields[1].empty() ||
        fields[1].find_first_not_of("0123456789") != std::string::npos || fields[1].size() > 9) {
      r.fail(where, "must start with a name and a rank offset");
    }
    const size_t offset = std::stoul(fields[1]);
    for (size_t i = 2; i < fields.size(); ++i) {
      bool ok = true;
      std::string bytes = decode_base64(fields[i], ok);
      if (!ok || bytes.empty()) {
        r.fail(where, fmt::format("token {} '{}' is not base64", i - 2, fields[i]));
      }
      const size_t id = offset + i - 2;
      if (id >= v.tokens.size()) v.tokens.resize(id + 1);
      v.tokens[id] = std::move(bytes);
    }
  }
  if (root.contains("explicit_n_vocab") && root["explicit_n_vocab"].is_number_integer()) {
    size_t n = v.tokens.size();
    for (const auto& [text, id] : v.special) n = std::max(n, static_cast<size_t>(id) + 1);
    if (n != root["explicit_n_vocab"].get<size_t>()) {
      r.fail("explicit_n_vocab", fmt::format("says {} tokens, the file holds {}",
                                             root["explicit_n_vocab"].get<size_t>(), n));
    }
  }
  return v;
}

}  // namespace

BpeVocabulary read_tokenizer_file(const std::string& path) {
  fs::path p(path);
  if (fs::is_directory(p)) p /= "tokenizer.json";
  Reader r{p.string()};
  if (!fs::is_regular_file(p)) {
    throw DataError(
        fmt::format("{}: no such tokenizer file (a Hugging Face tokenizer.json, a "
                    "folder holding one, or a js-tiktoken rank file)",
                    r.file));
  }
  std::string text;
  try {
    text = read_file(p.string());
  } catch (const std::exception& e) {
    throw DataError(fmt::format("{}: cannot read: {}", r.file, e.what()));
  }
  // A js-tiktoken module: `export default {...};` (or `module.exports = {...};`).
  const size_t brace = text.find('{');
  if (brace != std::string::npos && text.compare(0, 1, "{") != 0) {
    const size_t close = text.rfind('}');
    if (close != std::string::npos && close > brace) text = text.substr(brace, close + 1 - brace);
  }
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    throw DataError(fmt::format("{}: not JSON: {}", r.file, e.what()));
  }
  if (!root.is_object()) r.fail("(top)", "must be an object");
  if (root.contains("bpe_ranks")) return read_ranks(r, root);
  if (root.contains("model")) return read_hf(r, root);
  r.fail("(top)",
         "neither a tokenizer.json (no `model`) nor a js-tiktoken rank file (no `bpe_ranks`)");
}

std::shared_ptr<const BpeTokenizer> load_tokenizer(const std::string& path) {
  const BpeVocabulary v = read_tokenizer_file(path);
  try {
    return std::make_shared<const BpeTokenizer>(v);
  } catch (const std::invalid_argument& e) {
    throw DataError(e.what());
  }
}

}  // namespace hybridlab::tokenizer
