// Plots against a swept numeric key: which keys make an axis, the series and their points.

#include <catch2/catch.hpp>

#include <filesystem>

#include "plot/gnuplot.h"
#include "report/axis_plot.h"
#include "report/report_parts.h"

using namespace hybridlab::report;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace axis_plot_test {
namespace {

VariantCells variant(const Labels& labels, double mean, double half, int64_t n = 3) {
  VariantCells v;
  v.task = "mqar";
  v.primary = "accuracy";
  v.train_length = 64;
  v.labels = labels;
  Interval iv;
  iv.mean = mean;
  iv.half_width = half;
  iv.n = n;
  v.cells[{"accuracy", 64}] = iv;
  return v;
}

}  // namespace

TEST_CASE("axis plot: numeric swept keys, one series per other setting, sorted, log x",
          "[report][plots]") {
  // Pairs 4, 16, 8 (out of order) for GG and GA; "layers" is not numeric, "d" has one value.
  std::vector<VariantCells> vs = {
      variant({{"layers", "GG"}, {"pairs", "4"}, {"d", "64"}}, 0.99, 0.01),
      variant({{"layers", "GG"}, {"pairs", "16"}, {"d", "64"}}, 0.20, 0.05),
      variant({{"layers", "GG"}, {"pairs", "8"}, {"d", "64"}}, 0.60, 0.10),
      variant({{"layers", "GA"}, {"pairs", "4"}, {"d", "64"}}, 1.00, 0.00),
      variant({{"layers", "GA"}, {"pairs", "8"}, {"d", "64"}}, 0.98, 0.02),
      variant({{"layers", "GA"}, {"pairs", "32"}, {"d", "64"}}, 0.95, 0.03)};
  std::vector<const VariantCells*> ptrs;
  for (const auto& v : vs) ptrs.push_back(&v);
  REQUIRE(numeric_axes(ptrs) == std::vector<std::string>{"pairs"});
  REQUIRE(numeric_axes(ptrs, 1) == std::vector<std::string>{"pairs", "d"});
  REQUIRE(numeric_axes(ptrs, 6).empty());  // 5 distinct pair counts

  const hybridlab::plot::LinePlot p = axis_plot(ptrs, {"pairs", "accuracy", 0, {}, false});
  REQUIRE(p.xlabel == "pairs");
  REQUIRE(p.ylabel == "accuracy");
  REQUIRE(p.logx);  // 32 / 4 = 8
  REQUIRE(p.series.size() == 2);
  REQUIRE(p.series[0].title == "layers=GG");  // d=64 is every line's: not in the legend
  REQUIRE(p.series[0].x == std::vector<double>{4, 8, 16});
  REQUIRE(p.series[0].y == std::vector<double>{0.99, 0.60, 0.20});
  REQUIRE(p.series[0].yerr == std::vector<double>{0.01, 0.10, 0.05});
  REQUIRE(p.series[1].title == "layers=GA");
  REQUIRE(p.series[1].x == std::vector<double>{4, 8, 32});

  // A narrow range stays linear; single-seed points carry no error bars; a missing cell or a
  // non-numeric value is left out.
  std::vector<VariantCells> narrow = {
      variant({{"pairs", "4"}}, 0.9, 0, 1), variant({{"pairs", "6"}}, 0.8, 0, 1),
      variant({{"pairs", "7.5"}}, 0.7, 0, 1), variant({{"pairs", "4x"}}, 0.1, 0, 1)};
  narrow[2].cells.clear();
  std::vector<const VariantCells*> nptrs;
  for (const auto& v : narrow) nptrs.push_back(&v);
  REQUIRE(numeric_axes(nptrs, 2).empty());  // "4x" is not a number
  const auto q = axis_plot(nptrs, {"pairs", "accuracy", 0, {}, false});
  REQUIRE_FALSE(q.logx);
  REQUIRE(q.series.size() == 1);
  REQUIRE(q.series[0].title == "all");
  REQUIRE(q.series[0].x == std::vector<double>{4, 6});
  REQUIRE(q.series[0].yerr.empty());
}

TEST_CASE("axis plot: eval settings and model quantities as x, chosen series and length",
          "[report][plots]") {
  // Two trained variants (head_dim 8, 16), each evaluated at 4 and 16 pairs (eval variants k4,
  // k16 at length 256; the trained row at 8 pairs) with their state size as a model quantity.
  std::vector<VariantCells> vs;
  for (const char* hd : {"8", "16"}) {
    for (const auto& [eval, k] :
         std::vector<std::pair<std::string, double>>{{"trained", 8}, {"k4", 4}, {"k16", 16}}) {
      VariantCells v = variant({{"head_dim", hd}, {"eval", eval}}, 0, 0);
      v.cells.clear();
      Interval iv;
      iv.mean = std::stod(hd) / k;  // a value that names its point
      iv.n = 1;
      v.cells[{"accuracy", 256}] = iv;
      v.axis["task.num_kv_pairs"] = k;
      v.axis["recurrent_state_floats"] = 2 * std::stod(hd) * std::stod(hd);
      vs.push_back(v);
    }
  }
  std::vector<const VariantCells*> ptrs;
  for (const auto& v : vs) ptrs.push_back(&v);
  double x = 0;
  REQUIRE(axis_value(vs[0], "head_dim", x));
  REQUIRE(x == 8);
  REQUIRE(axis_value(vs[1], "task.num_kv_pairs", x));
  REQUIRE(x == 4);
  REQUIRE_FALSE(axis_value(vs[1], "pairs", x));

  // x set by eval variants: the `eval` label is not a series (one line per head_dim).
  const auto p = axis_plot(ptrs, {"task.num_kv_pairs", "accuracy", 256, {}, true});
  REQUIRE(p.series.size() == 2);
  REQUIRE(p.series[0].title == "head_dim=8");
  REQUIRE(p.series[0].x == std::vector<double>{4, 8, 16});
  REQUIRE(p.series[0].y == std::vector<double>{2, 1, 0.5});
  REQUIRE(p.series[1].y == std::vector<double>{4, 2, 1});
  REQUIRE(p.logx == false);  // 16 / 4 < 8
  REQUIRE(p.title.find("at 256") != std::string::npos);

  // Against a model quantity, one line per eval setting as asked.
  const auto q = axis_plot(ptrs, {"recurrent_state_floats", "accuracy", 256, {"eval"}, false});
  REQUIRE(q.series.size() == 3);
  REQUIRE(q.series[1].title == "eval=k4");
  REQUIRE(q.series[1].x == std::vector<double>{128, 512});
  REQUIRE(q.series[1].y == std::vector<double>{2, 4});

  // No length asked: the training length (64) has no cell here, so each row's one length (256).
  const auto d = axis_plot(ptrs, {"task.num_kv_pairs", "accuracy", 0, {}, true});
  REQUIRE(d.series.size() == 2);
  REQUIRE(d.series[0].y == std::vector<double>{2, 1, 0.5});
  // A row scored at two other lengths has no default cell: left out.
  vs[0].cells[{"accuracy", 512}] = vs[0].cells.at({"accuracy", 256});
  const auto e = axis_plot(ptrs, {"task.num_kv_pairs", "accuracy", 0, {}, true});
  REQUIRE(e.series[0].x == std::vector<double>{4, 16});
}

TEST_CASE("plot legends name only the keys that differ among the lines", "[report][plots]") {
  const Labels a = {{"layers", "GA"}, {"head_dim", "32"}, {"use_short_conv", "false"}},
               b = {{"layers", "GG"}, {"head_dim", "32"}, {"use_short_conv", "false"}},
               c = {{"layers", "GG"}, {"head_dim", "64"}};
  CHECK(legend_labels({&a, &b}, {"x", "y"}) == std::vector<std::string>{"layers=GA", "layers=GG"});
  // A key one line lacks tells the lines apart too.
  CHECK(legend_labels({&a, &b, &c}, {"x", "y", "z"}) ==
        std::vector<std::string>{"layers=GA head_dim=32 use_short_conv=false",
                                 "layers=GG head_dim=32 use_short_conv=false",
                                 "layers=GG head_dim=64"});
  // Nothing differs: each line is named by its fallback; a single line keeps its whole label.
  CHECK(legend_labels({&a, &a}, {"x", "y"}) == std::vector<std::string>{"x", "y"});
  CHECK(legend_labels({&a}, {"x"}) ==
        std::vector<std::string>{"layers=GA head_dim=32 use_short_conv=false"});
  CHECK(differing_keys({&b, &c}) == std::set<std::string>{"head_dim", "use_short_conv"});
}

TEST_CASE("plots: a folder or title with quotes, backslashes and @ draws", "[report][plots]") {
  if (!hybridlab::plot::gnuplot_available()) return;  // the report then says plots need gnuplot
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "hybridlab_axis_plot_test" / "'q\"@a\\b";
  fs::remove_all(dir);
  hybridlab::plot::LinePlot p;
  p.title = "it's \"@a\" \\ ok";
  p.xlabel = "'x";
  p.ylabel = "y\"";
  p.series.push_back({"'s", {1, 2}, {3, 4}});
  const std::string png = (dir / "'plot.png").string();
  hybridlab::plot::plot_lines(p, png);
  CHECK(fs::file_size(png) > 1000);
}

}  // namespace axis_plot_test
