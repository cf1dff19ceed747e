// The layers below comm compile without MPI on the include path: core, geometry (splits, boxes, field
// views, area weights), numerics and io. Built as part of every build (gridshard_headers_without_mpi), so
// a header that pulls in <mpi.h> breaks the build.
#include "gridshard/core/error.hpp"
#include "gridshard/core/memory.hpp"
#include "gridshard/geometry/area_weights.hpp"
#include "gridshard/geometry/decomposition.hpp"
#include "gridshard/geometry/field_views.hpp"
#include "gridshard/geometry/halo_geometry.hpp"
#include "gridshard/geometry/split.hpp"
#include "gridshard/io/file_extent.hpp"
#include "gridshard/io/grid_info.hpp"
#include "gridshard/io/netcdf_reader.hpp"
#include "gridshard/io/output_file.hpp"
#include "gridshard/io/units.hpp"
#include "gridshard/io/zonal_writer.hpp"
#include "gridshard/numerics/double_double.hpp"
#include "gridshard/numerics/exact_sum.hpp"

namespace gridshard::compile_check {

[[maybe_unused]] FieldShard<float> a_view{};
[[maybe_unused]] Weights some_weights{};

}  // namespace gridshard::compile_check
