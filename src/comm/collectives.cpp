#include "gridshard/comm/collectives.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>
#include <type_traits>

#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/mpi_check.hpp"
#include "gridshard/core/error.hpp"

namespace gridshard {
namespace {

// MPI counts are ints; refuse what would overflow one rather than send a wrong count.
int as_count(std::int64_t n, const char* what) {
    if (n < 0 || n > INT_MAX) {
        throw ArgumentError(std::string(what) + ": " + std::to_string(n) +
                            " elements do not fit one MPI count (at most " + std::to_string(INT_MAX) + ")");
    }
    return static_cast<int>(n);
}

// The element type, agreed with the lengths: ranks that pass different types (possible from Python) would
// otherwise mix their bytes.
template <class T>
constexpr std::int64_t element_code() noexcept {
    return static_cast<std::int64_t>(sizeof(T)) + (std::is_floating_point_v<T> ? 100 : 0);
}

// The local part of every field collective's argument check, as a message (empty when fine).
std::string shard_error(const ProcessMesh& mesh, const Decomposition& decomposition, std::size_t shard_size,
                        std::int64_t channels, std::int64_t samples = 1) {
    if (!(decomposition.mesh() == mesh.shape())) {
        return "decomposition mesh " + to_string(decomposition.mesh()) + " differs from process mesh " +
               to_string(mesh.shape());
    }
    if (channels < 0 || samples < 0) {
        return "channels=" + std::to_string(channels) + " and samples=" + std::to_string(samples) + " must be >= 0";
    }
    const Box box = decomposition.box(mesh.coords());
    const std::int64_t expected = samples * channels * box.area();
    if (static_cast<std::int64_t>(shard_size) != expected) {
        return "shard has " + std::to_string(shard_size) + " elements but (samples=" + std::to_string(samples) +
               ", channels=" + std::to_string(channels) + ", lat=" + std::to_string(box.lat.size()) +
               ", lon=" + std::to_string(box.lon.size()) + ") needs " + std::to_string(expected);
    }
    return {};
}

// Calls f(shard_offset, global_offset, length) for each row of `channels` planes of `box`, where the shard is
// laid out (channels, box) and the global field (channels, grid).
template <class F>
void for_each_box_row(const GridShape& grid, const Box& box, std::int64_t channels, F&& f) {
    const std::int64_t rows = box.lat.size();
    const std::int64_t cols = box.lon.size();
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t i = 0; i < rows; ++i) {
            f((c * rows + i) * cols, (c * grid.nlat + box.lat.begin + i) * grid.nlon + box.lon.begin, cols);
        }
    }
}

template <class T>
void copy_shard_into_global(const GridShape& grid, const Box& box, std::int64_t channels, const T* shard, T* global) {
    for_each_box_row(grid, box, channels,
                     [&](std::int64_t s, std::int64_t g, std::int64_t n) { std::copy_n(shard + s, n, global + g); });
}

template <class T>
void copy_shard_out_of_global(const GridShape& grid, const Box& box, std::int64_t channels, const T* global, T* shard) {
    for_each_box_row(grid, box, channels,
                     [&](std::int64_t s, std::int64_t g, std::int64_t n) { std::copy_n(global + g, n, shard + s); });
}

template <class T>
void allreduce_in_place(const Communicator& comm, std::span<T> values, MPI_Op op) {
    detail::agree_or_throw(comm, "", {static_cast<std::int64_t>(values.size()), element_code<T>()},
                           "reduction length, element type and summation (exact or MPI's)");
    GRIDSHARD_MPI(MPI_Allreduce, MPI_IN_PLACE, values.data(),
                  as_count(static_cast<std::int64_t>(values.size()), "reduce"), detail::mpi_datatype<T>(), op,
                  comm.native());
}

}  // namespace

template <class T>
void reduce_sum(const ProcessMesh& mesh, std::span<T> values) {
    allreduce_in_place(mesh.data(), values, MPI_SUM);
}

template <class T>
void reduce_mean(const ProcessMesh& mesh, std::span<T> values) {
    static_assert(std::is_floating_point_v<T>, "reduce_mean needs a floating type");
    allreduce_in_place(mesh.data(), values, MPI_SUM);
    const T count = static_cast<T>(mesh.data().size());
    for (T& v : values) {
        v /= count;
    }
}

