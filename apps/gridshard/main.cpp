// gridshard: the command-line front end. Parses the subcommand and hands over to it. Every error becomes
// one line, printed once (by world rank 0 under a launcher), and the exit status of its kind: 2 for bad
// input or arguments, 1 for a failure of the system (see commands.hpp).

#include <malloc.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <iostream>
#include <ostream>

#include "commands.hpp"
#include "gridshard/comm/communicator.hpp"
#include "gridshard/comm/environment.hpp"
#include "gridshard/core/error.hpp"
#include "setting_flags.hpp"

namespace {

// Writes `text` once: under mpirun or srun every rank parses the same command line, so only world rank 0
// speaks. A process started plainly is alone and speaks without starting MPI; under a launcher, finding
// the rank starts MPI, and if that fails every process speaks rather than none. Rank 0 speaks before MPI
// is finalised: MPI_Finalize holds the other ranks until then, so none exits (and has the launcher end
// the job) before the line is out.
void say_once(std::ostream& out, const std::string& text) {
    if (!gridshard::MpiEnvironment::launched()) {
        out << text << std::flush;
        return;
    }
    try {
        const gridshard::MpiEnvironment environment(nullptr, nullptr);
        if (gridshard::Communicator::world().rank() == 0) {
            out << text << std::flush;
        }
        return;
    } catch (const std::exception&) {
    }
    out << text << std::flush;
}

int run(int argc, char** argv) {
    CLI::App app{"gridshard: metrics of global lat-lon fields split over an MPI process mesh"};
    app.require_subcommand(1);
    gridshard::cli::Runner decompose = gridshard::cli::add_decompose_command(app);
    gridshard::cli::Runner eval = gridshard::cli::add_eval_command(app);

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
        say_once(std::cout, (app.get_subcommands().empty() ? &app : app.get_subcommands().front())->help());
        return 0;
    } catch (const CLI::CallForAllHelp&) {
        say_once(std::cout, app.help("", CLI::AppFormatMode::All));
        return 0;
    } catch (const CLI::ParseError& error) {
        say_once(std::cerr, "gridshard: error: " + gridshard::cli::with_flags(error.what()) + "\n");
        return gridshard::cli::exit_usage;
    }

    try {
        if (app.got_subcommand("decompose")) {
            return decompose();
        }
        if (app.got_subcommand("eval")) {
            return eval();  // prints its own errors, once
        }
    } catch (const gridshard::ArgumentError& error) {
        say_once(std::cerr, "gridshard: error: " + gridshard::cli::with_flags(error.what()) + "\n");
        return gridshard::cli::exit_usage;
    } catch (const std::exception& error) {
        std::cerr << "gridshard: error: " << gridshard::cli::with_flags(error.what()) << "\n";
        return gridshard::cli::exit_failure;
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
        std::cerr << "gridshard: error: " << gridshard::cli::with_flags(error.what()) << "\n";
        return gridshard::cli::exit_failure;
    }
}
