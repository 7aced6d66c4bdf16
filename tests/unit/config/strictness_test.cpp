// The strict reading of hostile input: one spelling per scalar type, finite numbers, no null
// values, no tags, no second document, bounded alias expansion, non-regular files, non-name keys,
// duplicate layer overrides, sizes no machine can hold, and errors that say where they come from.

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "config/config_state.h"
#include "hybridlab/config.h"
#include "hybridlab/experiment.h"
#include "hybridlab/runtime.h"
#include "hybridlab/task.h"

using Catch::Matchers::Contains;
using hybridlab::Config;
using hybridlab::ConfigError;
using hybridlab::Section;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace strictness_test {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no ConfigError>";
}

std::string temp_file(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / "hybridlab_strictness_test";
  std::filesystem::create_directories(dir);
  const auto path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

// The errors recorded when reading `key` of section `sec` as T from `yaml`.
template <class T>
std::string read_error(const std::string& yaml, const std::string& key) {
  Config cfg = Config::parse(yaml, "s.yaml");
  Section s = cfg.section("x");
  s.get<T>(key, T{});
  return cfg.errors().empty() ? "" : cfg.errors()[0];
}

template <class T>
T read_ok(const std::string& yaml, const std::string& key) {
  Config cfg = Config::parse(yaml, "s.yaml");
  Section s = cfg.section("x");
  const T v = s.get<T>(key, T{});
  INFO(yaml);
  REQUIRE(cfg.errors().empty());
  return v;
}

const std::string kMinimal =
    "model: {d_model: 32, layers: GA, attention: {n_heads: 2}}\n"
    "task: {name: mqar, seq_len: 64}\n"
    "train: {steps: 2}\n";

}  // namespace

TEST_CASE("strict: bools are true or false, nothing else", "[config][strict]") {
  CHECK(read_ok<bool>("x: {b: true}", "b"));
  CHECK_FALSE(read_ok<bool>("x: {b: false}", "b"));
  for (const char* bad : {"\"true\"", "'false'", "off", "yes", "on", "1", "True", "FALSE"}) {
    INFO(bad);
    CHECK_THAT(read_error<bool>(std::string("x: {b: ") + bad + "}", "b"),
               Contains("s.yaml:1:5: x.b: expected true or false"));
  }
  CHECK_THAT(read_error<bool>("x: {b: \"true\"}", "b"), Contains("a quoted value is a string"));
}

TEST_CASE("strict: integers are plain decimal digits", "[config][strict]") {
  CHECK(read_ok<int64_t>("x: {n: 20}", "n") == 20);
  CHECK(read_ok<int64_t>("x: {n: -7}", "n") == -7);
  CHECK(read_ok<int>("x: {n: +3}", "n") == 3);
  for (const char* bad : {"\"20\"", "'20'", "0x14", "0o24", "20.0", "2e1", "1_000", "twenty",
                          "99999999999999999999"}) {
    INFO(bad);
    CHECK_THAT(read_error<int64_t>(std::string("x: {n: ") + bad + "}", "n"),
               Contains("x.n: expected an integer"));
  }
  CHECK_THAT(read_error<int>("x: {n: 3000000000}", "n"), Contains("an integer between"));
  CHECK_THAT(read_error<int64_t>("x: {n: \"20\"}", "n"), Contains("a quoted value is a string"));
}

TEST_CASE("strict: numbers are finite decimals, .inf and .nan are refused", "[config][strict]") {
  CHECK(read_ok<double>("x: {v: 1.0e-3}", "v") == 1e-3);
  CHECK(read_ok<double>("x: {v: 2}", "v") == 2.0);
  CHECK(read_ok<double>("x: {v: -.5}", "v") == -0.5);
  for (const char* bad :
       {".inf", "-.inf", ".nan", ".NaN", "1e400", "inf", "nan", "0x1p3", "\"0.1\"", "Infinity"}) {
    INFO(bad);
    CHECK_THAT(read_error<double>(std::string("x: {v: ") + bad + "}", "v"),
               Contains("x.v: expected a finite number"));
  }
  CHECK_THAT(read_error<double>("x: {v: .inf}", "v"), Contains(".inf and .nan are refused"));
  // Digits past a double's range either way: 1e-400 is not silently 0, nor 1e-320 a subnormal.
  for (const char* bad : {"1e-400", "1e-320", "-2.5e-999"}) {
    INFO(bad);
    CHECK_THAT(read_error<double>(std::string("x: {v: ") + bad + "}", "v"),
               Contains("x.v: expected a finite number") && Contains("1e-400 as 0"));
  }
  CHECK(read_ok<double>("x: {v: 0.0e-400}", "v") == 0.0);
  CHECK(read_ok<double>("x: {v: 2.3e-308}", "v") == 2.3e-308);
  // A subnormal that keeps a double's digits is the number written.
  CHECK(read_ok<double>("x: {v: 1e-308}", "v") == 1e-308);
  CHECK(read_ok<double>("x: {v: -3.5e-310}", "v") == -3.5e-310);
  CHECK_THAT(read_error<std::vector<double>>("x: {v: [0.9, .nan]}", "v"),
             Contains("list of finite numbers"));
}

