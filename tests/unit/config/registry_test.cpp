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
  const MixerRegistry& b = MixerRegistry::builtin();
  REQUIRE(b.find("A") == b.find("attention"));
  REQUIRE(b.find("G")->name == "gated_deltanet");
  REQUIRE(b.find("Q") == nullptr);
  REQUIRE(b.names() == "A (attention), G (gated_deltanet)");
  REQUIRE(b.origin("attention") == "built in");
  // A search path's registry over the built-in types: one lookup for both, a clash names both.
  MixerRegistry m(&b);
  MixerType clash = attention_mixer_type();
  clash.name = "attention2";  // a new name with a taken letter
  REQUIRE_THROWS_WITH(m.add(clash, "/p/a2.so"),
                      Contains("'attention2' (letter A, /p/a2.so) is not used: 'attention' "
                               "(letter A, built in) has its letter"));
  REQUIRE_THROWS_WITH(m.add(gated_deltanet_mixer_type(), "/p/g.so"),
                      Contains("'gated_deltanet' (letter G, built in) has its name"));
  MixerType mine = attention_mixer_type();
  mine.name = "mine";
  mine.letter = 'Y';
  mine.plugin_file = "/p/mine.so";
  m.add(mine, "/p/mine.so");
  REQUIRE(m.find("Y")->name == "mine");
  REQUIRE(m.find("A") == b.find("A"));  // the built-in type itself, not a copy
  REQUIRE(m.origin("mine") == "/p/mine.so");
  REQUIRE(m.origin("gated_deltanet") == "built in");
  REQUIRE(m.names() == "A (attention), G (gated_deltanet), Y (mine, plugin)");
  MixerType other = mine;
  other.name = "other";
  REQUIRE_THROWS_WITH(m.add(other, "/p/o.so"),
                      Contains("'mine' (letter Y, /p/mine.so) has its letter"));
  REQUIRE(m.types().size() == 3);
  REQUIRE(b.types().size() == 2);

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