template <class T>
void reduce_weighted_mean(const ProcessMesh& mesh, std::span<T> values, double weight) {
    static_assert(std::is_floating_point_v<T>, "reduce_weighted_mean needs a floating type");
    const std::string error =
        (std::isfinite(weight) && weight >= 0)
            ? std::string()
            : "reduce_weighted_mean: weight must be finite and >= 0, got weight=" + std::to_string(weight);
    detail::agree_or_throw(mesh.data(), error, {static_cast<std::int64_t>(values.size()), element_code<T>()},
                           "reduction length and element type");
    std::vector<double> sums(values.size() + 1);
    for (std::size_t k = 0; k < values.size(); ++k) {
        sums[k] = weight == 0 ? 0.0 : static_cast<double>(values[k]) * weight;
    }
    sums.back() = weight;
    GRIDSHARD_MPI(MPI_Allreduce, MPI_IN_PLACE, sums.data(), as_count(static_cast<std::int64_t>(sums.size()), "reduce"),
                  MPI_DOUBLE, MPI_SUM, mesh.data().native());
    if (!(sums.back() > 0)) {
        throw ArgumentError("reduce_weighted_mean: total weight over the data group must be > 0, got " +
                            std::to_string(sums.back()));
    }
    for (std::size_t k = 0; k < values.size(); ++k) {
        values[k] = static_cast<T>(sums[k] / sums.back());
    }
}

template <class T>
void reduce_min(const ProcessMesh& mesh, std::span<T> values) {
    allreduce_in_place(mesh.data(), values, MPI_MIN);
}

template <class T>
void reduce_max(const ProcessMesh& mesh, std::span<T> values) {
    allreduce_in_place(mesh.data(), values, MPI_MAX);
}

template <class T>
std::vector<T> allgather_data(const ProcessMesh& mesh, std::span<const T> values) {
    const Communicator& data = mesh.data();
    const auto n = static_cast<std::int64_t>(values.size());
    detail::agree_or_throw(data, "", {n, element_code<T>()}, "allgather_data length and element type");
    std::vector<T> all(values.size() * static_cast<std::size_t>(data.size()));
    GRIDSHARD_MPI(MPI_Allgather, values.data(), as_count(n, "allgather_data"), detail::mpi_datatype<T>(), all.data(),
                  as_count(n, "allgather_data"), detail::mpi_datatype<T>(), data.native());
    return all;
}

template <class T>
std::vector<T> transpose_over_data(const ProcessMesh& mesh, std::span<const T> local, std::int64_t rows,
                                   std::int64_t columns, std::int64_t& total_rows) {
    const Communicator& data = mesh.data();
    const std::string error = rows < 0 || columns < 0 || static_cast<std::int64_t>(local.size()) != rows * columns
                                  ? "transpose_over_data: " + std::to_string(local.size()) + " values for " +
                                        std::to_string(rows) + " rows of " + std::to_string(columns)
                                  : "";
    detail::agree_or_throw(data, error, {columns, element_code<T>()}, "transpose_over_data columns and element type");
    const int ranks = data.size();
    std::vector<std::int64_t> counts(static_cast<std::size_t>(ranks));
    GRIDSHARD_MPI(MPI_Allgather, &rows, 1, MPI_INT64_T, counts.data(), 1, MPI_INT64_T, data.native());
    total_rows = 0;
    for (const std::int64_t c : counts) {
        total_rows += c;
    }
    const Range mine = data_block(columns, ranks, data.rank(), true);
    // To rank k: my rows over its block, row by row. From rank j: its rows over my block.
    std::vector<T> send(local.size());
    std::vector<int> send_counts(static_cast<std::size_t>(ranks));
    std::vector<int> send_offsets(static_cast<std::size_t>(ranks));
    std::vector<int> receive_counts(static_cast<std::size_t>(ranks));
    std::vector<int> receive_offsets(static_cast<std::size_t>(ranks));
    std::int64_t sent = 0;
    std::int64_t received = 0;
    for (int k = 0; k < ranks; ++k) {
        const Range block = data_block(columns, ranks, k, true);
        send_offsets[static_cast<std::size_t>(k)] = as_count(sent, "transpose_over_data");
        for (std::int64_t r = 0; r < rows; ++r) {
            std::copy_n(local.data() + r * columns + block.begin, block.size(), send.data() + sent);
            sent += block.size();
        }
        send_counts[static_cast<std::size_t>(k)] =
            as_count(sent - send_offsets[static_cast<std::size_t>(k)], "transpose_over_data");
        receive_offsets[static_cast<std::size_t>(k)] = as_count(received, "transpose_over_data");
        receive_counts[static_cast<std::size_t>(k)] =
            as_count(counts[static_cast<std::size_t>(k)] * mine.size(), "transpose_over_data");
        received += counts[static_cast<std::size_t>(k)] * mine.size();
    }
    std::vector<T> out(static_cast<std::size_t>(received));
    GRIDSHARD_MPI(MPI_Alltoallv, send.data(), send_counts.data(), send_offsets.data(), detail::mpi_datatype<T>(),
                  out.data(), receive_counts.data(), receive_offsets.data(), detail::mpi_datatype<T>(), data.native());
    return out;
}

