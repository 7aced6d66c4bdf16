// A bounded-time fuzzer of the config pipeline: the shipped experiment files, mutated (byte flips,
// splices, alias bombs, deep nesting, long scalars, huge numbers, tags, quotes, unicode, and any
// one key of the file set to an empty, huge or special-file value; first every key of every
// shipped file with one value of each such class, then random mutations), each
// run through what `config show` does (load with `extends`, read_experiment, build the model when
// it is small, print the resolved config) in a forked child under a memory limit (RLIMIT_AS) and
// a time limit (alarm). Every case must end either accepted or with a UserError whose message
// names the file; a crash, a hang, an allocation failure or any other exception is a failure, and
// its input is written to build/fuzz-failures/ to reproduce it.
//
// Deterministic: the cases come from a seeded generator. The time budget bounds how many run.
//   HYBRIDLAB_FUZZ_SECONDS       total budget (default 60; CI runs the default)
//   HYBRIDLAB_FUZZ_SEED          generator seed (default 1)
//   HYBRIDLAB_FUZZ_CASE_SECONDS  per-case time limit (default 10)
//   HYBRIDLAB_FUZZ_CASE_MIB      per-case memory above the parent's footprint (default 3072)
// A longer run: HYBRIDLAB_FUZZ_SECONDS=600 build/bin/test_fuzz

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include "hybridlab/config.h"
#include "hybridlab/experiment.h"
#include "hybridlab/model.h"
#include "hybridlab/plugin_host.h"
#include "hybridlab/task.h"
#include "layers/mlp.h"
#include "model/model_options.h"

