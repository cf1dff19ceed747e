// Power spectra of sharded fields (include/gridshard/metrics/spectrum.hpp, docs/spectrum.md).
//
// Both spectra start by handing whole rows to owners (one MPI_Alltoallv of the input's own values), so each
// row's FFT runs on one rank. The spherical spectrum then hands each (channel, m) column of Fourier
// coefficients to an owner (a second MPI_Alltoallv, complex doubles), which folds it about the equator and
// forms the Legendre sums over one hemisphere's rows in a fixed order (spectrum_kernels.hpp), adding
// f_m |c_lm|^2 into an exact sum per (channel, l). The exact sums of every rank are merged by one all-reduce
// of their limbs, so the order of m over ranks and threads does not matter. Field-owner mode is the same path
// with every row and column of a channel on one rank (the second all-to-all then moves nothing between
// ranks). A rank never sends to itself: its own rows are read in its shard (or copied, when its box holds
// part of them) and its own columns filled straight from its transforms.

#include "gridshard/metrics/spectrum.hpp"

#include <fftw3.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <limits>
#include <memory>
#include <mutex>
#include <numbers>
#include <string>

#include "gridshard/comm/agreement.hpp"
#include "gridshard/comm/mpi_check.hpp"
#include "gridshard/core/error.hpp"
#include "gridshard/core/memory.hpp"
#include "gridshard/numerics/exact_sum.hpp"
#include "row_kernels.hpp"
#include "spectrum_kernels.hpp"
#include "threads.hpp"

