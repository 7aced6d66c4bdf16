// `hybridlab inspect position` (run as a user would) and `plugins list` hooks.

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "plot/gnuplot.h"
#include "scheme_loader.h"

using namespace hybridlab;
using namespace hybridlab::test;
namespace fs = std::filesystem;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace inspect_test {
namespace {

struct Run {
  int code;
  std::string output;
};

// Runs the CLI with `args`, stdout and stderr together.
Run run_cli(const std::string& args, const std::string& tag) {
  const fs::path log = fs::path(HYBRIDLAB_BINARY_DIR) / ("test_position_cli_" + tag + ".log");
  const std::string cmd =
      std::string("\"") + HYBRIDLAB_CLI + "\" " + args + " >\"" + log.string() + "\" 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, ss.str()};
}

std::vector<std::string> read_lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string cell; std::getline(ss, cell, ',');) out.push_back(cell);
  return out;
}

bool is_png(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  char magic[8] = {};
  in.read(magic, 8);
  return in && std::string(magic + 1, 3) == "PNG";
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::path(HYBRIDLAB_BINARY_DIR) / name;
  fs::remove_all(d);
  return d;
}

}  // namespace

TEST_CASE("inspect: the seed exercise, sinusoidal PE heatmap for 512 x 128",
          "[position][inspect]") {
  const fs::path out = fresh_dir("test_position_inspect_sin");
  const Run r = run_cli("inspect position --scheme sinusoidal --length 512 --d-model 128 --out \"" +
                            out.string() + "\"",
                        "sin");
  INFO(r.output);
  REQUIRE(r.code == 0);
  REQUIRE(r.output.find("wrote " + (out / "pe.csv").string()) != std::string::npos);
  const auto lines = read_lines(out / "pe.csv");
  REQUIRE(lines.size() == 513);  // header + 512 positions
  const auto header = split(lines[0]);
  REQUIRE(header.size() == 129);
  REQUIRE(header[0] == "position");
  REQUIRE(header[1] == "sin0");
  REQUIRE(header[2] == "cos0");
  // Row for position 100: sin(100) = −0.506365641, cos(100·10000^(−2/128)) by hand below.
  const auto row = split(lines[101]);
  REQUIRE(row[0] == "100");
  REQUIRE(std::abs(std::stod(row[1]) - (-0.506365641)) < 1e-6);
  REQUIRE(std::abs(std::stod(row[4]) - std::cos(100 * std::pow(10000.0, -2.0 / 128))) < 1e-6);
  if (plot::gnuplot_available()) {
    REQUIRE(is_png(out / "pe.png"));
    REQUIRE(is_png(out / "wavelength.png"));
  }
}

TEST_CASE("inspect: alibi bias per head, rope frequencies, scheme keys from the command line",
          "[position][inspect]") {
  const fs::path alibi = fresh_dir("test_position_inspect_alibi");
  Run r = run_cli("inspect position --scheme alibi --heads 2 --length 16 --no-plots --out \"" +
                      alibi.string() + "\"",
                  "alibi");
  INFO(r.output);
  REQUIRE(r.code == 0);
  // Two heads: slopes 1/16 and 1/256; bias[i][j] = −m·(i − j).
  const auto slopes = read_lines(alibi / "slopes.csv");
  REQUIRE(slopes.size() == 3);
  REQUIRE(slopes[1] == "0,0.0625");
  const auto b0 = read_lines(alibi / "bias_head0.csv");
  REQUIRE(b0.size() == 17);
  REQUIRE(split(b0[9])[1] == "-0.5");                   // i = 8, j = 0: −0.0625·8
  REQUIRE_FALSE(fs::exists(alibi / "bias_head0.png"));  // --no-plots

  const fs::path rope = fresh_dir("test_position_inspect_rope");
  r = run_cli(
      "inspect position --scheme rope --heads 1 --head-dim 64 --length 32 "
      "rope_scaling.type=yarn rope_scaling.factor=4 "
      "rope_scaling.original_max_position_embeddings=2048 --out \"" +
          rope.string() + "\"",
      "rope");
  INFO(r.output);
  REQUIRE(r.code == 0);
  const auto inv = read_lines(rope / "inv_freq.csv");
  REQUIRE(inv[0] == "pair k,default,yarn");
  // Pair 16: 0.01 by default, 0.00538462 with yarn (positional_schemes.md §9).
  REQUIRE(std::abs(std::stod(split(inv[17])[1]) - 0.01) < 1e-9);
  REQUIRE(std::abs(std::stod(split(inv[17])[2]) - 0.00538462) < 1e-8);
  const auto af = read_lines(rope / "attention_factor.csv");
  REQUIRE(std::abs(std::stod(split(af[1])[1]) - (0.1 * std::log(4.0) + 1)) < 1e-12);
  if (plot::gnuplot_available()) {
    REQUIRE(is_png(rope / "inv_freq.png"));
    REQUIRE(is_png(rope / "cos.png"));
  }
}

