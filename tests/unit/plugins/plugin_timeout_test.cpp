// HYBRIDLAB_PLUGIN_TIMEOUT: the time limit of each supervised plugin call, bounded.

#include <catch2/catch.hpp>

#include <cstdlib>

#include "hybridlab/error.h"
#include "util/supervised.h"

using hybridlab::UserError;
using hybridlab::detail::plugin_time_limit;

TEST_CASE("plugin timeout: default 60 s, a number above 0 and at most 3600, anything else named",
          "[plugins][supervised]") {
  ::unsetenv("HYBRIDLAB_PLUGIN_TIMEOUT");
  CHECK(plugin_time_limit() == 60);
  ::setenv("HYBRIDLAB_PLUGIN_TIMEOUT", "2.5", 1);
  CHECK(plugin_time_limit() == 2.5);
  ::setenv("HYBRIDLAB_PLUGIN_TIMEOUT", "3600", 1);
  CHECK(plugin_time_limit() == 3600);
  for (const char* bad : {"0", "-1", "nan", "inf", "abc", "1e308", "3601"}) {
    ::setenv("HYBRIDLAB_PLUGIN_TIMEOUT", bad, 1);
    INFO(bad);
    CHECK_THROWS_AS(plugin_time_limit(), UserError);
    CHECK_THROWS_WITH(plugin_time_limit(), Catch::Contains("(0, 3600]"));
  }
  ::unsetenv("HYBRIDLAB_PLUGIN_TIMEOUT");
}
