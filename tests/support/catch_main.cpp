// The one Catch2 main of the test suite (compiled once, linked into every test executable).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "hybridlab/runtime.h"

int main(int argc, char** argv) {
  hybridlab::prepare_process();  // the CPU settings every hybridlab program runs with
  return Catch::Session().run(argc, argv);
}
