// `hybridlab inspect attention` on a trained PaTH hybrid: a table per layer and head, with and
// without the layer's position, each row a query's weights; bad input refused with exit 2 and
// nothing written.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli_support.h"

namespace fs = std::filesystem;
using clitest::cli;
using clitest::q;
using clitest::Result;
using clitest::slurp;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace inspect_attention_cli_test {
namespace {

struct Tmp : clitest::TempDir {
  Tmp() : clitest::TempDir("inspectattn") {}
};

// A PaTH-FoX attention layer after a Gated DeltaNet layer, on 4-pair MQAR at 32 tokens.
fs::path trained_run(const fs::path& dir) {
  std::ofstream(dir / "exp.yaml")
      << "name: maps\n"
         "model: {d_model: 16, vocab_size: 64, layers: GA,\n"
         "        attention: {n_heads: 2, path: true, position: {scheme: fox}},\n"
         "        gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 16}}\n"
         "task: {name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}\n"
         "train: {steps: 2, batch_size: 2, warmup_steps: 1}\n"
         "eval: {lengths: [32], examples: 4}\n"
         "runtime: {threads: 1}\n";
  const Result r =
      cli("run " + q(dir / "exp.yaml") + " -q --no-report --runs-dir " + q(dir / "runs"));
  REQUIRE(r.code == 0);
  return dir / "runs" / "maps" / "main";
}

// The sums of each data row of a CSV table (its first column is the row label).
std::vector<double> row_sums(const fs::path& csv) {
  std::istringstream in(slurp(csv));
  std::string line;
  std::getline(in, line);  // header
  std::vector<double> out;
  while (std::getline(in, line)) {
    std::istringstream cells(line);
    std::string cell;
    std::getline(cells, cell, ',');  // row label
    double sum = 0;
    while (std::getline(cells, cell, ',')) sum += std::stod(cell);
    out.push_back(sum);
  }
  return out;
}

}  // namespace

TEST_CASE("inspect attention writes each head's weights with and without PaTH-FoX",
          "[integration][inspect]") {
  Tmp tmp;
  const fs::path run = trained_run(tmp.path);
  const fs::path out = tmp.path / "maps";
  const Result r = cli("inspect attention " + q(run) + " --length 16 --no-plots --out " + q(out));
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("layer 1 (attention, path+fox): mean key distance per head"));
  CHECK_THAT(r.out, Catch::Contains("without its position"));
  for (const char* name :
       {"layer1_head0", "layer1_head1", "layer1_head0_no_position", "layer1_head1_no_position"}) {
    const fs::path csv = out / (std::string(name) + ".csv");
    REQUIRE(fs::exists(csv));
    const std::vector<double> sums = row_sums(csv);
    REQUIRE(sums.size() == 16);  // one row per query
    for (double s : sums) CHECK(s == Approx(1.0).margin(1e-4));
  }
  CHECK_FALSE(fs::exists(out / "layer0_head0.csv"));  // Gated DeltaNet: no weights
}

TEST_CASE("inspect attention refuses what it cannot draw, writing nothing",
          "[integration][inspect]") {
  Tmp tmp;
  const fs::path run = trained_run(tmp.path);
  const fs::path out = tmp.path / "maps";
  const auto refused = [&](const std::string& args, const std::string& message) {
    INFO(args);
    const Result r = cli("inspect attention " + args + " --out " + q(out), 120);
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains(message));
    CHECK_FALSE(fs::exists(out));
  };
  refused(q(run) + " --layer 0", "--layer 0 is layer 0 (gated_deltanet)");
  refused(q(run) + " --layer 2", "--layer 2: the model has 2 layers");
  refused(q(run) + " --length 4096", "--length: '4096' is not an integer from 1 to 1024");
  // A length the task cannot hold is blamed on --length, not on the run's files.
  refused(q(run) + " --length 8", "--length 8: ");
  refused(q(tmp.path), "is not a run folder");
  // An output folder that holds anything is refused before any work, and left as it was.
  fs::create_directories(out);
  std::ofstream(out / "notes.txt") << "mine\n";
  const Result r = cli("inspect attention " + q(run) + " --no-plots --out " + q(out), 120);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("is not empty; give a new or empty folder"));
  CHECK_THAT(r.out, !Catch::Contains("mean key distance"));
  CHECK(std::distance(fs::directory_iterator(out), fs::directory_iterator()) == 1);
}

}  // namespace inspect_attention_cli_test
