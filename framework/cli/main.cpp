// hybridlab: the command-line entry point. Subcommands live in cmd_*.cpp.

#include <torch/version.h>

#include <ATen/Parallel.h>
#include <fmt/core.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "hybridlab/distributed.h"
#include "hybridlab/error.h"
#include "hybridlab/runtime.h"
#include "hybridlab/version.h"

namespace {

std::string version_text() {
  return fmt::format(
      "hybridlab {}\nLibTorch {}\nBLAS {}\nthreads {} intra-op (of {} cores), {} inter-op\n",
      HYBRIDLAB_VERSION, TORCH_VERSION, hybridlab::blas_backend(), at::get_num_threads(),
      hybridlab::hardware_threads(), at::get_num_interop_threads());
}

}  // namespace

int main(int argc, char** argv) {
  hybridlab::prepare_process();  // BLAS kernels, malloc: before any tensor work or sweep worker
  CLI::App app{
      "hybridlab: hybrid attention / Gated DeltaNet sequence models, positional schemes as "
      "plugins, long-context ablations.\nRun `hybridlab COMMAND --help` for each command."};
  app.require_subcommand(1);
  bool show_version = false;
  app.add_flag_callback(
      "-V,--version",
      [&] {
        at::set_num_threads(hybridlab::hardware_threads());
        std::cout << version_text();
        std::exit(0);
      },
      "Print the version, the LibTorch version, the BLAS backend and the thread count");
  (void)show_version;

  std::vector<const hybridlab::cli::CommandGroup*> groups =
      hybridlab::cli::command_groups().entries();
  std::sort(groups.begin(), groups.end(), [](auto* a, auto* b) { return a->order < b->order; });
  for (const auto* g : groups) g->add(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Bad command lines are bad input like any other: exit 2 (help and version print and exit 0).
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const hybridlab::UserError& e) {
    std::fflush(stdout);
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const hybridlab::RankLost& e) {
    std::fflush(stdout);
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::cerr << "internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