namespace fs = std::filesystem;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace config_fuzz_test {
namespace {

double env_number(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  return end && *end == '\0' ? d : fallback;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---- mutations

using Rng = std::mt19937_64;

size_t pick(Rng& rng, size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng() % n); }

// Offsets just after "key: " where a value starts (a place to put a hostile value).
std::vector<size_t> value_starts(const std::string& t) {
  std::vector<size_t> out;
  for (size_t i = 0; i + 1 < t.size(); ++i) {
    if (t[i] == ':' && t[i + 1] == ' ') out.push_back(i + 2);
  }
  return out;
}

// Replaces the value after a random "key: " (up to the end of the line, or the next ',' / '}').
std::string replace_value(Rng& rng, const std::string& t, const std::string& value) {
  const auto starts = value_starts(t);
  if (starts.empty()) return t + "\nx: " + value + "\n";
  const size_t at = starts[pick(rng, starts.size())];
  size_t end = at;
  while (end < t.size() && t[end] != '\n' && t[end] != ',' && t[end] != '}') ++end;
  return t.substr(0, at) + value + t.substr(end);
}

std::string alias_bomb(Rng& rng, int levels, int fanout) {
  std::string s = "a0: &a0 [\"lol\"]\n";
  for (int l = 1; l < levels; ++l) {
    s += "a" + std::to_string(l) + ": &a" + std::to_string(l) + " [";
    for (int f = 0; f < fanout; ++f) s += (f ? ", *a" : "*a") + std::to_string(l - 1);
    s += "]\n";
  }
  (void)rng;
  return s;
}

std::string nested(Rng& rng, int depth) {
  const bool map = rng() % 2;
  std::string open = map ? "{a: " : "[", close = map ? "}" : "]";
  std::string s;
  for (int i = 0; i < depth; ++i) s += open;
  s += "1";
  for (int i = 0; i < depth; ++i) s += close;
  return s;
}

const std::vector<std::string> kHostileValues = {
    "1e308", "-1e308", "1e400", "99999999999999999999", "-9223372036854775808",
    "9223372036854775807", "1000000000000", "0", "-1", ".inf", "-.inf", ".nan", "0x14", "0o17",
    "1_000", "\"20\"", "'true'", "yes", "off", "~", "null", "", "!!str 20", "!foo 3", "!!float 1",
    "[]", "{}", "[1, [2, [3]]]", "{? [a]: 1}", "&x 3", "*x", "*undefined", "\"\\u0000\"", "é",
    "\"α β\"", "\xff\xfe", "\xe2\x80\xae", "..", ".", "/dev/zero", "/", "-", "?", "|\n  x", ">-",
    "'", "\"", "[", "{", "#", "@", "`", "%YAML 1.2", "---", "...", "\t", "1e12", "3.5", "-0", "+5",
    "0.1e-400", "1e-320", "NaN", "Infinity", "true", "false", "GGGA", "AAAAAAAAAAAAAAAA",
    // empty values of every type
    "\"\"", "''", "\" \"",
    // special files where a path is read
    "/dev/null", "/dev/stdin", "/proc/self/mem", "/proc", "/tmp", "/nonexistent/x.so",
    "/dev/zero/x.so",
    // huge values
    "1e18", "4294967296", "2147483648", "[1e18]", "[99999999999999999999]"};

// Every dotted path to a scalar in `n` (where a hostile value replaces one key's value).
void leaf_paths(const YAML::Node& n, const std::string& prefix, std::vector<std::string>& out) {
  if (n.IsMap()) {
    for (const auto& kv : n) {
      if (kv.first.IsScalar())
        leaf_paths(kv.second, prefix.empty() ? kv.first.Scalar() : prefix + "." + kv.first.Scalar(),
                   out);
    }
  } else if (!prefix.empty()) {
    out.push_back(prefix);
  }
}

// `t` with the value at dotted `path` replaced by `value` (YAML text), as `config show
// PATH=VALUE` would set it; `t` as is when it is not YAML.
std::string set_key(const std::string& t, const std::string& path, const std::string& value) {
  try {
    YAML::Node root = YAML::Load(t);
    YAML::Node cur = root;
    size_t at = 0;
    for (size_t dot; (dot = path.find('.', at)) != std::string::npos; at = dot + 1) {
      YAML::Node next = cur[path.substr(at, dot - at)];
      cur.reset(next);
    }
    cur[path.substr(at)] = YAML::Load(value);
    YAML::Emitter em;
    em << root;
    return em.c_str();
  } catch (const std::exception&) {
    return t;
  }
}

std::vector<std::string> leaf_paths_of(const std::string& t) {
  std::vector<std::string> paths;
  try {
    leaf_paths(YAML::Load(t), "", paths);
  } catch (const std::exception&) {
  }
  return paths;
}

// One random key of the file set to a random hostile value.
std::string set_one_key(Rng& rng, const std::string& t) {
  const std::vector<std::string> paths = leaf_paths_of(t);
  if (paths.empty()) return t;
  return set_key(t, paths[pick(rng, paths.size())],
                 kHostileValues[pick(rng, kHostileValues.size())]);
}

// One value of each class a reader must refuse or bound, tried on every key of every shipped file
// before the random cases: an empty string (an empty task.name crashed `config show`), a NUL,
// negative, zero, past int64, past a double's range, special files, empty collections.
const std::vector<std::string> kValueClasses = {
    "\"\"",   "\"\\u0000\"", "-1",   "0",  "99999999999999999999",
    "1e-400", "/dev/zero",   "/tmp", "[]", "{}"};

// Every (file, key, value class) case, each key path once over the corpus.
std::vector<std::string> per_key_cases(const std::vector<std::string>& corpus) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const std::string& text : corpus) {
    for (const std::string& path : leaf_paths_of(text)) {
      if (!seen.insert(path).second) continue;
      for (const std::string& v : kValueClasses) out.push_back(set_key(text, path, v));
    }
  }
  return out;
}

std::string random_unicode(Rng& rng) {
  static const std::vector<std::string> pieces = {
      "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xc0\xaf", "\xed\xa0\x80",
      "\x00",     "\xef\xbb\xbf", "\xe2\x80\xae",     "\x1b[31m"};
  std::string s;
  const size_t n = 1 + pick(rng, 8);
  for (size_t i = 0; i < n; ++i) s += pieces[pick(rng, pieces.size())];
  return s;
}

