// Power spectra of sharded fields (include/gridshard/metrics/spectrum.hpp, docs/spectrum.md): who owns what, and
// the steps of one spectrum. The data move through comm (comm/redistribution.hpp, comm/exact_allreduce.hpp), the
// quadrature is geometry's (geometry/sphere_quadrature.hpp), and the transform on one rank is
// spherical_transform.hpp's.
//
// Both spectra start by handing whole rows to owners (one all-to-all of the input's own values), so each row's FFT
// runs on one rank. The spherical spectrum then hands each (channel, m) column of Fourier coefficients to an owner
// (a second all-to-all, complex doubles), which folds it about the equator and forms the Legendre sums over one
// hemisphere's rows in a fixed order, adding f_m |c_lm|^2 into an exact sum per (channel, l). The exact sums of
// every rank are merged by one all-reduce of their limbs, so the order of m over ranks and threads does not matter.
// Field-owner mode is the same path with every row and column of a channel on one rank (the second all-to-all then
// moves nothing between ranks). A rank never sends to itself: its own rows are read in its shard (or copied, when
// its box holds part of them) and its own columns filled straight from its transforms.

#include "gridshard/metrics/spectrum.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <limits>
#include <memory>
#include <numbers>
#include <string>

#include "../comm/thread_blocks.hpp"
#include "../core/names.hpp"
#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/exact_allreduce.hpp"
#include "gridshard/comm/redistribution.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/core/memory.hpp"
#include "gridshard/numerics/exact_sum.hpp"
#include "row_kernels.hpp"
#include "spherical_transform.hpp"

namespace gridshard {

namespace {

using detail::Column;
using detail::Hemisphere;
using detail::PendingTerms;
using detail::RowFft;

constexpr double pi = std::numbers::pi;

// ---- names ------------------------------------------------------------------------------------------------

constexpr detail::NameTable<SpectrumConvention, 2> convention_names{{
    {"ace", SpectrumConvention::ace},
    {"full", SpectrumConvention::full},
}};
constexpr detail::NameTable<SpectrumMode, 3> mode_names{{
    {"automatic", SpectrumMode::automatic},
    {"field-owners", SpectrumMode::field_owners},
    {"transposes", SpectrumMode::transposes},
}};
constexpr detail::NameTable<SpectrumTruncation, 2> truncation_names{{
    {"torch-harmonics-0.8", SpectrumTruncation::torch_harmonics_0_8},
    {"triangular", SpectrumTruncation::triangular},
}};
constexpr detail::NameTable<ZonalWeighting, 3> weighting_names{{
    {"none", ZonalWeighting::none},
    {"cos-lat", ZonalWeighting::cos_lat},
    {"circumference", ZonalWeighting::circumference},
}};

// `count` doubles, not initialised (for buffers written whole before they are read: no pass of zeros), or a
// SystemError naming `what`, as allocate_vector's.
std::unique_ptr<double[]> uninitialised_doubles(std::size_t count, const char* what) {
    try {
        return std::unique_ptr<double[]>(new double[count]);
    } catch (const std::bad_alloc&) {
        throw SystemError("out of memory allocating " + std::string(what) + ": " +
                          format_bytes(static_cast<std::uint64_t>(count) * sizeof(double)));
    }
}

std::vector<Box> spatial_boxes(const ShardedGrid& grid) {
    std::vector<Box> boxes;
    for (int r = 0; r < grid.mesh().spatial().size(); ++r) {
        boxes.push_back(grid.decomposition().box_of_spatial_rank(r));
    }
    return boxes;
}

// Rows of each lat block split over its lon group in (c, k) order: the owner of (c, k) as a rank of the lon
// group. Entries outside `lat_block` are unused (-1).
std::vector<int> lon_group_row_owners(Range lat_block, std::int64_t channels, std::int64_t nlat, int lon_ranks) {
    std::vector<int> owner(static_cast<std::size_t>(channels * nlat), -1);
    const std::int64_t rows = channels * lat_block.size();
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t k = lat_block.begin; k < lat_block.end; ++k) {
            const std::int64_t index = c * lat_block.size() + (k - lat_block.begin);
            owner[static_cast<std::size_t>(c * nlat + k)] = static_cast<int>(index * lon_ranks / rows);
        }
    }
    return owner;
}
}  // namespace

