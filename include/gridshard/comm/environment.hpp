#pragma once
/// @file
/// RAII initialisation and finalisation of MPI for programs (the CLI, the tests).

namespace gridshard {

/// Initialises MPI (MPI_THREAD_FUNNELED) unless it already is, and finalises it on destruction if
/// this object initialised it. MPI_COMM_WORLD is set to return errors as codes, so failures reach
/// gridshard's error path instead of aborting. A process started without a launcher (no mpirun,
/// srun or PMI environment) asks Open MPI for a light singleton start, unless the user set otherwise.
/// Collective over MPI_COMM_WORLD.
class MpiEnvironment {
  public:
    MpiEnvironment(int* argc, char*** argv);
    MpiEnvironment(const MpiEnvironment&) = delete;
    MpiEnvironment& operator=(const MpiEnvironment&) = delete;
    ~MpiEnvironment();

    /// Whether a launcher (mpirun, mpiexec, srun, a PMI or PMIx process manager) started this process, as
    /// its environment says. No MPI calls; for a process that wants to know before starting MPI.
    [[nodiscard]] static bool launched() noexcept;

    /// Ends every rank of MPI_COMM_WORLD with `exit_code` after a failure that not all ranks saw.
    [[noreturn]] static void abort(int exit_code) noexcept;

  private:
    bool initialized_here_ = false;
};

}  // namespace gridshard
