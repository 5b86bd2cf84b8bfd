// The subcommands of `uwarp`, each with its own --help: main.cc dispatches on the first argument.
// Each returns the exit status: 0 success, 1 failure, 2 usage error.
#pragma once

namespace uwarp::tool {

int info_main(int argc, char** argv);
int stat_main(int argc, char** argv);
int trace_main(int argc, char** argv);

}  // namespace uwarp::tool
