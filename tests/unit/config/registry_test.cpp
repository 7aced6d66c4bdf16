// The one registry idiom (util/registry.h) and its users: duplicates named with both origins,
// unknown names with the nearest known one, entries sorted; the mixer registry refuses a second
// type with a taken name or pattern letter; the task registry holds every task.

#include <catch2/catch.hpp>

#include <string>

#include "model/mixer.h"
#include "tasks/registry.h"
#include "util/registry.h"

using namespace hybridlab;
using Catch::Matchers::Contains;

TEST_CASE("registry: duplicates name both origins, unknown names get the nearest", "[registry]") {
  Registry<int> r("widget");
  r.add("rope", 1, "a.so");
  r.add("alibi", 2, "built in");
  REQUIRE(r.size() == 2);
  REQUIRE(*r.find("rope") == 1);
  REQUIRE(r.find("ropee") == nullptr);
  REQUIRE(r.origin("rope") == "a.so");
  REQUIRE(r.names() == std::vector<std::string>{"alibi", "rope"});
  REQUIRE(*r.entries()[0] == 2);
  try {
    r.add("rope", 3, "b.so");
    FAIL("expected DuplicateEntry");
  } catch (const DuplicateEntry& e) {
    REQUIRE(std::string(e.what()) == "two widgets are named 'rope': a.so and b.so");
  }
  REQUIRE(*r.find("rope") == 1);  // the first stays
  REQUIRE(r.unknown("ropee") ==
          "unknown widget 'ropee'; did you mean 'rope'? (widgets: alibi, rope)");
  REQUIRE(r.unknown("zzzzzzzz") == "unknown widget 'zzzzzzzz' (widgets: alibi, rope)");
  REQUIRE(Registry<int>("widget").unknown("x") == "unknown widget 'x' (widgets: none)");
}

TEST_CASE("registry: mixer types by name and letter, tasks", "[registry]") {
  MixerRegistry m;
  register_builtin_mixers(m);
  REQUIRE(m.find("A") == m.find("attention"));
  REQUIRE(m.find("G")->name == "gated_deltanet");
  REQUIRE(m.find("Q") == nullptr);
  REQUIRE(m.names() == "A (attention), G (gated_deltanet)");
  MixerType clash = attention_mixer_type();
  clash.name = "attention2";  // a new name with a taken letter
  REQUIRE_THROWS_WITH(m.add(clash), Contains("two mixer pattern letters are named 'A'") &&
                                        Contains("mixer type 'attention'") &&
                                        Contains("mixer type 'attention2'"));
  REQUIRE_THROWS_WITH(m.add(gated_deltanet_mixer_type()),
                      Contains("two mixer types are named 'gated_deltanet'"));
  REQUIRE(m.types().size() == 2);

  const std::vector<std::string> all = {"algorithmic",  "compression",  "copy",
                                        "flip_flop",    "fuzzy_recall", "in_context_recall",
                                        "memorization", "mqar",         "niah",
                                        "noisy_recall", "passkey",      "ruler_cwe",
                                        "ruler_fwe",    "ruler_vt",     "selective_copy",
                                        "text",         "word_problem"};
  REQUIRE(tasks::task_registry().names() == all);
  REQUIRE(task_types().size() == all.size());
  for (size_t i = 0; i < all.size(); ++i) REQUIRE(task_types()[i].name == all[i]);  // by name
}
