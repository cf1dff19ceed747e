#pragma once
/// @file
/// Everything public in gridshard, one block per layer, lowest first.

#include "gridshard/core/error.hpp"
#include "gridshard/core/memory.hpp"

#include "gridshard/geometry/area_weights.hpp"
#include "gridshard/geometry/decomposition.hpp"
#include "gridshard/geometry/field_views.hpp"
#include "gridshard/geometry/halo_geometry.hpp"
#include "gridshard/geometry/regions.hpp"
#include "gridshard/geometry/split.hpp"

#include "gridshard/numerics/double_double.hpp"
#include "gridshard/numerics/exact_sum.hpp"

#include "gridshard/io/calendar.hpp"
#include "gridshard/io/dataset_writer.hpp"
#include "gridshard/io/file_extent.hpp"
#include "gridshard/io/grid_info.hpp"
#include "gridshard/io/netcdf_reader.hpp"
#include "gridshard/io/output_file.hpp"
#include "gridshard/io/units.hpp"
#include "gridshard/io/zonal_writer.hpp"

#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/collectives.hpp"
#include "gridshard/comm/communicator.hpp"
#include "gridshard/comm/environment.hpp"
#include "gridshard/comm/halo_exchange.hpp"
#include "gridshard/comm/memory_check.hpp"
#include "gridshard/comm/padded_halo_exchange.hpp"
#include "gridshard/comm/process_mesh.hpp"
#include "gridshard/comm/threads.hpp"

#include "gridshard/metrics/ensemble.hpp"
#include "gridshard/metrics/evaluation.hpp"
#include "gridshard/metrics/field.hpp"
#include "gridshard/metrics/flood_fill.hpp"
#include "gridshard/metrics/metrics.hpp"
#include "gridshard/metrics/scores.hpp"
#include "gridshard/metrics/spectrum.hpp"
#include "gridshard/metrics/terms.hpp"
#include "gridshard/metrics/time_mean.hpp"
