#include "gridshard/comm/halo_exchange.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/mpi_check.hpp"
#include "gridshard/core/error.hpp"

namespace gridshard {
namespace {

std::string plan_error(const ProcessMesh& mesh, const Decomposition& decomposition, int width,
                       const Periodicity& periodicity) {
    if (!(decomposition.mesh() == mesh.shape())) {
        return "halo exchange: decomposition mesh " + to_string(decomposition.mesh()) + " differs from process mesh " +
               to_string(mesh.shape());
    }
    try {
        validate_halo(decomposition, width, periodicity);
    } catch (const ArgumentError& error) {
        return error.what();
    }
    return {};
}

// Appends the `rows x cols` block of each channel of `field` (channels, box) adjacent to `side` to `out`.
template <class T>
T* pack_edge(std::span<const T> field, const Box& box, std::int64_t channels, const HaloSide& side, T* out) {
    const std::int64_t nrows = box.lat.size();
    const std::int64_t ncols = box.lon.size();
    const std::int64_t row0 = side.side == Side::lat_next ? nrows - side.rows : 0;
    const std::int64_t col0 = side.side == Side::lon_next ? ncols - side.cols : 0;
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t i = 0; i < side.rows; ++i) {
            const T* row = field.data() + (c * nrows + row0 + i) * ncols + col0;
            out = std::copy_n(row, side.cols, out);
        }
    }
    return out;
}

}  // namespace

HaloExchange::HaloExchange(const ProcessMesh& mesh, const Decomposition& decomposition, int width,
                           Periodicity periodicity)
    : mesh_(mesh), width_(width) {
    const GridShape grid = decomposition.grid();
    detail::agree_or_throw(mesh.spatial(), plan_error(mesh, decomposition, width, periodicity),
                           {grid.nlat, grid.nlon, static_cast<std::int64_t>(decomposition.rule()), width,
                            periodicity.lat, periodicity.lon},
                           "halo plan (nlat, nlon, split, width, periodic lat, periodic lon)");
    box_ = decomposition.box(mesh.coords());
    sides_ = halo_sides(decomposition, mesh.coords(), width, periodicity);
}

template <class T>
HaloBuffers<T> HaloExchange::make_buffers(std::int64_t channels) const {
    if (channels < 0) {
        throw ArgumentError("halo buffers: channels must be >= 0, got channels=" + std::to_string(channels));
    }
    HaloBuffers<T> buffers;
    buffers.channels_ = channels;
    for (const HaloSide& side : sides_) {
        const std::size_t s = HaloBuffers<T>::index(side.side);
        const auto n = static_cast<std::size_t>(channels * side.cells());
        buffers.present_[s] = true;
        buffers.rows_[s] = side.rows;
        buffers.cols_[s] = side.cols;
        buffers.received_[s].resize(n);
        buffers.sent_[s].resize(side.is_self ? 0 : n);
    }
    return buffers;
}

template <class T>
void HaloExchange::execute(std::span<const T> shard, HaloBuffers<T>& buffers) const {
    const std::span<const T> fields[] = {shard};
    execute(std::span<const std::span<const T>>(fields), buffers);
}

template <class T>
std::string HaloExchange::argument_error(std::span<const std::span<const T>> fields,
                                         const HaloBuffers<T>& buffers) const {
    const auto nfields = static_cast<std::int64_t>(fields.size());
    const std::int64_t channels = nfields > 0 ? buffers.channels() / nfields : 0;
    std::string error;
    if (nfields == 0 || channels * nfields != buffers.channels()) {
        error = "halo exchange: " + std::to_string(buffers.channels()) + " buffer channels cannot be split over " +
                std::to_string(nfields) + " field(s)";
    }
    for (const auto& field : fields) {
        if (error.empty() && static_cast<std::int64_t>(field.size()) != channels * box_.area()) {
            error = "halo exchange: shard has " + std::to_string(field.size()) +
                    " elements but (channels=" + std::to_string(channels) + ", lat=" + std::to_string(box_.lat.size()) +
                    ", lon=" + std::to_string(box_.lon.size()) + ") needs " + std::to_string(channels * box_.area());
        }
    }
    for (const HaloSide& side : sides_) {
        if (error.empty() && buffers.channels() * side.cells() > std::numeric_limits<int>::max()) {
            error = "halo exchange: a strip of " + std::to_string(buffers.channels() * side.cells()) +
                    " values does not fit one MPI message count";
        }
    }
    return error;
}