template <class T>
void spatial_reduce_sum(const ProcessMesh& mesh, std::span<T> values) {
    allreduce_in_place(mesh.spatial(), values, MPI_SUM);
}

template <class T>
void lon_sum_in_rank_order(const ProcessMesh& mesh, std::span<T> values) {
    const Communicator& lon = mesh.lon();
    const auto n = static_cast<std::int64_t>(values.size());
    detail::agree_or_throw(lon, "", {n, element_code<T>()}, "lon_sum_in_rank_order length and element type");
    std::vector<T> all(values.size() * static_cast<std::size_t>(lon.size()));
    GRIDSHARD_MPI(MPI_Allgather, values.data(), as_count(n, "lon_sum_in_rank_order"), detail::mpi_datatype<T>(),
                  all.data(), as_count(n, "lon_sum_in_rank_order"), detail::mpi_datatype<T>(), lon.native());
    for (std::size_t k = 0; k < values.size(); ++k) {
        T sum = all[k];
        for (std::size_t r = 1; r < static_cast<std::size_t>(lon.size()); ++r) {
            sum += all[r * values.size() + k];
        }
        values[k] = sum;
    }
}

template <class T>
void spatial_reduce_max(const ProcessMesh& mesh, std::span<T> values) {
    allreduce_in_place(mesh.spatial(), values, MPI_MAX);
}

template <class T>
void broadcast_spatial(const ProcessMesh& mesh, std::span<T> values) {
    const Communicator& spatial = mesh.spatial();
    detail::agree_or_throw(spatial, "", {static_cast<std::int64_t>(values.size()), element_code<T>()},
                           "broadcast length and element type");
    GRIDSHARD_MPI(MPI_Bcast, values.data(), as_count(static_cast<std::int64_t>(values.size()), "broadcast"),
                  detail::mpi_datatype<T>(), 0, spatial.native());
}

template <class T>
std::vector<T> gather_spatial(const ProcessMesh& mesh, const Decomposition& decomposition, std::span<const T> shard,
                              std::int64_t channels) {
    const Communicator& spatial = mesh.spatial();
    detail::agree_or_throw(spatial, shard_error(mesh, decomposition, shard.size(), channels),
                           {channels, element_code<T>()}, "gather_spatial channels and element type");
    const GridShape grid = decomposition.grid();
    as_count(channels * grid.nlat * grid.nlon, "gather_spatial");
    const auto ranks = static_cast<std::size_t>(spatial.size());
    std::vector<int> counts(ranks);
    std::vector<int> displacements(ranks + 1, 0);
    for (std::size_t k = 0; k < ranks; ++k) {
        counts[k] = static_cast<int>(channels * decomposition.box_of_spatial_rank(static_cast<int>(k)).area());
        displacements[k + 1] = displacements[k] + counts[k];
    }
    std::vector<T> packed(static_cast<std::size_t>(displacements.back()));
    GRIDSHARD_MPI(MPI_Allgatherv, shard.data(), counts[static_cast<std::size_t>(spatial.rank())],
                  detail::mpi_datatype<T>(), packed.data(), counts.data(), displacements.data(),
                  detail::mpi_datatype<T>(), spatial.native());
    std::vector<T> global(packed.size());
    for (std::size_t k = 0; k < ranks; ++k) {
        copy_shard_into_global(grid, decomposition.box_of_spatial_rank(static_cast<int>(k)), channels,
                               packed.data() + displacements[k], global.data());
    }
    return global;
}

