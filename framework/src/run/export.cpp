// export_run: a trained run's model written in a Hugging Face layout other tools read.

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "checkpoint/safetensors.h"
#include "hybridlab/error.h"
#include "hybridlab/interop.h"
#include "hybridlab/run.h"
#include "hybridlab/run_build.h"
#include "util/atomic_file.h"

namespace hybridlab {
namespace fs = std::filesystem;

namespace {

// Refuses an output folder that holds anything: an export never mixes with other files.
void check_out_dir(const std::string& out_dir) {
  std::error_code ec;
  if (!path_present(out_dir)) return;
  if (!fs::is_directory(out_dir, ec) || fs::is_symlink(out_dir, ec)) {
    throw UserError(
        fmt::format("'{}' exists and is not a folder; give a new folder to export to", out_dir));
  }
  if (!fs::is_empty(out_dir, ec)) {
    throw UserError(fmt::format(
        "'{}' is not empty; give a new or empty folder (an export never overwrites files)",
        out_dir));
  }
}

}  // namespace

ExportedRun export_run(const std::string& run_dir, const std::string& format,
                       const std::string& out_dir) {
  if (format != "hf-fla") {
    throw UserError(
        fmt::format("--format '{}' is not known; the formats are: hf-fla (flash-linear-attention's "
                    "gated_deltanet layout)",
                    format));
  }
  check_out_dir(out_dir);
  TrainedRun t = load_trained_run(RunFolder(run_dir));
  const ModelBuildContext lengths = model_build_context(t.built.exp);
  const HfCheckpoint ck =
      export_hf_fla(*t.built.model, std::max(lengths.train_length, lengths.max_length));

  const fs::path out = fs::absolute(out_dir).lexically_normal();
  const fs::path tmp = out.string() + ".tmp." + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  try {
    write_file_atomic((tmp / "config.json").string(), ck.config_json);
    write_safetensors((tmp / "model.safetensors").string(), ck.tensors,
                      {{"format", "pt"}, {"hybridlab_run", run_dir}});
    if (fs::exists(out, ec)) fs::remove(out, ec);  // empty (checked above)
    fs::rename(tmp, out, ec);
    if (ec) {
      throw UserError(
          fmt::format("cannot move '{}' to '{}': {}", tmp.string(), out.string(), ec.message()));
    }
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  ExportedRun r;
  r.out_dir = out.string();
  r.tensors = static_cast<int64_t>(ck.tensors.size());
  r.bytes = static_cast<int64_t>(fs::file_size(out / "model.safetensors"));
  return r;
}

}  // namespace hybridlab
