// Experiment and run names as folder names: never outside the runs folder, never colliding.

#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <vector>

#include "hybridlab/experiment.h"
#include "hybridlab/sweep.h"
#include "runs_support.h"

using namespace hybridlab;

TEST_CASE("folder names: safe text is kept, anything else is replaced and hashed",
          "[runs][names]") {
  CHECK(folder_name("pattern-GGGA_scheme-rope_seed-0") == "pattern-GGGA_scheme-rope_seed-0");
  CHECK(folder_name("1e-3") == "1e-3");
  CHECK(folder_name("a+b.c") == "a+b.c");
  // Altered texts keep their safe bytes, then "-" and 8 hex digits.
  const std::string spaced = folder_name("a b");
  CHECK(spaced.rfind("a_b-", 0) == 0);
  CHECK(spaced.size() == 4 + 8);
  CHECK(spaced != folder_name("a_b"));
  CHECK(folder_name("α β") != folder_name("γ δ"));
  CHECK(folder_name("x/../../y").find('/') == std::string::npos);
  // A run of replaced bytes is one '_': "α β" is 5 bytes, all replaced.
  CHECK(folder_name("α β").rfind("_-", 0) == 0);
  for (const std::string& bad :
       std::vector<std::string>{"", ".", "..", "../x", "/", std::string("a\0b", 3), ".hidden"}) {
    const std::string f = folder_name(bad);
    INFO("'" << bad << "' -> '" << f << "'");
    CHECK(!f.empty());
    CHECK(f != ".");
    CHECK(f != "..");
    CHECK(f[0] != '.');
    CHECK(f.find('/') == std::string::npos);
    CHECK(f.find('\0') == std::string::npos);
    CHECK(folder_name(f) == f);  // a folder name is a fixed point
  }
  // Distinct texts stay distinct folders.
  std::set<std::string> names;
  for (const std::string t : {"", ".", "..", "_", "a b", "a_b", "a  b", "α β", "γ δ", "a/b"})
    names.insert(folder_name(t));
  CHECK(names.size() == 10u);
}

TEST_CASE("folder names: an experiment name that is not a folder name is refused at its line",
          "[runs][names]") {
  for (const std::string name : {"\"..\"", "\".\"", "\"\"", "a/b", "\"x y\"", ".hidden"}) {
    INFO(name);
    try {
      read_experiment(Config::parse("name: " + name + "\n" + runstest::tiny_yaml(), "exp.yaml"));
      FAIL("expected ConfigError");
    } catch (const ConfigError& e) {
      CHECK_THAT(e.what(), Catch::Contains("exp.yaml:1:"));
      CHECK_THAT(e.what(), Catch::Contains("cannot name the runs folder"));
    }
  }
  // A name from the file stem is made safe instead (the file exists; its name is not a choice).
  runstest::TempDir tmp;
  std::ofstream(tmp.path / "my exp.yaml") << runstest::tiny_yaml();
  const Experiment e = read_experiment(Config::load((tmp.path / "my exp.yaml").string()));
  CHECK(e.name == folder_name("my exp"));
  CHECK(e.name.find(' ') == std::string::npos);
}

TEST_CASE("folder names: sweep values with spaces or unicode give distinct safe run names",
          "[runs][names]") {
  const Experiment e = read_experiment(Config::parse(
      runstest::tiny_yaml("sweep:\n  grid:\n    description: [\"α β\", \"γ δ\", \"a b\", a_b, "
                          "\"..\", \"/\"]\n"),
      "exp.yaml"));
  const auto vs = expand_sweep(e.sweep);
  REQUIRE(vs.size() == 6u);
  std::set<std::string> names;
  for (const auto& v : vs) {
    INFO(v.name);
    CHECK(folder_name(v.name) == v.name);
    CHECK(v.name.rfind("description-", 0) == 0);
    names.insert(v.name);
  }
  CHECK(names.size() == 6u);
  CHECK(vs[3].name == "description-a_b");
  // The label keeps the value as written (the report shows it).
  CHECK(vs[0].labels.at(0).second == "α β");
}
