#pragma once
/// @file
/// The collectives that sharded metric code needs (docs/design.md §4). Each names the group it talks to and
/// the ranks that hold the result. Element types: float, double, std::int32_t, std::int64_t.
///
/// Shards are contiguous arrays `(channels, box.lat.size(), box.lon.size())`, longitude fastest, where
/// `box = decomposition.box(mesh.coords())`; leading dims (batch, time, level) are flattened into channels.
/// Every collective first checks its arguments collectively (one small allreduce over its group), so
/// a bad argument on one rank raises the same ArgumentError on every rank instead of a hang.

#include <cstdint>
#include <span>
#include <vector>

#include "gridshard/comm/process_mesh.hpp"
#include "gridshard/geometry/decomposition.hpp"

namespace gridshard {

/// Elementwise sum of `values` over the data group, in place. Collective over `data`; every rank holds
/// the result. `values` must have the same length on every rank.
template <class T>
void reduce_sum(const ProcessMesh& mesh, std::span<T> values);

/// Elementwise sum of `values` over the data group, in place, exactly: each element is the exact sum of the data
/// ranks' values rounded once to T (to nearest, ties to even), so its bits do not depend on the order or algorithm
/// of MPI's reduction, nor on the MPI library. NaN where a value is NaN or both infinities occur; an infinity where
/// one kind does; -0 where every value is -0. Collective over `data`: one agreement of the length and element type,
/// one MPI_Allreduce (MAX) of 2 int16 per element (the exponent range of its values, and their specials), one
/// MPI_Allreduce (SUM) of 1 or 2 int64 per element (its digits on the grid of its lowest bit: one where the values
/// span fewer than about 60 bits, as a float32 element's do); and, only for elements
/// whose values span more than 2^103 (or every element past 1024 data ranks), one MPI_Allgather of those elements,
/// each then summed exactly in rank order on every rank. src/comm/exact_data_sum.cpp has the algorithm.
template <class T>
void reduce_sum_exact(const ProcessMesh& mesh, std::span<T> values);

/// `reduce_sum_exact`, then each element divided by the data size in one IEEE division (the rounded exact sum over
/// the count: reduce_mean's formula, with a sum whose bits do not depend on the reduction's order). Collective over
/// `data`, as reduce_sum_exact.
template <class T>
void reduce_mean_exact(const ProcessMesh& mesh, std::span<T> values);

/// Elementwise mean over the data group (sum / data size), in place. Collective over `data`; all ranks
/// hold the result. Use reduce_weighted_mean when ranks hold different numbers of samples.
template <class T>
void reduce_mean(const ProcessMesh& mesh, std::span<T> values);

/// Elementwise `sum(values * weight) / sum(weight)` over the data group, in place: the mean over
/// samples when each rank's `values` are means over `weight` samples. Collective over `data`; all ranks
/// hold the result. Floating types only; the total weight must be positive.
template <class T>
void reduce_weighted_mean(const ProcessMesh& mesh, std::span<T> values, double weight);

/// Elementwise minimum over the data group, in place. Collective over `data`; all ranks hold the result.
template <class T>
void reduce_min(const ProcessMesh& mesh, std::span<T> values);

/// Elementwise maximum over the data group, in place. Collective over `data`; all ranks hold the result.
template <class T>
void reduce_max(const ProcessMesh& mesh, std::span<T> values);

/// Concatenates every data rank's `values` in data-rank order; all ranks of the data group get the
/// result. Lengths must agree. Collective over `data` (MPI_Allgather).
template <class T>
[[nodiscard]] std::vector<T> allgather_data(const ProcessMesh& mesh, std::span<const T> values);

/// Redistributes rows over the data group: rank d holds `rows` rows of `columns` values (`local`, row-major;
/// for example its ensemble members over one box), and afterwards holds every rank's rows, in data-rank order,
/// for its own block of the columns (`data_block(columns, D, d, true)`): `(total rows, block)`, with
/// `total_rows` set. Ranks may hold different numbers of rows (none too), but the same `columns`. Collective over
/// `data`: one agreement on `columns` and the element type, one all-gather of the row counts, one
/// MPI_Alltoallv moving (D - 1) / D of the values.
template <class T>
[[nodiscard]] std::vector<T> transpose_over_data(const ProcessMesh& mesh, std::span<const T> local, std::int64_t rows,
                                                 std::int64_t columns, std::int64_t& total_rows);

/// Elementwise sum over the spatial group, in place. Collective over `spatial`; all ranks hold the result.
template <class T>
void spatial_reduce_sum(const ProcessMesh& mesh, std::span<T> values);

/// Elementwise sum over the lon group, in place, formed on every rank in lon-rank order from an all-gather: every rank
/// of the group holds the same bits, whatever order MPI's reductions would take (the adjoint of a result replicated
/// over the lon group, such as a zonal mean's). Collective over `lon`: one agreement of the length and element type,
/// one MPI_Allgather.
template <class T>
void lon_sum_in_rank_order(const ProcessMesh& mesh, std::span<T> values);

/// Elementwise maximum over the spatial group, in place (a NaN anywhere gives NaN, as MPI_MAX on IEEE values
/// may; callers pass values without NaN). Collective over `spatial`; all ranks hold the result.
template <class T>
void spatial_reduce_max(const ProcessMesh& mesh, std::span<T> values);

/// Copies spatial rank 0's `values` to every rank of its spatial group. Collective over `spatial`.
template <class T>
void broadcast_spatial(const ProcessMesh& mesh, std::span<T> values);

/// All-gather of a field over the spatial group: every spatial rank gets the whole field
/// `(channels, nlat, nlon)`. Shard sizes may differ (and be empty under div_up). Collective over
/// `spatial` (MPI_Allgatherv of each shard, never a zero-padded all-reduce); all spatial ranks hold
/// the result. Moves the whole field to every rank: the costly path that halos avoid.
template <class T>
[[nodiscard]] std::vector<T> gather_spatial(const ProcessMesh& mesh, const Decomposition& decomposition,
                                            std::span<const T> shard, std::int64_t channels);

/// Gathers a field with a data-parallel leading dim onto world rank 0. Each rank holds
/// `(local_samples, channels, box)`; data ranks hold consecutive sample blocks (they may differ in
/// size; spatial ranks of one data rank must agree). World rank 0 gets `(total_samples, channels,
/// nlat, nlon)`; the others get an empty vector. Collective over `world` (MPI_Gatherv to rank 0).
template <class T>
[[nodiscard]] std::vector<T> gather_global(const ProcessMesh& mesh, const Decomposition& decomposition,
                                           std::span<const T> shard, std::int64_t local_samples, std::int64_t channels);

/// The shard `(channels, box)` of a global field `(channels, nlat, nlon)` that every rank holds, for the
/// rank at `coords`. No MPI calls.
template <class T>
[[nodiscard]] std::vector<T> scatter_spatial(const Decomposition& decomposition, const MeshCoords& coords,
                                             std::span<const T> global, std::int64_t channels);

/// Scatters a global field `(channels, nlat, nlon)` held by spatial rank 0 (other ranks pass an empty
/// span) so each spatial rank gets its shard `(channels, box)`. Collective over `spatial` (MPI_Scatterv).
template <class T>
[[nodiscard]] std::vector<T> scatter_spatial_from_root(const ProcessMesh& mesh, const Decomposition& decomposition,
                                                       std::span<const T> global, std::int64_t channels);

}  // namespace gridshard
