// The safetensors reader and writer against hand-made bytes (safetensors README "Format",
// safetensors/src/tensor.rs `validate`): values, the header's layout rules, and each refusal.

#include <torch/torch.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "checkpoint/safetensors.h"
#include "hybridlab/error.h"
#include "unit/interop/interop_test_util.h"

using namespace hybridlab;
namespace fs = std::filesystem;

namespace safetensors_test {
namespace {

fs::path fresh_dir(const std::string& name) { return interoptest::fresh_dir("st_" + name); }

std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A file of an 8-byte length, `header` and `data`; the length field may lie (`declared`).
std::string write_raw(const fs::path& dir, const std::string& header, const std::string& data,
                      int64_t declared = -1) {
  const std::string path = (dir / "t.safetensors").string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << le64(declared < 0 ? header.size() : static_cast<uint64_t>(declared)) << header << data;
  return path;
}

std::string error_of(const std::string& path) {
  try {
    SafetensorsFile f(path);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("safetensors: hand-made bytes read as their values", "[interop]") {
  const fs::path dir = fresh_dir("values");
  // F32 1.5 = 0x3FC00000 and -2 = 0xC0000000; BF16 1.0 = 0x3F80; F16 1.0 = 0x3C00 (little-endian).
  const std::string data = std::string("\x00\x00\xc0\x3f\x00\x00\x00\xc0", 8) +
                           std::string("\x80\x3f", 2) + std::string("\x00\x3c", 2);
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"BF16","shape":[],"data_offsets":[8,10]},)"
      R"("c":{"dtype":"F16","shape":[1,1],"data_offsets":[10,12]}})";
  SafetensorsFile f(write_raw(dir, header, data));
  CHECK(f.header().metadata.at("format") == "pt");
  CHECK(f.header().data_start == 8 + header.size());
  const torch::Tensor a = f.load("a");
  REQUIRE(a.scalar_type() == torch::kFloat32);
  CHECK(a[0].item<float>() == 1.5f);
  CHECK(a[1].item<float>() == -2.0f);
  const torch::Tensor b = f.load("b");
  CHECK(b.dim() == 0);
  CHECK(b.scalar_type() == torch::kBFloat16);
  CHECK(b.to(torch::kFloat32).item<float>() == 1.0f);
  const torch::Tensor c = f.load("c");
  CHECK(c.sizes() == torch::IntArrayRef({1, 1}));
  CHECK(c.to(torch::kFloat32).item<float>() == 1.0f);
  fs::remove_all(dir);
}

TEST_CASE("safetensors: write then read round-trips every dtype, in the reference order",
          "[interop]") {
  const fs::path dir = fresh_dir("roundtrip");
  const std::string path = (dir / "m.safetensors").string();
  const auto f64 = torch::tensor({1.0, -0.25, 3e-300}, torch::kFloat64);
  const auto f32 = torch::arange(6, torch::kFloat32).view({2, 3}).t();  // not contiguous
  const auto bf16 = torch::tensor({0.5f, -7.0f}).to(torch::kBFloat16);
  const auto f16 = torch::tensor({65504.0f}).to(torch::kFloat16);
  const auto i64 = torch::tensor({int64_t{-1}, int64_t{1} << 40});
  const auto flag = torch::tensor({true, false, true});
  const auto empty = torch::zeros({0, 4});
  write_safetensors(path,
                    {{"z.f32", f32},
                     {"a.bf16", bf16},
                     {"m.i64", i64},
                     {"b.f64", f64},
                     {"c.f16", f16},
                     {"flag", flag},
                     {"empty", empty}},
                    {{"source", "test"}});
  SafetensorsFile f(path);
  CHECK(f.header().data_start % 8 == 0);  // the header is padded to a multiple of 8
  // Descending element size, then name: b.f64 (8), m.i64 (8), empty (4, F32), z.f32, then the
  // 2-byte a.bf16, c.f16, then the 1-byte flag. Offsets by hand: 24, 16, 0, 24, 4, 2, 3 bytes.
  std::vector<std::string> names;
  std::vector<uint64_t> begins;
  for (const auto& e : f.header().tensors) {
    names.push_back(e.name);
    begins.push_back(e.begin);
  }
  CHECK(names ==
        std::vector<std::string>{"b.f64", "m.i64", "empty", "z.f32", "a.bf16", "c.f16", "flag"});
  CHECK(begins == std::vector<uint64_t>{0, 24, 40, 40, 64, 68, 70});
  CHECK(f.load("b.f64").equal(f64));
  CHECK(f.load("z.f32").equal(f32.contiguous()));
  CHECK(f.load("a.bf16").equal(bf16));
  CHECK(f.load("c.f16").equal(f16));
  CHECK(f.load("m.i64").equal(i64));
  CHECK(f.load("flag").equal(flag));
  CHECK(f.load("empty").sizes() == torch::IntArrayRef({0, 4}));
  CHECK(f.header().metadata.at("source") == "test");
  CHECK(fs::file_size(path) == f.header().data_start + 73);
  fs::remove_all(dir);
}

TEST_CASE("safetensors: every malformed header is refused naming the file and the tensor",
          "[interop]") {
  const fs::path dir = fresh_dir("bad");
  const std::string four(4, '\0'), eight(8, '\0');
  auto rec = [](const std::string& name, const std::string& dtype, const std::string& shape, int b,
                int e) {
    return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
           ",\"data_offsets\":[" + std::to_string(b) + "," + std::to_string(e) + "]}";
  };
  struct Case {
    std::string what, header, data, expect;
    int64_t declared = -1;
  };
  const std::vector<Case> cases{
      {"truncated header", "{}", "", "runs past the end", 100},
      {"oversized header", "{}", "", "exceeds the format's limit", 200'000'000},
      {"not JSON", "{\"a\":", "", "not valid JSON"},
      {"not an object", "[1,2]", "", "not a JSON object"},
      {"duplicate", "{" + rec("a", "F32", "[1]", 0, 4) + "," + rec("a", "F32", "[1]", 4, 8) + "}",
       eight, "tensor 'a' is named twice"},
      {"gap", "{" + rec("a", "F32", "[1]", 0, 4) + "," + rec("b", "F32", "[1]", 8, 12) + "}",
       std::string(12, '\0'),
       "tensor 'b' starts at byte 8 of the data, where 4 was expected (a gap)"},
      {"overlap", "{" + rec("a", "F32", "[2]", 0, 8) + "," + rec("b", "F32", "[1]", 4, 8) + "}",
       eight, "where 8 was expected (an overlap)"},
      {"byte count", "{" + rec("a", "F32", "[3]", 0, 8) + "}", eight, "needs 12 bytes"},
      {"trailing bytes", "{" + rec("a", "F32", "[1]", 0, 4) + "}", eight,
       "end at byte 4 of the data but the file holds 8"},
      {"short data", "{" + rec("a", "F32", "[2]", 0, 8) + "}", four,
       "end at byte 8 of the data but the file holds 4"},
      {"unknown dtype", "{" + rec("a", "F31", "[1]", 0, 4) + "}", four, "unknown dtype 'F31'"},
      {"negative size", "{" + rec("a", "F32", "[-1]", 0, 4) + "}", four, "not a size"},
      {"no offsets", R"({"a":{"dtype":"F32","shape":[1]}})", four, "tensor 'a': no 'data_offsets'"},
      {"reversed", "{" + rec("a", "F32", "[0]", 4, 0) + "}", "", "end before begin"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    const std::string path = write_raw(dir, c.header, c.data, c.declared);
    const std::string err = error_of(path);
    INFO(err);
    CHECK(err.find(path) == 0);
    CHECK(err.find(c.expect) != std::string::npos);
  }
  {
    const std::string path = (dir / "short.safetensors").string();
    std::ofstream(path, std::ios::binary) << "abc";
    CHECK(error_of(path).find("too short") != std::string::npos);
  }
  // A well-formed F8 tensor opens; loading it is refused naming the dtype.
  SafetensorsFile f8(write_raw(dir, "{" + rec("x", "F8_E4M3", "[2]", 0, 2) + "}", "ab"));
  CHECK_THROWS_WITH(f8.load("x"), Catch::Contains("tensor 'x': dtype 'F8_E4M3' is not read"));
  CHECK_THROWS_WITH(f8.load("y"), Catch::Contains("no tensor 'y'"));
  fs::remove_all(dir);
}

TEST_CASE("safetensors: a sharded checkpoint reads through its index", "[interop]") {
  const fs::path dir = fresh_dir("sharded");
  write_safetensors((dir / "model-00001-of-00002.safetensors").string(), {{"a", torch::ones({2})}});
  write_safetensors((dir / "model-00002-of-00002.safetensors").string(),
                    {{"b", torch::full({3}, 2.0)}});
  auto write_index = [&](const std::string& b_file) {
    std::ofstream(dir / "model.safetensors.index.json")
        << R"({"metadata":{"total_size":20},"weight_map":{"a":"model-00001-of-00002.safetensors",)"
        << R"("b":")" << b_file << R"("}})";
  };
  write_index("model-00002-of-00002.safetensors");
  SafetensorsCheckpoint ck(dir.string());
  CHECK(ck.names() == std::vector<std::string>{"a", "b"});
  CHECK(ck.load("b").equal(torch::full({3}, 2.0)));
  CHECK(ck.file_of("a").find("00001") != std::string::npos);
  CHECK_THROWS_WITH(ck.load("c"), Catch::Contains("no tensor 'c'"));
  // The index names the wrong shard for b.
  write_index("model-00001-of-00002.safetensors");
  CHECK_THROWS_WITH(SafetensorsCheckpoint(dir.string()),
                    Catch::Contains("weight_map.b names 'model-00001-of-00002.safetensors'"));
  fs::remove_all(dir);
}

TEST_CASE("safetensors: a failed write leaves nothing and refuses bad names", "[interop]") {
  const fs::path dir = fresh_dir("write");
  const std::string path = (dir / "m.safetensors").string();
  CHECK_THROWS_AS(write_safetensors(path, {{"a", torch::ones({1})}, {"a", torch::ones({1})}}),
                  std::invalid_argument);
  CHECK_THROWS_AS(write_safetensors(path, {{"__metadata__", torch::ones({1})}}),
                  std::invalid_argument);
  CHECK_THROWS_AS(write_safetensors(path, {{"c", torch::ones({1}, torch::kComplexFloat)}}),
                  std::invalid_argument);
  CHECK(fs::is_empty(dir));
  fs::remove_all(dir);
}

TEST_CASE("safetensors: load_into converts in chunks into an existing tensor", "[interop]") {
  const fs::path dir = fresh_dir("into");
  const std::string path = (dir / "m.safetensors").string();
  const torch::Tensor w = torch::randn({5, 7}).to(torch::kBFloat16);
  write_safetensors(path, {{"w", w}, {"i", torch::arange(3)}});
  SafetensorsFile f(path);
  // 6-byte chunks: 3 BF16 values at a time, the last chunk partial (35 = 11·3 + 2).
  torch::Tensor dst = torch::zeros({5, 7}, torch::kFloat64);
  f.load_into("w", dst, 6);
  CHECK(dst.equal(w.to(torch::kFloat64)));
  torch::Tensor wrong = torch::zeros({4, 7});
  CHECK_THROWS_WITH(f.load_into("w", wrong), Catch::Contains("35 elements cannot fill"));
  fs::remove_all(dir);
}

}  // namespace safetensors_test
