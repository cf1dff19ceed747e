// The Aggregator's maps as they are held: gathered whole onto world rank 0, or each data rank 0's own box for a
// collective write.

#include "gridshard/comm/collectives.hpp"
#include "gridshard/evaluation/aggregator.hpp"

namespace gridshard {

std::vector<std::vector<double>> Aggregator::held_maps(const std::vector<double>& part) const {
    const ProcessMesh& mesh = grid_.mesh();
    const std::int64_t channels = shape_.channels;
    auto plane = static_cast<std::size_t>(grid_.box().area());
    bool holds = mesh.coords().data == 0;
    std::vector<double> maps = part;
    if (options_.gather_maps) {
        maps = gather_global<double>(mesh, grid_.decomposition(),
                                     std::span<const double>(part.data(), holds ? part.size() : 0), holds ? 1 : 0,
                                     channels);
        plane = static_cast<std::size_t>(grid_.grid().nlat * grid_.grid().nlon);
        holds = mesh.world().rank() == 0;
    }
    std::vector<std::vector<double>> out(static_cast<std::size_t>(channels));
    for (std::int64_t c = 0; c < channels && holds; ++c) {
        const auto first = maps.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(c) * plane);
        out[static_cast<std::size_t>(c)].assign(first, first + static_cast<std::ptrdiff_t>(plane));
    }
    return out;
}

}  // namespace gridshard