namespace gridshard {

namespace {

constexpr double pi = std::numbers::pi;

// ---- names ------------------------------------------------------------------------------------------------

template <class Enum, std::size_t N>
Enum parse_name(std::string_view text, const std::array<std::pair<std::string_view, Enum>, N>& names,
                const char* what) {
    std::string known;
    for (const auto& [name, value] : names) {
        if (text == name) {
            return value;
        }
        known += (known.empty() ? "" : ", ") + std::string(name);
    }
    throw ArgumentError(std::string(what) + "=\"" + std::string(text) + "\" is not one of " + known);
}

constexpr std::array<std::pair<std::string_view, SphereGrid>, 3> grid_names{{
    {"legendre-gauss", SphereGrid::legendre_gauss},
    {"equiangular", SphereGrid::equiangular},
    {"lobatto", SphereGrid::lobatto},
}};
constexpr std::array<std::pair<std::string_view, SpectrumConvention>, 2> convention_names{{
    {"ace", SpectrumConvention::ace},
    {"full", SpectrumConvention::full},
}};
constexpr std::array<std::pair<std::string_view, SpectrumMode>, 3> mode_names{{
    {"automatic", SpectrumMode::automatic},
    {"field-owners", SpectrumMode::field_owners},
    {"transposes", SpectrumMode::transposes},
}};
constexpr std::array<std::pair<std::string_view, SpectrumTruncation>, 2> truncation_names{{
    {"torch-harmonics-0.8", SpectrumTruncation::torch_harmonics_0_8},
    {"triangular", SpectrumTruncation::triangular},
}};
constexpr std::array<std::pair<std::string_view, ZonalWeighting>, 3> weighting_names{{
    {"none", ZonalWeighting::none},
    {"cos-lat", ZonalWeighting::cos_lat},
    {"circumference", ZonalWeighting::circumference},
}};

// ---- quadrature -------------------------------------------------------------------------------------------

// P_n(x) and P_{n-1}(x) by the three-term recurrence.
std::pair<double, double> legendre_pair(std::int64_t n, double x) {
    double p_previous = 1.0;
    double p = x;
    if (n == 0) {
        return {1.0, 0.0};
    }
    for (std::int64_t k = 2; k <= n; ++k) {
        const auto kd = static_cast<double>(k);
        const double next = ((2.0 * kd - 1.0) * x * p - (kd - 1.0) * p_previous) / kd;
        p_previous = p;
        p = next;
    }
    return {p, p_previous};
}

SphereQuadrature gauss_legendre(std::int64_t n) {
    SphereQuadrature q{std::vector<double>(static_cast<std::size_t>(n)),
                       std::vector<double>(static_cast<std::size_t>(n))};
    const auto nd = static_cast<double>(n);
    for (std::int64_t i = 0; i < (n + 1) / 2; ++i) {
        // Newton from Tricomi's estimate of the i-th largest root.
        double x = std::cos(pi * (static_cast<double>(i) + 0.75) / (nd + 0.5));
        double derivative = 1.0;
        for (int iteration = 0; iteration < 100; ++iteration) {
            const auto [p, p_previous] = legendre_pair(n, x);
            derivative = nd * (x * p - p_previous) / (x * x - 1.0);
            const double step = p / derivative;
            x -= step;
            if (std::abs(step) < 1e-16) {
                break;
            }
        }
        const auto [p, p_previous] = legendre_pair(n, x);
        derivative = nd * (x * p - p_previous) / (x * x - 1.0);
        const double weight = 2.0 / ((1.0 - x * x) * derivative * derivative);
        const auto hi = static_cast<std::size_t>(n - 1 - i);
        const auto lo = static_cast<std::size_t>(i);
        q.nodes[hi] = x;
        q.nodes[lo] = -x;
        q.weights[hi] = weight;
        q.weights[lo] = weight;
    }
    if (n % 2 == 1) {
        q.nodes[static_cast<std::size_t>(n / 2)] = 0.0;
    }
    return q;
}

SphereQuadrature gauss_lobatto(std::int64_t n) {
    if (n < 2) {
        throw ArgumentError("nlat=" + std::to_string(n) + ": the lobatto grid needs at least 2 rows");
    }
    SphereQuadrature q{std::vector<double>(static_cast<std::size_t>(n)),
                       std::vector<double>(static_cast<std::size_t>(n))};
    const std::int64_t degree = n - 1;
    const auto dd = static_cast<double>(degree);
    for (std::int64_t i = 0; i < n; ++i) {
        // Newton on (1 - x^2) P'_{n-1}(x) from the Chebyshev-Gauss-Lobatto nodes.
        double x = -std::cos(pi * static_cast<double>(i) / dd);
        if (i > 0 && i < degree) {
            for (int iteration = 0; iteration < 100; ++iteration) {
                const auto [p, p_previous] = legendre_pair(degree, x);
                // q(x) = P_{d-1} - x P_d is proportional to (1 - x^2) P'_d; q'(x) = -(d + 1) P_d.
                const double value = p_previous - x * p;
                const double slope = -(dd + 1.0) * p;
                const double step = value / slope;
                x -= step;
                if (std::abs(step) < 1e-16) {
                    break;
                }
            }
        }
        const double p = legendre_pair(degree, x).first;
        q.nodes[static_cast<std::size_t>(i)] = x;
        q.weights[static_cast<std::size_t>(i)] = 2.0 / (dd * (dd + 1.0) * p * p);
    }
    return q;
}

SphereQuadrature clenshaw_curtis(std::int64_t n) {
    if (n < 2) {
        throw ArgumentError("nlat=" + std::to_string(n) + ": the equiangular grid needs at least 2 rows");
    }
    SphereQuadrature q{std::vector<double>(static_cast<std::size_t>(n)),
                       std::vector<double>(static_cast<std::size_t>(n))};
    const std::int64_t intervals = n - 1;
    const auto nd = static_cast<double>(intervals);
    for (std::int64_t j = 0; j <= intervals; ++j) {
        const double theta = pi * static_cast<double>(intervals - j) / nd;  // ascending nodes: theta from pi to 0
        q.nodes[static_cast<std::size_t>(j)] = std::cos(theta);
        double v = 1.0;
        const std::int64_t half = intervals / 2;
        for (std::int64_t k = 1; k <= half; ++k) {
            const auto kd = static_cast<double>(k);
            const double factor = (intervals % 2 == 0 && k == half) ? 1.0 : 2.0;  // Trefethen's clencurt
            v -= factor * std::cos(2.0 * kd * theta) / (4.0 * kd * kd - 1.0);
        }
        double weight = 2.0 * v / nd;
        if (j == 0 || j == intervals) {
            weight = intervals % 2 == 0 ? 1.0 / (nd * nd - 1.0) : 1.0 / (nd * nd);
        }
        q.weights[static_cast<std::size_t>(j)] = weight;
    }
    return q;
}

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

// ---- rows to owners ---------------------------------------------------------------------------------------

int as_int_count(std::int64_t count, const char* what) {
    if (count > std::numeric_limits<int>::max()) {
        throw ArgumentError(std::string(what) + ": " + std::to_string(count) +
                            " values to move to one rank exceed MPI's int counts");
    }
    return static_cast<int>(count);
}

// Whole rows `(channel, global row)` at their owners: `owner[c * nlat + k]` is a rank of `comm`, `boxes[r]` the
// box of rank r of `comm`. Returns the rows this rank owns, in (c, k) order, and their keys: a row this rank's
// shard holds whole is read where it is, the others are assembled, as doubles (converted exactly). Collective
// over `comm` (one MPI_Alltoallv of T).
template <class T>
struct OwnedRows {
    std::vector<std::int64_t> keys;      // c * nlat + k
    std::vector<const T*> in_shard;      // per row: the row in this rank's shard, or null
    std::vector<std::size_t> assembled;  // per row not in the shard: its index in `values`
    std::vector<double> values;          // the assembled rows, nlon values each
};

template <class T>
OwnedRows<T> rows_to_owners(const Communicator& comm, const std::vector<Box>& boxes, GridShape grid,
                            FieldShard<T> field, const std::vector<int>& owner) {
    const auto ranks = static_cast<std::size_t>(comm.size());
    const int me = comm.rank();
    const Box& mine = boxes[static_cast<std::size_t>(me)];
    const std::int64_t channels = field.channels;
    std::vector<int> send_counts(ranks, 0);
    std::vector<int> receive_counts(ranks, 0);
    OwnedRows<T> owned;
    for (std::int64_t key = 0; key < channels * grid.nlat; ++key) {
        if (owner[static_cast<std::size_t>(key)] == me) {
            owned.keys.push_back(key);
        }
    }
    owned.in_shard.assign(owned.keys.size(), nullptr);
    owned.assembled.assign(owned.keys.size(), 0);
    std::vector<std::int64_t> slot(static_cast<std::size_t>(channels * grid.nlat), -1);
    for (std::size_t s = 0; s < owned.keys.size(); ++s) {
        slot[static_cast<std::size_t>(owned.keys[s])] = static_cast<std::int64_t>(s);
    }
    // The packing order is (destination, c, k) on the sender and (source, c, k) on the receiver.
    std::vector<std::vector<std::int64_t>> to(ranks);
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t k = mine.lat.begin; k < mine.lat.end; ++k) {
            const int r = owner[static_cast<std::size_t>(c * grid.nlat + k)];
            to[static_cast<std::size_t>(r)].push_back(c * mine.lat.size() + (k - mine.lat.begin));
        }
    }
    // A rank's own rows are read in its shard when it holds them whole, or copied, not sent to itself.
    const auto self = static_cast<std::size_t>(me);
    const auto cols = static_cast<std::size_t>(mine.lon.size());
    const bool whole_rows = mine.lon.begin == 0 && mine.lon.end == grid.nlon;
    const auto key_of_local_row = [&](std::int64_t local_row) {
        return (local_row / mine.lat.size()) * grid.nlat + mine.lat.begin + local_row % mine.lat.size();
    };
    for (const std::int64_t local_row : to[self]) {
        if (whole_rows) {
            owned.in_shard[static_cast<std::size_t>(slot[static_cast<std::size_t>(key_of_local_row(local_row))])] =
                field.values.data() + static_cast<std::size_t>(local_row) * cols;
        }
    }
    std::size_t assembled_rows = 0;
    for (std::size_t s = 0; s < owned.keys.size(); ++s) {
        if (owned.in_shard[s] == nullptr) {
            owned.assembled[s] = assembled_rows++;
        }
    }
    std::int64_t send_total = 0;
    std::int64_t receive_total = 0;
    for (std::size_t r = 0; r < ranks; ++r) {
        if (r == self) {
            continue;
        }
        send_counts[r] = as_int_count(static_cast<std::int64_t>(to[r].size()) * mine.lon.size(), "power spectrum");
        send_total += send_counts[r];
        const Box& theirs = boxes[r];
        std::int64_t rows = 0;
        for (const std::int64_t key : owned.keys) {
            const std::int64_t k = key % grid.nlat;
            rows += (k >= theirs.lat.begin && k < theirs.lat.end) ? 1 : 0;
        }
        receive_counts[r] = as_int_count(rows * theirs.lon.size(), "power spectrum");
        receive_total += receive_counts[r];
    }
    std::vector<T> send(static_cast<std::size_t>(send_total));
    std::vector<int> send_displacements(ranks, 0);
    std::vector<int> receive_displacements(ranks, 0);
    std::size_t at = 0;
    for (std::size_t r = 0; r < ranks; ++r) {
        send_displacements[r] = static_cast<int>(at);
        if (r == self) {
            continue;
        }
        for (const std::int64_t local_row : to[r]) {
            std::copy_n(field.values.data() + static_cast<std::size_t>(local_row) * cols, cols, send.data() + at);
            at += cols;
        }
    }
    for (std::size_t r = 1; r < ranks; ++r) {
        receive_displacements[r] = receive_displacements[r - 1] + receive_counts[r - 1];
    }
    std::vector<T> received(static_cast<std::size_t>(receive_total));
    GRIDSHARD_MPI(MPI_Alltoallv, send.data(), send_counts.data(), send_displacements.data(), detail::mpi_datatype<T>(),
                  received.data(), receive_counts.data(), receive_displacements.data(), detail::mpi_datatype<T>(),
                  comm.native());
    owned.values.assign(assembled_rows * static_cast<std::size_t>(grid.nlon), 0.0);
    at = 0;
    for (std::size_t r = 0; r < ranks; ++r) {
        const Box& theirs = boxes[r];
        if (r == self) {
            continue;
        }
        for (std::size_t s = 0; s < owned.keys.size(); ++s) {
            const std::int64_t k = owned.keys[s] % grid.nlat;
            if (k < theirs.lat.begin || k >= theirs.lat.end) {
                continue;
            }
            double* row = owned.values.data() + owned.assembled[s] * static_cast<std::size_t>(grid.nlon);
            for (std::int64_t j = theirs.lon.begin; j < theirs.lon.end; ++j) {
                row[j] = static_cast<double>(received[at++]);
            }
        }
    }
    for (const std::int64_t local_row : to[self]) {
        if (whole_rows) {
            break;
        }
        const auto s = static_cast<std::size_t>(slot[static_cast<std::size_t>(key_of_local_row(local_row))]);
        const T* from = field.values.data() + static_cast<std::size_t>(local_row) * cols;
        double* row = owned.values.data() + owned.assembled[s] * static_cast<std::size_t>(grid.nlon) + mine.lon.begin;
        for (std::size_t j = 0; j < cols; ++j) {
            row[j] = static_cast<double>(from[j]);
        }
    }
    return owned;
}

