#include "gridshard/io/parallel_io.hpp"

#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <memory>
#include <optional>

#include "dataset_sink.hpp"
#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/mpi_check.hpp"
#include "gridshard/core/error.hpp"
#include "netcdf_handle.hpp"
#if GRIDSHARD_PARALLEL_IO
#include "pnetcdf_file.hpp"
#endif

namespace gridshard::io {
namespace {

// Rank 0's `text`, on every rank of `comm`. Collective.
std::string broadcast_text(const Communicator& comm, const std::string& text) {
    std::int64_t size = static_cast<std::int64_t>(text.size());
    GRIDSHARD_MPI(MPI_Bcast, &size, 1, MPI_INT64_T, 0, comm.native());
    std::string out = comm.rank() == 0 ? text : std::string(static_cast<std::size_t>(size), '\0');
    GRIDSHARD_MPI(MPI_Bcast, out.data(), static_cast<int>(size), MPI_CHAR, 0, comm.native());
    return out;
}

}  // namespace

void write_dataset_collectively(const std::string& temporary_path, const std::string& path, const Dataset& dataset,
                                const Communicator& comm) {
    // The sizes and parts first, agreed: a rank whose part does not fit stops every rank before any write.
    check_collectively(comm, attempt([&] {
                           if (!collective_io_available()) {
                               throw ArgumentError("cannot write '" + path + "' collectively: " +
                                                   std::string(collective_io_unavailable_reason()));
                           }
                           detail::check_dataset(dataset, path, true);
                       }));
#if GRIDSHARD_PARALLEL_IO
    // Every rank makes every call (the sink keeps its first failure), so the collectives always match.
    const bool root = comm.rank() == 0;
    {
        detail::PnetcdfSink sink(temporary_path, path, comm.native(), detail::classic_file_bytes(dataset));
        detail::write_dataset_through(sink, dataset, root);
        sink.close();
        check_collectively(
            comm, LocalFailure{sink.failure(), sink.system_failure() ? ErrorKind::system : ErrorKind::argument});
    }
    // MPI-IO may report a failed write on one rank only, or not at all (a write cut short is counted as
    // done): the file must hold a header and every byte it declares, and each rank's part must read back.
    check_collectively(comm, attempt([&] {
                           if (root) {
                               detail::fit_to_extent(temporary_path, path);
                           }
                       }));
    detail::PnetcdfReadBack read_back(temporary_path, path, comm.native());
    detail::write_dataset_through(read_back, dataset, root);
    read_back.close();
    check_collectively(comm, LocalFailure{read_back.failure(), ErrorKind::system});
#else
    (void)temporary_path;
#endif
}

namespace {

/// Refuses (ArgumentError) a rank that does not find rank 0's temporary `temporary` of `path`, holding its own name.
void check_sees_temporary(const std::string& path, const std::string& temporary, int rank) {
    std::string seen(temporary.size() + 1, '\0');
    const int fd = ::open(temporary.c_str(), O_RDONLY | O_CLOEXEC);
    const ssize_t got = fd < 0 ? -1 : ::pread(fd, seen.data(), seen.size(), 0);
    const int error = errno;
    if (fd >= 0) {
        ::close(fd);
    }
    if (got != static_cast<ssize_t>(temporary.size()) || seen.compare(0, temporary.size(), temporary) != 0) {
        throw ArgumentError("cannot write '" + path + "' collectively: rank " + std::to_string(rank) +
                            " does not see the temporary '" + temporary + "' that rank 0 made (" +
                            (fd < 0 ? std::string(std::strerror(error)) : std::string("another file of that name")) +
                            "): every rank must see the output folder on one shared file system");
    }
}

}  // namespace

void write_outputs_atomically(const std::vector<CollectiveOutputJob>& jobs, const Communicator& comm) {
    const bool root = comm.rank() == 0;
    std::vector<std::unique_ptr<AtomicOutput>> outputs;
    check_collectively(
        comm, attempt([&] {
            if (root) {
                for (const CollectiveOutputJob& job : jobs) {
                    // Every rank writes into a collective one, by its name; rank 0's own can be unnamed.
                    outputs.push_back(std::make_unique<AtomicOutput>(
                        job.path, job.fill_collectively ? TemporaryKind::shared : TemporaryKind::unnamed_if_possible));
                    if (job.fill_collectively) {  // its name in it, for the other ranks to find
                        outputs.back()->write(outputs.back()->temporary_path());
                        outputs.back()->flush();
                    }
                }
            }
        }));
    // Every rank knows every named temporary, so that if rank 0 is killed, the others remove its temporaries when
    // the launcher ends them (rank 0's own remove themselves on a signal; an unnamed one goes with rank 0).
    std::vector<std::string> temporaries;
    std::vector<RemovedOnSignal> removed_on_signal;
    for (std::size_t k = 0; k < jobs.size(); ++k) {
        temporaries.push_back(broadcast_text(comm, root ? outputs[k]->temporary_path() : std::string()));
        if (!root && jobs[k].fill_collectively) {
            removed_on_signal.emplace_back(temporaries.back());
        }
    }
    // Every rank must write into rank 0's temporary itself, not into a file of that name on a file system of its own
    // (a node-local folder), where its part would be lost without an error: rank 0 wrote the temporary's name into it
    // (flushed) before the broadcast, and every other rank reads it back before anything is written.
    check_collectively(comm, attempt([&] {
                           for (std::size_t k = 0; k < jobs.size(); ++k) {
                               if (jobs[k].fill_collectively && !root) {
                                   check_sees_temporary(jobs[k].path, temporaries[k], comm.rank());
                               }
                           }
                       }));
    for (std::size_t k = 0; k < jobs.size(); ++k) {
        if (jobs[k].fill_collectively) {
            jobs[k].fill_collectively(temporaries[k]);  // agrees on its own failures
        } else {
            check_collectively(comm, attempt([&] {
                                   if (root) {
                                       jobs[k].fill(*outputs[k]);
                                   }
                               }));
        }
    }
    // Everything written: flush every file, then rename them all; a failure leaves every target as it was.
    check_collectively(comm, attempt([&] {
                           for (const auto& output : outputs) {
                               output->flush();
                           }
                           for (const auto& output : outputs) {
                               output->publish();
                           }
                       }));
}

}  // namespace gridshard::io
