// The report over run folders written by hand: seeds aggregated into intervals, best and
// indistinguishable cells, health in every row, claims judged and written to claims.csv.

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "hybridlab/report.h"
#include "hybridlab/run_record.h"
#include "hybridlab/sweep.h"
#include "support/job_support.h"

using namespace hybridlab;
namespace fs = std::filesystem;
using json = nlohmann::json;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace report_seeds_test {
namespace {

struct FakeRun {
  std::string pattern;
  int seed = 0;
  double acc64 = 0, acc128 = 0;
  bool falling = false;  // loss still falling at the end
  bool has128 = true;    // evaluated at 128 (false: only at 64)
};

const std::vector<std::string> kClaims = {
    "GA accuracy at 64 >= 0.8", "GA accuracy at 64 is better than AA",
    "GG accuracy at 64 is better than GA", "AA accuracy at 64 >= 0.5"};

void write_run(const fs::path& dir, const FakeRun& f) {
  const std::string name = "pattern-" + f.pattern + "_seed-" + std::to_string(f.seed);
  const fs::path d = dir / name;
  fs::create_directories(d);
  RunFolder(d.string()).write_status(RunState::kFinished);
  json j = {{"run", name},
            {"labels", {{"pattern", f.pattern}, {"seed", std::to_string(f.seed)}}},
            {"task", "mqar"},
            {"primary_metric", "accuracy"},
            {"higher_is_better", true},
            {"train_length", 64},
            {"params", 100},
            {"chance", {{"accuracy", 1.0 / 128}}}};
  j["eval"]["64"] = {{"accuracy", f.acc64}, {"loss", 1.0}, {"examples", 8}};
  if (f.has128) j["eval"]["128"] = {{"accuracy", f.acc128}, {"loss", 2.0}, {"examples", 8}};
  std::ofstream(d / "results.json") << j.dump();
  std::ofstream m(d / "metrics.jsonl");
  for (int s = 1; s <= 100; ++s) {
    // Plateau at 1.0 after step 20, or a line still falling by 1% of its value per 10 steps.
    const double loss = f.falling ? 3.0 - 0.02 * s : (s < 20 ? 3.0 - 0.1 * s : 1.0);
    m << json({{"step", s}, {"loss", loss}}).dump() << "\n";
  }
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The CSV row starting with `first` (split at commas; no quoted cells in these files).
std::vector<std::string> csv_row(const std::string& csv, const std::string& first) {
  std::istringstream in(csv);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(first + ",", 0) != 0) continue;
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream ls(line);
    while (std::getline(ls, cell, ',')) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.push_back("");
    return cells;
  }
  return {};
}

void write_sweep(const fs::path& dir) {
  // GA {0.9, 0.95, 1.0}: mean 0.95, s 0.05, half-width 4.302653 * 0.05 / sqrt(3) = 0.1242069.
  // GG {0.8, 0.85, 0.9}: mean 0.85, [0.7258, 0.9742] overlaps GA's [0.8258, 1.0742].
  // AA {0.01, 0.02, 0.03}: mean 0.02, half-width 0.0248414: at chance (1/128).
  // AG: one seed, 0.9: a point inside GA's interval.
  // GA's seed 0 (0.9) is still learning; its seed 2 (1.0) would be solved, never flagged.
  const double ga[] = {0.9, 0.95, 1.0}, gg[] = {0.8, 0.85, 0.9}, aa[] = {0.01, 0.02, 0.03};
  for (int s = 0; s < 3; ++s) {
    write_run(dir, {"GA", s, ga[s], 0.5, s == 0});
    write_run(dir, {"GG", s, gg[s], 0.6, false});
    write_run(dir, {"AA", s, aa[s], 0.01, false});
  }
  write_run(dir, {"AG", 0, 0.9, 0.4, false});
  write_expectations(dir.string(), kClaims);
}

}  // namespace