std::string mutate(Rng& rng, const std::string& base, const std::vector<std::string>& corpus) {
  std::string t = base;
  const int rounds = 1 + static_cast<int>(pick(rng, 3));
  for (int r = 0; r < rounds; ++r) {
    switch (pick(rng, 14)) {
      case 0: {  // byte flips
        const size_t n = 1 + pick(rng, 4);
        for (size_t i = 0; i < n && !t.empty(); ++i)
          t[pick(rng, t.size())] = static_cast<char>(rng() & 0xff);
        break;
      }
      case 1: {  // splice a slice of another file
        const std::string& o = corpus[pick(rng, corpus.size())];
        const size_t a = pick(rng, o.size()),
                     b = a + pick(rng, std::min<size_t>(400, o.size() - a));
        const size_t at = pick(rng, t.size() + 1);
        t = t.substr(0, at) + o.substr(a, b - a) + t.substr(at);
        break;
      }
      case 2: {  // alias bomb, whole-file or as a value
        const std::string bomb =
            alias_bomb(rng, 3 + static_cast<int>(pick(rng, 8)), 2 + static_cast<int>(pick(rng, 9)));
        t = rng() % 2 ? bomb + t : t + "\n" + bomb;
        break;
      }
      case 3:  // deep nesting
        t = replace_value(rng, t, nested(rng, 1 + static_cast<int>(pick(rng, 3000))));
        break;
      case 4: {  // long scalar
        const size_t n = 1000 + pick(rng, 60000);
        std::string v(n, "GAXZ"[pick(rng, 4)]);
        if (rng() % 2) v = "{pattern: " + v + ", repeat: " + std::to_string(pick(rng, 100)) + "}";
        t = replace_value(rng, t, v);
        break;
      }
      case 5:
      case 6:  // hostile value
        t = replace_value(rng, t, kHostileValues[pick(rng, kHostileValues.size())]);
        break;
      case 7: {  // unicode or invalid UTF-8
        const size_t at = pick(rng, t.size() + 1);
        t = t.substr(0, at) + random_unicode(rng) + t.substr(at);
        break;
      }
      case 8: {  // delete or duplicate a line
        std::vector<std::string> lines;
        std::istringstream in(t);
        for (std::string l; std::getline(in, l);) lines.push_back(l);
        if (lines.empty()) break;
        const size_t i = pick(rng, lines.size());
        if (rng() % 2)
          lines.erase(lines.begin() + static_cast<long>(i));
        else
          lines.insert(lines.begin() + static_cast<long>(pick(rng, lines.size())), lines[i]);
        t.clear();
        for (const auto& l : lines) t += l + "\n";
        break;
      }
      case 9: {  // a second document, or a stray structure
        static const std::vector<std::string> tails = {"\n---\nmodel: {}\n",
                                                       "\n- a\n",
                                                       "\n? [a]\n: 1\n",
                                                       "\nsweep: {zip: {? [a]: [1]}}\n",
                                                       "\nsweep: {exclude: [{? {a: 1}: 2}]}\n",
                                                       "\nextends: /dev/zero\n",
                                                       "\nextends: .\n"};
        t += tails[pick(rng, tails.size())];
        break;
      }
      case 10: {  // truncate
        t = t.substr(0, pick(rng, t.size() + 1));
        break;
      }
      case 12:
      case 13:  // one key set to a hostile value
        t = set_one_key(rng, t);
        break;
      default: {  // indentation damage
        const size_t at = pick(rng, t.size() + 1);
        t.insert(at, std::string(1 + pick(rng, 6), rng() % 2 ? ' ' : '\t'));
        break;
      }
    }
  }
  return t;
}

// ---- one case in a child process

enum Outcome { kAccepted = 0, kCleanError = 2, kUnlocatedError = 3, kInternalError = 4 };

// What `config show` does, bounded: the model is built only when it is small.
void run_pipeline(const std::string& path) {
  using namespace hybridlab;
  Config cfg = Config::load(path);
  const Experiment exp = read_experiment(cfg);
  const ModelOptions& m = *exp.model;
  const double d = static_cast<double>(m.d_model);
  const double params =
      static_cast<double>(m.layers.size()) *
          (4 * d * d + 3 * d * static_cast<double>(mlp_hidden_size(m.mlp, m.d_model))) +
      2 * d * static_cast<double>(m.vocab_size);
  const ModelBuildContext ctx = model_build_context(exp);
  if (params < 2e7 && ctx.max_length <= (1 << 16)) {
    auto host = make_plugin_host(cfg);
    build_model(m, *host, ctx);
  }
  const std::string text = cfg.resolved_yaml();
  if (text.empty()) throw std::logic_error("empty resolved config");
}

struct CaseResult {
  std::string kind;  // accepted, error, unlocated, internal, crash, hang
  std::string message;
};

size_t current_vm_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0;
  statm >> pages;
  return pages * static_cast<size_t>(::sysconf(_SC_PAGE_SIZE));
}

