// Hostile configs through the CLI as a user runs it: every refusal is exit code 2 with one
// located message, quickly and in bounded memory, and every shipped experiment's resolved config
// loads again to the same text.

#include <sys/wait.h>
#include <catch2/catch.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

using Catch::Matchers::Contains;
namespace fs = std::filesystem;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace config_cli_test {
namespace {
struct Result {
  int code;
  std::string output;
};

// Runs a shell command under an 8 GiB address-space limit, capturing stdout and stderr together.
Result run(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(("ulimit -v 8388608; " + cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), p)) out += buf.data();
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

const std::string kCli = HYBRIDLAB_CLI;

fs::path temp_dir() {
  const auto dir = fs::temp_directory_path() / "hybridlab_config_cli_test";
  fs::create_directories(dir);
  return dir;
}

std::string temp_yaml(const std::string& name, const std::string& text) {
  const auto path = (temp_dir() / name).string();
  std::ofstream(path) << text;
  return path;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The resolved text without its comment header (which names the source file).
std::string body(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("#", 0) != 0) out += line + "\n";
  }
  return out;
}

const std::string kSmall =
    "model: {d_model: 32, layers: GA, attention: {n_heads: 2, position: {scheme: rope}}}\n"
    "task: {name: mqar, seq_len: 64}\n";
}  // namespace

// A folder holding data/brown, a stand-in for the Brown corpus (the suite runs without the real
// one), and GPT-2's ranks: config show checks the corpus as run does, and the first place a corpus
// is looked for is the working directory. Documents of 64 KiB cover every shipped length (the
// longest is 8192).
fs::path stand_in_corpus_dir() {
  const fs::path dir = temp_dir() / "with_corpus";
  for (const char* split : {"train", "validation"}) {
    const fs::path folder = dir / "data" / "brown" / split;
    fs::create_directories(folder);
    std::ofstream doc(folder / "doc.txt");
    for (int i = 0; i < 4096; ++i) doc << "the cat sat by " << i % 97 << ".\n";
  }
  // `task.tokenizer: gpt2` is looked for the same way: the real ranks (scripts/test.sh fetches
  // them), since a stand-in vocabulary would not be GPT-2's.
  const fs::path ranks = fs::path(HYBRIDLAB_SOURCE_DIR) / "data" / "tokenizers" / "gpt2.js";
  if (fs::exists(ranks)) {
    fs::create_directories(dir / "data" / "tokenizers");
    fs::copy_file(ranks, dir / "data" / "tokenizers" / "gpt2.js",
                  fs::copy_options::overwrite_existing);
  }
  return dir;
}

namespace {

// Checks that `config show` of each shipped experiment selected by `pick` (a path relative to
// experiments/) reads back unchanged; returns how many were checked. Each show builds every
// distinct model of the file (the pre-flight check), a few seconds for the larger sweeps, so the
// files are split over three test cases that ctest runs side by side, each well inside its limit.
template <class Pick>
int round_trip_shipped(Pick pick) {
  const fs::path experiments = fs::path(HYBRIDLAB_SOURCE_DIR) / "experiments";
  const std::string show =
      "cd '" + stand_in_corpus_dir().string() + "' && " + kCli + " config show ";
  int checked = 0;
  for (const auto& e : fs::recursive_directory_iterator(experiments)) {
    if (e.path().extension() != ".yaml" || !pick(e.path().lexically_relative(experiments)))
      continue;
    INFO(e.path().string());
    const auto first = run(show + e.path().string());
    REQUIRE(first.code == 0);
    // Written next to the experiments' folder's parent layout: relative data paths still resolve.
    const std::string copy = (temp_dir() / ("rt_" + e.path().filename().string())).string();
    std::ofstream(copy) << first.output;
    const auto second = run(show + copy);
    INFO(second.output);
    REQUIRE(second.code == 0);
    CHECK(body(second.output) == body(first.output));
    // Floats print in their shortest form.
    CHECK_THAT(first.output, !Contains("0000000000"));
    ++checked;
  }
  return checked;
}

bool in_literature(const fs::path& rel) { return *rel.begin() == "literature"; }

}  // namespace

TEST_CASE("cli: the resolved config of every shipped experiment outside literature/ loads again",
          "[cli][config]") {
  CHECK(round_trip_shipped([](const fs::path& rel) { return !in_literature(rel); }) >= 5);
}

TEST_CASE("cli: the resolved config of the literature files a-o loads again unchanged",
          "[cli][config]") {
  CHECK(round_trip_shipped([](const fs::path& rel) {
          return in_literature(rel) && rel.filename().string() < "p";
        }) >= 5);
}

TEST_CASE("cli: the resolved config of the literature files p-z loads again unchanged",
          "[cli][config]") {
  CHECK(round_trip_shipped([](const fs::path& rel) {
          return in_literature(rel) && rel.filename().string() >= "p";
        }) >= 5);
}

TEST_CASE("cli: an alias bomb is refused with its location, quickly", "[cli][config]") {
  std::string bomb =
      "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n";
  std::string prev = "a";
  for (char c = 'b'; c <= 'i'; ++c) {
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 10; ++i) bomb += (i ? ",*" : "*") + prev;
    bomb += "]\n";
    prev = std::string(1, c);
  }
  const auto path = temp_yaml("bomb.yaml", bomb);
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run(kCli + " config show " + path);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Contains(path + ":") && Contains("expands to more than"));
  CHECK(s < 20);
}

