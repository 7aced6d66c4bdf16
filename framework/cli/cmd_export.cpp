// `hybridlab export`: a trained run's model in a Hugging Face layout other tools read.

#include <fmt/format.h>

#include <memory>

#include "commands.h"
#include "hybridlab/run.h"

namespace hybridlab::cli {

void add_export_command(CLI::App& app) {
  struct Args {
    std::string run_dir, format = "hf-fla", out_dir;
  };
  auto a = std::make_shared<Args>();
  auto* c = app.add_subcommand(
      "export",
      "Write the model of a trained or finished run as config.json + model.safetensors in a "
      "Hugging Face layout. hf-fla: flash-linear-attention's gated_deltanet (Gated DeltaNet "
      "layers, attention layers with RoPE through its `attn` spec), loadable with fla's "
      "AutoModelForCausalLM. What the layout cannot express (a plugin mixer, a scheme other than "
      "RoPE, qk-norm, an output gate, ...) is refused by name, never approximated "
      "(docs/interop.md).\n"
      "Exit code: 0 written, 2 bad input or a model the layout cannot express (nothing written).");
  c->add_option("run_dir", a->run_dir, "Run folder, e.g. runs/quickstart/pattern-GGGA_scheme-rope")
      ->required();
  c->add_option("out_dir", a->out_dir, "New (or empty) folder to write the files into")->required();
  c->add_option("--format", a->format, "Layout: hf-fla")->capture_default_str();
  c->callback([a] {
    const ExportedRun r = export_run(a->run_dir, a->format, a->out_dir);
    fmt::print("wrote {}: config.json and model.safetensors ({} tensors, {:.1f} MiB)\n", r.out_dir,
               r.tensors, static_cast<double>(r.bytes) / (1024.0 * 1024.0));
  });
}

}  // namespace hybridlab::cli
