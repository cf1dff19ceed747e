#pragma once
// Support for the MPI tests: the mesh shape a run was started with (from --mesh=DxHxW), and integer
// fills derived from global indices, so every gathered or halo value can be checked exactly.

#include <cstdint>
#include <vector>

#include "gridshard/comm/process_mesh.hpp"
#include "gridshard/geometry/decomposition.hpp"

namespace gridshard::mpitest {

/// The mesh shape of this run: --mesh=DxHxW, or 1x1xN for N ranks when none was given.
const MeshShape& mesh_shape();

/// The mesh of this run over MPI_COMM_WORLD. Collective over the world.
inline ProcessMesh make_mesh() {
    return ProcessMesh(Communicator::world(), mesh_shape());
}

/// Every rank of the world alone on a 1x1x1 mesh, made once (a collective split of the world on first use): the
/// serial answer the distributed ones are compared with.
inline const ProcessMesh& serial_mesh() {
    static const ProcessMesh mesh(Communicator::world().split(Communicator::world().rank(), 0), MeshShape{1, 1, 1});
    return mesh;
}

/// An exact integer label of a global point: sample*10^6 + channel*10^4 + lat*100 + lon, for the test
/// grids (lat, lon < 100; channels < 100). Exact in float (< 2^24) for samples 0..15.
inline std::int64_t label(std::int64_t sample, std::int64_t channel, std::int64_t lat, std::int64_t lon) {
    return sample * 1000000 + channel * 10000 + lat * 100 + lon;
}

/// The shard (samples, channels, box) of the labelled field.
template <class T>
std::vector<T> labelled_shard(const Box& box, std::int64_t channels, std::int64_t first_sample = 0,
                              std::int64_t samples = 1) {
    std::vector<T> shard;
    shard.reserve(static_cast<std::size_t>(samples * channels * box.area()));
    for (std::int64_t s = first_sample; s < first_sample + samples; ++s) {
        for (std::int64_t c = 0; c < channels; ++c) {
            for (std::int64_t i = box.lat.begin; i < box.lat.end; ++i) {
                for (std::int64_t j = box.lon.begin; j < box.lon.end; ++j) {
                    shard.push_back(static_cast<T>(label(s, c, i, j)));
                }
            }
        }
    }
    return shard;
}

/// The shard (planes, box) of a global field (planes, nlat, nlon) that every rank holds.
template <class T>
std::vector<T> shard_of(const std::vector<T>& global, const GridShape& grid, const Box& box, std::int64_t planes) {
    std::vector<T> out;
    for (std::int64_t c = 0; c < planes; ++c) {
        for (std::int64_t i = box.lat.begin; i < box.lat.end; ++i) {
            const auto row = global.begin() + (c * grid.nlat + i) * grid.nlon;
            out.insert(out.end(), row + box.lon.begin, row + box.lon.end);
        }
    }
    return out;
}

/// Grids that exercise a mesh: one cell per shard, sizes that do not divide, and small odd ones.
/// Under `balanced` only grids at least as large as the mesh; under div_up some leave shards empty.
std::vector<GridShape> test_grids(const MeshShape& mesh, SplitRule rule);

}  // namespace gridshard::mpitest