TEST_CASE("inspect: bad scheme keys exit with code 2 and name the key", "[position][inspect]") {
  const fs::path out = fresh_dir("test_position_inspect_bad");
  const Run r = run_cli(
      "inspect position --scheme rope rope_scaling.type=yarnn --out \"" + out.string() + "\"",
      "bad");
  INFO(r.output);
  REQUIRE(r.code == 2);
  REQUIRE(r.output.find("position.rope_scaling.type") != std::string::npos);
  REQUIRE(r.output.find("did you mean 'yarn'") != std::string::npos);
  const Run odd =
      run_cli("inspect position --scheme rope --head-dim 33 --out \"" + out.string() + "\"", "odd");
  INFO(odd.output);
  REQUIRE(odd.code == 2);
  REQUIRE(odd.output.find("head_dim 33") != std::string::npos);
}

TEST_CASE("inspect: kerple, xpos, fire, p_rope and rotate_num_heads tables",
          "[position][inspect]") {
  auto cell = [](const fs::path& csv, size_t row, size_t col) {
    return std::stod(split(read_lines(csv)[row + 1])[col + 1]);  // past the header and label
  };
  const fs::path k = fresh_dir("test_position_inspect_kerple");
  Run r = run_cli("inspect position --scheme kerple --heads 2 --length 8 --no-plots --out \"" +
                      k.string() + "\" r1_init=1 r2_init=1",
                  "kerple");
  INFO(r.output);
  REQUIRE(r.code == 0);
  REQUIRE(std::abs(cell(k / "bias_head1.csv", 3, 0) - (-1.3862944)) < 1e-6);  // −ln(1 + 3)
  REQUIRE(std::abs(cell(k / "parameters.csv", 0, 1) - 1.0) < 1e-12);

  const fs::path x = fresh_dir("test_position_inspect_xpos");
  r = run_cli(
      "inspect position --scheme xpos --heads 1 --head-dim 8 --length 8 --no-plots --out \"" +
          x.string() + "\"",
      "xpos");
  INFO(r.output);
  REQUIRE(r.code == 0);
  REQUIRE(std::abs(cell(x / "zeta.csv", 1, 0) - 0.464286) < 1e-6);  // (1/4 + 0.4)/1.4
  // Position 0 is 4 before the centre 4: pair 0 scale (1/ζ_0)^(4/512) = 3.5^(1/128).
  REQUIRE(std::abs(cell(x / "query_scale.csv", 0, 0) - std::pow(3.5, 1.0 / 128)) < 1e-6);

  const fs::path f = fresh_dir("test_position_inspect_fire");
  r = run_cli("inspect position --scheme fire --heads 2 --length 101 --no-plots --out \"" +
                  f.string() + "\"",
              "fire");
  INFO(r.output);
  REQUIRE(r.code == 0);
  REQUIRE(std::abs(cell(f / "mlp_input.csv", 100, 90) - 0.1752548) < 1e-6);
  REQUIRE(read_lines(f / "bias_head1.csv").size() == 102);

  const fs::path p = fresh_dir("test_position_inspect_p_rope");
  r = run_cli(
      "inspect position --scheme p_rope --heads 1 --head-dim 256 --length 4 --no-plots "
      "--out \"" +
          p.string() + "\" p=0.25",
      "p_rope");
  INFO(r.output);
  REQUIRE(r.code == 0);
  REQUIRE(std::abs(cell(p / "inv_freq.csv", 31, 0) - std::pow(10000.0, -62.0 / 256)) < 1e-9);
  REQUIRE(cell(p / "inv_freq.csv", 32, 0) == 0.0);

  const fs::path h = fresh_dir("test_position_inspect_rope_heads");
  r = run_cli(
      "inspect position --scheme rope --heads 4 --head-dim 16 --length 4 --no-plots --out "
      "\"" +
          h.string() + "\" rotate_num_heads=2",
      "rope_heads");
  INFO(r.output);
  REQUIRE(r.code == 0);
  REQUIRE(read_lines(h / "rotated_heads.csv") ==
          std::vector<std::string>{"head,rotated", "0,0", "1,0", "2,1", "3,1"});
}