SpectrumConvention parse_spectrum_convention(std::string_view text) {
    return detail::parse_name(text, convention_names, "convention");
}
SpectrumMode parse_spectrum_mode(std::string_view text) {
    return detail::parse_name(text, mode_names, "mode");
}
SpectrumTruncation parse_spectrum_truncation(std::string_view text) {
    return detail::parse_name(text, truncation_names, "truncation");
}
ZonalWeighting parse_zonal_weighting(std::string_view text) {
    return detail::parse_name(text, weighting_names, "weighting");
}
std::string_view to_string(SpectrumConvention convention) noexcept {
    return detail::name_of(convention, convention_names);
}
std::string_view to_string(SpectrumTruncation truncation) noexcept {
    return detail::name_of(truncation, truncation_names);
}

SpectrumBiases spectrum_norm_biases(std::span<const double> prediction, std::span<const double> target) {
    if (prediction.size() != target.size() || target.empty()) {
        throw ArgumentError("spectrum_norm_biases: " + std::to_string(prediction.size()) + " predicted and " +
                            std::to_string(target.size()) + " target degrees");
    }
    SpectrumBiases b;
    const auto finite = [](double power) { return std::isfinite(power); };
    if (!std::all_of(prediction.begin(), prediction.end(), finite) ||
        !std::all_of(target.begin(), target.end(), finite)) {
        // A spectrum of values that were not finite: no summary can be formed (ACE's sums would skip its NaN
        // ratios and report 0).
        const double nan = std::numeric_limits<double>::quiet_NaN();
        return {nan, nan, nan, nan};
    }
    const auto degrees = static_cast<double>(target.size());
    for (std::size_t l = 0; l < target.size(); ++l) {
        const double r = prediction[l] / target[l] - 1.0;
        if (r > 0.0) {
            b.positive += r;
        } else if (r < 0.0) {
            b.negative += r;
        }
    }
    b.smallest_scale = prediction.back() / target.back() - 1.0;
    b.positive /= degrees;
    b.negative /= degrees;
    b.mean_abs = std::abs(b.positive) + std::abs(b.negative);
    return b;
}

SpectrumSize spectrum_size(const SpectrumSpec& spec, GridShape grid) {
    const std::int64_t orders = grid.nlon / 2 + 1;
    std::int64_t lmax = spec.grid == SphereGrid::lobatto ? grid.nlat - 1 : grid.nlat;
    std::int64_t mmax = orders;
    if (spec.truncation == SpectrumTruncation::triangular) {
        lmax = spec.grid == SphereGrid::equiangular ? (grid.nlat + 1) / 2 : std::min(lmax, orders);
        mmax = std::min(lmax, orders);
        lmax = mmax;
    }
    if (spec.lmax != 0) {
        if (spec.lmax < 1 || spec.lmax > grid.nlat) {
            throw ArgumentError("lmax=" + std::to_string(spec.lmax) +
                                " must lie in [1, nlat=" + std::to_string(grid.nlat) + "]");
        }
        lmax = spec.lmax;
    }
    if (spec.mmax != 0) {
        if (spec.mmax < 1 || spec.mmax > orders) {
            throw ArgumentError("mmax=" + std::to_string(spec.mmax) +
                                " must lie in [1, nlon/2+1=" + std::to_string(orders) + "]");
        }
        mmax = spec.mmax;
    }
    return {lmax, mmax};
}

// ---- the plan -----------------------------------------------------------------------------------------------