// ---- row FFTs ---------------------------------------------------------------------------------------------

// One deterministic real-to-complex plan for one row length: FFTW_ESTIMATE (no timing) and FFTW_NO_SIMD (the
// same codelets, so the same bits, on every CPU), on buffers of its own. FFTW's planner is not thread-safe;
// plans are made and destroyed under one lock, and executed on their own buffers only.
class RowFft {
  public:
    explicit RowFft(std::int64_t n) : n_(n) {
        const std::lock_guard lock(planner_mutex());
        in_ = fftw_alloc_real(static_cast<std::size_t>(n));
        out_ = fftw_alloc_complex(static_cast<std::size_t>(n / 2 + 1));
        plan_ = fftw_plan_dft_r2c_1d(static_cast<int>(n), in_, out_, FFTW_ESTIMATE | FFTW_NO_SIMD | FFTW_DESTROY_INPUT);
        if (plan_ == nullptr || in_ == nullptr || out_ == nullptr) {
            release();
            throw std::runtime_error("power spectrum: FFTW could not plan a transform of length " + std::to_string(n));
        }
    }
    RowFft(const RowFft&) = delete;
    RowFft& operator=(const RowFft&) = delete;
    ~RowFft() {
        const std::lock_guard lock(planner_mutex());
        release();
    }
    [[nodiscard]] std::int64_t size() const noexcept { return n_; }
    /// The transform of `row` (n values, converted exactly to double): bins 0..n/2, unnormalised.
    template <class V>
    std::span<const std::complex<double>> operator()(const V* row) {
        for (std::int64_t j = 0; j < n_; ++j) {
            in_[j] = static_cast<double>(row[j]);
        }
        fftw_execute(plan_);
        return {reinterpret_cast<const std::complex<double>*>(out_), static_cast<std::size_t>(n_ / 2 + 1)};
    }

  private:
    static std::mutex& planner_mutex() {
        static std::mutex mutex;
        return mutex;
    }
    void release() noexcept {
        if (plan_ != nullptr) {
            fftw_destroy_plan(plan_);
        }
        fftw_free(in_);
        fftw_free(out_);
    }
    std::int64_t n_;
    double* in_ = nullptr;
    fftw_complex* out_ = nullptr;
    fftw_plan plan_ = nullptr;
};

// The transform of owned row `s`.
template <class T>
std::span<const std::complex<double>> transform(RowFft& fft, const OwnedRows<T>& rows, std::size_t s) {
    if (rows.in_shard[s] != nullptr) {
        return fft(rows.in_shard[s]);
    }
    return fft(rows.values.data() + rows.assembled[s] * static_cast<std::size_t>(fft.size()));
}

// ---- the Legendre sums ------------------------------------------------------------------------------------

// The lowest and highest binary exponents of the finite non-zero values added to a rank's sums.
struct ExponentRange {
    int lowest = std::numeric_limits<int>::max();
    int highest = -std::numeric_limits<int>::max();  // negatable: the merge reduces -highest with MPI_MIN
    void add(double value) noexcept {
        if (value != 0.0 && std::isfinite(value)) {
            const int e = std::ilogb(value);
            lowest = std::min(lowest, e);
            highest = std::max(highest, e);
        }
    }
    void add(const ExponentRange& other) noexcept {
        lowest = std::min(lowest, other.lowest);
        highest = std::max(highest, other.highest);
    }
};