TEST_CASE("strict: a quoted scalar is a string, plain words are strings too", "[config][strict]") {
  CHECK(read_ok<std::string>("x: {s: \"20\"}", "s") == "20");
  CHECK(read_ok<std::string>("x: {s: rope}", "s") == "rope");
  CHECK(read_ok<std::vector<std::string>>("x: {s: [a, \"b c\"]}", "s") ==
        std::vector<std::string>{"a", "b c"});
}

TEST_CASE("strict: YAML tags are refused where they are written", "[config][strict]") {
  CHECK_THAT(error_of([] { Config::parse("train:\n  steps: !!str 20\n", "t.yaml"); }),
             Contains("t.yaml:2:") && Contains("train.steps: YAML tag 'tag:yaml.org,2002:str'"));
  CHECK_THAT(error_of([] { Config::parse("train: {steps: !foo 20}\n", "t.yaml"); }),
             Contains("train.steps: YAML tag '!foo' is not accepted"));
  Config cfg = Config::parse("train: {}\n", "t.yaml");
  CHECK_THAT(error_of([&] { cfg.apply_override("train.steps=!!int 3"); }),
             Contains("command line override 'train.steps=!!int 3'") && Contains("YAML tag"));
}

TEST_CASE("strict: command-line overrides keep working and type like files", "[config][strict]") {
  Config cfg = Config::parse("train: {steps: 5}\n", "o.yaml");
  cfg.apply_override("train.steps=20");
  cfg.apply_override("train.lr=1.0e-3");
  cfg.apply_override("train.flag=true");
  Section t = cfg.section("train");
  CHECK(t.get<int64_t>("steps", 0) == 20);
  CHECK(t.get<double>("lr", 0) == 1e-3);
  CHECK(t.get<bool>("flag", false));
  CHECK(cfg.errors().empty());
  cfg.apply_override("train.lr=.inf");
  Section t2 = cfg.section("train");
  t2.get<double>("lr", 0);
  REQUIRE(cfg.errors().size() == 1);
  CHECK_THAT(cfg.errors()[0], Contains("command line override 'train.lr=.inf'") &&
                                  Contains("expected a finite number"));
  // KEY=null removes the key: the reader's default applies, with no error.
  Config c2 = Config::parse("train: {steps: 5}\n", "o.yaml");
  c2.apply_override("train.steps=null");
  Section t3 = c2.section("train");
  CHECK(t3.get<int64_t>("steps", 42) == 42);
  CHECK(c2.errors().empty());
}

TEST_CASE("strict: a key written with no value is an error, not the default", "[config][strict]") {
  Config cfg = Config::parse("model:\n  layers:\n  d_model: 64\n", "n.yaml");
  Section m = cfg.section("model");
  CHECK(m.get<std::string>("layers", "GGGA") == "GGGA");
  REQUIRE(cfg.errors().size() == 1);
  CHECK_THAT(cfg.errors()[0], Contains("n.yaml:2:3: model.layers: the key has no value"));
  Config c2 = Config::parse("runtime:\n", "n.yaml");
  c2.root().child("runtime");
  CHECK_THAT(c2.errors().at(0), Contains("n.yaml:1:1: runtime: the key has no value"));
}

TEST_CASE("strict: a second YAML document is refused", "[config][strict]") {
  CHECK_THAT(
      error_of([] { Config::parse("train: {steps: 5}\n---\ntrain: {steps: 9}\n", "d.yaml"); }),
      Contains("d.yaml:3:1: a second YAML document"));
  // A lone document marker is fine.
  CHECK_NOTHROW(Config::parse("---\ntrain: {steps: 5}\n", "d.yaml"));
}

TEST_CASE("strict: runtime.threads 0 is refused (auto is spelled auto)", "[config][strict]") {
  Config cfg = Config::parse("runtime: {threads: 0}\n", "r.yaml");
  hybridlab::read_runtime_options(cfg.section("runtime"));
  REQUIRE(cfg.errors().size() == 1);
  CHECK_THAT(cfg.errors()[0], Contains("r.yaml:1:11: runtime.threads") && Contains("'auto'"));
}