// Everything of a spectrum that depends on the grid, the channel count and the spec alone: who owns which rows and
// columns, the quadrature, the nodes and Legendre diagonals of the owned orders, and the row transforms.
struct SpectrumPlan::State {
    explicit State(const ShardedGrid& grid) : mesh(grid.mesh()), shape(grid.grid()), box(grid.box()) {}

    ProcessMesh mesh;  // a copy: it shares the grid's communicators
    GridShape shape;
    Box box;
    SpectrumSpec spec;
    std::int64_t channels = 0;
    std::string error;  // what is wrong with the spec for this grid (raised by the first compute, on every rank)
    SpectrumSize size{};
    std::int64_t lmax = 0;
    std::int64_t mmax = 0;
    int ranks = 1;
    int me = 0;
    bool owners = false;
    std::vector<Box> boxes;
    std::vector<int> row_owner;  // per (c, k): the spatial rank that transforms the row
    Hemisphere hemisphere{1};
    std::vector<Column> columns;  // this rank's (c, m) columns, m-major (so `orders` ascends); no values yet
    std::vector<std::int64_t> column_of_pair;
    std::vector<double> quadrature_weights;
    std::vector<double> x;                       // the nodes of the hemisphere's rows (hemisphere_nodes)
    std::vector<std::int64_t> orders;            // the m this rank owns some column of, ascending
    std::vector<std::vector<double>> diagonals;  // Pbar_mm(x_k) of each owned order
    std::vector<std::int64_t> slot_of_channel;   // per channel: its slot among this rank's, or -1
    std::int64_t slots = 0;
    std::vector<std::unique_ptr<RowFft>> ffts;  // one per thread, made as the threads are first needed
    // The working memory of a call, made by the first and kept for the next (so that no call but the first takes
    // fresh pages from the system): the columns' values, each thread's pending terms, the sums over threads.
    std::unique_ptr<double[]> column_values;
    std::vector<PendingTerms> thread_terms;
    std::vector<ExactSum> power;

    [[nodiscard]] int column_owner(std::int64_t c, std::int64_t m) const noexcept {
        return owners ? static_cast<int>(c % ranks) : static_cast<int>((c * mmax + m) % ranks);
    }
};

