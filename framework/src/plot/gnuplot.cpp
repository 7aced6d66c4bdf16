#include "plot/gnuplot.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "hybridlab/error.h"
#include "plot/csv.h"
#include "util/atomic_file.h"

namespace hybridlab::plot {
namespace fs = std::filesystem;

namespace {

// Runs `command` through the shell; true when it exits with status 0.
bool shell_ok(const std::string& command) {
  const int rc = std::system(command.c_str());
  return rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

// 'text' quoted for the POSIX shell.
std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// 'text' as a gnuplot double-quoted string: backslash and quote escaped, newlines as spaces. A
// single-quoted string cannot start with a quote: gnuplot 5.4 reads ''' as '' followed by '.
std::string gp_quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '\n') {
      out += ' ';
    } else {
      if (c == '\\' || c == '"') out += '\\';
      out += c;
    }
  }
  return out + "\"";
}

bool has_pngcairo() {
  static const bool yes = shell_ok("gnuplot -e \"set terminal pngcairo\" >/dev/null 2>&1");
  return yes;
}

void require_gnuplot() {
  if (!gnuplot_available()) {
    throw UserError(
        "cannot draw plots: the program 'gnuplot' was not found on PATH (install the Debian "
        "package gnuplot-nox: apt-get install gnuplot-nox)");
  }
}

// A private temporary folder, removed with everything in it when this object goes.
class TempDir {
 public:
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "hybridlab-plot-XXXXXX").string();
    if (!::mkdtemp(templ.data())) {
      throw UserError("cannot create a temporary folder under '" +
                      fs::temp_directory_path().string() + "': " + std::strerror(errno));
    }
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out.flush()) {
    throw UserError("cannot write temporary plot file '" + path.string() +
                    "': " + std::strerror(errno));
  }
}

std::string terminal_line() {
  return has_pngcairo() ? "set terminal pngcairo noenhanced size 900,600 font 'Sans,10'\n"
                        : "set terminal png noenhanced size 900,600\n";
}

// Writes `script` (which plots to the file named by the gnuplot variable `outfile`) into `tmp`,
// runs gnuplot and moves the image to `png_path`.
void render(const TempDir& tmp, const std::string& script, const std::string& png_path) {
  const fs::path target(png_path);
  std::error_code ec;
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec) {
      throw UserError("cannot create folder '" + target.parent_path().string() +
                      "': " + ec.message());
    }
  }
  const std::string partial = png_path + ".tmp." + std::to_string(::getpid()) + ".png";
  const fs::path gp = tmp.path() / "plot.gp";
  const fs::path log = tmp.path() / "gnuplot.log";
  write_text(gp, "outfile = " + gp_quote(partial) + "\n" + terminal_line() +
                     "set output outfile\n" + script + "unset output\n");
  const bool ok =
      shell_ok("gnuplot " + shell_quote(gp.string()) + " >" + shell_quote(log.string()) + " 2>&1");
  if (!ok || !fs::exists(partial) || fs::file_size(partial, ec) == 0) {
    std::remove(partial.c_str());
    std::string message;
    try {
      message = read_file(log.string());
    } catch (const std::exception&) {
    }
    throw std::runtime_error("gnuplot failed to draw '" + png_path + "': " + message);
  }
  fs::rename(partial, target, ec);
  if (ec) {
    std::remove(partial.c_str());
    throw UserError("cannot move '" + partial + "' to '" + png_path + "': " + ec.message());
  }
}

std::string number(double v) { return std::isfinite(v) ? format_number(v) : "NaN"; }

}  // namespace

bool gnuplot_available() {
  static const bool yes = shell_ok("gnuplot --version >/dev/null 2>&1");
  return yes;
}