// The rows of one hemisphere. Legendre-Gauss nodes are antisymmetric about the equator (x_{n-1-k} = -x_k,
// exactly: gauss_legendre sets both from one root), and Pbar_lm(-x) = (-1)^(l+m) Pbar_lm(x), so
// `c_lm = sum_{k < half} Pbar_lm(x_k) (l + m even ? E_k : O_k)` with `E_k = Y_k + Y_{n-1-k}`,
// `O_k = Y_k - Y_{n-1-k}` (Y = q X) for the northern rows k < n / 2 and `E = O = Y` at the equator row of an
// odd n: half the rows, and one recurrence on them. The southern rows are thereby taken at exactly -x of their
// mirror, where torch-harmonics evaluates cos(arccos(node)), which may differ from it by an ulp (and, for the
// equiangular and lobatto grids, whose nodes are each rounded on their own, by an ulp or so of the node).
struct Hemisphere {
    std::size_t nlat = 0;
    std::size_t half = 0;    // rows k < half: the northern ones and the equator row of an odd nlat
    std::size_t padded = 0;  // half rounded up to a multiple of 8, the rows beyond `half` zero
    explicit Hemisphere(std::int64_t rows)
        : nlat(static_cast<std::size_t>(rows)), half((nlat + 1) / 2), padded((half + 7) / 8 * 8) {}
};

// One (channel, m) column of weighted Fourier coefficients Y_k = q_k X_m(theta_k), folded:
// `values` holds E re, E im, O re, O im, `padded` values each.
struct Column {
    std::int64_t channel = 0;
    std::int64_t m = 0;
    double* values = nullptr;  // 4 x padded, in a buffer of all the columns

    // Row k's value, before the fold: northern rows (and the equator) in the E parts, southern ones at their
    // mirror's index in the O parts.
    void place(const Hemisphere& rows, std::size_t k, std::complex<double> y) noexcept {
        const bool south = k >= rows.half;
        const std::size_t at = (south ? 2 * rows.padded : 0) + (south ? rows.nlat - 1 - k : k);
        values[at] = y.real();
        values[at + rows.padded] = y.imag();
    }
    // Zeros the rows beyond `half` of each part (the columns' buffer is not initialised).
    void zero_padding(const Hemisphere& rows) noexcept {
        for (std::size_t part = 0; part < 4; ++part) {
            std::fill(values + part * rows.padded + rows.half, values + (part + 1) * rows.padded, 0.0);
        }
    }
    // Once every row is placed: E = north + south, O = north - south (the equator row: E = O = its value).
    void fold(const Hemisphere& rows) noexcept {
        for (std::size_t part = 0; part < 2; ++part) {
            double* even = values + part * rows.padded;
            double* odd = values + (2 + part) * rows.padded;
            for (std::size_t k = 0; k < rows.nlat / 2; ++k) {
                const double north = even[k];
                const double south = odd[k];
                even[k] = north + south;
                odd[k] = north - south;
            }
            if (rows.nlat % 2 == 1) {
                odd[rows.half - 1] = even[rows.half - 1];
            }
        }
    }
    [[nodiscard]] const double* even(std::size_t part, const Hemisphere& rows) const noexcept {
        return values + part * rows.padded;
    }
    [[nodiscard]] const double* odd(std::size_t part, const Hemisphere& rows) const noexcept {
        return values + (2 + part) * rows.padded;
    }
};

// The terms f_m |c_lm|^2 of one thread, per (channel slot, l): held until `batch` of one sum are there, then
// added to its exact sum as one block (add_exact_sum), the same exact sum as adding them one by one (exact
// sums do not depend on grouping or order) for a fraction of the cost. `range` takes their exponents.
class PendingTerms {
  public:
    static constexpr std::size_t batch = 64;
    explicit PendingTerms(std::size_t sums) : values_(sums * batch), counts_(sums, 0), power_(sums) {}
    void add(std::size_t sum, double term) noexcept {
        values_[sum * batch + counts_[sum]] = term;
        if (++counts_[sum] == batch) {
            flush(sum);
        }
    }
    /// Adds every held term; then `power()` holds this thread's exact sums.
    void flush_all() noexcept {
        for (std::size_t sum = 0; sum < counts_.size(); ++sum) {
            flush(sum);
        }
    }
    [[nodiscard]] const std::vector<ExactSum>& power() const noexcept { return power_; }
    [[nodiscard]] const ExponentRange& range() const noexcept { return range_; }

  private:
    void flush(std::size_t sum) noexcept {
        const double* terms = values_.data() + sum * batch;
        for (std::size_t i = 0; i < counts_[sum]; ++i) {
            range_.add(terms[i]);
        }
        add_exact_sum(terms, static_cast<std::int64_t>(counts_[sum]), 1.0, power_[sum]);
        counts_[sum] = 0;
    }
    std::vector<double> values_;  // (sums, batch)
    std::vector<std::size_t> counts_;
    std::vector<ExactSum> power_;
    ExponentRange range_;
};

