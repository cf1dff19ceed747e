// The Aggregator's maps as they are held: gathered whole onto world rank 0, or each data rank 0's own box for a
// collective write.

#include "gridshard/comm/collectives.hpp"
#include "gridshard/evaluation/aggregator.hpp"
#include "gridshard/metrics/metrics.hpp"

namespace gridshard {

std::vector<std::vector<double>> Aggregator::held_maps(const std::vector<double>& part) const {
    const ProcessMesh& mesh = grid_.mesh();
    const std::int64_t channels = shape_.channels;
    auto plane = static_cast<std::size_t>(grid_.box().area());
    bool holds = mesh.coords().data == 0;
    std::vector<double> gathered;
    const std::vector<double>* maps = &part;  // this rank's box, or the gathered global maps
    if (options_.gather_maps) {
        gathered = gather_global<double>(mesh, grid_.decomposition(),
                                         std::span<const double>(part.data(), holds ? part.size() : 0), holds ? 1 : 0,
                                         channels);
        maps = &gathered;
        plane = static_cast<std::size_t>(grid_.grid().nlat * grid_.grid().nlon);
        holds = mesh.world().rank() == 0;
    }
    std::vector<std::vector<double>> out(static_cast<std::size_t>(channels));
    for (std::int64_t c = 0; c < channels && holds; ++c) {
        const auto first = maps->begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(c) * plane);
        out[static_cast<std::size_t>(c)].assign(first, first + static_cast<std::ptrdiff_t>(plane));
    }
    return out;
}

template <class Value>
void Aggregator::finish_compared_maps(VariableScores& out, const std::vector<double>& gen,
                                      const std::vector<double>& target, std::vector<double> ChannelScores::*gen_map,
                                      std::vector<double> ChannelScores::*target_map) const {
    const std::int64_t channels = shape_.channels;
    // The area-weighted RMSE of the prediction's map against the truth's over the points the policy counts (the
    // library's masked_rmse; collective over spatial).
    const std::vector<double> rmse =
        masked_rmse<double>(grid_, FieldShard<double>{target, channels}, FieldShard<double>{gen, channels},
                            regions_.front().weights.view(), options_.policy, options_.summation);
    for (std::int64_t c = 0; c < channels; ++c) {
        const auto k = static_cast<std::size_t>(c);
        for (const RegisteredScore* s : scores_) {
            if (std::holds_alternative<Value>(s->source)) {
                out[k].regions.front().time_means.push_back({s, rmse[k]});
            }
        }
    }
    std::vector<std::vector<double>> gen_maps = held_maps(gen);  // collective over the world
    std::vector<std::vector<double>> target_maps = held_maps(target);
    for (std::int64_t c = 0; c < channels; ++c) {
        out[static_cast<std::size_t>(c)].*gen_map = std::move(gen_maps[static_cast<std::size_t>(c)]);
        out[static_cast<std::size_t>(c)].*target_map = std::move(target_maps[static_cast<std::size_t>(c)]);
    }
}

template void Aggregator::finish_compared_maps<TrendValue>(VariableScores&, const std::vector<double>&,
                                                           const std::vector<double>&,
                                                           std::vector<double> ChannelScores::*,
                                                           std::vector<double> ChannelScores::*) const;
template void Aggregator::finish_compared_maps<IndexRegressionValue>(VariableScores&, const std::vector<double>&,
                                                                     const std::vector<double>&,
                                                                     std::vector<double> ChannelScores::*,
                                                                     std::vector<double> ChannelScores::*) const;

}  // namespace gridshard