TEST_CASE("strict: an alias bomb is refused quickly, at its location", "[config][strict]") {
  // Nine levels of ten aliases each: 10^9 values once expanded, 1.4 KB of text.
  std::string bomb =
      "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n";
  std::string prev = "a";
  for (char c = 'b'; c <= 'i'; ++c) {
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 10; ++i) bomb += (i ? ",*" : "*") + prev;
    bomb += "]\n";
    prev = std::string(1, c);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const std::string msg = error_of([&] { Config::parse(bomb, "bomb.yaml"); });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK_THAT(msg, Contains("bomb.yaml:") && Contains("expands to more than 100000 values"));
  CHECK(seconds < 5);
  Config cfg;
  CHECK_THAT(error_of([&] {
               cfg.apply_override("x=" + std::string("[&a [1,1,1,1,1,1,1,1,1,1], "
                                                     "&b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a], "
                                                     "&c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b], "
                                                     "&d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c], "
                                                     "&e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d], "
                                                     "[*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]]"));
             }),
             Contains("command line override") && Contains("expands to more than"));
}

TEST_CASE("strict: map keys must be names (sweep zip, exclude, anywhere)", "[config][strict]") {
  CHECK_THAT(
      error_of([] { Config::parse("sweep:\n  zip:\n    ? [a, b]\n    : [1, 2]\n", "k.yaml"); }),
      Contains("k.yaml:3:7: sweep.zip: a key must be a name"));
  CHECK_THAT(
      error_of([] { Config::parse("sweep:\n  exclude:\n    - {? {a: 1} : 2}\n", "k.yaml"); }),
      Contains("k.yaml:3:") && Contains("sweep.exclude.0: a key must be a name"));
}

TEST_CASE("strict: non-regular files are refused wherever a config is read", "[config][strict]") {
  CHECK_THAT(error_of([] { Config::load("/dev/zero"); }),
             Contains("'/dev/zero' is not a regular file"));
  const auto path = temp_file("extends_zero.yaml", "extends: /dev/zero\n");
  CHECK_THAT(error_of([&] { Config::load(path); }),
             Contains("extends_zero.yaml:1:1: extends: '/dev/zero' is not a regular file"));
  const auto dir = std::filesystem::temp_directory_path() / "hybridlab_strictness_test";
  const auto loop = (dir / "loop.yaml").string();
  std::filesystem::remove(loop);
  std::filesystem::create_symlink(loop, loop);
  CHECK_THAT(error_of([&] { Config::load(loop); }), Contains("loop of symbolic links"));
}

TEST_CASE("strict: a long bad layer pattern gives one line per distinct letter",
          "[config][strict]") {
  std::string pattern(20000, 'X');
  pattern[0] = 'G';
  pattern[5] = 'Q';
  Config cfg = Config::parse(kMinimal, "p.yaml");
  cfg.apply_override("model.layers={pattern: " + pattern + ", repeat: 1000000000}");
  const std::string msg = error_of([&] { hybridlab::read_experiment(cfg); });
  CHECK_THAT(msg, Contains("letter 'X' (at 19998 of 20000 positions, first at 2)"));
  CHECK_THAT(msg, Contains("letter 'Q' (character 6 of 20000)"));
  CHECK(msg.size() < 4000);
  // A huge repeat of a good pattern is refused by the layer limit, not by bad_alloc.
  Config c2 = Config::parse(kMinimal, "p.yaml");
  c2.apply_override("model.layers={pattern: GA, repeat: 1000000000}");
  CHECK_THAT(error_of([&] { hybridlab::read_experiment(c2); }), Contains("at most 4096"));
}

TEST_CASE("strict: two overrides naming the same layer are refused", "[config][strict]") {
  Config cfg = Config::parse(
      "model:\n  d_model: 32\n  layers: GGGA\n  attention: {n_heads: 2}\n  overrides:\n"
      "    3: {n_heads: 4}\n    -1: {n_heads: 8}\n    1: {}\n    01: {}\n"
      "task: {name: mqar, seq_len: 64}\n",
      "o.yaml");
  const std::string msg = error_of([&] { hybridlab::read_experiment(cfg); });
  CHECK_THAT(msg, Contains("o.yaml:7:5: model.overrides.-1: names layer 3, which the override '3' "
                           "at o.yaml:6:5 already names"));
  CHECK_THAT(msg, Contains("o.yaml:9:5: model.overrides.01: names layer 1, which the override '1' "
                           "at o.yaml:8:5"));
}

