#pragma once
/// @file
/// Halo exchange with the four side neighbours (no corners), planned once and executed many times.
///
/// @code
///   void east_west(const gridshard::ProcessMesh& mesh, const gridshard::Decomposition& decomposition,
///                  const std::vector<float>& shard, std::int64_t channels) {   // shard: (channels, box)
///       gridshard::HaloExchange plan(mesh, decomposition, /*width=*/1, {.lat = false, .lon = true});
///       auto halo = plan.make_buffers<float>(channels);
///       plan.execute(std::span<const float>(shard), halo);      // collective over `spatial`
///       if (halo.has(gridshard::Side::lon_prev)) { float v = halo.at(gridshard::Side::lon_prev, 0, 0, 0); }
///   }
/// @endcode

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gridshard/comm/process_mesh.hpp"
#include "gridshard/geometry/halo_geometry.hpp"

namespace gridshard {

class HaloExchange;

/// The halo strips one rank receives, one per side, each laid out `(channels, rows, cols)`:
/// lat sides are `width x local nlon`, lon sides `local nlat x width`. Strip `lat_prev` holds the global
/// rows `[lat.begin - width, lat.begin)`, `lon_next` the columns `[lon.end, lon.end + width)` (modulo the
/// grid when periodic), and so on. A side at a non-periodic global edge has no strip (`has` is false):
/// the caller applies its own boundary rule. Made by HaloExchange::make_buffers; reusable.
template <class T>
class HaloBuffers {
  public:
    /// Whether a strip was exchanged across `side`.
    [[nodiscard]] bool has(Side side) const noexcept { return present_[index(side)]; }
    /// The strip across `side`, `(channels, rows(side), cols(side))`; empty when `!has(side)`.
    [[nodiscard]] std::span<const T> strip(Side side) const noexcept { return received_[index(side)]; }
    [[nodiscard]] std::int64_t rows(Side side) const noexcept { return rows_[index(side)]; }
    [[nodiscard]] std::int64_t cols(Side side) const noexcept { return cols_[index(side)]; }
    [[nodiscard]] std::int64_t channels() const noexcept { return channels_; }
    /// Element (channel, row, col) of the strip across `side`.
    [[nodiscard]] T at(Side side, std::int64_t channel, std::int64_t row, std::int64_t col) const noexcept {
        const std::size_t s = index(side);
        return received_[s][static_cast<std::size_t>((channel * rows_[s] + row) * cols_[s] + col)];
    }

  private:
    friend class HaloExchange;
    static constexpr std::size_t index(Side side) noexcept { return static_cast<std::size_t>(side); }

    std::int64_t channels_ = 0;
    std::array<bool, 4> present_{};
    std::array<std::int64_t, 4> rows_{};
    std::array<std::int64_t, 4> cols_{};
    std::array<std::vector<T>, 4> received_;
    std::array<std::vector<T>, 4> sent_;  // packing space for outgoing strips
};

/// A halo-exchange plan for shards `(channels, box)` of one decomposition: neighbour ranks, strip shapes
/// and tags are computed once in the constructor; `execute` is const and can be called any number of times.
/// Every neighbour gets all channels of a field in one message. The plan keeps a copy of the mesh
/// (sharing its communicators), so it may outlive the mesh it was built from.
class HaloExchange {
  public:
    /// Validates `width` and `decomposition` (see validate_halo: no empty shards, shards at least `width`
    /// thick along exchanging axes) and checks collectively that every spatial rank passed the same
    /// plan, so a bad argument raises the same ArgumentError on every rank. Collective over `spatial`.
    HaloExchange(const ProcessMesh& mesh, const Decomposition& decomposition, int width = 1,
                 Periodicity periodicity = {});

    /// Receive and packing buffers for fields of `channels` channels. No MPI calls.
    template <class T>
    [[nodiscard]] HaloBuffers<T> make_buffers(std::int64_t channels) const;

    /// Exchanges the edge strips of `shard` `(channels, box)` with the side neighbours and fills
    /// `buffers`. Collective over `spatial` (one small allreduce checks the arguments; then point-to-point
    /// messages with the up to four side neighbours only). Each rank holds its own halos.
    /// Bytes sent per rank: channels x perimeter x width x sizeof(T).
    template <class T>
    void execute(std::span<const T> shard, HaloBuffers<T>& buffers) const;

    /// Exchanges several fields of the same shape in one message per neighbour: field f's channels
    /// occupy channels `[f*k, (f+1)*k)` of `buffers`, with `k = buffers.channels() / fields.size()`.
    /// Collective over `spatial`, as the single-field form.
    template <class T>
    void execute(std::span<const std::span<const T>> fields, HaloBuffers<T>& buffers) const;

    /// What is wrong with these arguments of execute() on this rank (empty when nothing). No MPI calls.
    template <class T>
    [[nodiscard]] std::string argument_error(std::span<const std::span<const T>> fields,
                                             const HaloBuffers<T>& buffers) const;

    /// execute() without its argument check, for a caller that has already agreed argument_error() and
    /// the channel count collectively over `spatial` (folded into a check of its own, so a step makes one
    /// agreement, not two). Point-to-point messages with the side neighbours only.
    template <class T>
    void exchange_agreed(std::span<const std::span<const T>> fields, HaloBuffers<T>& buffers) const;

    /// The sides this rank exchanges across, with their neighbours and strip shapes. No MPI calls.
    [[nodiscard]] const std::vector<HaloSide>& sides() const noexcept { return sides_; }
    [[nodiscard]] const Box& box() const noexcept { return box_; }
    [[nodiscard]] int width() const noexcept { return width_; }

  private:
    ProcessMesh mesh_;  // a copy: it shares the mesh's communicators
    Box box_;
    int width_;
    std::vector<HaloSide> sides_;
};

}  // namespace gridshard
