#include "checkpoint/safetensors.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "hybridlab/error.h"
#include "util/atomic_file.h"

namespace hybridlab {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The format's integer and float dtypes hybridlab reads, with their torch dtypes and sizes.
struct DtypeRow {
  const char* name;
  torch::ScalarType type;
};
constexpr std::array<DtypeRow, 10> kDtypes{{{"F64", torch::kFloat64},
                                            {"F32", torch::kFloat32},
                                            {"F16", torch::kFloat16},
                                            {"BF16", torch::kBFloat16},
                                            {"I64", torch::kInt64},
                                            {"I32", torch::kInt32},
                                            {"I16", torch::kInt16},
                                            {"I8", torch::kInt8},
                                            {"U8", torch::kUInt8},
                                            {"BOOL", torch::kBool}}};

// Every dtype name of the format (safetensors/src/tensor.rs `Dtype`), read or not: a name outside
// this list is a malformed header, one inside it but not in kDtypes is unsupported.
const std::set<std::string>& format_dtype_names() {
  static const std::set<std::string> names{
      "BOOL",    "F4",          "F6_E2M3",     "F6_E3M2", "U8",  "I8",  "F8_E5M2", "F8_E4M3",
      "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16",     "U16", "F16", "BF16",    "I32",
      "U32",     "F32",         "C64",         "F64",     "I64", "U64"};
  return names;
}

[[noreturn]] void bad(const std::string& file, const std::string& what) {
  throw DataError(fmt::format("{}: {}", file, what));
}

uint64_t element_size(const std::string& dtype) {
  for (const auto& row : kDtypes) {
    if (dtype == row.name) return static_cast<uint64_t>(c10::elementSize(row.type));
  }
  return 0;
}

// Reads one record; `file` and `name` for messages.
SafetensorsEntry read_entry(const std::string& name, const json& rec, const std::string& file) {
  const std::string where = fmt::format("tensor '{}'", name);
  if (!rec.is_object()) bad(file, where + ": expected an object with dtype, shape, data_offsets");
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!rec.contains(key)) bad(file, fmt::format("{}: no '{}'", where, key));
  }
  SafetensorsEntry e;
  e.name = name;
  if (!rec["dtype"].is_string()) bad(file, where + ": 'dtype' is not a string");
  e.dtype = rec["dtype"].get<std::string>();
  if (!format_dtype_names().count(e.dtype)) {
    bad(file, fmt::format("{}: unknown dtype '{}'", where, e.dtype));
  }
  if (!rec["shape"].is_array()) bad(file, where + ": 'shape' is not a list");
  for (const auto& d : rec["shape"]) {
    if (!d.is_number_unsigned()) bad(file, where + ": 'shape' holds a value that is not a size");
    e.shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
    if (e.shape.back() < 0) bad(file, where + ": a dimension past 2^63");
  }
  const json& off = rec["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
      !off[1].is_number_unsigned()) {
    bad(file, where + ": 'data_offsets' is not [begin, end]");
  }
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  if (e.begin > e.end)
    bad(file, fmt::format("{}: data_offsets [{}, {}] end before begin", where, e.begin, e.end));
  return e;
}

// prod(shape)·itemsize, or throws when it overflows; 0 itemsize (an unread dtype) is checked
// against the bytes only when the dtype is read.
void check_size(const SafetensorsEntry& e, const std::string& file) {
  const uint64_t item = element_size(e.dtype);
  if (item == 0) return;  // refused on load, not here: the header itself is well formed
  uint64_t bytes = item;
  for (int64_t d : e.shape) {
    const auto u = static_cast<uint64_t>(d);
    if (u != 0 && bytes > std::numeric_limits<uint64_t>::max() / u) {
      bad(file, fmt::format("tensor '{}': shape overflows", e.name));
    }
    bytes *= u;
  }
  if (bytes != e.end - e.begin) {
    bad(file,
        fmt::format("tensor '{}': {} {} needs {} bytes, data_offsets [{}, {}] hold {}", e.name,
                    e.dtype, json(e.shape).dump(), bytes, e.begin, e.end, e.end - e.begin));
  }
}

// Contiguous from 0, no gap, no overlap, ending where the file does.
void check_layout(std::vector<SafetensorsEntry>& tensors, uint64_t data_size,
                  const std::string& file) {
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  for (const auto& e : tensors) {
    if (e.begin != at) {
      bad(file, fmt::format("tensor '{}' starts at byte {} of the data, where {} was expected ({})",
                            e.name, e.begin, at, e.begin > at ? "a gap" : "an overlap"));
    }
    at = e.end;
  }
  if (at != data_size) {
    bad(file, fmt::format("the tensors end at byte {} of the data but the file holds {} data "
                          "bytes (truncated or padded file)",
                          at, data_size));
  }
}

}  // namespace

