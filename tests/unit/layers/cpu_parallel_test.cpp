// cpu::parallel_for: really on LibTorch's threads (this file is compiled without OpenMP, as the
// kernels are, so at::parallel_for here would run on one thread), every index exactly once,
// at::get_thread_num() a valid scratch index, errors carried back, no nested teams.

#include <ATen/Parallel.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "layers/kernels/cpu_parallel.h"

namespace cpu_parallel_test {

struct Chunk {
  int64_t begin, end;
  int thread_num;
  std::thread::id thread;
};

// Runs parallel_for with `threads` intra-op threads and returns its chunks in order of begin.
std::vector<Chunk> chunks_of(int threads, int64_t begin, int64_t end, int64_t grain) {
  const int before = at::get_num_threads();
  at::set_num_threads(threads);
  std::mutex m;
  std::vector<Chunk> seen;
  hybridlab::cpu::parallel_for(begin, end, grain, [&](int64_t b, int64_t e) {
    const std::lock_guard<std::mutex> lock(m);
    seen.push_back({b, e, at::get_thread_num(), std::this_thread::get_id()});
  });
  at::set_num_threads(before);
  std::sort(seen.begin(), seen.end(),
            [](const Chunk& a, const Chunk& b) { return a.begin < b.begin; });
  return seen;
}

TEST_CASE("cpu::parallel_for splits a range over two threads as at::parallel_for would",
          "[cpu_parallel]") {
  REQUIRE(hybridlab::cpu::parallel_for_is_threaded());
  const std::vector<Chunk> c = chunks_of(2, 3, 104, 1);
  // 101 iterations over 2 threads: ATen's split is ceil(101/2) = 51, then the rest.
  REQUIRE(c.size() == 2);
  CHECK(c[0].begin == 3);
  CHECK(c[0].end == 54);
  CHECK(c[1].begin == 54);
  CHECK(c[1].end == 104);
  CHECK(c[0].thread != c[1].thread);
  CHECK(std::set<int>{c[0].thread_num, c[1].thread_num} == std::set<int>{0, 1});
}

TEST_CASE("cpu::parallel_for runs on the caller alone when it should", "[cpu_parallel]") {
  const std::thread::id me = std::this_thread::get_id();
  SECTION("one thread configured") {
    const std::vector<Chunk> c = chunks_of(1, 0, 100, 1);
    REQUIRE(c.size() == 1);
    CHECK(c[0].begin == 0);
    CHECK(c[0].end == 100);
    CHECK(c[0].thread == me);
    CHECK(c[0].thread_num == 0);
  }
  SECTION("range within one grain") {
    const std::vector<Chunk> c = chunks_of(2, 0, 64, 64);
    REQUIRE(c.size() == 1);
    CHECK(c[0].end == 64);
    CHECK(c[0].thread == me);
  }
  SECTION("grain leaves work for one thread less") {
    // 10 iterations, grain 6: ceil(10/6) = 2 members of the team get 5 each.
    const std::vector<Chunk> c = chunks_of(2, 0, 10, 6);
    REQUIRE(c.size() == 2);
    CHECK(c[0].end == 5);
    CHECK(c[1].end == 10);
  }
  SECTION("empty range") { CHECK(chunks_of(2, 5, 5, 1).empty()); }
}

TEST_CASE("cpu::parallel_for nested inside itself runs inline", "[cpu_parallel]") {
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  std::mutex m;
  std::vector<std::pair<std::thread::id, std::thread::id>> inner;  // (outer thread, inner thread)
  hybridlab::cpu::parallel_for(0, 2, 1, [&](int64_t, int64_t) {
    const std::thread::id outer = std::this_thread::get_id();
    hybridlab::cpu::parallel_for(0, 8, 1, [&](int64_t b, int64_t e) {
      const std::lock_guard<std::mutex> lock(m);
      CHECK(b == 0);
      CHECK(e == 8);
      inner.emplace_back(outer, std::this_thread::get_id());
    });
  });
  at::set_num_threads(before);
  REQUIRE(inner.size() == 2);
  for (const auto& [outer, in] : inner) CHECK(outer == in);
}

TEST_CASE("cpu::parallel_for rethrows a chunk's exception after the team ends", "[cpu_parallel]") {
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  std::mutex m;
  std::vector<int64_t> finished;
  auto run = [&] {
    hybridlab::cpu::parallel_for(0, 20, 1, [&](int64_t b, int64_t) {
      if (b > 0) throw std::runtime_error("chunk starting at " + std::to_string(b));
      const std::lock_guard<std::mutex> lock(m);
      finished.push_back(b);
    });
  };
  CHECK_THROWS_WITH(run(), "chunk starting at 10");
  at::set_num_threads(before);
  CHECK(finished == std::vector<int64_t>{0});
}

}  // namespace cpu_parallel_test
