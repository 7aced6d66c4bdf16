// `hybridlab run` end to end on a tiny sweep: parallel child processes, a failing variant recorded
// while the sweep goes on, finished runs skipped on rerun, the report, bad runs folders.

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;

namespace {

struct Result {
  int code;
  std::string out;
};

Result cli(const std::string& args) {
  const std::string cmd = std::string("HYBRIDLAB_PLUGIN_PATH= OMP_NUM_THREADS=1 '") +
                          HYBRIDLAB_CLI + "' " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

struct Tmp {
  fs::path path = fs::temp_directory_path() / ("hybridlab_jobcli_" + std::to_string(::getpid()));
  Tmp() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Tmp() { fs::remove_all(path); }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_experiment(const fs::path& file) {
  std::ofstream(file)
      << "name: tiny\n"
         "model: {d_model: 16, vocab_size: 64, layers: GA, attention: {n_heads: 2},\n"
         "        gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 16}}\n"
         "task: {name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}\n"
         "train: {steps: 6, batch_size: 4, warmup_steps: 1, checkpoint_every: 3}\n"
         "eval: {lengths: [32, 64], examples: 8}\n"
         "runtime: {threads: 1}\n"
         "plugins: {paths: ['" HYBRIDLAB_TEST_PLUGIN_DIR
         "']}\n"
         "sweep:\n"
         "  grid:\n"
         "    model.attention.position.scheme: [nope, alibi, /nonexistent/broken.so]\n";
}

}  // namespace

TEST_CASE("job cli: a sweep with a failing variant, rerun skips finished runs, report written",
          "[job][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "tiny.yaml";
  write_experiment(exp);
  const std::string runs = (tmp.path / "runs").string();
  const Result r = cli("run '" + exp.string() + "' --runs-dir '" + runs + "' --jobs 2 --quiet");
  INFO(r.out);
  REQUIRE(r.code == 1);  // one variant failed, the others finished
  const fs::path dir = tmp.path / "runs" / "tiny";
  const auto status = [&](const std::string& run) {
    return nlohmann::json::parse(slurp(dir / run / "status.json"));
  };
  REQUIRE(status("scheme-nope")["state"] == "finished");
  REQUIRE(status("scheme-alibi")["state"] == "finished");
  const auto bad = status("scheme-broken.so");
  REQUIRE(bad["state"] == "failed");
  REQUIRE(bad["error"].get<std::string>().find("broken.so") != std::string::npos);
  for (const char* f :
       {"config.yaml", "source.yaml", "metrics.jsonl", "results.json", "checkpoint/state.pt"}) {
    REQUIRE(fs::exists(dir / "scheme-alibi" / f));
  }
  const auto res = nlohmann::json::parse(slurp(dir / "scheme-alibi" / "results.json"));
  REQUIRE(res["eval"].contains("64"));
  REQUIRE(res["train"]["steps"] == 6);
  const std::string md = slurp(dir / "summary.md");
  REQUIRE(md.find("| scheme=nope |") != std::string::npos);
  REQUIRE(md.find("scheme-broken.so (failed)") != std::string::npos);
  REQUIRE(slurp(dir / "summary.csv").find("accuracy@64") != std::string::npos);
  REQUIRE(r.out.find("1 failed") != std::string::npos);

  // Rerun: finished runs are skipped, the failed one is tried again (and fails again).
  const Result again = cli("run '" + exp.string() + "' --runs-dir '" + runs + "' --quiet");
  REQUIRE(again.out.find("0 finished, 2 skipped (finished before), 1 failed") != std::string::npos);

  // Changing the config does not overwrite a finished run.
  const Result changed = cli("run '" + exp.string() + "' train.steps=7 --runs-dir '" + runs +
                             "' --only scheme-nope --quiet");
  INFO(changed.out);
  REQUIRE(changed.code == 2);
  REQUIRE(changed.out.find("not overwritten") != std::string::npos);
  REQUIRE(nlohmann::json::parse(slurp(dir / "scheme-nope" / "results.json"))["train"]["steps"] ==
          6);
  const Result guarded =
      cli("run '" + exp.string() + "' train.steps=8 --runs-dir '" + runs + "' --shard 0/3 --quiet");
  REQUIRE(guarded.out.find("different configuration") != std::string::npos);

  // sweep list shows the states; --shard slices round robin.
  const Result list =
      cli("sweep list '" + exp.string() + "' --runs-dir '" + runs + "' --shard 1/3");
  REQUIRE(list.code == 0);
  REQUIRE(list.out.find("1 run(s) of 3") != std::string::npos);
  REQUIRE(list.out.find("scheme-alibi") != std::string::npos);
}

TEST_CASE("job cli: an unwritable runs folder is a clear error", "[job][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "tiny.yaml";
  write_experiment(exp);
  std::ofstream(tmp.path / "afile") << "x";
  const Result r =
      cli("run '" + exp.string() + "' --runs-dir '" + (tmp.path / "afile").string() + "' --quiet");
  INFO(r.out);
  REQUIRE(r.code == 2);
  REQUIRE(r.out.find("cannot create the runs folder") != std::string::npos);
  REQUIRE(r.out.find("--runs-dir") != std::string::npos);
}

TEST_CASE("job cli: a sweep key that is not a config key names the nearest key", "[job][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "bad.yaml";
  std::ofstream(exp) << "model: {d_model: 16, vocab_size: 64, layers: A}\n"
                        "task: {name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}\n"
                        "sweep: {grid: {train.stpes: [1, 2]}}\n";
  const Result r = cli("sweep list '" + exp.string() + "'");
  INFO(r.out);
  REQUIRE(r.code == 2);
  REQUIRE(r.out.find("did you mean 'steps'") != std::string::npos);
}