torch::ScalarType safetensors_torch_dtype(const std::string& dtype, const std::string& where) {
  for (const auto& row : kDtypes) {
    if (dtype == row.name) return row.type;
  }
  throw DataError(
      fmt::format("{}: dtype '{}' is not read by hybridlab (it reads F64, F32, F16, "
                  "BF16, I64, I32, I16, I8, U8, BOOL)",
                  where, dtype));
}

std::string safetensors_dtype_name(torch::ScalarType t) {
  for (const auto& row : kDtypes) {
    if (t == row.type) return row.name;
  }
  throw std::invalid_argument(std::string("safetensors has no name for dtype ") + c10::toString(t));
}

SafetensorsHeader parse_safetensors_header(const std::string& header_json, uint64_t file_size,
                                           const std::string& file) {
  SafetensorsHeader h;
  h.data_start = 8 + header_json.size();
  // Duplicate names: nlohmann keeps the last one silently, so they are caught while parsing.
  std::set<std::string> seen;
  std::string duplicate;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 &&
        !seen.insert(parsed.get<std::string>()).second && duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json doc;
  try {
    doc = json::parse(header_json, cb);
  } catch (const json::exception& e) {
    bad(file, fmt::format("the header is not valid JSON ({})", e.what()));
  }
  if (!duplicate.empty()) bad(file, fmt::format("tensor '{}' is named twice", duplicate));
  if (!doc.is_object()) bad(file, "the header is not a JSON object");
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) bad(file, "'__metadata__' is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) bad(file, fmt::format("__metadata__.{} is not a string", m.key()));
        h.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    h.tensors.push_back(read_entry(it.key(), *it, file));
    check_size(h.tensors.back(), file);
  }
  check_layout(h.tensors, file_size - h.data_start, file);
  return h;
}

SafetensorsFile::SafetensorsFile(std::string path) : path_(std::move(path)) {
  std::error_code ec;
  if (!fs::is_regular_file(path_, ec)) bad(path_, "not a file");
  const uint64_t size = fs::file_size(path_, ec);
  if (ec) bad(path_, "cannot read: " + ec.message());
  if (size < 8) bad(path_, fmt::format("{} bytes: too short for the 8-byte header length", size));
  std::ifstream in(path_, std::ios::binary);
  unsigned char len_bytes[8];
  if (!in.read(reinterpret_cast<char*>(len_bytes), 8)) bad(path_, "cannot read the header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];  // little-endian on any host
  if (n > kSafetensorsMaxHeader) {
    bad(path_, fmt::format("header length {} exceeds the format's limit of {} bytes", n,
                           kSafetensorsMaxHeader));
  }
  if (n > size - 8) {
    bad(path_,
        fmt::format("header length {} runs past the end of the {}-byte file (truncated)", n, size));
  }
  std::string text(n, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(n))) bad(path_, "cannot read the header");
  header_ = parse_safetensors_header(text, size, path_);
  for (size_t i = 0; i < header_.tensors.size(); ++i) index_[header_.tensors[i].name] = i;
}

bool SafetensorsFile::contains(const std::string& name) const { return index_.count(name) > 0; }

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) bad(path_, fmt::format("no tensor '{}'", name));
  return header_.tensors[it->second];
}

torch::Tensor SafetensorsFile::load(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  const torch::ScalarType type =
      safetensors_torch_dtype(e.dtype, fmt::format("{}: tensor '{}'", path_, name));
  torch::Tensor t = torch::empty(e.shape, torch::TensorOptions().dtype(type));
  std::ifstream in(path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(header_.data_start + e.begin));
  const auto bytes = static_cast<std::streamsize>(e.end - e.begin);
  if (!in.read(static_cast<char*>(t.data_ptr()), bytes)) {
    bad(path_, fmt::format("tensor '{}': cannot read its {} bytes", name, bytes));
  }
  return t;
}

void SafetensorsFile::load_into(const std::string& name, torch::Tensor& dst,
                                int64_t chunk_bytes) const {
  const SafetensorsEntry& e = entry(name);
  const torch::ScalarType type =
      safetensors_torch_dtype(e.dtype, fmt::format("{}: tensor '{}'", path_, name));
  const auto item = static_cast<int64_t>(c10::elementSize(type));
  const int64_t numel = static_cast<int64_t>(e.end - e.begin) / item;
  if (!dst.is_contiguous() || dst.device() != torch::kCPU || dst.numel() != numel) {
    bad(path_, fmt::format("tensor '{}': {} elements cannot fill a tensor of {}", name, numel,
                           json(dst.sizes().vec()).dump()));
  }
  std::ifstream in(path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(header_.data_start + e.begin));
  const int64_t per_chunk = std::max<int64_t>(1, chunk_bytes / item);
  torch::Tensor buffer = torch::empty({std::min(per_chunk, std::max<int64_t>(numel, 1))},
                                      torch::TensorOptions().dtype(type));
  torch::Tensor flat = dst.view({-1});
  for (int64_t at = 0; at < numel; at += per_chunk) {
    const int64_t n = std::min(per_chunk, numel - at);
    if (!in.read(static_cast<char*>(buffer.data_ptr()), static_cast<std::streamsize>(n * item))) {
      bad(path_, fmt::format("tensor '{}': cannot read its bytes", name));
    }
    flat.narrow(0, at, n).copy_(buffer.narrow(0, 0, n));
  }
}