TEST_CASE("report: seeds of a variant become mean ± 95% CI with n, best and ≈ marked",
          "[report][aggregate]") {
  jobtest::TempDir tmp;
  write_sweep(tmp.path);
  const ReportFiles f = write_report(tmp.str(), false);
  const std::string md = f.markdown_text;
  INFO(md);
  REQUIRE(md.find("| variant | n | 64 (train) | 128 | health |") != std::string::npos);
  REQUIRE(md.find("| pattern=GA | 3 | **0.9500 ± 0.1242** | 0.5000 ± 0.0000 | still learning "
                  "(1/3) |") != std::string::npos);
  REQUIRE(md.find("| pattern=GG | 3 | ≈ 0.8500 ± 0.1242 | **0.6000 ± 0.0000** | ok |") !=
          std::string::npos);
  REQUIRE(md.find("| pattern=AA | 3 | 0.0200 ± 0.0248 | 0.0100 ± 0.0000 | at chance |") !=
          std::string::npos);
  REQUIRE(md.find("| pattern=AG | 1 | ≈ 0.9000 | 0.4000 | ok |") != std::string::npos);

  // summary.csv keeps one row per run, with its own health.
  const std::string csv = slurp(f.csv);
  INFO(csv);
  REQUIRE(csv_row(csv, "pattern-GA_seed-0")[5] == "still learning");
  REQUIRE(csv_row(csv, "pattern-GA_seed-2")[5] == "ok");
  REQUIRE(csv_row(csv, "pattern-AA_seed-1")[5] == "at chance");

  // summary_by_variant.csv: one row per variant with n, mean and half-width.
  const std::string by = slurp(f.by_variant_csv);
  INFO(by);
  REQUIRE(by.rfind("variant,pattern,task,n,health,accuracy@64,accuracy@64_ci95,accuracy@128,"
                   "accuracy@128_ci95,loss@64,loss@64_ci95,loss@128,loss@128_ci95\n",
                   0) == 0);
  const auto ga = csv_row(by, "pattern-GA");
  REQUIRE(ga.size() == 13);
  REQUIRE(ga[3] == "3");
  REQUIRE(std::stod(ga[5]) == Approx(0.95));
  REQUIRE(std::stod(ga[6]) == Approx(0.1242069).epsilon(1e-6));
  const auto ag = csv_row(by, "pattern-AG");
  REQUIRE(ag[3] == "1");
  REQUIRE(ag[6].empty());  // one seed: no interval
}

TEST_CASE("report: sweep labels named like a CSV column get their own name (sweep_<label>)",
          "[report][aggregate]") {
  // A sweep over `task` and `train.steps` labels its runs "task" and "steps", the names of two
  // columns summary.csv writes itself: each name must appear once in a header.
  jobtest::TempDir tmp;
  for (int s = 0; s < 3; ++s) {
    write_run(tmp.path, {"GA", s, 0.9, 0.5, false});
    const fs::path file = tmp.path / ("pattern-GA_seed-" + std::to_string(s)) / "results.json";
    json j = json::parse(slurp(file));
    j["labels"]["task"] = "mqar";
    j["labels"]["steps"] = "400";
    std::ofstream(file) << j.dump();
  }
  const ReportFiles f = write_report(tmp.str(), false);
  for (const std::string& path : {f.csv, f.by_variant_csv}) {
    const std::string text = slurp(path);
    const std::string header = text.substr(0, text.find('\n'));
    INFO(header);
    std::vector<std::string> names;
    std::istringstream hs(header);
    for (std::string c; std::getline(hs, c, ',');) names.push_back(c);
    for (const std::string& n : names) CHECK(std::count(names.begin(), names.end(), n) == 1);
    const auto at = std::find(names.begin(), names.end(), "sweep_task");
    REQUIRE(at != names.end());
    const auto row = csv_row(text, path == f.csv ? "pattern-GA_seed-1" : "pattern-GA");
    REQUIRE(row.size() == names.size());
    CHECK(row[static_cast<size_t>(at - names.begin())] == "mqar");
  }
  const std::string runs = slurp(f.csv);
  CHECK(runs.find(",sweep_steps,") != std::string::npos);
}

TEST_CASE("report: a length measured on fewer seeds than its row says how many",
          "[report][aggregate]") {
  jobtest::TempDir tmp;
  for (int s = 0; s < 3; ++s) write_run(tmp.path, {"GG", s, 0.8 + 0.05 * s, 0.6, false, s < 2});
  const std::string md = write_report(tmp.str(), false).markdown_text;
  INFO(md);
  // 64: three seeds, as the row; 128: two of them.
  CHECK(md.find("| pattern=GG | 3 | **0.8500 ± 0.1242** | **0.6000 ± 0.0000 (n=2)** |") !=
        std::string::npos);
  CHECK(md.find("(n=k): the cell holds fewer seeds than its row") != std::string::npos);
}

