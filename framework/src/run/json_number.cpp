// Doubles in the run folder's JSON records: non-finite values as strings (json_number.h says why).

#include "run/json_number.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace hybridlab {

nlohmann::json number_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

double number_of(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  throw std::runtime_error("expected a number (or \"nan\", \"inf\", \"-inf\"), got " + j.dump());
}

double number_at(const nlohmann::json& obj, const std::string& key, double fallback) {
  const auto it = obj.find(key);
  return it == obj.end() ? fallback : number_of(*it);
}

nlohmann::json numbers_json(const std::vector<double>& values) {
  nlohmann::json a = nlohmann::json::array();
  for (double v : values) a.push_back(number_json(v));
  return a;
}

std::vector<double> numbers_of(const nlohmann::json& j) {
  if (!j.is_array()) throw std::runtime_error("expected a list of numbers, got " + j.dump());
  std::vector<double> out;
  out.reserve(j.size());
  for (const auto& v : j) out.push_back(number_of(v));
  return out;
}

}  // namespace hybridlab
