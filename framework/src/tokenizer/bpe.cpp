#include "tokenizer/bpe.h"

#include <fmt/format.h>

#include <limits>
#include <stdexcept>

namespace hybridlab::tokenizer {
namespace {

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

// Pieces longer than this are merged but not remembered (a run of spaces or digits).
constexpr size_t kLongestCachedPiece = 64;
constexpr size_t kCacheEntries = 1 << 20;

}  // namespace

BpeTokenizer::BpeTokenizer(const BpeVocabulary& vocab)
    : source_(vocab.source),
      bytes_(vocab.tokens),
      whole_piece_first_(vocab.whole_piece_first),
      special_(vocab.special),
      pre_(vocab.pattern) {
  const auto bad = [&](const std::string& what) {
    return std::invalid_argument(fmt::format("{}: {}", source_, what));
  };
  for (const auto& [text, id] : special_) {
    if (id < 0) throw bad(fmt::format("special token '{}' has the negative id {}", text, id));
    if (static_cast<size_t>(id) >= bytes_.size()) bytes_.resize(static_cast<size_t>(id) + 1);
  }
  lengths_.assign(bytes_.size(), 0);
  for (size_t id = 0; id < vocab.tokens.size(); ++id) {
    const std::string& t = vocab.tokens[id];
    if (t.empty()) continue;
    const auto [it, fresh] = id_of_.emplace(t, static_cast<int32_t>(id));
    if (!fresh) throw bad(fmt::format("ids {} and {} are the same token", it->second, id));
    lengths_[id] = static_cast<int32_t>(t.size());
  }
  for (const auto& [text, id] : special_) lengths_[static_cast<size_t>(id)] = int32_t(text.size());
  for (int b = 0; b < 256; ++b) {
    const auto it = id_of_.find(std::string(1, static_cast<char>(b)));
    if (it == id_of_.end()) {
      throw bad(fmt::format("the byte 0x{:02x} has no token (byte-level BPE needs all 256)", b));
    }
    byte_id_[b] = it->second;
  }
  const auto add = [&](int32_t a, int32_t b, Merge m) {
    const auto [it, fresh] = merges_.emplace(pair_key(a, b), m);
    if (!fresh && m.priority < it->second.priority) it->second = m;
  };
  if (vocab.merges_by_rank) {
    // Every split of a token into two tokens may merge back into it, at the token's rank.
    for (const auto& [t, id] : id_of_) {
      for (size_t k = 1; k < t.size(); ++k) {
        const auto a = id_of_.find(t.substr(0, k));
        if (a == id_of_.end()) continue;
        const auto b = id_of_.find(t.substr(k));
        if (b != id_of_.end()) add(a->second, b->second, {id, id});
      }
    }
  } else {
    for (size_t i = 0; i < vocab.merges.size(); ++i) {
      const auto& [left, right] = vocab.merges[i];
      const auto a = id_of_.find(left), b = id_of_.find(right), r = id_of_.find(left + right);
      if (a == id_of_.end() || b == id_of_.end() || r == id_of_.end()) {
        throw bad(fmt::format("merge {} joins parts or makes a result that is not a token", i));
      }
      add(a->second, b->second, {static_cast<int32_t>(i), r->second});
    }
  }
}

void BpeTokenizer::merge(std::vector<int32_t>& parts) const {
  while (parts.size() > 1) {
    int32_t best = std::numeric_limits<int32_t>::max();
    size_t at = 0;
    int32_t result = -1;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const auto it = merges_.find(pair_key(parts[i], parts[i + 1]));
      if (it != merges_.end() && it->second.priority < best) {
        best = it->second.priority;
        result = it->second.result;
        at = i;
      }
    }
    if (result < 0) return;
    parts[at] = result;
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  const bool cacheable = piece.size() <= kLongestCachedPiece;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(std::string(piece));
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> parts;
  const auto whole = whole_piece_first_ ? id_of_.find(std::string(piece)) : id_of_.end();
  if (whole != id_of_.end()) {
    parts.push_back(whole->second);
  } else {
    parts.reserve(piece.size());
    for (unsigned char c : piece) parts.push_back(byte_id_[c]);
    merge(parts);
  }
  out.insert(out.end(), parts.begin(), parts.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kCacheEntries) cache_.clear();
    cache_.emplace(std::string(piece), std::move(parts));
  }
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  for (std::string_view piece : pre_.split(text)) encode_piece(piece, ids);
  return ids;
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= bytes_.size() || lengths_[id] == 0) {
      throw std::out_of_range(fmt::format("{}: token id {} is not in the vocabulary", source_, id));
    }
    if (!bytes_[id].empty()) {
      out += bytes_[id];
      continue;
    }
    for (const auto& [text, sid] : special_) {
      if (sid == id) out += text;
    }
  }
  return out;
}

int32_t BpeTokenizer::special_id(const std::string& text) const {
  const auto it = special_.find(text);
  return it == special_.end() ? -1 : it->second;
}

}  // namespace hybridlab::tokenizer