TEST_CASE("report: claims are judged on the intervals and written to claims.csv",
          "[report][claims]") {
  jobtest::TempDir tmp;
  write_sweep(tmp.path);
  const ReportFiles f = write_report(tmp.str(), false);
  INFO(f.markdown_text);
  // GG and GA have runs of the same seeds: judged on the per-seed differences. GG trails GA by
  // 0.1 on every seed, so "GG better than GA" fails, although the two intervals overlap.
  REQUIRE(f.claims_held == 2);
  REQUIRE(f.claims_failed == 2);
  REQUIRE(f.claims_inconclusive == 0);
  REQUIRE(f.markdown_text.find("| GA accuracy at 64 >= 0.8 | holds | 0.9500 ± 0.1242 (n=3) | "
                               "0.8000 |  |") != std::string::npos);
  REQUIRE(f.markdown_text.find("| AA accuracy at 64 >= 0.5 | **fails** |") != std::string::npos);
  REQUIRE(f.markdown_text.find("| GG accuracy at 64 is better than GA | **fails** | "
                               "0.8500 ± 0.1242 (n=3) | 0.9500 ± 0.1242 (n=3) | paired over 3 "
                               "seeds: difference -0.1 ± ") != std::string::npos);
  const std::string csv = slurp(f.claims_csv);
  INFO(csv);
  REQUIRE(csv.rfind("claim,outcome,left,left_mean,left_ci95,left_n,right,right_mean,right_ci95,"
                    "right_n,paired_difference_mean,paired_difference_ci95,paired_n,note\n",
                    0) == 0);
  const auto row = csv_row(csv, "GA accuracy at 64 is better than AA");
  REQUIRE(row.size() >= 13);
  // GA - AA per seed: 0.89, 0.93, 0.97: mean 0.93, half-width 4.302653 * 0.04 / sqrt(3).
  REQUIRE(std::stod(row[10]) == Approx(0.93));
  REQUIRE(std::stod(row[11]) == Approx(4.302653 * 0.04 / std::sqrt(3.0)).epsilon(1e-5));
  REQUIRE(row[12] == "3");
  REQUIRE(row[1] == "holds");
  REQUIRE(row[2] == "pattern-GA accuracy at 64");
  REQUIRE(row[5] == "3");
  REQUIRE(row[6] == "pattern-AA accuracy at 64");
  REQUIRE(std::stod(row[7]) == Approx(0.02));
  REQUIRE(std::stod(row[8]) == Approx(0.0248414).epsilon(1e-5));
}

TEST_CASE("report: a variant whose seeds split is flagged and its claims are not judged",
          "[report][claims][split]") {
  jobtest::TempDir tmp;
  // GG: two seeds left the plateau (0.98, 0.99), seed 1 did not (0.236): mean 0.73533, half-width
  // 4.302653 * 0.432464 / sqrt(3) = 1.07430: [-0.339, 1.810], inconclusive on the interval
  // alone, and named as a split instead. AA is at
  // chance on every seed: no split. GA's seeds agree: its claim is judged as usual.
  const double gg[] = {0.98, 0.236, 0.99}, aa[] = {0.01, 0.02, 0.03}, ga[] = {0.97, 0.98, 0.99};
  for (int s = 0; s < 3; ++s) {
    write_run(tmp.path, {"GG", s, gg[s], 0.5, false});
    write_run(tmp.path, {"AA", s, aa[s], 0.01, false});
    write_run(tmp.path, {"GA", s, ga[s], 0.5, false});
  }
  write_expectations(tmp.str(), {"GG accuracy at 64 >= 0.01", "GA accuracy at 64 is better than GG",
                                 "GA accuracy at 64 is better than AA"});
  const ReportFiles f = write_report(tmp.str(), false);
  const std::string& md = f.markdown_text;
  INFO(md);
  REQUIRE(md.find("| pattern=GG | 3 | ≈ 0.7353 ± 1.0743 | **0.5000 ± 0.0000** | seeds split (2/3 "
                  "reached) |") != std::string::npos);
  REQUIRE(md.find("| pattern=AA | 3 | 0.0200 ± 0.0248 | 0.0100 ± 0.0000 | at chance |") !=
          std::string::npos);
  REQUIRE(f.claims_split == 2);
  REQUIRE(f.claims_held == 1);
  REQUIRE(f.claims_inconclusive == 0);
  REQUIRE(md.find("| GG accuracy at 64 >= 0.01 | **seeds split** |") != std::string::npos);
  REQUIRE(md.find("pattern-GG seeds split: 2/3 reached, seed-1 at 0.236 (accuracy at 64) (on "
                  "the intervals alone: inconclusive)") != std::string::npos);
  REQUIRE(md.find("| GA accuracy at 64 is better than AA | holds |") != std::string::npos);
  REQUIRE(md.find("## Seeds that split") != std::string::npos);
  REQUIRE(md.find("- pattern=GG: seeds split: 2/3 reached, seed-1 at 0.236") != std::string::npos);
  REQUIRE(md.find("3 claims: 1 hold, 0 fail, 0 inconclusive, 2 on variants whose seeds split") !=
          std::string::npos);
  // (Its note holds commas, quoted in the CSV: only the leading cells are read here.)
  const auto row = csv_row(slurp(f.claims_csv), "GA accuracy at 64 is better than GG");
  REQUIRE(row.size() >= 2);
  REQUIRE(row[1] == "seeds split");
}

