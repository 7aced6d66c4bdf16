// validate_experiment_config: the strict read of a whole experiment file (read_experiment).

#include "commands.h"
#include "hybridlab/experiment.h"

namespace hybridlab::cli {

void validate_experiment_config(Config& cfg) { read_experiment(cfg); }

}  // namespace hybridlab::cli