TEST_CASE("strict: sizes no machine holds are refused at the key", "[config][strict]") {
  Config cfg = Config::parse(kMinimal + "eval: {lengths: [64, 1000000000000]}\n", "z.yaml");
  CHECK_THAT(error_of([&] { hybridlab::read_experiment(cfg); }),
             Contains("z.yaml:4:8: eval.lengths: length 1000000000000 needs at least"));
  Config c2 = Config::parse(kMinimal, "z.yaml");
  c2.apply_override("task.seq_len=1000000000000");
  CHECK_THAT(error_of([&] { hybridlab::read_experiment(c2); }),
             Contains("command line override 'task.seq_len=1000000000000': task.seq_len: "
                      "training at seq_len 1000000000000"));
  Config c3 = Config::parse(kMinimal, "z.yaml");
  c3.apply_override("model.d_model=10000000");
  CHECK_THAT(error_of([&] { hybridlab::read_experiment(c3); }),
             Contains("model.d_model: the model has at least"));
  // The shipped sizes pass.
  Config ok = Config::parse(kMinimal + "eval: {lengths: [64, 128, 8192]}\n", "z.yaml");
  CHECK_NOTHROW(hybridlab::read_experiment(ok));
}

TEST_CASE("strict: a negative seed is refused wherever a seed is read", "[config][strict]") {
  // A negative seed would wrap to a huge unsigned generator seed; the same run written with a
  // different number is a silent duplicate.
  for (const char* key : {"train.seed", "eval.seed", "runtime.seed"}) {
    Config cfg = Config::parse(kMinimal, "s.yaml");
    cfg.apply_override(std::string(key) + "=-1");
    CHECK_THAT(error_of([&] { hybridlab::read_experiment(cfg); }),
               Contains(std::string(key) + ": must be >= 0"));
  }
  Config sw = Config::parse(kMinimal + "sweep: {seeds: [0, -3]}\n", "s.yaml");
  CHECK_THAT(error_of([&] { hybridlab::read_experiment(sw); }),
             Contains("s.yaml:4:9: sweep.seeds: every seed must be >= 0"));
}

TEST_CASE("strict: an empty parsed config names its origin, not <config>", "[config][strict]") {
  // An emptied source.yaml of a run folder: the missing keys are blamed on that file.
  Config cfg = Config::parse("", "runs/e/main/source.yaml");
  const std::string msg = error_of([&] { hybridlab::read_experiment(cfg); });
  CHECK_THAT(msg, Contains("runs/e/main/source.yaml"));
  CHECK_THAT(msg, !Contains("<config>"));
}

TEST_CASE("strict: an unknown dotted override is blamed on the command line", "[config][strict]") {
  Config cfg = Config::parse(kMinimal, "u.yaml");
  cfg.apply_override("foo.bar=1");
  const std::string msg = error_of([&] { hybridlab::read_experiment(cfg); });
  CHECK_THAT(msg, Contains("command line override 'foo.bar=1': foo: unknown key 'foo'"));
  CHECK_THAT(msg, !Contains("u.yaml: foo"));
}

TEST_CASE("strict: floats are written in their shortest form", "[config][strict]") {
  Config cfg = Config::parse("train: {betas: [0.9, 0.95], lr: 0.1}\n", "f.yaml");
  Section t = cfg.section("train");
  t.get<std::vector<double>>("betas", {});
  t.get<double>("lr", 0);
  const std::string text = cfg.resolved_yaml();
  CHECK_THAT(text, Contains("betas: [0.9, 0.95]") && Contains("lr: 0.1"));
  CHECK_THAT(text, !Contains("0.90000000000000002"));
  CHECK(hybridlab::shortest_double(1e-8) == "1e-08");
  CHECK(hybridlab::shortest_double(0.1 + 0.2) == "0.30000000000000004");
}

TEST_CASE("strict: a corpus path that is a device is refused at task.path", "[config][strict]") {
  Config cfg = Config::parse("task: {name: text, seq_len: 64, path: /dev/zero}\n", "z.yaml");
  auto task = hybridlab::read_task(cfg.section("task"), hybridlab::TaskContext{});
  REQUIRE(task);
  try {
    task->prepare({64});
    FAIL("expected a DataError");
  } catch (const hybridlab::DataError& e) {
    CHECK_THAT(std::string(e.what()), Contains("z.yaml:1:") && Contains("task.path") &&
                                          Contains("'/dev/zero' is not a regular file"));
  }
}

}  // namespace strictness_test