template <class T>
std::vector<T> gather_global(const ProcessMesh& mesh, const Decomposition& decomposition, std::span<const T> shard,
                             std::int64_t local_samples, std::int64_t channels) {
    const Communicator& world = mesh.world();
    detail::agree_or_throw(world, shard_error(mesh, decomposition, shard.size(), channels, local_samples),
                           {channels, element_code<T>()}, "gather_global channels and element type");
    // Every rank learns every rank's sample count, so all check the same thing and raise the same error.
    const auto ranks = static_cast<std::size_t>(world.size());
    std::vector<std::int64_t> samples(ranks);
    GRIDSHARD_MPI(MPI_Allgather, &local_samples, 1, MPI_INT64_T, samples.data(), 1, MPI_INT64_T, world.native());
    const MeshShape shape = mesh.shape();
    const auto spatial_size = static_cast<std::size_t>(shape.spatial_size());
    std::vector<std::int64_t> first_sample(static_cast<std::size_t>(shape.data) + 1, 0);
    for (std::size_t r = 0; r < ranks; ++r) {
        const std::size_t d = r / spatial_size;
        if (samples[r] != samples[d * spatial_size]) {
            throw ArgumentError("gather_global: spatial ranks of data rank " + std::to_string(d) +
                                " hold different sample counts (" + std::to_string(samples[d * spatial_size]) +
                                " and " + std::to_string(samples[r]) + ")");
        }
        first_sample[d + 1] = first_sample[d] + samples[d * spatial_size];
    }
    const GridShape grid = decomposition.grid();
    const std::int64_t total_samples = first_sample.back();
    as_count(total_samples * channels * grid.nlat * grid.nlon, "gather_global");

    std::vector<int> counts(ranks);
    std::vector<int> displacements(ranks + 1, 0);
    for (std::size_t r = 0; r < ranks; ++r) {
        const Box box = decomposition.box_of_spatial_rank(static_cast<int>(r % spatial_size));
        counts[r] = static_cast<int>(samples[r] * channels * box.area());
        displacements[r + 1] = displacements[r] + counts[r];
    }
    const bool root = world.rank() == 0;
    std::vector<T> packed(root ? static_cast<std::size_t>(displacements.back()) : 0);
    GRIDSHARD_MPI(MPI_Gatherv, shard.data(), counts[static_cast<std::size_t>(world.rank())], detail::mpi_datatype<T>(),
                  packed.data(), counts.data(), displacements.data(), detail::mpi_datatype<T>(), 0, world.native());
    if (!root) {
        return {};
    }
    // A rank's block (samples, channels, box) is (samples*channels) planes of its box; place them at the
    // data rank's first sample.
    std::vector<T> global(packed.size());
    for (std::size_t r = 0; r < ranks; ++r) {
        const std::size_t d = r / spatial_size;
        const Box box = decomposition.box_of_spatial_rank(static_cast<int>(r % spatial_size));
        T* destination = global.data() + first_sample[d] * channels * grid.nlat * grid.nlon;
        copy_shard_into_global(grid, box, samples[r] * channels, packed.data() + displacements[r], destination);
    }
    return global;
}

template <class T>
std::vector<T> scatter_spatial(const Decomposition& decomposition, const MeshCoords& coords, std::span<const T> global,
                               std::int64_t channels) {
    const GridShape grid = decomposition.grid();
    if (channels < 0 || static_cast<std::int64_t>(global.size()) != channels * grid.nlat * grid.nlon) {
        throw ArgumentError("scatter_spatial: global field has " + std::to_string(global.size()) +
                            " elements but (channels=" + std::to_string(channels) +
                            ", nlat=" + std::to_string(grid.nlat) + ", nlon=" + std::to_string(grid.nlon) + ") needs " +
                            std::to_string(channels * grid.nlat * grid.nlon));
    }
    const Box box = decomposition.box(coords);
    std::vector<T> shard(static_cast<std::size_t>(channels * box.area()));
    copy_shard_out_of_global(grid, box, channels, global.data(), shard.data());
    return shard;
}