// The Legendre sums of the columns of one m (all channels at once, one recurrence on the northern rows), into
// `terms` at (channel slot) * lmax + l. `diagonal` holds Pbar_mm(x_k) and `x` the nodes x_k for k < rows.padded
// (zero beyond rows.half); torch-harmonics' recurrence (sht.py, _precompute_legpoly), in fp64. Each c_lm's sums
// over k, of its real and its imaginary part, are fixed_order_dots' (spectrum_kernels.hpp), so a channel's bits
// depend neither on the other channels summed with it nor on the instruction set.
void legendre_sums(std::int64_t m, std::int64_t lmax, const Hemisphere& rows, const std::vector<double>& x,
                   const std::vector<double>& diagonal, std::span<const Column* const> columns,
                   std::span<const std::int64_t> slots, double factor, PendingTerms& terms) {
    const std::size_t n = rows.padded;
    // Pbar_lm for four degrees in turn, in the vector of (l - m) mod 4; zero for l = m - 1.
    std::array<std::vector<double>, 4> p;
    for (std::vector<double>& values : p) {
        values.assign(n, 0.0);
    }
    // The real and imaginary parts of every column, E (l + m even) and O (l + m odd).
    std::array<std::vector<const double*>, 2> parts;
    for (const Column* column : columns) {
        for (std::size_t part = 0; part < 2; ++part) {
            parts[0].push_back(column->even(part, rows));
            parts[1].push_back(column->odd(part, rows));
        }
    }
    const auto p_of = [&p, m](std::int64_t l) -> std::vector<double>& {
        return p[static_cast<std::size_t>((l - m + 4) % 4)];
    };
    const auto add_terms = [&](std::int64_t l, const std::vector<double>& sums) {
        for (std::size_t c = 0; c < columns.size(); ++c) {
            const double re = sums[2 * c];
            const double im = sums[2 * c + 1];
            terms.add(static_cast<std::size_t>(slots[c] * lmax + l), factor * (re * re + im * im));
        }
    };
    std::vector<double> sums(2 * columns.size());
    std::vector<double> sums_2(2 * columns.size());
    const auto md = static_cast<double>(m);
    // Degrees four at a time: l and l + 2 share a parity, so their sums share one pass over the columns.
    for (std::int64_t first = m; first < lmax; first += 4) {
        const std::int64_t last = std::min(first + 4, lmax);
        for (std::int64_t l = first; l < last; ++l) {
            const auto ld = static_cast<double>(l);
            if (l == m) {
                std::copy(diagonal.begin(), diagonal.end(), p_of(l).begin());
            } else if (l == m + 1) {
                // a x p - 0 p_previous: the value of torch-harmonics' a * x * p.
                detail::legendre_step(x.data(), std::sqrt(2.0 * ld + 1.0), 0.0, p_of(l - 1).data(), p_of(l - 2).data(),
                                      p_of(l).data(), n);
            } else {
                const double a = std::sqrt((2.0 * ld - 1.0) / (ld - md) * (2.0 * ld + 1.0) / (ld + md));
                const double b = std::sqrt((ld + md - 1.0) / (ld - md) * (2.0 * ld + 1.0) / (2.0 * ld - 3.0) *
                                           (ld - md - 1.0) / (ld + md));
                detail::legendre_step(x.data(), a, b, p_of(l - 1).data(), p_of(l - 2).data(), p_of(l).data(), n);
            }
        }
        for (std::int64_t l = first; l < std::min(first + 2, last); ++l) {
            const std::vector<const double*>& of_parity = parts[static_cast<std::size_t>((l + m) % 2)];
            if (l + 2 < last) {
                detail::fixed_order_dot_pairs(p_of(l).data(), p_of(l + 2).data(), of_parity.data(), of_parity.size(), n,
                                              sums.data(), sums_2.data());
                add_terms(l, sums);
                add_terms(l + 2, sums_2);
            } else {
                detail::fixed_order_dots(p_of(l).data(), of_parity.data(), of_parity.size(), n, sums.data());
                add_terms(l, sums);
            }
        }
    }
}

// The limb window that holds every sum of up to `terms` values within `range`, with a margin.
LimbWindow window_for_range(const ExponentRange& range, std::int64_t terms) {
    if (range.highest < range.lowest) {
        return {0, 1};
    }
    const int headroom =
        static_cast<int>(std::ceil(std::log2(static_cast<double>(std::max<std::int64_t>(terms, 2))))) + 2;
    const int lowest_bit = std::max(range.lowest - 53, -1074);
    const int highest_bit = range.highest + headroom;
    const int first = std::max(0, (lowest_bit - ExactSum::lowest_exponent) / ExactSum::limb_bits - 1);
    const int last =
        std::min(ExactSum::limb_count, (highest_bit - ExactSum::lowest_exponent) / ExactSum::limb_bits + 2);
    return {first, last - first};
}