template <class T>
void HaloExchange::execute(std::span<const std::span<const T>> fields, HaloBuffers<T>& buffers) const {
    detail::agree_or_throw(mesh_.spatial(), argument_error(fields, buffers), {buffers.channels()},
                           "halo exchange channels");
    exchange_agreed(fields, buffers);
}

template <class T>
void HaloExchange::exchange_agreed(std::span<const std::span<const T>> fields, HaloBuffers<T>& buffers) const {
    const Communicator& spatial = mesh_.spatial();
    const std::int64_t channels = buffers.channels() / static_cast<std::int64_t>(fields.size());

    // A message crossing my side s is tagged s; the neighbour receives it across opposite(s).
    std::array<MPI_Request, 8> requests{};
    int pending = 0;
    for (const HaloSide& side : sides_) {
        const std::size_t s = HaloBuffers<T>::index(side.side);
        if (side.is_self) {
            continue;
        }
        const int peer = spatial_rank_of_coords(mesh_.shape(), side.neighbour);
        const int count = static_cast<int>(buffers.received_[s].size());
        GRIDSHARD_MPI(MPI_Irecv, buffers.received_[s].data(), count, detail::mpi_datatype<T>(), peer,
                      static_cast<int>(opposite(side.side)), spatial.native(),
                      &requests[static_cast<std::size_t>(pending++)]);
    }
    for (const HaloSide& side : sides_) {
        const std::size_t s = HaloBuffers<T>::index(side.side);
        if (side.is_self) {
            // One rank along a periodic axis: my own opposite edge is my halo across this side.
            const HaloSide own_edge{opposite(side.side), side.neighbour, side.rows, side.cols, true};
            T* out = buffers.received_[s].data();
            for (const auto& field : fields) {
                out = pack_edge(field, box_, channels, own_edge, out);
            }
            continue;
        }
        T* out = buffers.sent_[s].data();
        for (const auto& field : fields) {
            out = pack_edge(field, box_, channels, side, out);
        }
        const int peer = spatial_rank_of_coords(mesh_.shape(), side.neighbour);
        const int count = static_cast<int>(buffers.sent_[s].size());
        GRIDSHARD_MPI(MPI_Isend, buffers.sent_[s].data(), count, detail::mpi_datatype<T>(), peer,
                      static_cast<int>(side.side), spatial.native(), &requests[static_cast<std::size_t>(pending++)]);
    }
    GRIDSHARD_MPI(MPI_Waitall, pending, requests.data(), MPI_STATUSES_IGNORE);
}

#define GRIDSHARD_INSTANTIATE_HALO(T)                                                                                \
    template HaloBuffers<T> HaloExchange::make_buffers<T>(std::int64_t) const;                                       \
    template void HaloExchange::execute<T>(std::span<const T>, HaloBuffers<T>&) const;                               \
    template void HaloExchange::execute<T>(std::span<const std::span<const T>>, HaloBuffers<T>&) const;              \
    template std::string HaloExchange::argument_error<T>(std::span<const std::span<const T>>, const HaloBuffers<T>&) \
        const;                                                                                                       \
    template void HaloExchange::exchange_agreed<T>(std::span<const std::span<const T>>, HaloBuffers<T>&) const;

GRIDSHARD_INSTANTIATE_HALO(float)
GRIDSHARD_INSTANTIATE_HALO(double)
GRIDSHARD_INSTANTIATE_HALO(std::int32_t)
GRIDSHARD_INSTANTIATE_HALO(std::int64_t)

}  // namespace gridshard