template <class T>
std::vector<T> scatter_spatial_from_root(const ProcessMesh& mesh, const Decomposition& decomposition,
                                         std::span<const T> global, std::int64_t channels) {
    const Communicator& spatial = mesh.spatial();
    const GridShape grid = decomposition.grid();
    const bool root = spatial.rank() == 0;
    std::string error = shard_error(mesh, decomposition, 0, 0);
    const std::int64_t expected = channels * grid.nlat * grid.nlon;
    if (error.empty() && root && static_cast<std::int64_t>(global.size()) != expected) {
        error = "scatter_spatial_from_root: the root's global field has " + std::to_string(global.size()) +
                " elements but (channels=" + std::to_string(channels) + ", nlat=" + std::to_string(grid.nlat) +
                ", nlon=" + std::to_string(grid.nlon) + ") needs " + std::to_string(expected);
    }
    detail::agree_or_throw(spatial, error, {channels, element_code<T>()},
                           "scatter_spatial_from_root channels and element type");
    as_count(expected, "scatter_spatial_from_root");

    const auto ranks = static_cast<std::size_t>(spatial.size());
    std::vector<int> counts(ranks);
    std::vector<int> displacements(ranks + 1, 0);
    for (std::size_t k = 0; k < ranks; ++k) {
        counts[k] = static_cast<int>(channels * decomposition.box_of_spatial_rank(static_cast<int>(k)).area());
        displacements[k + 1] = displacements[k] + counts[k];
    }
    std::vector<T> packed(root ? static_cast<std::size_t>(displacements.back()) : 0);
    if (root) {
        for (std::size_t k = 0; k < ranks; ++k) {
            copy_shard_out_of_global(grid, decomposition.box_of_spatial_rank(static_cast<int>(k)), channels,
                                     global.data(), packed.data() + displacements[k]);
        }
    }
    const auto mine = static_cast<std::size_t>(spatial.rank());
    std::vector<T> shard(static_cast<std::size_t>(counts[mine]));
    GRIDSHARD_MPI(MPI_Scatterv, packed.data(), counts.data(), displacements.data(), detail::mpi_datatype<T>(),
                  shard.data(), counts[mine], detail::mpi_datatype<T>(), 0, spatial.native());
    return shard;
}

#define GRIDSHARD_INSTANTIATE_COLLECTIVES(T)                                                                           \
    template void reduce_sum<T>(const ProcessMesh&, std::span<T>);                                                     \
    template void reduce_min<T>(const ProcessMesh&, std::span<T>);                                                     \
    template void reduce_max<T>(const ProcessMesh&, std::span<T>);                                                     \
    template void spatial_reduce_sum<T>(const ProcessMesh&, std::span<T>);                                             \
    template void spatial_reduce_max<T>(const ProcessMesh&, std::span<T>);                                             \
    template void lon_sum_in_rank_order<T>(const ProcessMesh&, std::span<T>);                                          \
    template std::vector<T> allgather_data<T>(const ProcessMesh&, std::span<const T>);                                 \
    template void broadcast_spatial<T>(const ProcessMesh&, std::span<T>);                                              \
    template std::vector<T> transpose_over_data<T>(const ProcessMesh&, std::span<const T>, std::int64_t, std::int64_t, \
                                                   std::int64_t&);                                                     \
    template std::vector<T> gather_spatial<T>(const ProcessMesh&, const Decomposition&, std::span<const T>,            \
                                              std::int64_t);                                                           \
    template std::vector<T> gather_global<T>(const ProcessMesh&, const Decomposition&, std::span<const T>,             \
                                             std::int64_t, std::int64_t);                                              \
    template std::vector<T> scatter_spatial<T>(const Decomposition&, const MeshCoords&, std::span<const T>,            \
                                               std::int64_t);                                                          \
    template std::vector<T> scatter_spatial_from_root<T>(const ProcessMesh&, const Decomposition&, std::span<const T>, \
                                                         std::int64_t);

GRIDSHARD_INSTANTIATE_COLLECTIVES(float)
GRIDSHARD_INSTANTIATE_COLLECTIVES(double)
GRIDSHARD_INSTANTIATE_COLLECTIVES(std::int32_t)
GRIDSHARD_INSTANTIATE_COLLECTIVES(std::int64_t)

template void reduce_mean<float>(const ProcessMesh&, std::span<float>);
template void reduce_mean<double>(const ProcessMesh&, std::span<double>);
template void reduce_weighted_mean<float>(const ProcessMesh&, std::span<float>, double);
template void reduce_weighted_mean<double>(const ProcessMesh&, std::span<double>, double);

}  // namespace gridshard
