#pragma once
// The main of a benchmark program: MPI up for the whole run, its options parsed, its run called and an error
// reported as one line. Collective only where the program's run is.

#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>

#include "gridshard/comm/environment.hpp"

namespace gridshard::bench {

/// MPI up; the program's `Options` defined on a CLI11 app of `description` by `define(app, options)` and parsed; then
/// `run(options)`'s exit status, or 1 after "NAME: error: ..." on stderr when it throws.
template <class Options, class Define, class Run>
int bench_main(int argc, char** argv, const char* name, const char* description, Define define, Run run) {
    MpiEnvironment mpi(&argc, &argv);
    Options options;
    CLI::App app{description};
    define(app, options);
    CLI11_PARSE(app, argc, argv);
    try {
        return run(options);
    } catch (const std::exception& error) {
        std::cerr << name << ": error: " << error.what() << "\n";
        return 1;
    }
}

}  // namespace gridshard::bench