SpectrumPlan::SpectrumPlan(const ShardedGrid& grid, std::int64_t channels, const SpectrumSpec& spec)
    : state_(std::make_unique<State>(grid)) {
    State& p = *state_;
    const GridShape shape = p.shape;
    p.spec = spec;
    p.channels = channels;
    try {
        p.size = spectrum_size(spec, shape);
        if (spec.grid != SphereGrid::legendre_gauss && shape.nlat < 2) {
            throw ArgumentError("nlat=" + std::to_string(shape.nlat) + ": the " + std::string(to_string(spec.grid)) +
                                " grid needs at least 2 rows");
        }
    } catch (const ArgumentError& e) {
        p.error = e.what();
        p.size = {};
    }
    if (!p.error.empty() || channels < 1) {
        return;  // nothing to plan: the compute raises the problem on every rank
    }
    p.lmax = p.size.lmax;
    p.mmax = std::min(p.size.mmax, p.lmax);  // orders m >= L have no degree l >= m below L
    const std::int64_t mmax = p.mmax;
    const Communicator& spatial = grid.mesh().spatial();
    p.ranks = spatial.size();
    p.me = spatial.rank();
    p.owners = spec.mode == SpectrumMode::field_owners || (spec.mode == SpectrumMode::automatic && channels >= p.ranks);

    // Who owns what: rows (c, k) and columns (c, m), as spatial ranks.
    p.boxes = spatial_boxes(grid);
    p.row_owner.assign(static_cast<std::size_t>(channels * shape.nlat), 0);
    const int lon_ranks = grid.mesh().shape().lon;
    for (int lat_index = 0; lat_index < grid.mesh().shape().lat; ++lat_index) {
        const Range block = grid.decomposition().lat_range(lat_index);
        const std::vector<int> in_block = lon_group_row_owners(block, channels, shape.nlat, lon_ranks);
        for (std::int64_t c = 0; c < channels; ++c) {
            for (std::int64_t k = block.begin; k < block.end; ++k) {
                const auto key = static_cast<std::size_t>(c * shape.nlat + k);
                p.row_owner[key] = p.owners ? static_cast<int>(c % p.ranks) : lat_index * lon_ranks + in_block[key];
            }
        }
    }
    p.hemisphere = Hemisphere(shape.nlat);
    p.column_of_pair.assign(static_cast<std::size_t>(channels * mmax), -1);
    for (std::int64_t m = 0; m < mmax; ++m) {
        for (std::int64_t c = 0; c < channels; ++c) {
            if (p.column_owner(c, m) == p.me) {
                p.column_of_pair[static_cast<std::size_t>(c * mmax + m)] = static_cast<std::int64_t>(p.columns.size());
                p.columns.push_back({c, m, nullptr});
            }
        }
    }
    const SphereQuadrature quadrature = sphere_quadrature(spec.grid, shape.nlat);
    p.quadrature_weights = quadrature.weights;
    p.x = detail::hemisphere_nodes(quadrature, p.hemisphere);
    for (const Column& column : p.columns) {
        if (p.orders.empty() || p.orders.back() != column.m) {
            p.orders.push_back(column.m);
        }
    }
    p.diagonals = detail::legendre_diagonals(p.x, p.hemisphere, p.orders);
    p.slot_of_channel.assign(static_cast<std::size_t>(channels), -1);
    for (const Column& column : p.columns) {
        if (p.slot_of_channel[static_cast<std::size_t>(column.channel)] < 0) {
            p.slot_of_channel[static_cast<std::size_t>(column.channel)] = p.slots++;
        }
    }
}

SpectrumPlan::SpectrumPlan(SpectrumPlan&&) noexcept = default;
SpectrumPlan& SpectrumPlan::operator=(SpectrumPlan&&) noexcept = default;
SpectrumPlan::~SpectrumPlan() = default;

std::int64_t SpectrumPlan::channels() const noexcept {
    return state_->channels;
}

std::int64_t SpectrumPlan::degrees() const noexcept {
    return state_->size.lmax;
}

