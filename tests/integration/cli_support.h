#pragma once
// Helpers of the CLI tests: running the built CLI, a temporary folder, reading a file.

#include <c10/util/hash.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace clitest {

struct Result {
  int code;  ///< exit code (-1 when killed by a signal)
  std::string out;
};

/// Runs `hybridlab ARGS` through the shell (no plugin folders from the environment, one OpenMP
/// thread), with stdout and stderr together. `timeout_s` > 0 kills it after that many seconds
/// (exit code 137), so that a test of a hang fails instead of hanging.
inline Result cli(const std::string& args, int timeout_s = 0) {
  const std::string cmd =
      std::string("HYBRIDLAB_PLUGIN_PATH= OMP_NUM_THREADS=1 ") +
      (timeout_s > 0 ? "timeout -s KILL " + std::to_string(timeout_s) + " " : std::string()) + "'" +
      HYBRIDLAB_CLI + "' " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

/// A fresh empty folder <temp>/hybridlab_<tag>_<pid>, removed when the object dies.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag)
      : path(std::filesystem::temp_directory_path() /
             ("hybridlab_" + tag + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

/// Writes a tiny experiment (a 2-layer d_model 16 GA model on 4-pair MQAR at 32 tokens, one
/// thread, the test plugins) named `name` with `train:` and `eval:` maps, plus `extra` lines.
inline void write_tiny_experiment(const std::filesystem::path& file, const std::string& name,
                                  const std::string& train, const std::string& eval,
                                  const std::string& extra = "") {
  std::ofstream(file) << "name: " << name
                      << "\n"
                         "model: {d_model: 16, vocab_size: 64, layers: GA, attention: {n_heads: "
                         "2},\n"
                         "        gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 16}}\n"
                         "task: {name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}\n"
                         "train: "
                      << train << "\neval: " << eval
                      << "\n"
                         "runtime: {threads: 1}\n"
                         "plugins: {paths: ['" HYBRIDLAB_TEST_PLUGIN_DIR "']}\n"
                      << extra;
}

/// `p` in single quotes, for a shell command line.
inline std::string q(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// Replaces the first `from` in `run`'s source.yaml by `to` and records the new text's digest in
/// run.json, as if the run had been trained with that configuration (a plugin since removed, a
/// moved plugin folder). Returns false when `from` is not in source.yaml.
inline bool retrain_source_as(const std::filesystem::path& run, const std::string& from,
                              const std::string& to) {
  std::string source = slurp(run / "source.yaml");
  std::string id = slurp(run / "run.json");
  const size_t at = source.find(from);
  const std::string old_digest = c10::sha1(source).str();
  const size_t digest_at = id.find(old_digest);
  if (at == std::string::npos || digest_at == std::string::npos) return false;
  source.replace(at, from.size(), to);
  id.replace(digest_at, old_digest.size(), c10::sha1(source).str());
  std::ofstream(run / "source.yaml") << source;
  std::ofstream(run / "run.json") << id;
  return true;
}

}  // namespace clitest
