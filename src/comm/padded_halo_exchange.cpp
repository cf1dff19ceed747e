#include "gridshard/comm/padded_halo_exchange.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/mpi_check.hpp"
#include "gridshard/core/error.hpp"

namespace gridshard {
namespace {

constexpr int padded_halo_tag = 31;  // one message each way per pair and exchange; MPI keeps them in order

std::string plan_error(const ProcessMesh& mesh, const Decomposition& decomposition, const PaddedHaloSpec& spec) {
    if (!(decomposition.mesh() == mesh.shape())) {
        return "padded halo: decomposition mesh " + to_string(decomposition.mesh()) + " differs from process mesh " +
               to_string(mesh.shape());
    }
    try {
        validate_padded_halo(decomposition, spec);
    } catch (const ArgumentError& error) {
        return error.what();
    }
    return {};
}

std::int64_t cells_of(const std::vector<HaloPiece>& pieces) {
    std::int64_t cells = 0;
    for (const HaloPiece& p : pieces) {
        cells += p.cols;
    }
    return cells;
}

// Copies the source cells of `pieces` (channel-major: every piece of channel 0, then of channel 1, ...) from the
// shard `(channels, box)` to `out`.
template <class T>
T* pack(std::span<const T> shard, const Box& box, std::int64_t channels, const std::vector<HaloPiece>& pieces, T* out) {
    const std::int64_t rows = box.lat.size();
    const std::int64_t cols = box.lon.size();
    for (std::int64_t c = 0; c < channels; ++c) {
        for (const HaloPiece& p : pieces) {
            const T* from =
                shard.data() + (c * rows + (p.source_row - box.lat.begin)) * cols + (p.source_col - box.lon.begin);
            out = std::copy_n(from, p.cols, out);
        }
    }
    return out;
}

// Copies the padded shard's `(channels, rows, cols)` cells of `pieces` (channel-major, as `pack` orders them) to
// `out`: what the adjoint sends back to the rank that sent them.
template <class T>
T* pack_padded(std::span<const T> padded, std::int64_t channels, std::int64_t rows, std::int64_t cols,
               const std::vector<HaloPiece>& pieces, T* out) {
    for (std::int64_t c = 0; c < channels; ++c) {
        for (const HaloPiece& p : pieces) {
            out = std::copy_n(padded.data() + (c * rows + p.row) * cols + p.col, p.cols, out);
        }
    }
    return out;
}

// Adds the values packed for `pieces` (as `pack` orders them) into the shard `(channels, box)` at the pieces' source
// cells, piece by piece in order.
template <class T>
const T* add_into_shard(const T* in, std::span<T> shard, const Box& box, std::int64_t channels,
                        const std::vector<HaloPiece>& pieces) {
    const std::int64_t rows = box.lat.size();
    const std::int64_t cols = box.lon.size();
    for (std::int64_t c = 0; c < channels; ++c) {
        for (const HaloPiece& p : pieces) {
            T* to = shard.data() + (c * rows + (p.source_row - box.lat.begin)) * cols + (p.source_col - box.lon.begin);
            for (std::int64_t k = 0; k < p.cols; ++k) {
                to[k] += in[k];
            }
            in += p.cols;
        }
    }
    return in;
}

// Writes the cells of `pieces`, packed as `pack` packs them, into the padded shard `(channels, rows, cols)`.
template <class T>
const T* unpack(const T* in, std::int64_t channels, std::int64_t rows, std::int64_t cols,
                const std::vector<HaloPiece>& pieces, std::span<T> padded) {
    for (std::int64_t c = 0; c < channels; ++c) {
        for (const HaloPiece& p : pieces) {
            std::copy_n(in, p.cols, padded.data() + (c * rows + p.row) * cols + p.col);
            in += p.cols;
        }
    }
    return in;
}

}  // namespace

PaddedHaloExchange::PaddedHaloExchange(const ProcessMesh& mesh, const Decomposition& decomposition, PaddedHaloSpec spec)
    : mesh_(mesh), spec_(spec) {
    const GridShape grid = decomposition.grid();
    detail::agree_or_throw(mesh.spatial(), plan_error(mesh, decomposition, spec),
                           {grid.nlat, grid.nlon, static_cast<std::int64_t>(decomposition.rule()), spec.width,
                            spec.periodic_lon, static_cast<std::int64_t>(spec.pole)},
                           "padded halo plan (nlat, nlon, split, width, periodic lon, pole rule)");
    box_ = decomposition.box(mesh.coords());
    const int me = spatial_rank_of_coords(mesh.shape(), mesh.coords());
    // What this rank receives, from its own pieces; what it sends, from every other rank's.
    std::map<int, Peer> peers;
    for (const HaloPiece& piece : padded_halo_pieces(decomposition, me, spec)) {
        if (piece.source == me) {
            own_.push_back(piece);
        } else {
            peers[piece.source].receive.push_back(piece);
        }
    }
    for (int r = 0; r < mesh.spatial().size(); ++r) {
        if (r == me) {
            continue;
        }
        for (const HaloPiece& piece : padded_halo_pieces(decomposition, r, spec)) {
            if (piece.source == me) {
                peers[r].send.push_back(piece);
            }
        }
    }
    for (auto& [rank, peer] : peers) {
        peer.rank = rank;
        peer.receive_cells = cells_of(peer.receive);
        peer.send_cells = cells_of(peer.send);
        peers_.push_back(std::move(peer));
    }
}

std::int64_t PaddedHaloExchange::sent_cells_per_channel() const noexcept {
    std::int64_t cells = 0;
    for (const Peer& peer : peers_) {
        cells += peer.send_cells;
    }
    return cells;
}

template <class T>
std::string PaddedHaloExchange::argument_error(std::span<const T> shard, std::int64_t channels,
                                               std::span<const T> padded) const {
    if (channels < 0) {
        return "padded halo: channels must be >= 0, got channels=" + std::to_string(channels);
    }
    if (static_cast<std::int64_t>(shard.size()) != channels * box_.area()) {
        return "padded halo: shard has " + std::to_string(shard.size()) +
               " elements but (channels=" + std::to_string(channels) + ", lat=" + std::to_string(box_.lat.size()) +
               ", lon=" + std::to_string(box_.lon.size()) + ") needs " + std::to_string(channels * box_.area());
    }
    if (static_cast<std::int64_t>(padded.size()) != channels * padded_rows() * padded_cols()) {
        return "padded halo: the padded buffer has " + std::to_string(padded.size()) +
               " elements but (channels=" + std::to_string(channels) + ", " + std::to_string(padded_rows()) + ", " +
               std::to_string(padded_cols()) + ") needs " + std::to_string(channels * padded_rows() * padded_cols());
    }
    for (const Peer& peer : peers_) {
        if (channels * std::max(peer.receive_cells, peer.send_cells) > std::numeric_limits<int>::max()) {
            return "padded halo: a message of " +
                   std::to_string(channels * std::max(peer.receive_cells, peer.send_cells)) +
                   " values does not fit one MPI message count";
        }
    }
    return {};
}

template <class T>
void PaddedHaloExchange::execute(std::span<const T> shard, std::int64_t channels, std::span<T> padded) const {
    detail::agree_or_throw(mesh_.spatial(), argument_error<T>(shard, channels, padded), {channels},
                           "padded halo channels");
    exchange_agreed(shard, channels, padded);
}

template <class T>
void PaddedHaloExchange::exchange_agreed(std::span<const T> shard, std::int64_t channels, std::span<T> padded) const {
    const Communicator& spatial = mesh_.spatial();
    const std::int64_t rows = padded_rows();
    const std::int64_t cols = padded_cols();
    const std::int64_t width = spec_.width;
    std::vector<std::vector<T>> received(peers_.size());
    std::vector<std::vector<T>> sent(peers_.size());
    std::vector<MPI_Request> requests;
    requests.reserve(2 * peers_.size());
    for (std::size_t k = 0; k < peers_.size(); ++k) {
        const Peer& peer = peers_[k];
        if (peer.receive_cells > 0) {
            received[k].resize(static_cast<std::size_t>(channels * peer.receive_cells));
            requests.emplace_back();
            GRIDSHARD_MPI(MPI_Irecv, received[k].data(), static_cast<int>(received[k].size()),
                          detail::mpi_datatype<T>(), peer.rank, padded_halo_tag, spatial.native(), &requests.back());
        }
    }
    for (std::size_t k = 0; k < peers_.size(); ++k) {
        const Peer& peer = peers_[k];
        if (peer.send_cells > 0) {
            sent[k].resize(static_cast<std::size_t>(channels * peer.send_cells));
            pack(shard, box_, channels, peer.send, sent[k].data());
            requests.emplace_back();
            GRIDSHARD_MPI(MPI_Isend, sent[k].data(), static_cast<int>(sent[k].size()), detail::mpi_datatype<T>(),
                          peer.rank, padded_halo_tag, spatial.native(), &requests.back());
        }
    }
    // Meanwhile: zeros in the ring, the box in the middle, this rank's own halo pieces.
    const std::int64_t box_rows = box_.lat.size();
    const std::int64_t box_cols = box_.lon.size();
    for (std::int64_t c = 0; c < channels; ++c) {
        T* plane = padded.data() + c * rows * cols;
        for (std::int64_t i = 0; i < rows; ++i) {
            T* row = plane + i * cols;
            if (i < width || i >= width + box_rows) {
                std::fill_n(row, cols, T{0});
                continue;
            }
            std::fill_n(row, width, T{0});
            std::copy_n(shard.data() + (c * box_rows + (i - width)) * box_cols, box_cols, row + width);
            std::fill_n(row + width + box_cols, width, T{0});
        }
    }
    if (!own_.empty()) {
        std::vector<T> own(static_cast<std::size_t>(channels * cells_of(own_)));
        pack(shard, box_, channels, own_, own.data());
        unpack<T>(own.data(), channels, rows, cols, own_, padded);
    }
    GRIDSHARD_MPI(MPI_Waitall, static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
    for (std::size_t k = 0; k < peers_.size(); ++k) {
        if (!received[k].empty()) {
            unpack<T>(received[k].data(), channels, rows, cols, peers_[k].receive, padded);
        }
    }
}

template <class T>
void PaddedHaloExchange::adjoint(std::span<const T> padded, std::int64_t channels, std::span<T> shard) const {
    detail::agree_or_throw(mesh_.spatial(), argument_error<T>(shard, channels, padded), {channels},
                           "padded halo adjoint channels");
    adjoint_agreed(padded, channels, shard);
}

template <class T>
void PaddedHaloExchange::adjoint_agreed(std::span<const T> padded, std::int64_t channels, std::span<T> shard) const {
    const Communicator& spatial = mesh_.spatial();
    const std::int64_t rows = padded_rows();
    const std::int64_t cols = padded_cols();
    const std::int64_t width = spec_.width;
    // The messages of execute() reversed: what this rank received it sends back, what it sent comes back.
    std::vector<std::vector<T>> back(peers_.size());
    std::vector<std::vector<T>> returned(peers_.size());
    std::vector<MPI_Request> requests;
    requests.reserve(2 * peers_.size());
    for (std::size_t k = 0; k < peers_.size(); ++k) {
        if (peers_[k].send_cells > 0) {
            returned[k].resize(static_cast<std::size_t>(channels * peers_[k].send_cells));
            requests.emplace_back();
            GRIDSHARD_MPI(MPI_Irecv, returned[k].data(), static_cast<int>(returned[k].size()),
                          detail::mpi_datatype<T>(), peers_[k].rank, padded_halo_tag, spatial.native(),
                          &requests.back());
        }
    }
    for (std::size_t k = 0; k < peers_.size(); ++k) {
        if (peers_[k].receive_cells > 0) {
            back[k].resize(static_cast<std::size_t>(channels * peers_[k].receive_cells));
            pack_padded(padded, channels, rows, cols, peers_[k].receive, back[k].data());
            requests.emplace_back();
            GRIDSHARD_MPI(MPI_Isend, back[k].data(), static_cast<int>(back[k].size()), detail::mpi_datatype<T>(),
                          peers_[k].rank, padded_halo_tag, spatial.native(), &requests.back());
        }
    }
    // Meanwhile: the middle, then this rank's own halo pieces.
    const std::int64_t box_rows = box_.lat.size();
    const std::int64_t box_cols = box_.lon.size();
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t i = 0; i < box_rows; ++i) {
            std::copy_n(padded.data() + (c * rows + i + width) * cols + width, box_cols,
                        shard.data() + (c * box_rows + i) * box_cols);
        }
    }
    if (!own_.empty()) {
        std::vector<T> own(static_cast<std::size_t>(channels * cells_of(own_)));
        pack_padded(padded, channels, rows, cols, own_, own.data());
        add_into_shard<T>(own.data(), shard, box_, channels, own_);
    }
    GRIDSHARD_MPI(MPI_Waitall, static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
    for (std::size_t k = 0; k < peers_.size(); ++k) {  // in rank order: a fixed order of the additions
        if (!returned[k].empty()) {
            add_into_shard<T>(returned[k].data(), shard, box_, channels, peers_[k].send);
        }
    }
}

#define GRIDSHARD_INSTANTIATE_PADDED_HALO(T)                                                                         \
    template void PaddedHaloExchange::execute<T>(std::span<const T>, std::int64_t, std::span<T>) const;              \
    template std::string PaddedHaloExchange::argument_error<T>(std::span<const T>, std::int64_t, std::span<const T>) \
        const;                                                                                                       \
    template void PaddedHaloExchange::exchange_agreed<T>(std::span<const T>, std::int64_t, std::span<T>) const;      \
    template void PaddedHaloExchange::adjoint<T>(std::span<const T>, std::int64_t, std::span<T>) const;              \
    template void PaddedHaloExchange::adjoint_agreed<T>(std::span<const T>, std::int64_t, std::span<T>) const;

GRIDSHARD_INSTANTIATE_PADDED_HALO(float)
GRIDSHARD_INSTANTIATE_PADDED_HALO(double)
GRIDSHARD_INSTANTIATE_PADDED_HALO(std::int32_t)
GRIDSHARD_INSTANTIATE_PADDED_HALO(std::int64_t)

}  // namespace gridshard
