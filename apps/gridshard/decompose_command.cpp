// `gridshard decompose`: the boxes, neighbours and halo-versus-gather bytes of every rank of a mesh.
// Pure geometry: no MPI calls, so it runs anywhere without mpirun.

#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.hpp"
#include "gridshard/geometry/decomposition.hpp"
#include "gridshard/geometry/halo_geometry.hpp"
#include "options.hpp"

namespace gridshard::cli {
namespace {

struct DecomposeOptions {
    std::int64_t nlat = 0;
    std::int64_t nlon = 0;
    std::string mesh = "1x1x1";
    SplitRule split = SplitRule::balanced;
    bool periodic_lon = false;
    bool json = false;
};

constexpr int halo_width = 1;
constexpr std::int64_t float32_bytes = 4;
/// The largest --nlat and --nlon (halo and gather byte counts stay far inside 64 bits).
constexpr std::int64_t max_extent = std::int64_t{1} << 31;

nlohmann::ordered_json rank_report(const Decomposition& decomposition, int rank, const Periodicity& periodicity) {
    const MeshShape& mesh = decomposition.mesh();
    const MeshCoords c = coords_of_rank(mesh, rank);
    const Box box = decomposition.box(c);
    nlohmann::ordered_json neighbours = nlohmann::ordered_json::object();
    for (Side side : all_sides) {
        const auto n = neighbour_coords(mesh, c, side, periodicity);
        neighbours[std::string(to_string(side))] =
            n ? nlohmann::ordered_json(rank_of_coords(mesh, *n)) : nlohmann::ordered_json();
    }
    return {
        {"rank", rank},
        {"coords", {c.data, c.lat, c.lon}},
        {"lat", {box.lat.begin, box.lat.end}},
        {"lon", {box.lon.begin, box.lon.end}},
        {"shape", {box.lat.size(), box.lon.size()}},
        {"neighbours", neighbours},
        {"halo_bytes_per_channel", halo_bytes_per_channel(decomposition, c, halo_width, periodicity, float32_bytes)},
        {"gather_bytes_per_channel", gather_bytes_per_channel(decomposition, c, float32_bytes)},
    };
}

std::string neighbour_text(const nlohmann::ordered_json& value) {
    return value.is_null() ? "-" : std::to_string(value.get<int>());
}

void print_table(const DecomposeOptions& options, const Decomposition& decomposition,
                 const nlohmann::ordered_json& ranks) {
    std::printf("grid %lld x %lld over mesh %s (data x lat x lon), split %s%s\n", static_cast<long long>(options.nlat),
                static_cast<long long>(options.nlon), to_string(decomposition.mesh()).c_str(),
                std::string(to_string(options.split)).c_str(), options.periodic_lon ? ", periodic longitude" : "");
    std::printf("%5s  %-9s  %-13s  %-13s  %-11s  %-29s  %12s  %14s\n", "rank", "coords", "lat", "lon", "shape",
                "neighbours (lat -/+, lon -/+)", "halo B/ch", "gather B/ch");
    for (const auto& r : ranks) {
        const auto& n = r["neighbours"];
        const std::string coords = "[" + std::to_string(r["coords"][0].get<int>()) + "," +
                                   std::to_string(r["coords"][1].get<int>()) + "," +
                                   std::to_string(r["coords"][2].get<int>()) + "]";
        const std::string lat = "[" + r["lat"][0].dump() + "," + r["lat"][1].dump() + ")";
        const std::string lon = "[" + r["lon"][0].dump() + "," + r["lon"][1].dump() + ")";
        const std::string shape = r["shape"][0].dump() + " x " + r["shape"][1].dump();
        const std::string neighbours = neighbour_text(n["lat_prev"]) + " " + neighbour_text(n["lat_next"]) + " " +
                                       neighbour_text(n["lon_prev"]) + " " + neighbour_text(n["lon_next"]);
        std::printf("%5d  %-9s  %-13s  %-13s  %-11s  %-29s  %12lld  %14lld\n", r["rank"].get<int>(), coords.c_str(),
                    lat.c_str(), lon.c_str(), shape.c_str(), neighbours.c_str(),
                    r["halo_bytes_per_channel"].get<long long>(), r["gather_bytes_per_channel"].get<long long>());
    }
    std::printf(
        "bytes per float32 channel sent by each rank: a 1-cell halo exchange against an all-gather of the "
        "whole field over the spatial group\n");
}

int run_decompose(const DecomposeOptions& options) {
    const MeshShape mesh = parse_mesh_shape(options.mesh);
    const SplitRule rule = options.split;
    const Decomposition decomposition({options.nlat, options.nlon}, mesh, rule);
    const Periodicity periodicity{.lat = false, .lon = options.periodic_lon};

    nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
    for (int rank = 0; rank < mesh.size(); ++rank) {
        ranks.push_back(rank_report(decomposition, rank, periodicity));
    }
    if (options.json) {
        const nlohmann::ordered_json report = {
            {"mesh", {{"data", mesh.data}, {"lat", mesh.lat}, {"lon", mesh.lon}}},
            {"split", to_string(options.split)},
            {"grid", {{"nlat", options.nlat}, {"nlon", options.nlon}}},
            {"ranks", ranks},
            {"periodic_lon", options.periodic_lon},
        };
        std::cout << report.dump() << "\n";
    } else {
        print_table(options, decomposition, ranks);
    }
    return 0;
}

}  // namespace

Runner add_decompose_command(CLI::App& app) {
    auto options = std::make_shared<DecomposeOptions>();
    CLI::App* command = app.add_subcommand("decompose", "Show how a grid splits over a data x lat x lon mesh (no MPI)");
    add_count_option(*command, "--nlat", options->nlat, 0, max_extent, "Number of latitudes")->required();
    add_count_option(*command, "--nlon", options->nlon, 0, max_extent, "Number of longitudes")->required();
    command->add_option("--mesh", options->mesh, "Mesh shape DxHxW (data x lat x lon)")->capture_default_str();
    add_choice_option(
        *command, "--split", options->split, parse_split_rule, [](SplitRule r) { return to_string(r); },
        "Split rule: balanced or div_up");
    command->add_flag("--periodic-lon", options->periodic_lon, "Treat longitude as periodic for the halo");
    command->add_flag("--json", options->json, "Print the decomposition as one JSON document");
    return [options] { return run_decompose(*options); };
}

}  // namespace gridshard::cli