template <class T>
std::vector<double> SpectrumPlan::operator()(FieldShard<T> field) {
    State& p = *state_;
    const Communicator& spatial = p.mesh.spatial();
    const GridShape shape = p.shape;
    std::string error = detail::shard_error(field, p.box, "data");
    if (error.empty() && field.channels != p.channels) {
        error = "data has " + std::to_string(field.channels) + " channels but the spectrum's plan was made for " +
                std::to_string(p.channels);
    }
    if (!p.error.empty()) {
        error = p.error;
    }
    const SpectrumSpec& spec = p.spec;
    detail::agree_or_throw(spatial, error,
                           {field.channels, static_cast<std::int64_t>(sizeof(T)), p.size.lmax, p.size.mmax,
                            static_cast<std::int64_t>(spec.grid), static_cast<std::int64_t>(spec.convention),
                            static_cast<std::int64_t>(spec.mode)},
                           "spherical_power_spectrum channels, element size, lmax, mmax, grid, convention, mode");
    const std::int64_t channels = p.channels;
    const std::int64_t lmax = p.lmax;
    const std::int64_t mmax = p.mmax;
    const int me = p.me;
    const Hemisphere& hemisphere = p.hemisphere;
    std::vector<Column>& columns = p.columns;
    const std::vector<std::int64_t>& column_of_pair = p.column_of_pair;

    // This rank's columns' values, in one buffer.
    const std::size_t column_size = 4 * hemisphere.padded;
    if (!p.column_values) {
        p.column_values = uninitialised_doubles(columns.size() * column_size, "the power spectrum's Fourier columns");
    }
    for (std::size_t i = 0; i < columns.size(); ++i) {
        columns[i].values = p.column_values.get() + i * column_size;
        columns[i].zero_padding(hemisphere);
    }

    // 1. Whole rows to their owners; FFT each, keep orders below mmax, times 2 pi / nlon. Values of this rank's
    // own columns go straight into them, times the quadrature weight; the others' are kept to be sent.
    OwnedRows<T> rows = rows_to_owners(spatial, p.boxes, shape, field.values, channels, p.row_owner);
    std::vector<std::vector<std::int64_t>> owned_rows_of_channel(static_cast<std::size_t>(channels));
    for (std::size_t s = 0; s < rows.keys.size(); ++s) {
        owned_rows_of_channel[static_cast<std::size_t>(rows.keys[s] / shape.nlat)].push_back(
            static_cast<std::int64_t>(s));
    }
    bool sends = false;  // whether some column of this rank's rows is another rank's
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t m = 0; m < mmax && !owned_rows_of_channel[static_cast<std::size_t>(c)].empty(); ++m) {
            sends = sends || p.column_owner(c, m) != me;
        }
    }
    const auto orders_kept = static_cast<std::size_t>(mmax);
    std::vector<std::complex<double>> spectra(sends ? rows.keys.size() * orders_kept : 0);
    {
        const double scale = 2.0 * pi / static_cast<double>(shape.nlon);
        // A few rows at a time, so the values written into each column lie together; batches shared between
        // threads (each writes its own rows).
        constexpr std::size_t batch = 32;
        const auto batches = static_cast<std::int64_t>((rows.keys.size() + batch - 1) / batch);
        const int fft_threads = detail::threads_for(batches, static_cast<std::int64_t>(batch) * shape.nlon);
        while (static_cast<int>(p.ffts.size()) < fft_threads) {  // a failed plan throws outside the parallel region
            p.ffts.push_back(std::make_unique<RowFft>(shape.nlon));
        }
        std::vector<std::vector<std::complex<double>>> bins_of_thread;
        for (int t = 0; t < fft_threads; ++t) {
            bins_of_thread.emplace_back(batch * orders_kept);
        }
        GRIDSHARD_PRAGMA(omp parallel for num_threads(fft_threads) schedule(static))
        for (std::int64_t index_of_batch = 0; index_of_batch < batches; ++index_of_batch) {
            const auto t = static_cast<std::size_t>(detail::thread_index());
            RowFft& fft = *p.ffts[t];
            std::vector<std::complex<double>>& batch_bins = bins_of_thread[t];
            const std::size_t first = static_cast<std::size_t>(index_of_batch) * batch;
            const std::size_t count = std::min(batch, rows.keys.size() - first);
            for (std::size_t b = 0; b < count; ++b) {
                const auto bins = detail::transform(fft, rows, first + b);
                for (std::size_t m = 0; m < orders_kept; ++m) {
                    batch_bins[b * orders_kept + m] = bins[m] * scale;
                }
                if (sends) {
                    std::copy_n(batch_bins.data() + b * orders_kept, orders_kept,
                                spectra.data() + (first + b) * orders_kept);
                }
            }
            // Per row of the batch: its channel's columns (in column_of_pair), its row k and quadrature weight.
            std::array<const std::int64_t*, batch> columns_of_row{};
            std::array<std::size_t, batch> row_of{};
            std::array<double, batch> weight_of{};
            for (std::size_t b = 0; b < count; ++b) {
                const std::int64_t key = rows.keys[first + b];
                columns_of_row[b] = column_of_pair.data() + static_cast<std::size_t>(key / shape.nlat) * orders_kept;
                row_of[b] = static_cast<std::size_t>(key % shape.nlat);
                weight_of[b] = p.quadrature_weights[row_of[b]];
            }
            for (std::size_t m = 0; m < orders_kept; ++m) {
                for (std::size_t b = 0; b < count; ++b) {
                    const std::int64_t index = columns_of_row[b][m];
                    if (index >= 0) {
                        const std::complex<double> v = batch_bins[b * orders_kept + m];
                        const double q = weight_of[b];
                        columns[static_cast<std::size_t>(index)].place(hemisphere, row_of[b],
                                                                       {q * v.real(), q * v.imag()});
                    }
                }
            }
        }
    }
    rows = {};  // only the transforms are needed from here

    // 2. The other columns (c, m) to their owners: pack (destination, c, m, k) and unpack (source, c, m, k).
    const auto uranks = static_cast<std::size_t>(p.ranks);
    const auto self = static_cast<std::size_t>(me);
    std::vector<int> send_counts(uranks, 0);
    std::vector<int> receive_counts(uranks, 0);
    std::vector<double> send;
    for (std::size_t r = 0; r < uranks; ++r) {
        const auto before = static_cast<std::int64_t>(send.size());
        for (std::int64_t c = 0; c < channels && r != self; ++c) {
            for (std::int64_t m = 0; m < mmax; ++m) {
                if (p.column_owner(c, m) != static_cast<int>(r)) {
                    continue;
                }
                for (const std::int64_t s : owned_rows_of_channel[static_cast<std::size_t>(c)]) {
                    const std::complex<double> v = spectra[static_cast<std::size_t>(s * mmax + m)];
                    send.push_back(v.real());
                    send.push_back(v.imag());
                }
            }
        }
        send_counts[r] = as_int_count(static_cast<std::int64_t>(send.size()) - before, "power spectrum");
    }
    spectra = {};
    // From rank r come, per channel, its rows of the channel times this rank's orders of it (re, im each).
    std::vector<std::int64_t> orders_of_channel(static_cast<std::size_t>(channels), 0);
    for (const Column& column : columns) {
        ++orders_of_channel[static_cast<std::size_t>(column.channel)];
    }
    std::vector<std::int64_t> rows_of_rank_and_channel(uranks * static_cast<std::size_t>(channels), 0);
    for (std::int64_t key = 0; key < channels * shape.nlat; ++key) {
        const auto r = static_cast<std::size_t>(p.row_owner[static_cast<std::size_t>(key)]);
        ++rows_of_rank_and_channel[r * static_cast<std::size_t>(channels) + static_cast<std::size_t>(key / shape.nlat)];
    }
    for (std::size_t r = 0; r < uranks; ++r) {
        std::int64_t count = 0;
        for (std::size_t c = 0; c < static_cast<std::size_t>(channels) && r != self; ++c) {
            count += 2 * rows_of_rank_and_channel[r * static_cast<std::size_t>(channels) + c] * orders_of_channel[c];
        }
        receive_counts[r] = as_int_count(count, "power spectrum");
    }
    std::vector<double> received = alltoallv(spatial, send, send_counts, receive_counts);
    send = {};
    {
        std::size_t at = 0;
        for (std::size_t r = 0; r < uranks; ++r) {
            for (std::int64_t c = 0; c < channels && r != self; ++c) {
                for (std::int64_t m = 0; m < mmax; ++m) {
                    if (p.column_owner(c, m) != me) {
                        continue;
                    }
                    Column& column =
                        columns[static_cast<std::size_t>(column_of_pair[static_cast<std::size_t>(c * mmax + m)])];
                    for (std::int64_t k = 0; k < shape.nlat; ++k) {
                        if (p.row_owner[static_cast<std::size_t>(c * shape.nlat + k)] != static_cast<int>(r)) {
                            continue;
                        }
                        const double q = p.quadrature_weights[static_cast<std::size_t>(k)];
                        const double re = q * received[at++];
                        const double im = q * received[at++];
                        column.place(hemisphere, static_cast<std::size_t>(k), {re, im});
                    }
                }
            }
        }
    }
    received = {};

    // 3. Legendre sums of the owned columns, m by m, shared between threads; exact sums per (channel, l).
    const std::vector<std::int64_t>& orders = p.orders;
    const int threads = detail::threads_for(static_cast<std::int64_t>(orders.size()),
                                            lmax * shape.nlat * std::max<std::int64_t>(1, p.slots));
    std::vector<PendingTerms>& thread_terms = p.thread_terms;
    for (PendingTerms& terms : thread_terms) {
        terms.clear();
    }
    while (static_cast<int>(thread_terms.size()) < threads) {
        thread_terms.emplace_back(static_cast<std::size_t>(p.slots * lmax));
    }
    const auto order_count = static_cast<std::int64_t>(orders.size());
    GRIDSHARD_PRAGMA(omp parallel for num_threads(threads) schedule(dynamic, 1))
    for (std::int64_t i = 0; i < order_count; ++i) {
        const std::int64_t m = orders[static_cast<std::size_t>(i)];
        std::vector<const Column*> of_m;
        std::vector<std::int64_t> slot_of;
        for (std::int64_t c = 0; c < channels; ++c) {
            const std::int64_t index = column_of_pair[static_cast<std::size_t>(c * mmax + m)];
            if (index >= 0) {
                Column& column = columns[static_cast<std::size_t>(index)];
                column.fold(hemisphere);  // here, just before its sums, by the thread that forms them
                of_m.push_back(&column);
                slot_of.push_back(p.slot_of_channel[static_cast<std::size_t>(c)]);
            }
        }
        const double factor = (spec.convention == SpectrumConvention::full && m > 0) ? 2.0 : 1.0;
        const auto t = static_cast<std::size_t>(detail::thread_index());
        detail::legendre_sums(m, lmax, hemisphere, p.x, p.diagonals[static_cast<std::size_t>(i)], of_m, slot_of, factor,
                              thread_terms[t]);
    }

    // 4. One exact sum per (channel, l) over threads and ranks.
    std::vector<ExactSum>& power = p.power;
    power.resize(static_cast<std::size_t>(channels * lmax));
    for (ExactSum& sum : power) {
        sum.clear();
    }
    ExponentRange range;
    for (std::size_t t = 0; t < static_cast<std::size_t>(threads); ++t) {
        PendingTerms& terms = thread_terms[t];
        terms.flush_all();
        range.add(terms.range());
        for (std::int64_t c = 0; c < channels; ++c) {
            const std::int64_t slot = p.slot_of_channel[static_cast<std::size_t>(c)];
            if (slot < 0) {
                continue;
            }
            for (std::int64_t l = 0; l < lmax; ++l) {
                power[static_cast<std::size_t>(c * lmax + l)].add(
                    terms.power()[static_cast<std::size_t>(slot * lmax + l)]);
            }
        }
    }
    // Every rank holds every sum (zero where it added nothing); each is rounded once.
    allreduce_exact(spatial, power, window_for_range(allreduce_range(spatial, range), mmax));
    std::vector<double> result(power.size());
    for (std::size_t i = 0; i < power.size(); ++i) {
        result[i] = power[i].to_double();
    }
    return result;
}