TEST_CASE("report: a claim about a variant without finished runs is inconclusive",
          "[report][claims]") {
  jobtest::TempDir tmp;
  write_run(tmp.path, {"GA", 0, 0.9, 0.5, false});
  write_expectations(tmp.str(), {"GA accuracy at 64 >= 0.5", "ZZ accuracy at 64 >= 0.5"});
  const ReportFiles f = write_report(tmp.str(), false);
  INFO(f.markdown_text);
  REQUIRE(f.claims_held == 1);
  REQUIRE(f.claims_inconclusive == 1);
  REQUIRE(f.markdown_text.find("cannot judge on these runs: unknown variant 'ZZ'") !=
          std::string::npos);
}

TEST_CASE("report: eval variants are rows beside the trained setting, aggregated over seeds",
          "[report][eval_variants]") {
  jobtest::TempDir tmp;
  // Two seeds of one trained model; its eval variant "ntk" is better at 128.
  const double trained128[] = {3.0, 3.2}, ntk128[] = {2.0, 2.2};
  for (int s = 0; s < 2; ++s) {
    const std::string name = "seed-" + std::to_string(s);
    const fs::path d = tmp.path / name;
    fs::create_directories(d);
    const RunFolder f(d.string());
    f.write_status(RunState::kFinished);
    RunResults r;
    r.id = RunIdentity{"exp", name, {{"seed", std::to_string(s)}}, "", {}};
    r.task = "text";
    r.primary_metric = "bits_per_byte";
    r.higher_is_better = false;
    r.train_length = 64;
    r.eval = {LengthResult{64, 8, {{"bits_per_byte", 2.5}}, {}},
              LengthResult{128, 8, {{"bits_per_byte", trained128[s]}}, {}}};
    r.variants = {EvalVariantResult{"ntk",
                                    "model.attention.position.rope_scaling={type: ntk}",
                                    {LengthResult{64, 8, {{"bits_per_byte", 2.6}}, {}},
                                     LengthResult{128, 8, {{"bits_per_byte", ntk128[s]}}, {}}},
                                    {}}};
    f.write_results(r);
  }
  write_expectations(tmp.str(), {"ntk bits_per_byte at 128 is better than trained",
                                 "trained bits_per_byte at 64 is better than ntk"});
  const ReportFiles f = write_report(tmp.str(), false);
  INFO(f.markdown_text);
  // Half-width of {3.0, 3.2}: 12.7062 * 0.141421 / sqrt(2) = 1.270620.
  CHECK(f.markdown_text.find("| eval=trained | 2 | **2.5000 ± 0.0000** | ≈ 3.1000 ± 1.2706 |") !=
        std::string::npos);
  CHECK(f.markdown_text.find("| eval=ntk | 2 | 2.6000 ± 0.0000 | **2.1000 ± 1.2706** |") !=
        std::string::npos);
  // The intervals overlap at 128, but seed by seed ntk is 1.0 better: judged on the paired
  // differences, it holds; at 64 both are exact points: holds.
  CHECK(f.claims_inconclusive == 0);
  CHECK(f.claims_held == 2);
  CHECK(f.markdown_text.find("paired over 2 seeds: difference -1 ± 0") != std::string::npos);
  const std::string csv = slurp(f.csv);
  CHECK(csv_row(csv, "seed-0_eval-ntk").size() > 3);
  CHECK(csv_row(csv, "seed-1_eval-trained").size() > 3);
}

}  // namespace report_seeds_test
