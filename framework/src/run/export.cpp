// export_run: a trained run's model written in a Hugging Face layout other tools read.

#include <fmt/format.h>

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

ExportedRun export_run(const std::string& run_dir, const std::string& format,
                       const std::string& out_dir) {
  if (format != "hf-fla") {
    throw UserError(
        fmt::format("--format '{}' is not known; the formats are: hf-fla (flash-linear-attention's "
                    "gated_deltanet layout)",
                    format));
  }
  require_new_folder(out_dir, "an export");
  TrainedRun t = load_trained_run(RunFolder(run_dir));
  const ModelBuildContext lengths = model_build_context(t.built.exp);
  const HfCheckpoint ck =
      export_hf_fla(*t.built.model, std::max(lengths.train_length, lengths.max_length));

  const fs::path out = write_folder_atomic(out_dir, "an export", [&](const std::string& tmp) {
    write_file_atomic((fs::path(tmp) / "config.json").string(), ck.config_json);
    write_safetensors((fs::path(tmp) / "model.safetensors").string(), ck.tensors,
                      {{"format", "pt"}, {"hybridlab_run", run_dir}});
  });
  ExportedRun r;
  r.out_dir = out.string();
  r.tensors = static_cast<int64_t>(ck.tensors.size());
  r.bytes = static_cast<int64_t>(fs::file_size(out / "model.safetensors"));
  return r;
}

}  // namespace hybridlab