CaseResult run_case(const std::string& path, const std::string& dir, int case_seconds,
                    size_t memory_bytes) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    rlimit lim{memory_bytes, memory_bytes};
    ::setrlimit(RLIMIT_AS, &lim);
    ::alarm(static_cast<unsigned>(case_seconds));
    int code = kAccepted;
    std::string msg;
    try {
      run_pipeline(path);
    } catch (const hybridlab::UserError& e) {
      msg = e.what();
      code = msg.find(dir) != std::string::npos ? kCleanError : kUnlocatedError;
    } catch (const std::exception& e) {
      msg = std::string(typeid(e).name()) + ": " + e.what();
      code = kInternalError;
    } catch (...) {
      msg = "unknown exception";
      code = kInternalError;
    }
    if (msg.size() > 4000) msg = msg.substr(0, 4000) + "...";
    [[maybe_unused]] const ssize_t w = ::write(fds[1], msg.data(), msg.size());
    ::close(fds[1]);
    ::_exit(code);
  }
  ::close(fds[1]);
  std::string msg;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
    msg.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return {sig == SIGALRM ? "hang" : "crash", "signal " + std::to_string(sig)};
  }
  switch (WEXITSTATUS(status)) {
    case kAccepted:
      return {"accepted", ""};
    case kCleanError:
      return {"error", msg};
    case kUnlocatedError:
      return {"unlocated", msg};
    default:
      return {"internal", msg};
  }
}

}  // namespace

TEST_CASE("fuzz: mutated experiment files fail cleanly, never crash or hang", "[fuzz]") {
  const double budget = env_number("HYBRIDLAB_FUZZ_SECONDS", 60);
  const auto seed = static_cast<uint64_t>(env_number("HYBRIDLAB_FUZZ_SEED", 1));
  const int case_seconds = static_cast<int>(env_number("HYBRIDLAB_FUZZ_CASE_SECONDS", 10));
  const size_t memory =
      current_vm_bytes() +
      static_cast<size_t>(env_number("HYBRIDLAB_FUZZ_CASE_MIB", 3072)) * (1u << 20);

  // The shipped experiments, copied next to the case so that `extends: base.yaml` resolves.
  const fs::path src = fs::path(HYBRIDLAB_SOURCE_DIR) / "experiments";
  const fs::path dir = fs::temp_directory_path() / ("hybridlab_fuzz_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<std::string> corpus;
  for (const auto& e : fs::directory_iterator(src)) {
    if (e.path().extension() != ".yaml") continue;
    fs::copy_file(e.path(), dir / e.path().filename(), fs::copy_options::overwrite_existing);
    corpus.push_back(slurp(e.path()));
  }
  std::sort(corpus.begin(), corpus.end());
  REQUIRE(corpus.size() >= 2);
  const fs::path failures = fs::path(HYBRIDLAB_BINARY_DIR) / "fuzz-failures";

  Rng rng(seed);
  std::map<std::string, int> counts;
  std::vector<std::string> problems;
  const auto start = std::chrono::steady_clock::now();
  int cases = 0;
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const std::vector<std::string> systematic = per_key_cases(corpus);
  while (elapsed() < budget) {
    const size_t i = static_cast<size_t>(cases);
    const std::string text = i < systematic.size()
                                 ? systematic[i]
                                 : mutate(rng, corpus[pick(rng, corpus.size())], corpus);
    const fs::path path = dir / ("case_" + std::to_string(cases) + ".yaml");
    std::ofstream(path, std::ios::binary) << text;
    const CaseResult r = run_case(path.string(), dir.string(), case_seconds, memory);
    ++counts[r.kind];
    if (r.kind != "accepted" && r.kind != "error") {
      fs::create_directories(failures);
      const fs::path keep =
          failures / ("seed" + std::to_string(seed) + "_case" + std::to_string(cases) + ".yaml");
      fs::copy_file(path, keep, fs::copy_options::overwrite_existing);
      problems.push_back(r.kind + " (" + keep.string() + "): " + r.message.substr(0, 600));
    }
    fs::remove(path);
    ++cases;
  }
  fs::remove_all(dir);
  std::ostringstream summary;
  summary << "fuzz: seed " << seed << ", " << cases << " cases (" << systematic.size()
          << " per key) in " << elapsed() << " s (" << cases / std::max(elapsed(), 1e-9) << "/s):";
  for (const auto& [k, n] : counts) summary << " " << k << " " << n;
  std::cout << summary.str() << "\n";
  INFO(summary.str());
  for (const auto& p : problems) UNSCOPED_INFO(p);
  CHECK(problems.empty());
  CHECK(cases > 0);
}

}  // namespace config_fuzz_test
