#pragma once
// Doubles in the run folder's JSON records, NaN and infinities included.
//
// JSON has no NaN or infinity (RFC 8259, section 6) and nlohmann::json writes them as null, which
// no reader takes for a number: one diverged evaluation made a whole results.json unreadable. A
// non-finite value is written as the string "nan", "inf" or "-inf" instead, and read back from
// those strings; null (what files written before this held for any of the three) reads as NaN.

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace hybridlab {

/// `v` as a JSON number, or as "nan", "inf", "-inf" when it is not finite.
nlohmann::json number_json(double v);

/// The double `j` holds: a number, "nan", "inf", "-inf", or null (NaN). Throws
/// std::runtime_error naming what it got for anything else.
double number_of(const nlohmann::json& j);

/// number_of(obj[key]), or `fallback` when `obj` has no `key`.
double number_at(const nlohmann::json& obj, const std::string& key, double fallback);

/// Each value as number_json writes it, as a JSON array.
nlohmann::json numbers_json(const std::vector<double>& values);

/// The doubles of a JSON array written by numbers_json. Throws std::runtime_error when `j` is not
/// an array or an element is not a number as number_of reads it.
std::vector<double> numbers_of(const nlohmann::json& j);

}  // namespace hybridlab
