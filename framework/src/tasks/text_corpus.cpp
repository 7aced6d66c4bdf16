#include "tasks/text_corpus.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "hybridlab/error.h"
#include "tokenizer/bpe.h"
#include "util/atomic_file.h"

namespace hybridlab::tasks {
namespace fs = std::filesystem;

bool is_utf8(const std::string& data, size_t& bad_offset) {
  const auto* s = reinterpret_cast<const unsigned char*>(data.data());
  const size_t n = data.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      bad_offset = i;
      return false;
    }
    if (i + len > n) {
      bad_offset = i;
      return false;
    }
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) {
        bad_offset = i;
        return false;
      }
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    // Overlong encodings, surrogates and values past U+10FFFF are invalid.
    const bool overlong =
        (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
      bad_offset = i;
      return false;
    }
    i += len;
  }
  return true;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

namespace {

struct Doc {
  std::string name;
  std::string text;
};

std::vector<fs::path> files_below(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_regular_file(type_ec) && it->path().filename().string()[0] != '.')
      out.push_back(it->path());
  }
  if (ec) {
    throw DataError(fmt::format("text corpus: cannot list '{}': {}", dir.string(), ec.message()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

Doc read_doc(const fs::path& p, const std::string& name) {
  Doc d{name, read_file(p.string())};
  size_t bad = 0;
  if (!is_utf8(d.text, bad)) {
    throw DataError(
        fmt::format("text corpus: '{}' is not UTF-8 (invalid byte 0x{:02x} at offset {}); "
                    "convert it, e.g. `iconv -f latin1 -t utf-8`",
                    p.string(), static_cast<unsigned char>(d.text[bad]), bad));
  }
  return d;
}

DocumentSet make_set(const std::vector<Doc>& docs) {
  DocumentSet s;
  int64_t total = 0;
  for (const auto& d : docs) total += static_cast<int64_t>(d.text.size());
  s.tokens = torch::empty({total}, torch::kUInt8);
  s.text_bytes = total;
  auto* p = s.tokens.data_ptr<uint8_t>();
  int64_t at = 0;
  for (const auto& d : docs) {
    std::copy(d.text.begin(), d.text.end(), p + at);
    s.offset_of.push_back(at);
    s.lengths.push_back(static_cast<int64_t>(d.text.size()));
    s.names.push_back(d.name);
    s.longest = std::max<int64_t>(s.longest, d.text.size());
    at += static_cast<int64_t>(d.text.size());
  }
  s.offsets = torch::tensor(s.offset_of, torch::kLong);
  return s;
}

}  // namespace

fs::path resolve_data_path(const std::string& path, const std::string& config_dir) {
  const fs::path p(path);
  if (p.is_absolute() || fs::exists(p)) return p;
  // Relative to the experiment file's folder and its parents (so `hybridlab run` works from any
  // folder for experiments inside the repository).
  if (!config_dir.empty()) {
    for (fs::path d = fs::absolute(config_dir); !d.empty(); d = d.parent_path()) {
      if (fs::exists(d / p)) return d / p;
      if (d == d.parent_path()) break;
    }
  }
  return p;
}

namespace {

// The places resolve_data_path() looked, for the error message.
std::string tried(const std::string& path, const std::string& config_dir) {
  const fs::path p(path);
  std::string out = "'" + fs::absolute(p).lexically_normal().string() + "'";
  if (p.is_absolute() || config_dir.empty()) return out;
  const fs::path d = fs::absolute(config_dir).lexically_normal();
  return out + " and '" + (d / p).string() + "' and the same below each parent of '" + d.string() +
         "'";
}

}  // namespace

TextCorpus load_text_corpus(const std::string& path, const std::string& config_dir,
                            double eval_fraction, const std::string& separator) {
  const fs::path root = resolve_data_path(path, config_dir);
  TextCorpus c;
  c.root = root.string();
  if (std::error_code loop; !fs::exists(root, loop) && loop.value() == ELOOP) {
    throw DataError(fmt::format("text corpus '{}' is a loop of symbolic links", root.string()));
  }
  if (!fs::exists(root)) {
    const bool brown = fs::path(path).filename() == "brown";
    throw DataError(fmt::format(
        "text corpus '{}' does not exist (looked for {}){}", path, tried(path, config_dir),
        brown ? ": the Brown corpus is fetched once by `scripts/fetch_brown.sh` (run by "
                "scripts/setup.sh) into data/brown/; nothing is downloaded at run time"
              : "; set task.path to a UTF-8 text file or folder"));
  }
  std::error_code ec;
  const fs::file_status st = fs::status(root, ec);
  if (!fs::is_directory(st) && !fs::is_regular_file(st)) {
    // /dev/zero, a pipe or a socket: reading it never ends or never holds documents.
    throw DataError(fmt::format(
        "text corpus '{}' is not a regular file or folder (a device, pipe or socket); set "
        "task.path to a UTF-8 text file or folder",
        root.string()));
  }
  std::vector<Doc> train, validation;
  auto add_split = [&](const Doc& d, uint64_t key) {
    // Hash of the name in [0,1): stable under adding or removing other documents.
    const double u =
        static_cast<double>(fnv1a(std::to_string(key) + d.name) >> 11) / 9007199254740992.0;
    (u < eval_fraction ? validation : train).push_back(d);
  };
  if (fs::is_directory(root)) {
    if (fs::is_directory(root / "train") && fs::is_directory(root / "validation")) {
      for (const auto& f : files_below(root / "train"))
        train.push_back(read_doc(f, f.lexically_relative(root).string()));
      for (const auto& f : files_below(root / "validation"))
        validation.push_back(read_doc(f, f.lexically_relative(root).string()));
    } else {
      for (const auto& f : files_below(root))
        add_split(read_doc(f, f.lexically_relative(root).string()), 0);
    }
  } else {
    const Doc whole = read_doc(root, root.filename().string());
    size_t at = 0;
    int64_t index = 0;
    while (at <= whole.text.size()) {
      size_t end = whole.text.find(separator, at);
      if (end == std::string::npos) end = whole.text.size();
      if (end > at)
        add_split({fmt::format("{}#{}", whole.name, index), whole.text.substr(at, end - at)}, 0);
      ++index;
      at = end + separator.size();
    }
  }
  auto drop_empty = [](std::vector<Doc>& v) {
    v.erase(std::remove_if(v.begin(), v.end(), [](const Doc& d) { return d.text.empty(); }),
            v.end());
  };
  drop_empty(train);
  drop_empty(validation);
  if (train.empty() && validation.empty()) {
    throw DataError(fmt::format("text corpus '{}' is empty (no non-empty documents)", c.root));
  }
  if (validation.empty() && train.size() >= 2) {  // tiny corpora: keep at least one eval document
    validation.push_back(train.back());
    train.pop_back();
  }
  if (train.empty() || validation.empty()) {
    throw DataError(fmt::format(
        "text corpus '{}' has {} train and {} validation documents; both splits need at least one "
        "(give a folder with train/ and validation/, or more documents{})",
        c.root, train.size(), validation.size(),
        fs::is_directory(root) ? "" : " separated by task.document_separator"));
  }
  c.train = make_set(train);
  c.validation = make_set(validation);
  return c;
}

DocumentSet tokenize_documents(const DocumentSet& set, const tokenizer::BpeTokenizer& tok) {
  DocumentSet out;
  out.names = set.names;
  out.text_bytes = set.text_bytes;
  std::vector<int32_t> all;
  all.reserve(static_cast<size_t>(set.text_bytes / 3));
  const auto* p = reinterpret_cast<const char*>(set.tokens.data_ptr<uint8_t>());
  for (size_t d = 0; d < set.lengths.size(); ++d) {
    const std::vector<int32_t> ids =
        tok.encode(std::string_view(p + set.offset_of[d], static_cast<size_t>(set.lengths[d])));
    out.offset_of.push_back(static_cast<int64_t>(all.size()));
    out.lengths.push_back(static_cast<int64_t>(ids.size()));
    out.longest = std::max<int64_t>(out.longest, static_cast<int64_t>(ids.size()));
    all.insert(all.end(), ids.begin(), ids.end());
  }
  out.tokens = torch::tensor(torch::ArrayRef<int32_t>(all), torch::kInt);
  out.offsets = torch::tensor(out.offset_of, torch::kLong);
  return out;
}

}  // namespace hybridlab::tasks
