// gridshard: the command-line front end. Parses the subcommand and hands over to it; every error
// becomes a one-line message and exit status 2 (bad arguments) or 1 (anything else).

#include <malloc.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <iostream>

#include "commands.hpp"
#include "gridshard/core/error.hpp"

namespace {

int run(int argc, char** argv) {
    CLI::App app{"gridshard: metrics of global lat-lon fields split over an MPI process mesh"};
    app.require_subcommand(1);
    gridshard::cli::Runner decompose = gridshard::cli::add_decompose_command(app);
    gridshard::cli::Runner eval = gridshard::cli::add_eval_command(app);

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& help) {
        return app.exit(help);
    } catch (const CLI::CallForAllHelp& help) {
        return app.exit(help);
    } catch (const CLI::ParseError& error) {
        std::cerr << "gridshard: error: " << error.what() << "\n";
        return gridshard::cli::exit_usage;
    }

    try {
        if (app.got_subcommand("decompose")) {
            return decompose();
        }
        if (app.got_subcommand("eval")) {
            return eval();
        }
    } catch (const gridshard::ArgumentError& error) {
        std::cerr << "gridshard: error: " << error.what() << "\n";
        return gridshard::cli::exit_usage;
    } catch (const std::exception& error) {
        std::cerr << "gridshard: error: " << error.what() << "\n";
        return 1;
    }
    return gridshard::cli::exit_usage;
}

}  // namespace

int main(int argc, char** argv) {
    // eval allocates and frees field-sized buffers every step; glibc would hand each one back to the
    // kernel and fault it in again on the next step (a third of the run time). Keep them in the heap.
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    try {
        return run(argc, argv);
    } catch (const std::exception& error) {
        std::cerr << "gridshard: error: " << error.what() << "\n";
        return 1;
    }
}