TEST_CASE("inspect: bad keys of the new schemes exit with code 2 and name the key",
          "[position][inspect]") {
  const fs::path out = fresh_dir("test_position_inspect_bad_new");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--scheme xpos scale_base=0", "position.scale_base: must be a finite number > 0"},
      {"--scheme xpos --bidirectional", "xPos is for causal attention"},
      {"--scheme p_rope p=1.5", "position.p: must be in (0, 1]"},
      {"--scheme rope --heads 4 rotate_num_heads=5", "position.rotate_num_heads"},
      {"--scheme kerple r1_init=.nan", "position.r1_init: expected a finite number"},
      {"--scheme fire c_init=-1", "position.c_init: must be a finite number > 0"}};
  for (const auto& [args, want] : cases) {
    const Run r =
        run_cli("inspect position " + args + " --out \"" + out.string() + "\"", "bad_new");
    INFO(args << ": " << r.output);
    REQUIRE(r.code == 2);
    REQUIRE(r.output.find(want) != std::string::npos);
    REQUIRE_FALSE(fs::exists(out / "bias_head0.csv"));
  }
}

TEST_CASE("plugins list: every scheme with its hooks", "[position][plugins]") {
  PluginHost host(test_plugin_dirs());
  std::map<std::string, uint32_t> hooks;
  for (const auto& r : host.plugins()) hooks[r.name] = r.hooks;
  REQUIRE(hooks.at("sinusoidal") == kHookEmbed);
  REQUIRE(hooks.at("learned") == kHookEmbed);
  REQUIRE(hooks.at("shaw") == kHookRelative);
  REQUIRE(hooks.at("t5") == kHookLogitBias);
  REQUIRE(hooks.at("alibi") == kHookLogitBias);
  // The plugin API v2 schemes also count their FLOPs for model summary.
  REQUIRE(hooks.at("rope") == (kHookRotate | kHookFlops));
  REQUIRE(hooks.at("kerple") == (kHookLogitBias | kHookFlops));
  REQUIRE(hooks.at("fire") == (kHookLogitBias | kHookFlops));
  REQUIRE(hooks.at("xpos") == (kHookRotate | kHookFlops));
  REQUIRE(hooks.at("p_rope") == (kHookRotate | kHookFlops));
  REQUIRE(hooks.at("nope_temperature") == kHookRotate);
  REQUIRE(hooks.at("fox") == (kHookDataBias | kHookFlops));
  REQUIRE(hooks.at("cope") == (kHookContentBias | kHookFlops));  // API v3
  const Run r = run_cli("plugins list", "list");
  INFO(r.output);
  REQUIRE(r.code == 0);
  for (const char* line : {"rope ", "alibi ", "t5 ", "shaw ", "learned ", "sinusoidal ", "kerple ",
                           "fire ", "xpos ", "p_rope "}) {
    REQUIRE(r.output.find(line) != std::string::npos);
  }
  REQUIRE(r.output.find("logit_bias") != std::string::npos);
  REQUIRE(r.output.find("rotate") != std::string::npos);
  REQUIRE(r.output.find("content_bias") != std::string::npos);
}

}  // namespace inspect_test