TEST_CASE("cli: a 40,000-letter bad layer pattern gives a short error", "[cli][config]") {
  const auto path = temp_yaml("pattern.yaml", kSmall);
  const auto r = run(kCli + " config show " + path +
                     " 'model.layers={pattern: " + std::string(40000, 'Z') + "}'");
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Contains("letter 'Z' (at 40000 of 40000 positions, first at 1)"));
  CHECK(r.output.size() < 4000);
}

TEST_CASE("cli: /dev/zero as a base file is refused, not read", "[cli][config]") {
  const auto path = temp_yaml("zero.yaml", "extends: /dev/zero\n");
  const auto r = run("timeout 20 " + kCli + " config show " + path);
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Contains(path + ":1:1: extends: '/dev/zero' is not a regular file"));
}

TEST_CASE("cli: non-finite values are refused for every float key, plugins included",
          "[cli][config]") {
  const auto path = temp_yaml("inf.yaml", kSmall);
  for (const std::string o :
       {"train.lr=.inf", "train.weight_decay=.nan", "train.grad_clip=.inf", "model.init_std=.inf",
        "model.norm_eps=.nan", "model.attention.position={scheme: rope, rope_theta: .inf}",
        "model.attention.position={scheme: learned, initializer_range: .nan}",
        "model.attention.position={scheme: shaw, initializer_range: .inf}",
        "model.attention.position={scheme: t5, initializer_factor: .inf}",
        "model.attention.position={scheme: rope, rope_scaling: {rope_type: yarn, factor: 2, "
        "attention_factor: .inf}}"}) {
    INFO(o);
    const auto r = run(kCli + " config show " + path + " '" + o + "'");
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Contains("expected a finite number") && Contains("command line"));
  }
  // In a file, the plugin's key is located at its line.
  const auto file = temp_yaml(
      "inf_file.yaml",
      "model:\n  d_model: 32\n  layers: GA\n  attention:\n    n_heads: 2\n"
      "    position: {scheme: rope, rope_theta: .inf}\ntask: {name: mqar, seq_len: 64}\n");
  const auto r = run(kCli + " config show " + file);
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Contains(file + ":6:") && Contains("rope_theta: expected a finite number"));
}

TEST_CASE("cli: plugin folders: foreign-architecture libraries are skipped, loops named",
          "[cli][plugins]") {
  const fs::path dir = temp_dir() / "foreign_plugins";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // A copy of a real plugin with its ELF e_machine changed to another architecture.
  const fs::path nope = fs::path(HYBRIDLAB_TEST_PLUGIN_DIR) / "nope.so";
  REQUIRE(fs::exists(nope));
  std::string bytes = slurp(nope.string());
  REQUIRE(bytes.size() > 20);
  const bool x86 = static_cast<unsigned char>(bytes[18]) == 62;
  bytes[18] = static_cast<char>(x86 ? 183 : 62);  // AArch64 on x86-64, x86-64 elsewhere
  bytes[19] = 0;
  const fs::path foreign = dir / "foreign.so";
  std::ofstream(foreign, std::ios::binary) << bytes;
  const auto r = run("HYBRIDLAB_PLUGIN_PATH=" + dir.string() + " " + kCli + " plugins list");
  CHECK(r.code == 0);
  CHECK_THAT(r.output, Contains("skipped: " + foreign.string()) &&
                           Contains(x86 ? "built for AArch64" : "built for x86-64"));
  CHECK_THAT(r.output, Contains("nope"));
  // And a config still loads with it on the path.
  const auto cfg = temp_yaml("with_foreign.yaml", kSmall);
  CHECK(run("HYBRIDLAB_PLUGIN_PATH=" + dir.string() + " " + kCli + " config show " + cfg).code ==
        0);

  const fs::path loop = temp_dir() / "plugin_loop";
  fs::remove(loop);
  fs::create_symlink(loop, loop);
  const auto l = run("HYBRIDLAB_PLUGIN_PATH=" + loop.string() + " " + kCli + " plugins list");
  CHECK(l.code == 2);
  CHECK_THAT(l.output, Contains("'" + loop.string() + "' is a loop of symbolic links"));
}

TEST_CASE("cli: an unknown dotted override is blamed on the command line", "[cli][config]") {
  const auto path = temp_yaml("origin.yaml", kSmall);
  const auto r = run(kCli + " config show " + path + " foo.bar=1");
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Contains("command line override 'foo.bar=1': foo: unknown key 'foo'"));
}

TEST_CASE("cli: a sweep of task.op that reaches addition reloads from its resolved config",
          "[cli][config]") {
  // The default alphabet of copy/reverse/sort stays out of the resolved config: addition refuses
  // the key, so a resolved `alphabet: 16` made the shown file fail to load.
  const std::string file = (temp_dir() / "ops.yaml").string();
  std::ofstream(file) << "model: {d_model: 32, vocab_size: 32, layers: G}\n"
                         "task: {name: algorithmic, op: sort, seq_len: 32}\n"
                         "sweep: {grid: {task.op: [sort, addition]}}\n";
  const auto first = run(kCli + " config show " + file);
  INFO(first.output);
  REQUIRE(first.code == 0);
  CHECK_THAT(first.output, !Contains("alphabet"));
  const std::string copy = (temp_dir() / "ops_shown.yaml").string();
  std::ofstream(copy) << first.output;
  const auto second = run(kCli + " config show " + copy);
  INFO(second.output);
  CHECK(second.code == 0);
}

}  // namespace config_cli_test