SafetensorsCheckpoint::SafetensorsCheckpoint(const std::string& path) : path_(path) {
  std::error_code ec;
  std::vector<std::string> shards;
  std::map<std::string, std::string> index;  // tensor -> shard file, from the index
  const fs::path dir(path);
  if (!fs::is_directory(dir, ec)) {
    shards.push_back(path);
  } else if (fs::exists(dir / "model.safetensors.index.json", ec)) {
    const std::string index_file = (dir / "model.safetensors.index.json").string();
    json doc;
    try {
      doc = json::parse(read_file(index_file));
    } catch (const json::exception& e) {
      bad(index_file, fmt::format("not valid JSON ({})", e.what()));
    }
    if (!doc.is_object() || !doc.contains("weight_map") || !doc["weight_map"].is_object()) {
      bad(index_file, "no 'weight_map' object");
    }
    std::set<std::string> files;
    for (auto it = doc["weight_map"].begin(); it != doc["weight_map"].end(); ++it) {
      if (!it->is_string())
        bad(index_file, fmt::format("weight_map.{} is not a file name", it.key()));
      const std::string shard = it->get<std::string>();
      if (shard.find('/') != std::string::npos) {
        bad(index_file,
            fmt::format("weight_map.{}: '{}' is not a file in the folder", it.key(), shard));
      }
      index[it.key()] = shard;
      files.insert(shard);
    }
    for (const auto& f : files) shards.push_back((dir / f).string());
  } else {
    shards.push_back((dir / "model.safetensors").string());
    if (!fs::exists(shards.back(), ec)) {
      bad(path, "no model.safetensors or model.safetensors.index.json in this folder");
    }
  }
  for (const auto& shard : shards) {
    files_.emplace_back(shard);
    for (const auto& e : files_.back().header().tensors) {
      if (where_.count(e.name)) {
        bad(shard, fmt::format("tensor '{}' is also in '{}'", e.name, file_of(e.name)));
      }
      where_[e.name] = files_.size() - 1;
    }
  }
  for (const auto& [name, shard] : index) {
    if (!where_.count(name) || fs::path(file_of(name)).filename() != shard) {
      bad((dir / "model.safetensors.index.json").string(),
          fmt::format("weight_map.{} names '{}', which does not hold it", name, shard));
    }
  }
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [name, i] : where_) out.push_back(name);
  return out;
}

const SafetensorsEntry& SafetensorsCheckpoint::entry(const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end()) bad(path_, fmt::format("no tensor '{}'", name));
  return files_[it->second].entry(name);
}

torch::Tensor SafetensorsCheckpoint::load(const std::string& name) const {
  entry(name);  // the error names the checkpoint
  return files_[where_.at(name)].load(name);
}

void SafetensorsCheckpoint::load_into(const std::string& name, torch::Tensor& dst) const {
  entry(name);  // the error names the checkpoint
  files_[where_.at(name)].load_into(name, dst);
}

const std::string& SafetensorsCheckpoint::file_of(const std::string& name) const {
  entry(name);
  return files_[where_.at(name)].path();
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<size_t> order(tensors.size());
  std::set<std::string> names;
  for (size_t i = 0; i < tensors.size(); ++i) {
    order[i] = i;
    if (tensors[i].first.empty() || tensors[i].first == "__metadata__" ||
        !names.insert(tensors[i].first).second) {
      throw std::invalid_argument("write_safetensors: empty, reserved or duplicate name '" +
                                  tensors[i].first + "'");
    }
    safetensors_dtype_name(tensors[i].second.scalar_type());  // throws for an unnamed dtype
  }
  // The reference writer's order: larger elements first (each stays aligned), then by name.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto sa = tensors[a].second.element_size(), sb = tensors[b].second.element_size();
    return sa != sb ? sa > sb : tensors[a].first < tensors[b].first;
  });
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t at = 0;
  for (size_t i : order) {
    const torch::Tensor& t = tensors[i].second;
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    header[tensors[i].first] = {{"dtype", safetensors_dtype_name(t.scalar_type())},
                                {"shape", t.sizes().vec()},
                                {"data_offsets", {at, at + bytes}}};
    at += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  write_file_atomic(path, [&](std::FILE* f) {
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(text.size() >> (8 * i));
    if (std::fwrite(len, 1, 8, f) != 8) return false;
    if (std::fwrite(text.data(), 1, text.size(), f) != text.size()) return false;
    for (size_t i : order) {
      const torch::Tensor t = tensors[i].second.detach().to(torch::kCPU).contiguous();
      const size_t bytes = static_cast<size_t>(t.numel()) * t.element_size();
      if (bytes && std::fwrite(t.data_ptr(), 1, bytes, f) != bytes) return false;
    }
    return true;
  });
}

}  // namespace hybridlab
