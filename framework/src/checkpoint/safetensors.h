#pragma once
// The safetensors checkpoint format (huggingface/safetensors, README "Format" and
// safetensors/src/tensor.rs `validate`): an 8-byte little-endian header length N, N bytes of
// UTF-8 JSON naming each tensor's dtype, shape and data_offsets (from the first byte after the
// header, end exclusive), then the tensors' bytes, row-major and little-endian, back to back.
// Sharded checkpoints add `model.safetensors.index.json` ({"weight_map": {tensor: file}}).
//
// Readers check the whole header (size, JSON, keys, dtypes, offsets) before allocating any
// tensor, so a truncated or hostile file costs at most its header. Every error is a DataError
// naming the file and the tensor or key.

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace hybridlab {

/// The largest header the reference implementation accepts (tensor.rs MAX_HEADER_SIZE).
constexpr uint64_t kSafetensorsMaxHeader = 100'000'000;

/// One tensor's record in a header.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;            ///< the format's name: "F32", "BF16", "I64", ...
  std::vector<int64_t> shape;   ///< [] is a scalar
  uint64_t begin = 0, end = 0;  ///< byte offsets from the start of the data section
};

/// A validated header: entries sorted by `begin`, contiguous from 0 to the end of the file.
struct SafetensorsHeader {
  std::vector<SafetensorsEntry> tensors;
  std::map<std::string, std::string> metadata;  ///< `__metadata__` (string values only)
  uint64_t data_start = 0;                      ///< 8 + N: file offset of the data section
};

/// The torch dtype of a format dtype name, or throws DataError naming `where` when hybridlab does
/// not read it (F8 variants, F4, F6, unsigned types wider than 8 bits, C64).
torch::ScalarType safetensors_torch_dtype(const std::string& dtype, const std::string& where);

/// The format's name for a torch dtype ("F32", ...); throws std::invalid_argument for one the
/// format has no name for.
std::string safetensors_dtype_name(torch::ScalarType t);

/// Parses and validates a header given the file's total size in bytes. `file` names the file in
/// messages. Throws DataError for: a file shorter than 8 bytes, N > kSafetensorsMaxHeader or past
/// the end of the file, invalid JSON or a non-object, duplicate tensor names, a record without
/// dtype / shape / data_offsets or with a wrong type, a negative dimension, an unknown dtype,
/// begin > end, a byte count other than prod(shape)·itemsize, offsets with a gap or an overlap,
/// and a last offset short of or past the end of the file.
SafetensorsHeader parse_safetensors_header(const std::string& header_json, uint64_t file_size,
                                           const std::string& file);

/// One safetensors file, its header read and checked on open; tensors are read on demand.
class SafetensorsFile {
 public:
  /// Reads and validates the header of `path` (parse_safetensors_header's errors, and DataError
  /// when the file cannot be read).
  explicit SafetensorsFile(std::string path);
  const SafetensorsHeader& header() const { return header_; }
  const std::string& path() const { return path_; }
  /// Whether the file holds tensor `name`.
  bool contains(const std::string& name) const;
  /// The record of `name`; throws DataError naming the file and the tensor when it is absent.
  const SafetensorsEntry& entry(const std::string& name) const;
  /// Reads tensor `name` into a new CPU tensor of its stored dtype and shape. Throws DataError
  /// when it is absent, its dtype is not read (safetensors_torch_dtype) or the read fails.
  torch::Tensor load(const std::string& name) const;
  /// Reads tensor `name` into `dst` (contiguous, CPU, the same number of elements, any floating
  /// dtype), `chunk_bytes` of the file at a time, converting the dtype: a tensor the size of the
  /// model's largest is never held twice. Throws DataError as load(), and when the element counts
  /// differ.
  void load_into(const std::string& name, torch::Tensor& dst,
                 int64_t chunk_bytes = int64_t{64} << 20) const;

 private:
  std::string path_;
  SafetensorsHeader header_;
  std::map<std::string, size_t> index_;
};

/// A checkpoint folder or file: `model.safetensors`, or the shards named by
/// `model.safetensors.index.json`, or a single `.safetensors` file given directly. Each shard's
/// header is validated on open; a name the index maps to a shard that lacks it is a DataError.
class SafetensorsCheckpoint {
 public:
  explicit SafetensorsCheckpoint(const std::string& path);
  /// Every tensor name, sorted.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return where_.count(name) > 0; }
  /// The record of `name` (DataError naming the checkpoint when absent).
  const SafetensorsEntry& entry(const std::string& name) const;
  /// Reads tensor `name` (SafetensorsFile::load).
  torch::Tensor load(const std::string& name) const;
  /// Reads tensor `name` into `dst` (SafetensorsFile::load_into).
  void load_into(const std::string& name, torch::Tensor& dst) const;
  /// The file `name` is stored in.
  const std::string& file_of(const std::string& name) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t> where_;
};

/// Writes `tensors` to `path` atomically (a temporary file in the same folder, renamed when
/// complete), streaming one tensor at a time: the file's bytes are never held in memory at once.
/// Tensors are written in the reference writer's order (descending dtype alignment, then name)
/// and the header is padded with spaces to a multiple of 8. Non-contiguous or non-CPU tensors are
/// copied one at a time. Throws std::invalid_argument for an empty or duplicate name or a dtype
/// the format cannot name, and UserError when the file cannot be written (nothing is left).
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace hybridlab
