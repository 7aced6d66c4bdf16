// The claims section of summary.md and claims.csv (report/report_parts.h): each `expect:` claim
// judged on the variants' intervals (report/claims.h).

#include <fmt/format.h>

#include "plot/csv.h"
#include "plot/gnuplot.h"
#include "report/claims.h"
#include "report/report_parts.h"

namespace hybridlab::report {

namespace {

std::string side_text(const CellRef& c) {
  return fmt::format("{} {} at {}", c.variant, c.metric, c.length);
}

// The variants' names, metrics and lengths, for resolving a claim's references.
ClaimCatalog catalog_of(const std::vector<VariantCells>& variants) {
  ClaimCatalog cat;
  std::set<std::string> metrics;
  std::set<int64_t> lengths;
  for (const auto& v : variants) {
    cat.variants.push_back({v.variant, v.labels});
    for (const auto& [key, iv] : v.cells) {
      metrics.insert(key.first);
      lengths.insert(key.second);
    }
  }
  cat.metrics.assign(metrics.begin(), metrics.end());
  cat.lengths.assign(lengths.begin(), lengths.end());
  return cat;
}

// Judges one claim on `variants` (inconclusive when its cells are missing from these runs).
std::pair<Claim, ClaimOutcome> judge(const std::string& text, const ClaimCatalog& cat,
                                     const std::vector<VariantCells>& variants) {
  const auto find = [&](const std::string& name) -> const VariantCells* {
    for (const auto& v : variants) {
      if (v.variant == name) return &v;
    }
    return nullptr;
  };
  const auto lookup = [&](const std::string& name, const std::string& m, int64_t L) {
    const VariantCells* v = find(name);
    return v ? v->cell(m, L) : Interval{};
  };
  const auto higher = [&](const std::string& m) {
    return variants.empty()
               ? true
               : metric_higher_is_better(m, variants[0].primary, variants[0].higher_is_better);
  };
  // Per-seed differences between two cells whose variants have runs of the same seeds.
  const auto paired = [&](const CellRef& a, const CellRef& b) {
    const VariantCells* va = find(a.variant);
    const VariantCells* vb = find(b.variant);
    if (!va || !vb) return Interval{};
    return paired_difference(*va, a.metric, a.length, *vb, b.metric, b.length);
  };
  const auto split_of = [&](const std::string& name) {
    const VariantCells* v = find(name);
    return v ? v->split_note() : std::string();
  };
  Claim c;
  ClaimOutcome o;
  try {
    c = parse_claim(text);
    resolve_claim(c, cat);
    o = evaluate_claim(c, lookup, higher, split_of, paired);
  } catch (const ClaimError& e) {
    // Checked when the experiment was read; here the runs of a cell may be missing.
    o.status = ClaimStatus::kInconclusive;
    o.note = std::string("cannot judge on these runs: ") + e.what();
  }
  return {c, o};
}

// A claim's row of claims.csv: the claim, its outcome, each side's mean, half-width and n, the
// paired difference, the note.
std::vector<std::string> csv_row(const std::string& text, const Claim& c, const ClaimOutcome& o) {
  const auto side_cells = [](const Interval& iv, bool number) {
    return std::vector<std::string>{iv.empty() ? "" : plot::format_number(iv.mean),
                                    iv.has_interval() ? plot::format_number(iv.half_width) : "",
                                    number || iv.empty() ? "" : std::to_string(iv.n)};
  };
  std::vector<std::string> row = {text, claim_status_name(o.status)};
  row.push_back(c.lhs.variant.empty() ? "" : side_text(c.lhs));
  for (auto& s : side_cells(o.lhs, false)) row.push_back(s);
  row.push_back(c.rhs_is_number ? plot::format_number(c.number)
                                : (c.rhs.variant.empty() ? "" : side_text(c.rhs)));
  for (auto& s : side_cells(o.rhs, c.rhs_is_number)) row.push_back(s);
  for (auto& s : side_cells(o.difference, false)) row.push_back(s);
  row.push_back(o.note);
  return row;
}

// A claim's row of summary.md's claims table (the outcome in bold unless it holds).
std::string md_row(const std::string& text, const Claim& c, const ClaimOutcome& o) {
  const auto side = [](const Interval& iv, bool number) {
    if (number) return fmt_value(iv.mean);
    return iv.empty() ? std::string("-") : interval_text(iv) + fmt::format(" (n={})", iv.n);
  };
  const std::string status = claim_status_name(o.status);
  return fmt::format("| {} | {} | {} | {} | {} |\n", text,
                     o.status == ClaimStatus::kHolds ? status : "**" + status + "**",
                     side(o.lhs, false), side(o.rhs, c.rhs_is_number), o.note);
}

}  // namespace

std::string claims_section(const std::filesystem::path& dir,
                           const std::vector<VariantCells>& variants, ReportFiles& files) {
  const std::vector<std::string> claims = read_expectations(dir.string());
  if (claims.empty()) return "";
  const ClaimCatalog cat = catalog_of(variants);
  std::vector<std::vector<std::string>> rows;
  std::string md =
      "\n## Claims\n\n| claim | outcome | left | right | note |\n|---|---|---|---|---|\n";
  for (const auto& text : claims) {
    const auto [c, o] = judge(text, cat, variants);
    (o.status == ClaimStatus::kHolds   ? files.claims_held
     : o.status == ClaimStatus::kFails ? files.claims_failed
     : o.status == ClaimStatus::kSplit ? files.claims_split
                                       : files.claims_inconclusive)++;
    rows.push_back(csv_row(text, c, o));
    md += md_row(text, c, o);
  }
  md += fmt::format("\n{} claims: {} hold, {} fail, {} inconclusive", claims.size(),
                    files.claims_held, files.claims_failed, files.claims_inconclusive);
  md += files.claims_split == 0
            ? std::string(".\n")
            : fmt::format(
                  ", {} on variants whose seeds split (one seed left the plateau, "
                  "another did not: more seeds, a longer schedule or a better recipe; "
                  "docs/experiments.md#run-health).\n",
                  files.claims_split);
  files.claims_csv = (dir / "claims.csv").string();
  plot::write_csv(files.claims_csv,
                  {"claim", "outcome", "left", "left_mean", "left_ci95", "left_n", "right",
                   "right_mean", "right_ci95", "right_n", "paired_difference_mean",
                   "paired_difference_ci95", "paired_n", "note"},
                  rows);
  return md;
}

}  // namespace hybridlab::report