template <class T>
std::vector<double> spherical_power_spectrum(const ShardedGrid& grid, FieldShard<T> field, const SpectrumSpec& spec) {
    SpectrumPlan plan(grid, field.channels, spec);
    return plan(field);
}

template <class T>
std::vector<double> zonal_power_spectrum(const ShardedGrid& grid, FieldShard<T> field, ZonalWeighting weighting,
                                         std::span<const double> lat_deg) {
    const Communicator& lon = grid.mesh().lon();
    const GridShape shape = grid.grid();
    const Box& box = grid.box();
    std::string error = detail::shard_error(field, box, "data");
    if (error.empty() && weighting != ZonalWeighting::none &&
        static_cast<std::int64_t>(lat_deg.size()) != box.lat.size()) {
        error = "lat has " + std::to_string(lat_deg.size()) + " values but this rank's box has " +
                std::to_string(box.lat.size()) + " rows";
    }
    detail::agree_or_throw(lon, error,
                           {field.channels, static_cast<std::int64_t>(sizeof(T)), static_cast<std::int64_t>(weighting)},
                           "zonal_power_spectrum channels, element size and weighting");
    const std::int64_t channels = field.channels;
    const std::int64_t bins = shape.nlon / 2 + 1;
    std::vector<Box> boxes;
    for (int j = 0; j < lon.size(); ++j) {
        boxes.push_back(grid.decomposition().box({0, grid.mesh().coords().lat, j}));
    }
    const std::vector<int> owner = lon_group_row_owners(box.lat, channels, shape.nlat, lon.size());
    const OwnedRows<T> rows = rows_to_owners(lon, boxes, shape, field.values, channels, owner);

    const auto ubins = static_cast<std::size_t>(bins);
    std::vector<double> mine(rows.keys.size() * ubins);
    {
        RowFft fft(shape.nlon);
        const double n = static_cast<double>(shape.nlon);
        for (std::size_t s = 0; s < rows.keys.size(); ++s) {
            const std::int64_t k = rows.keys[s] % shape.nlat;
            double w = 1.0;
            if (weighting != ZonalWeighting::none) {
                w = std::cos(lat_deg[static_cast<std::size_t>(k - box.lat.begin)] * pi / 180.0);
                if (weighting == ZonalWeighting::circumference) {
                    w = 2.0 * pi * 6367500.0 * w;
                }
            }
            const auto spectrum = detail::transform(fft, rows, s);
            for (std::size_t m = 0; m < ubins; ++m) {
                const std::complex<double> v = spectrum[m] / n;
                mine[s * ubins + m] = w * (m == 0 ? 1.0 : 2.0) * std::norm(v);
            }
        }
    }
    // Every lon rank gets the block's row spectra, in the owners' (c, k) order.
    const auto ranks = static_cast<std::size_t>(lon.size());
    std::vector<int> counts(ranks, 0);
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t k = box.lat.begin; k < box.lat.end; ++k) {
            counts[static_cast<std::size_t>(owner[static_cast<std::size_t>(c * shape.nlat + k)])] +=
                as_int_count(bins, "zonal power spectrum");
        }
    }
    const std::vector<double> gathered = allgatherv<double>(lon, mine, counts);
    std::vector<std::size_t> next(ranks, 0);  // where each rank's rows start in `gathered`
    for (std::size_t r = 1; r < ranks; ++r) {
        next[r] = next[r - 1] + static_cast<std::size_t>(counts[r - 1]);
    }
    std::vector<double> result(gathered.size());
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t k = box.lat.begin; k < box.lat.end; ++k) {
            const auto r = static_cast<std::size_t>(owner[static_cast<std::size_t>(c * shape.nlat + k)]);
            const auto out = static_cast<std::size_t>((c * box.lat.size() + (k - box.lat.begin)) * bins);
            std::copy_n(gathered.data() + next[r], ubins, result.data() + out);
            next[r] += ubins;
        }
    }
    return result;
}

template std::vector<double> SpectrumPlan::operator()<float>(FieldShard<float>);
template std::vector<double> SpectrumPlan::operator()<double>(FieldShard<double>);
template std::vector<double> spherical_power_spectrum<float>(const ShardedGrid&, FieldShard<float>,
                                                             const SpectrumSpec&);
template std::vector<double> spherical_power_spectrum<double>(const ShardedGrid&, FieldShard<double>,
                                                              const SpectrumSpec&);
template std::vector<double> zonal_power_spectrum<float>(const ShardedGrid&, FieldShard<float>, ZonalWeighting,
                                                         std::span<const double>);
template std::vector<double> zonal_power_spectrum<double>(const ShardedGrid&, FieldShard<double>, ZonalWeighting,
                                                          std::span<const double>);

}  // namespace gridshard
