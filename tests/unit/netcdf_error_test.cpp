// The one netCDF error rule (gridshard/io/netcdf_error.hpp): a failed call of each class gives the same error, and
// so the same exit status, whether the reader, the writer or the PnetCDF writer met it. No MPI communication.

#include <gtest/gtest.h>
#include <netcdf.h>

#include <cerrno>
#include <functional>
#include <string>

#include "gridshard/core/error.hpp"
#include "gridshard/io/netcdf_error.hpp"
#include "netcdf_handle.hpp"
#include "write_handle.hpp"
#if GRIDSHARD_PARALLEL_IO
#include <mpi.h>

#include "pnetcdf_file.hpp"
#endif

namespace gridshard::io {
namespace {

// The tool's exit status for what `call` throws (apps/gridshard/main.cpp: 2 for ArgumentError, 1 otherwise).
int exit_status(const std::function<void()>& call) {
    try {
        call();
    } catch (const ArgumentError&) {
        return 2;
    } catch (const Error&) {
        return 1;
    }
    return 0;
}

#if GRIDSHARD_PARALLEL_IO
// The PnetCDF writer's rule: its first failure noted, agreed as a system failure (1) or the caller's (2).
class NotedFailure : public detail::PnetcdfCollective {
  public:
    NotedFailure() : PnetcdfCollective("out.nc", MPI_COMM_SELF) {}
    int exit_status_of(int status) {
        note(status, "writing");
        return system_failure() ? 1 : 2;
    }
};
#endif

struct Case {
    int status;
    int exit;
};

// Statuses of each class, from netCDF-C, PnetCDF and the system (errno values netCDF-C passes through).
const Case cases[] = {
    {ENOSPC, 1},
    {EIO, 1},
    {EDQUOT, 1},
    {NC_EIO, 1},
    {NC_ENOMEM, 1},
    {NC_EMPI, 1},
    {NC_ECANTWRITE, 1},
    {pnetcdf_status::file, 1},
    {pnetcdf_status::read, 1},
    {pnetcdf_status::write, 1},
    {pnetcdf_status::open, 1},
    {pnetcdf_status::no_space, 1},
    {pnetcdf_status::quota, 1},
    {ENOENT, 2},
    {EACCES, 2},
    {EISDIR, 2},
    {NC_ENOTNC, 2},
    {NC_EBADNAME, 2},
    {NC_ENAMEINUSE, 2},
    {NC_ENOTVAR, 2},
    {NC_EHDFERR, 2},
    {NC_EINVAL, 2},
    {NC_EINTERNAL, 2},
};

TEST(NetcdfErrorRule, EachClassGivesOneExitStatusFromTheReaderTheWriterAndPnetcdf) {
    for (const Case& c : cases) {
        SCOPED_TRACE("status " + std::to_string(c.status));
        EXPECT_EQ(classify_netcdf_status(c.status) == NetcdfFailure::system ? 1 : 2, c.exit);
        EXPECT_EQ(exit_status([&] { detail::check(c.status, "in.nc", "reading"); }), c.exit);
        EXPECT_EQ(exit_status([&] { detail::fail("in.nc", "opening", c.status); }), c.exit);
        EXPECT_EQ(exit_status([&] { detail::check_write(c.status, "out.nc", "writing"); }), c.exit);
#if GRIDSHARD_PARALLEL_IO
        EXPECT_EQ(NotedFailure().exit_status_of(c.status), c.exit);
#endif
    }
}

TEST(NetcdfErrorRule, TheCallersErrorsCarryNetcdfsStatusAndTheSystemsItsMessage) {
    try {
        detail::check(NC_ENOTNC, "in.nc", "opening");
        FAIL() << "no error";
    } catch (const NetcdfError& e) {
        EXPECT_EQ(e.nc_status(), NC_ENOTNC);
        EXPECT_NE(std::string(e.what()).find("netCDF file 'in.nc': opening: "), std::string::npos) << e.what();
    }
    try {
        detail::check_write(ENOSPC, "out.nc", "closing");
        FAIL() << "no error";
    } catch (const SystemError& e) {
        EXPECT_NE(std::string(e.what()).find("cannot write 'out.nc': closing: No space left on device"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_EQ(exit_status([] { detail::check(NC_NOERR, "in.nc", "reading"); }), 0);
    EXPECT_EQ(exit_status([] { detail::check_write(NC_NOERR, "out.nc", "writing"); }), 0);
}

}  // namespace
}  // namespace gridshard::io