// Merges every rank's exact sums of `power` over `comm` (every rank holds all of them; zero where it added
// nothing) and rounds each once. Collective over `comm`: one small MPI_Allreduce agreeing on a limb window,
// then one MPI_Allreduce of the windowed limbs (the full limbs, in a second one, should any sum not fit).
std::vector<double> merge_exact(const Communicator& comm, const std::vector<ExactSum>& power, ExponentRange range,
                                std::int64_t terms) {
    std::array<int, 2> bounds{range.lowest, -range.highest};
    GRIDSHARD_MPI(MPI_Allreduce, MPI_IN_PLACE, bounds.data(), 2, MPI_INT, MPI_MIN, comm.native());
    range.lowest = bounds[0];
    range.highest = -bounds[1];
    const LimbWindow window = window_for_range(range, terms);
    const auto width = static_cast<std::size_t>(window.count + 3);
    std::vector<std::int64_t> packed(power.size() * width + 1, 0);
    for (std::size_t i = 0; i < power.size(); ++i) {
        if (!power[i].pack_window(std::span(packed).subspan(i * width, width), window.first)) {
            packed.back() = 1;
        }
    }
    allreduce_sum_in_place(comm, packed);
    std::vector<double> result(power.size());
    if (packed.back() == 0) {
        for (std::size_t i = 0; i < power.size(); ++i) {
            result[i] = ExactSum::unpack_window(std::span(packed).subspan(i * width, width), window.first).to_double();
        }
        return result;
    }
    std::vector<std::int64_t> full(power.size() * ExactSum::wire_size, 0);
    for (std::size_t i = 0; i < power.size(); ++i) {
        power[i].pack(std::span(full).subspan(i * ExactSum::wire_size, ExactSum::wire_size));
    }
    allreduce_sum_in_place(comm, full);
    for (std::size_t i = 0; i < power.size(); ++i) {
        result[i] = ExactSum::unpack(std::span(full).subspan(i * ExactSum::wire_size, ExactSum::wire_size)).to_double();
    }
    return result;
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

SphereGrid parse_sphere_grid(std::string_view text) {
    return parse_name(text, grid_names, "grid");
}
SpectrumConvention parse_spectrum_convention(std::string_view text) {
    return parse_name(text, convention_names, "convention");
}
SpectrumMode parse_spectrum_mode(std::string_view text) {
    return parse_name(text, mode_names, "mode");
}
SpectrumTruncation parse_spectrum_truncation(std::string_view text) {
    return parse_name(text, truncation_names, "truncation");
}
ZonalWeighting parse_zonal_weighting(std::string_view text) {
    return parse_name(text, weighting_names, "weighting");
}
std::string_view to_string(SphereGrid grid) noexcept {
    for (const auto& [name, value] : grid_names) {
        if (value == grid) {
            return name;
        }
    }
    return "unknown";
}
std::string_view to_string(SpectrumConvention convention) noexcept {
    return convention == SpectrumConvention::ace ? "ace" : "full";
}
std::string_view to_string(SpectrumTruncation truncation) noexcept {
    return truncation == SpectrumTruncation::triangular ? "triangular" : "torch-harmonics-0.8";
}

double latitude_offset_from_nodes_deg(SphereGrid grid, std::span<const double> lat_deg) {
    const auto n = static_cast<std::int64_t>(lat_deg.size());
    if (n < 1 || (grid != SphereGrid::legendre_gauss && n < 2)) {
        return 0.0;
    }
    const SphereQuadrature q = sphere_quadrature(grid, n);
    // The nodes ascend in cos(colatitude) = sin(latitude): south first. Compare in either order.
    double ascending = 0.0;
    double descending = 0.0;
    for (std::int64_t k = 0; k < n; ++k) {
        const double node_deg = std::asin(std::clamp(q.nodes[static_cast<std::size_t>(k)], -1.0, 1.0)) * 180.0 / pi;
        ascending = std::max(ascending, std::abs(lat_deg[static_cast<std::size_t>(k)] - node_deg));
        descending = std::max(descending, std::abs(lat_deg[static_cast<std::size_t>(n - 1 - k)] - node_deg));
    }
    return std::min(ascending, descending);
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

SphereQuadrature sphere_quadrature(SphereGrid grid, std::int64_t nlat) {
    if (nlat < 1) {
        throw ArgumentError("nlat=" + std::to_string(nlat) + " must be positive");
    }
    switch (grid) {
        case SphereGrid::legendre_gauss:
            return gauss_legendre(nlat);
        case SphereGrid::equiangular:
            return clenshaw_curtis(nlat);
        case SphereGrid::lobatto:
            return gauss_lobatto(nlat);
    }
    throw ArgumentError("grid: unknown value");
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

template <class T>
std::vector<double> spherical_power_spectrum(const ShardedGrid& grid, FieldShard<T> field, const SpectrumSpec& spec) {
    const Communicator& spatial = grid.mesh().spatial();
    const GridShape shape = grid.grid();
    std::string error = detail::shard_error(field, grid.box(), "data");
    SpectrumSize size{};
    try {
        size = spectrum_size(spec, shape);
        if (spec.grid != SphereGrid::legendre_gauss && shape.nlat < 2) {
            throw ArgumentError("nlat=" + std::to_string(shape.nlat) + ": the " + std::string(to_string(spec.grid)) +
                                " grid needs at least 2 rows");
        }
    } catch (const ArgumentError& e) {
        error = e.what();
    }
    detail::agree_or_throw(spatial, error,
                           {field.channels, static_cast<std::int64_t>(sizeof(T)), size.lmax, size.mmax,
                            static_cast<std::int64_t>(spec.grid), static_cast<std::int64_t>(spec.convention),
                            static_cast<std::int64_t>(spec.mode)},
                           "spherical_power_spectrum channels, element size, lmax, mmax, grid, convention, mode");
    const std::int64_t channels = field.channels;
    const std::int64_t lmax = size.lmax;
    const std::int64_t mmax = std::min(size.mmax, lmax);  // orders m >= L have no degree l >= m below L
    const int ranks = spatial.size();
    const int me = spatial.rank();
    const bool owners =
        spec.mode == SpectrumMode::field_owners || (spec.mode == SpectrumMode::automatic && channels >= ranks);

    // Who owns what: rows (c, k) and columns (c, m), as spatial ranks.
    const std::vector<Box> boxes = spatial_boxes(grid);
    std::vector<int> row_owner(static_cast<std::size_t>(channels * shape.nlat));
    auto column_owner = [&](std::int64_t c, std::int64_t m) {
        return owners ? static_cast<int>(c % ranks) : static_cast<int>((c * mmax + m) % ranks);
    };
    const int lon_ranks = grid.mesh().shape().lon;
    for (int lat_index = 0; lat_index < grid.mesh().shape().lat; ++lat_index) {
        const Range block = grid.decomposition().lat_range(lat_index);
        const std::vector<int> in_block = lon_group_row_owners(block, channels, shape.nlat, lon_ranks);
        for (std::int64_t c = 0; c < channels; ++c) {
            for (std::int64_t k = block.begin; k < block.end; ++k) {
                const auto key = static_cast<std::size_t>(c * shape.nlat + k);
                row_owner[key] = owners ? static_cast<int>(c % ranks) : lat_index * lon_ranks + in_block[key];
            }
        }
    }

    // The columns (c, m) this rank owns, m-major (so `orders` below ascends), in one buffer.
    const Hemisphere hemisphere(shape.nlat);
    std::vector<Column> columns;
    std::vector<std::int64_t> column_of_pair(static_cast<std::size_t>(channels * mmax), -1);
    for (std::int64_t m = 0; m < mmax; ++m) {
        for (std::int64_t c = 0; c < channels; ++c) {
            if (column_owner(c, m) == me) {
                column_of_pair[static_cast<std::size_t>(c * mmax + m)] = static_cast<std::int64_t>(columns.size());
                columns.push_back({c, m, nullptr});
            }
        }
    }
    const std::size_t column_size = 4 * hemisphere.padded;
    const std::unique_ptr<double[]> column_values =
        uninitialised_doubles(columns.size() * column_size, "the power spectrum's Fourier columns");
    for (std::size_t i = 0; i < columns.size(); ++i) {
        columns[i].values = column_values.get() + i * column_size;
        columns[i].zero_padding(hemisphere);
    }
    const SphereQuadrature quadrature = sphere_quadrature(spec.grid, shape.nlat);

    // 1. Whole rows to their owners; FFT each, keep orders below mmax, times 2 pi / nlon. Values of this rank's
    // own columns go straight into them, times the quadrature weight; the others' are kept to be sent.
    OwnedRows<T> rows = rows_to_owners(spatial, boxes, shape, field, row_owner);
    std::vector<std::vector<std::int64_t>> owned_rows_of_channel(static_cast<std::size_t>(channels));
    for (std::size_t s = 0; s < rows.keys.size(); ++s) {
        owned_rows_of_channel[static_cast<std::size_t>(rows.keys[s] / shape.nlat)].push_back(
            static_cast<std::int64_t>(s));
    }
    bool sends = false;  // whether some column of this rank's rows is another rank's
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t m = 0; m < mmax && !owned_rows_of_channel[static_cast<std::size_t>(c)].empty(); ++m) {
            sends = sends || column_owner(c, m) != me;
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
        std::vector<std::unique_ptr<RowFft>> ffts;  // made here: a failed plan throws outside the parallel region
        std::vector<std::vector<std::complex<double>>> bins_of_thread;
        for (int t = 0; t < fft_threads; ++t) {
            ffts.push_back(std::make_unique<RowFft>(shape.nlon));
            bins_of_thread.emplace_back(batch * orders_kept);
        }
        GRIDSHARD_PRAGMA(omp parallel for num_threads(fft_threads) schedule(static))
        for (std::int64_t index_of_batch = 0; index_of_batch < batches; ++index_of_batch) {
            const auto t = static_cast<std::size_t>(detail::thread_index());
            RowFft& fft = *ffts[t];
            std::vector<std::complex<double>>& batch_bins = bins_of_thread[t];
            const std::size_t first = static_cast<std::size_t>(index_of_batch) * batch;
            const std::size_t count = std::min(batch, rows.keys.size() - first);
            for (std::size_t b = 0; b < count; ++b) {
                const auto bins = transform(fft, rows, first + b);
                for (std::size_t m = 0; m < orders_kept; ++m) {
                    batch_bins[b * orders_kept + m] = bins[m] * scale;
                }
                if (sends) {
                    std::copy_n(batch_bins.data() + b * orders_kept, orders_kept,
                                spectra.data() + (first + b) * orders_kept);
                }
            }
            for (std::size_t m = 0; m < orders_kept; ++m) {
                for (std::size_t b = 0; b < count; ++b) {
                    const std::int64_t key = rows.keys[first + b];
                    const std::int64_t index =
                        column_of_pair[static_cast<std::size_t>(key / shape.nlat) * orders_kept + m];
                    if (index >= 0) {
                        const auto k = static_cast<std::size_t>(key % shape.nlat);
                        const std::complex<double> v = batch_bins[b * orders_kept + m];
                        const double q = quadrature.weights[k];
                        columns[static_cast<std::size_t>(index)].place(hemisphere, k, {q * v.real(), q * v.imag()});
                    }
                }
            }
        }
    }
    rows = {};  // only the transforms are needed from here

    // 2. The other columns (c, m) to their owners: pack (destination, c, m, k) and unpack (source, c, m, k).
    const auto uranks = static_cast<std::size_t>(ranks);
    const auto self = static_cast<std::size_t>(me);
    std::vector<int> send_counts(uranks, 0);
    std::vector<int> receive_counts(uranks, 0);
    std::vector<double> send;
    std::vector<int> send_displacements(uranks, 0);
    for (std::size_t r = 0; r < uranks; ++r) {
        send_displacements[r] = as_int_count(static_cast<std::int64_t>(send.size()), "power spectrum");
        for (std::int64_t c = 0; c < channels && r != self; ++c) {
            for (std::int64_t m = 0; m < mmax; ++m) {
                if (column_owner(c, m) != static_cast<int>(r)) {
                    continue;
                }
                for (const std::int64_t s : owned_rows_of_channel[static_cast<std::size_t>(c)]) {
                    const std::complex<double> v = spectra[static_cast<std::size_t>(s * mmax + m)];
                    send.push_back(v.real());
                    send.push_back(v.imag());
                }
            }
        }
        send_counts[r] = as_int_count(static_cast<std::int64_t>(send.size()) - send_displacements[r], "power spectrum");
    }
    spectra = {};
    // From rank r come, per channel, its rows of the channel times this rank's orders of it (re, im each).
    std::vector<std::int64_t> orders_of_channel(static_cast<std::size_t>(channels), 0);
    for (const Column& column : columns) {
        ++orders_of_channel[static_cast<std::size_t>(column.channel)];
    }
    std::vector<std::int64_t> rows_of_rank_and_channel(uranks * static_cast<std::size_t>(channels), 0);
    for (std::int64_t key = 0; key < channels * shape.nlat; ++key) {
        const auto r = static_cast<std::size_t>(row_owner[static_cast<std::size_t>(key)]);
        ++rows_of_rank_and_channel[r * static_cast<std::size_t>(channels) + static_cast<std::size_t>(key / shape.nlat)];
    }
    std::vector<int> receive_displacements(uranks, 0);
    std::int64_t receive_total = 0;
    for (std::size_t r = 0; r < uranks; ++r) {
        std::int64_t count = 0;
        for (std::size_t c = 0; c < static_cast<std::size_t>(channels) && r != self; ++c) {
            count += 2 * rows_of_rank_and_channel[r * static_cast<std::size_t>(channels) + c] * orders_of_channel[c];
        }
        receive_counts[r] = as_int_count(count, "power spectrum");
        receive_displacements[r] = as_int_count(receive_total, "power spectrum");
        receive_total += count;
    }
    std::vector<double> received(static_cast<std::size_t>(receive_total));
    GRIDSHARD_MPI(MPI_Alltoallv, send.data(), send_counts.data(), send_displacements.data(), MPI_DOUBLE,
                  received.data(), receive_counts.data(), receive_displacements.data(), MPI_DOUBLE, spatial.native());
    send = {};
    {
        std::size_t at = 0;
        for (std::size_t r = 0; r < uranks; ++r) {
            for (std::int64_t c = 0; c < channels && r != self; ++c) {
                for (std::int64_t m = 0; m < mmax; ++m) {
                    if (column_owner(c, m) != me) {
                        continue;
                    }
                    Column& column =
                        columns[static_cast<std::size_t>(column_of_pair[static_cast<std::size_t>(c * mmax + m)])];
                    for (std::int64_t k = 0; k < shape.nlat; ++k) {
                        if (row_owner[static_cast<std::size_t>(c * shape.nlat + k)] != static_cast<int>(r)) {
                            continue;
                        }
                        const double q = quadrature.weights[static_cast<std::size_t>(k)];
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
    // x_k = cos(flip(arccos(nodes)))_k, as torch-harmonics forms it (row 0 at the north pole), for the northern
    // rows and the equator row; zero in the padding.
    std::vector<double> x(hemisphere.padded, 0.0);
    for (std::size_t k = 0; k < hemisphere.half; ++k) {
        x[k] = std::cos(std::acos(quadrature.nodes[hemisphere.nlat - 1 - k]));
    }
    std::vector<std::int64_t> orders;  // the m this rank owns some column of, ascending
    for (const Column& column : columns) {
        if (orders.empty() || orders.back() != column.m) {
            orders.push_back(column.m);
        }
    }
    // Pbar_mm(x_k) for the owned orders, advancing the diagonal through every m below (zero in the padding).
    std::vector<std::vector<double>> diagonals(orders.size());
    {
        std::vector<double> diagonal(hemisphere.padded, 0.0);
        std::fill_n(diagonal.begin(), hemisphere.half, 1.0 / std::sqrt(4.0 * pi));
        std::int64_t at_m = 0;
        for (std::size_t i = 0; i < orders.size(); ++i) {
            for (; at_m < orders[i]; ++at_m) {
                const auto l = static_cast<double>(at_m + 1);
                for (std::size_t k = 0; k < hemisphere.half; ++k) {
                    diagonal[k] = std::sqrt((2.0 * l + 1.0) * (1.0 + x[k]) * (1.0 - x[k]) / 2.0 / l) * diagonal[k];
                }
            }
            diagonals[i] = diagonal;
        }
    }
    std::vector<std::int64_t> slot_of_channel(static_cast<std::size_t>(channels), -1);
    std::int64_t slots = 0;
    for (const Column& column : columns) {
        if (slot_of_channel[static_cast<std::size_t>(column.channel)] < 0) {
            slot_of_channel[static_cast<std::size_t>(column.channel)] = slots++;
        }
    }
    const int threads = detail::threads_for(static_cast<std::int64_t>(orders.size()),
                                            lmax * shape.nlat * std::max<std::int64_t>(1, slots));
    std::vector<PendingTerms> thread_terms;
    thread_terms.reserve(static_cast<std::size_t>(threads));
    for (int t = 0; t < threads; ++t) {
        thread_terms.emplace_back(static_cast<std::size_t>(slots * lmax));
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
                slot_of.push_back(slot_of_channel[static_cast<std::size_t>(c)]);
            }
        }
        const double factor = (spec.convention == SpectrumConvention::full && m > 0) ? 2.0 : 1.0;
        const auto t = static_cast<std::size_t>(detail::thread_index());
        legendre_sums(m, lmax, hemisphere, x, diagonals[static_cast<std::size_t>(i)], of_m, slot_of, factor,
                      thread_terms[t]);
    }

    // 4. One exact sum per (channel, l) over threads and ranks.
    std::vector<ExactSum> power(static_cast<std::size_t>(channels * lmax));
    ExponentRange range;
    for (PendingTerms& terms : thread_terms) {
        terms.flush_all();
        range.add(terms.range());
        for (std::int64_t c = 0; c < channels; ++c) {
            const std::int64_t slot = slot_of_channel[static_cast<std::size_t>(c)];
            if (slot < 0) {
                continue;
            }
            for (std::int64_t l = 0; l < lmax; ++l) {
                power[static_cast<std::size_t>(c * lmax + l)].add(
                    terms.power()[static_cast<std::size_t>(slot * lmax + l)]);
            }
        }
    }
    return merge_exact(spatial, power, range, mmax);
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
    const OwnedRows<T> rows = rows_to_owners(lon, boxes, shape, field, owner);

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
            const auto spectrum = transform(fft, rows, s);
            for (std::size_t m = 0; m < ubins; ++m) {
                const std::complex<double> v = spectrum[m] / n;
                mine[s * ubins + m] = w * (m == 0 ? 1.0 : 2.0) * std::norm(v);
            }
        }
    }
    // Every lon rank gets the block's row spectra, in the owners' (c, k) order.
    const auto ranks = static_cast<std::size_t>(lon.size());
    std::vector<int> counts(ranks, 0);
    std::vector<int> displacements(ranks, 0);
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t k = box.lat.begin; k < box.lat.end; ++k) {
            counts[static_cast<std::size_t>(owner[static_cast<std::size_t>(c * shape.nlat + k)])] +=
                as_int_count(bins, "zonal power spectrum");
        }
    }
    for (std::size_t r = 1; r < ranks; ++r) {
        displacements[r] = displacements[r - 1] + counts[r - 1];
    }
    std::vector<double> gathered(static_cast<std::size_t>(channels * box.lat.size() * bins));
    GRIDSHARD_MPI(MPI_Allgatherv, mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, gathered.data(),
                  counts.data(), displacements.data(), MPI_DOUBLE, lon.native());
    std::vector<double> result(gathered.size());
    std::vector<std::size_t> next(ranks);
    for (std::size_t r = 0; r < ranks; ++r) {
        next[r] = static_cast<std::size_t>(displacements[r]);
    }
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

template std::vector<double> spherical_power_spectrum<float>(const ShardedGrid&, FieldShard<float>,
                                                             const SpectrumSpec&);
template std::vector<double> spherical_power_spectrum<double>(const ShardedGrid&, FieldShard<double>,
                                                              const SpectrumSpec&);
template std::vector<double> zonal_power_spectrum<float>(const ShardedGrid&, FieldShard<float>, ZonalWeighting,
                                                         std::span<const double>);
template std::vector<double> zonal_power_spectrum<double>(const ShardedGrid&, FieldShard<double>, ZonalWeighting,
                                                          std::span<const double>);

}  // namespace gridshard