void plot_lines(const LinePlot& plot, const std::string& png_path) {
  if (plot.series.empty()) {
    throw std::invalid_argument("plot_lines('" + png_path + "'): the plot has no series");
  }
  for (const Series& s : plot.series) {
    if (s.x.size() != s.y.size()) {
      throw std::invalid_argument("plot_lines('" + png_path + "'): series '" + s.title + "' has " +
                                  std::to_string(s.x.size()) + " x values but " +
                                  std::to_string(s.y.size()) + " y values");
    }
    if (!s.yerr.empty() && s.yerr.size() != s.y.size()) {
      throw std::invalid_argument("plot_lines('" + png_path + "'): series '" + s.title + "' has " +
                                  std::to_string(s.yerr.size()) + " error bars for " +
                                  std::to_string(s.y.size()) + " y values");
    }
    for (size_t i = 0; i < s.x.size(); ++i) {
      if ((plot.logx && !(s.x[i] > 0)) || (plot.logy && std::isfinite(s.y[i]) && !(s.y[i] > 0))) {
        throw std::invalid_argument("plot_lines('" + png_path + "'): series '" + s.title +
                                    "' has a non-positive value on a log axis at point " +
                                    std::to_string(i));
      }
    }
  }
  require_gnuplot();
  TempDir tmp;
  std::ostringstream gp;
  gp << "set title " << gp_quote(plot.title) << "\n"
     << "set xlabel " << gp_quote(plot.xlabel) << "\n"
     << "set ylabel " << gp_quote(plot.ylabel) << "\n"
     << "set grid\nset datafile missing 'NaN'\n";
  // Beside the plot a key takes its longest title (about 7 px a character at Sans 10) plus the
  // line sample, about 60 px: up to 28 characters that stays under a third of the 900 px width.
  // Longer titles go below the plot, which keeps the whole width; two columns while two fit.
  size_t longest_title = 0;
  for (const Series& s : plot.series) longest_title = std::max(longest_title, s.title.size());
  if (longest_title <= 28)
    gp << "set key outside right top\n";
  else
    gp << "set key outside below left Left reverse maxcols " << (longest_title <= 56 ? 2 : 1)
       << "\n";
  if (plot.logx) gp << "set logscale x 2\nset format x '%g'\n";
  if (plot.logy) gp << "set logscale y\nset format y '%g'\n";
  if (std::isfinite(plot.vline)) {
    gp << "set arrow from " << number(plot.vline) << ", graph 0 to " << number(plot.vline)
       << ", graph 1 nohead dashtype 2 linewidth 1.5 linecolor rgb 'gray40'\n";
    if (!plot.vline_label.empty()) {
      gp << "set label " << gp_quote(plot.vline_label) << " at " << number(plot.vline)
         << ", graph 0.97 offset 0.5,0 left textcolor rgb 'gray30'\n";
    }
  }
  gp << "plot ";
  for (size_t k = 0; k < plot.series.size(); ++k) {
    const Series& s = plot.series[k];
    const fs::path data = tmp.path() / ("series" + std::to_string(k) + ".dat");
    std::string text;
    for (size_t i = 0; i < s.x.size(); ++i) {
      text += number(s.x[i]) + " " + number(s.y[i]);
      if (!s.yerr.empty()) text += " " + number(std::isfinite(s.yerr[i]) ? s.yerr[i] : 0.0);
      text += "\n";
    }
    write_text(data, text);
    gp << (k ? ", \\\n     " : "") << gp_quote(data.string())
       << (s.yerr.empty() ? " using 1:2 with linespoints" : " using 1:2:3 with yerrorlines")
       << " title " << gp_quote(s.title) << " linewidth 2 pointsize 0.8";
  }
  gp << "\n";
  render(tmp, gp.str(), png_path);
}

namespace {

// `set xtics ("a" 0, "b" 1)`: labels at the cell centres.
std::string tic_labels(const char* axis, const std::vector<std::string>& labels) {
  std::string out = std::string("set ") + axis + " (";
  for (size_t i = 0; i < labels.size(); ++i) {
    out += (i ? ", " : "") + gp_quote(labels[i]) + " " + std::to_string(i);
  }
  return out + ")\n";
}

}  // namespace

void plot_heatmap(const torch::Tensor& m, const std::string& title, const std::string& xlabel,
                  const std::string& ylabel, const std::string& png_path,
                  const std::vector<std::string>& xtics, const std::vector<std::string>& ytics) {
  if (!m.defined() || m.dim() != 2 || m.numel() == 0) {
    throw std::invalid_argument("plot_heatmap('" + png_path +
                                "'): expected a non-empty 2-D tensor");
  }
  if ((!xtics.empty() && static_cast<int64_t>(xtics.size()) != m.size(1)) ||
      (!ytics.empty() && static_cast<int64_t>(ytics.size()) != m.size(0))) {
    throw std::invalid_argument("plot_heatmap('" + png_path +
                                "'): one tic label per column and per row");
  }
  require_gnuplot();
  TempDir tmp;
  const torch::Tensor v = m.detach().to(torch::kCPU, torch::kDouble).contiguous();
  const int64_t rows = v.size(0), cols = v.size(1);
  const double* p = v.data_ptr<double>();
  std::string text;
  text.reserve(static_cast<size_t>(rows * cols * 12));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      if (c) text += ' ';
      text += number(p[r * cols + c]);
    }
    text += '\n';
  }
  const fs::path data = tmp.path() / "matrix.dat";
  write_text(data, text);
  std::ostringstream gp;
  gp << "set title " << gp_quote(title) << "\n"
     << "set xlabel " << gp_quote(xlabel) << "\n"
     << "set ylabel " << gp_quote(ylabel) << "\n"
     << "set xrange [-0.5:" << cols - 0.5 << "]\n"
     << "set yrange [" << rows - 0.5 << ":-0.5]\n"  // row 0 at the top
     << "set tics out\nset palette rgbformulae 33,13,10\nset datafile missing 'NaN'\n";
  if (!xtics.empty()) gp << tic_labels("xtics", xtics);
  if (!ytics.empty()) gp << tic_labels("ytics", ytics);
  gp << "plot " << gp_quote(data.string()) << " matrix with image notitle\n";
  render(tmp, gp.str(), png_path);
}

}  // namespace hybridlab::plot
