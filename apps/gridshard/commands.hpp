#pragma once
// The subcommands of the gridshard tool. Each registers its options on the app and returns the
// function that runs it; runners return the process exit status.

#include <CLI/CLI.hpp>

#include <functional>

namespace gridshard::cli {

/// Exit status for bad input or arguments (ArgumentError), on every rank.
inline constexpr int exit_usage = 2;
/// Exit status for a failure of the system: a full disk, an I/O error, MPI, memory exhausted mid-run.
inline constexpr int exit_failure = 1;

using Runner = std::function<int()>;

/// `gridshard decompose`: prints how a grid splits over a mesh. Makes no MPI calls.
Runner add_decompose_command(CLI::App& app);

/// `gridshard eval`: scores a prediction against the truth over MPI (see eval_command.cpp).
Runner add_eval_command(CLI::App& app);

}  // namespace gridshard::cli
