// The forecast evaluation's netCDF source: ACE's `autoregressive_{predictions,target}.nc` and the other
// layouts of docs/forecast.md, each rank reading only its box through read plans.

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "gridshard/core/error.hpp"
#include "gridshard/io/calendar.hpp"
#include "gridshard/io/forecast_source.hpp"
#include "gridshard/io/netcdf_reader.hpp"
#include "gridshard/io/units.hpp"

namespace gridshard::io {
namespace {

bool is_sample_name(const std::string& name) {
    return name == "sample" || name == "samples";
}

std::int64_t dim_size(const io::VariableShape& v, const std::string& dim) {
    const auto at = std::find(v.dim_names.begin(), v.dim_names.end(), dim);
    return at == v.dim_names.end() ? 0 : v.dim_sizes[static_cast<std::size_t>(at - v.dim_names.begin())];
}

/// The dims of `v` that number samples or members: those of io::is_ensemble_dim_name and `extra`, besides
/// time and the grid.
std::vector<std::string> ensemble_dims(const io::VariableShape& v, const std::string& extra) {
    std::vector<std::string> dims;
    for (std::size_t k = 0; k + 2 < v.dim_names.size(); ++k) {
        if (v.time_index && static_cast<int>(k) == *v.time_index) {
            continue;
        }
        if (io::is_ensemble_dim_name(v.dim_names[k]) || v.dim_names[k] == extra) {
            dims.push_back(v.dim_names[k]);
        }
    }
    return dims;
}

/// The dims of `v` besides time, the grid and `skip`, with their sizes: the channels.
std::vector<std::pair<std::string, std::int64_t>> channel_dims(const io::VariableShape& v,
                                                               const std::vector<std::string>& skip) {
    std::vector<std::pair<std::string, std::int64_t>> dims;
    for (std::size_t k = 0; k + 2 < v.dim_names.size(); ++k) {
        if ((v.time_index && static_cast<int>(k) == *v.time_index) ||
            std::find(skip.begin(), skip.end(), v.dim_names[k]) != skip.end()) {
            continue;
        }
        dims.emplace_back(v.dim_names[k], v.dim_sizes[k]);
    }
    return dims;
}

/// The first field variable of `reader` with a time dim, for the layout.
io::VariableShape first_timed_field(const io::NetcdfReader& reader, const std::vector<std::string>& names) {
    for (const std::string& name : names.empty() ? reader.field_variables() : names) {
        io::VariableShape v = reader.variable(name);
        if (v.time_index) {
            return v;
        }
    }
    throw ArgumentError("prediction '" + reader.path() + "' has no variable with a time dim on its lat x lon grid");
}

/// The members per initial condition of a sample dim of `samples` entries, from `init_time(sample)`:
/// runs of equal initial times, which must all be as long. 1 when the file has no init_time.
std::int64_t members_from_init_time(const io::NetcdfReader& reader, const std::string& sample_dim, std::int64_t samples,
                                    bool& found) {
    const std::optional<io::WholeVariable> init = reader.whole_variable("init_time");
    found = init && init->dims == std::vector<std::string>{sample_dim};
    if (!found || samples == 0) {
        return 1;
    }
    const std::vector<double>& t = init->values;
    std::int64_t run = 1;
    while (run < samples && t[static_cast<std::size_t>(run)] == t[0]) {
        ++run;
    }
    bool uniform = samples % run == 0;
    for (std::int64_t s = 0; s < samples && uniform; ++s) {
        uniform = t[static_cast<std::size_t>(s)] == t[static_cast<std::size_t>(s - s % run)] &&
                  (s % run != 0 || s == 0 || t[static_cast<std::size_t>(s)] != t[static_cast<std::size_t>(s - 1)]);
    }
    if (!uniform) {
        throw ArgumentError("prediction '" + reader.path() + "': init_time(" + sample_dim +
                            ") does not come in runs of one length (members sharing an initial time, member " +
                            "fastest); give " + setting_name("ensemble_size"));
    }
    return run;
}

/// A time variable of a file (init_time, valid_time) read as dates, each value in the variable's own units and
/// CF calendar (none is "standard"); values of units that are not "UNIT since DATE" (or that it cannot read) are read
/// as they are.
class TimeVariable {
  public:
    explicit TimeVariable(io::WholeVariable v) : v_(std::move(v)) {
        calendar_ = v_.calendar.empty() ? "standard" : v_.calendar;
        if (v_.units.find(" since ") != std::string::npos) {
            try {
                axis_ = io::parse_time_units(v_.units, v_.calendar);
            } catch (const ArgumentError&) {  // "months since ...": compared as numbers
            }
        }
    }
    [[nodiscard]] const io::WholeVariable& variable() const noexcept { return v_; }
    [[nodiscard]] bool dated() const noexcept { return axis_.has_value(); }
    [[nodiscard]] bool known(std::size_t k) const { return std::isfinite(v_.values[k]); }
    /// The date `seconds` after value `k`; only when dated() and known(k).
    [[nodiscard]] io::DateTime date(std::size_t k, double seconds = 0.0) const {
        return axis_->date_after(v_.values[k], seconds);
    }
    [[nodiscard]] std::string text(const io::DateTime& d) const { return io::to_string(d) + " (" + calendar_ + ")"; }
    /// Whether two dates are the same instant, counting days in this variable's calendar; only when dated().
    [[nodiscard]] bool same_date(const io::DateTime& a, const io::DateTime& b) const {
        return io::same_date(a, b, axis_->calendar);
    }
    /// Value `k` as a date, or as its number and units when not dated().
    [[nodiscard]] std::string text(std::size_t k) const {
        if (dated()) {
            return text(date(k));
        }
        char number[32];
        std::snprintf(number, sizeof number, "%.17g", v_.values[k]);
        return std::string(number) + " " + v_.units;
    }
    /// Whether value `k` is the same instant as value `other_k` of `other`: the same date, each read in its own
    /// calendar, or (either not dated) the same number in the same units.
    [[nodiscard]] bool same_instant(std::size_t k, const TimeVariable& other, std::size_t other_k) const {
        if (!known(k) || !other.known(other_k)) {
            return std::isnan(v_.values[k]) == std::isnan(other.v_.values[other_k]);
        }
        if (dated() && other.dated()) {
            return io::same_date(date(k), other.date(other_k), axis_->calendar);
        }
        return v_.values[k] == other.v_.values[other_k] && v_.units == other.v_.units;
    }

  private:
    io::WholeVariable v_;
    std::string calendar_;
    std::optional<io::TimeAxis> axis_;
};

class NetcdfForecastSteps final : public ForecastSteps {
  public:
    NetcdfForecastSteps(io::VariableReader truth, io::VariableReader prediction, const ForecastLayout& layout,
                        bool truth_has_ic)
        : truth_(std::move(truth)), prediction_(std::move(prediction)), layout_(layout), truth_has_ic_(truth_has_ic) {}

    void read(std::int64_t ic, std::int64_t lead, Range members, std::span<float> truth,
              std::span<float> member_values) override {
        read_into(ic, lead, members, truth, member_values);
    }
    void read(std::int64_t ic, std::int64_t lead, Range members, std::span<double> truth,
              std::span<double> member_values) override {
        read_into(ic, lead, members, truth, member_values);
    }
    void read_none() override {
        truth_.read_none();
        for (std::int64_t k = 0; k < prediction_calls(); ++k) {
            prediction_.read_none();
        }
    }

  private:
    // Which indexed dim of the prediction the members run along, and whether one call can read them.
    [[nodiscard]] std::size_t run_dim() const {
        return layout_.folded || layout_.initial_condition_dim.empty() ? 0 : 1;
    }
    [[nodiscard]] bool run_possible() const {
        return (layout_.folded || !layout_.member_dim.empty()) && prediction_.can_read_run(run_dim());
    }
    // Collective reads: the prediction reads per (initial condition, lead) of every rank, whatever its
    // members: one run, or one read per member of the layout (nothing past the rank's own).
    [[nodiscard]] std::int64_t prediction_calls() const { return run_possible() ? 1 : layout_.members; }

    template <class T>
    void read_into(std::int64_t ic, std::int64_t lead, Range members, std::span<T> truth, std::span<T> values) {
        const std::int64_t m = layout_.members;
        const std::size_t size = truth.size();
        if (members.begin < 0 || members.end > m || values.size() != size * static_cast<std::size_t>(members.size())) {
            throw ArgumentError("a members buffer of " + std::to_string(values.size()) + " values for members [" +
                                std::to_string(members.begin) + ", " + std::to_string(members.end) + ") of " +
                                std::to_string(m) + ", each of " + std::to_string(size));
        }
        std::vector<std::int64_t> at;
        // The members in one read where they are consecutive along the slowest dim read (ACE's folded samples,
        // or a member dim): each HDF5 chunk holding several of them is then read once.
        const auto position = [&](std::int64_t k) {
            at.clear();
            if (!layout_.initial_condition_dim.empty()) {
                at.push_back(layout_.folded ? ic * m + k : ic);
            }
            if (!layout_.member_dim.empty()) {
                at.push_back(k);
            }
            at.push_back(lead);
        };
        const bool collective = truth_.collective() || prediction_.collective();
        const auto read_truth = [&] {
            std::vector<std::int64_t> where;
            if (truth_has_ic_) {
                where.push_back(layout_.truth_repeated ? ic * m : ic);
            }
            where.push_back(lead);
            truth_.read_at(where, truth);
        };
        if ((members.size() > 1 || (collective && members.size() == 1)) && run_possible()) {
            read_round(collective, read_truth, [&] {
                position(members.begin);
                prediction_.read_run(at, {run_dim(), members.size()}, values);
            });
            return;
        }
        ReadRound round(collective);
        round.read(read_truth);
        // A collective round makes as many reads as every other rank: nothing past this rank's members.
        const std::int64_t calls = collective ? prediction_calls() : members.size();
        for (std::int64_t k = 0; k < calls; ++k) {
            round.read([&] {
                if (k >= members.size()) {
                    prediction_.read_none();
                    return;
                }
                position(members.begin + k);
                prediction_.read_at(at, values.subspan(static_cast<std::size_t>(k) * size, size));
            });
        }
        round.finish();
    }

    io::VariableReader truth_;
    io::VariableReader prediction_;
    ForecastLayout layout_;
    bool truth_has_ic_;
};

class NetcdfForecast final : public ForecastSource {
  public:
    NetcdfForecast(const std::string& truth_path, const std::string& prediction_path,
                   const std::vector<std::string>& names, const LayoutHints& hints, bool allow_time_mismatch,
                   const InputAccess& access)
        : truth_(access.open(truth_path)), prediction_(access.open(prediction_path)) {
        const std::string truth_name = "truth '" + truth_path + "'";
        const std::string prediction_name = "prediction '" + prediction_path + "'";
        const io::GridInfo& a = truth_.grid();
        const io::GridInfo& b = prediction_.grid();
        if (!io::same_grid(a, b)) {
            throw ArgumentError(truth_name + " (" + std::to_string(a.shape().nlat) + " x " +
                                std::to_string(a.shape().nlon) + ") and " + prediction_name + " (" +
                                std::to_string(b.shape().nlat) + " x " + std::to_string(b.shape().nlon) +
                                ") lie on different grids");
        }
        if (a.ntime != b.ntime || b.ntime < 1) {
            throw ArgumentError(truth_name + " has " + std::to_string(a.ntime) + " lead times, " + prediction_name +
                                " " + std::to_string(b.ntime) + " (both need the same, at least 1)");
        }
        if (!allow_time_mismatch) {
            if (const std::string problem = io::time_mismatch(a, truth_name, b, prediction_name); !problem.empty()) {
                throw ArgumentError(problem + " (" + setting_name("allow_time_mismatch") +
                                    " compares them step by step regardless)");
            }
        }
        resolve_layout(first_timed_field(prediction_, names), hints);
        check_initial_times(allow_time_mismatch);

        std::vector<std::string> layout_dims;
        for (const std::string* dim : {&layout_.initial_condition_dim, &layout_.member_dim}) {
            if (!dim->empty()) {
                layout_dims.push_back(*dim);
            }
        }
        for (const std::string& name : names.empty() ? prediction_.field_variables() : names) {
            const io::VariableShape p = prediction_.variable(name);
            if (!p.time_index) {
                if (names.empty()) {
                    continue;  // a mask or orography: nothing to score per lead time
                }
                throw ArgumentError(setting_name("variables") + ": variable '" + name + "' of " + prediction_name +
                                    " has no time dim");
            }
            if (ensemble_dims(p, hints.ensemble_dim) != ensemble_dims(first_, hints.ensemble_dim) ||
                dim_size(p, layout_.initial_condition_dim) != dim_size(first_, layout_.initial_condition_dim) ||
                dim_size(p, layout_.member_dim) != dim_size(first_, layout_.member_dim)) {
                throw ArgumentError("variable '" + name + "' of " + prediction_name +
                                    " has other ensemble dims than variable '" + first_.name + "'");
            }
            const io::VariableShape t = truth_.variable(name);
            if (!t.time_index) {
                throw ArgumentError("variable '" + name + "' of " + truth_name + " has no time dim");
            }
            if (channel_dims(t, {truth_ic_dim_}) != channel_dims(p, layout_dims)) {
                throw ArgumentError("variable '" + name + "' has other level dims in " + truth_name + " than in " +
                                    prediction_name);
            }
            if (!truth_ic_dim_.empty() && dim_size(t, truth_ic_dim_) != truth_ic_size_) {
                throw ArgumentError("variable '" + name + "' of " + truth_name + " has " +
                                    std::to_string(dim_size(t, truth_ic_dim_)) + " entries on dim '" + truth_ic_dim_ +
                                    "', variable '" + first_.name + "' " + std::to_string(truth_ic_size_));
            }
            if (!io::same_units(t.units, p.units)) {
                throw ArgumentError("variable '" + name + "' has units '" + t.units + "' in " + truth_name + " but '" +
                                    p.units + "' in " + prediction_name + " (no conversion is made)");
            }
            std::int64_t channels = 1;
            for (const auto& [dim, size] : channel_dims(p, layout_dims)) {
                channels *= size;
            }
            const bool any_double = t.value_type == io::ValueType::float64 || p.value_type == io::ValueType::float64;
            variables_.push_back({name, channels, any_double ? io::ValueType::float64 : io::ValueType::float32});
        }
        lead_times_.values = b.time_values;
        lead_times_.units = b.time_units;
    }

    [[nodiscard]] const SourceGrid& grid() const override { return prediction_.grid(); }
    [[nodiscard]] const ForecastLayout& layout() const override { return layout_; }
    [[nodiscard]] const LeadTimes& lead_times() const override { return lead_times_; }
    [[nodiscard]] std::vector<SourceVariable> variables() const override { return variables_; }

    [[nodiscard]] std::unique_ptr<ForecastSteps> open(const SourceVariable& variable, const Box& box) const override {
        const std::string& time_dim = prediction_.grid().time_dim;
        std::vector<std::string> prediction_dims;
        for (const std::string* dim : {&layout_.initial_condition_dim, &layout_.member_dim}) {
            if (!dim->empty()) {
                prediction_dims.push_back(*dim);
            }
        }
        prediction_dims.push_back(time_dim);
        std::vector<std::string> truth_dims;
        if (!truth_ic_dim_.empty()) {
            truth_dims.push_back(truth_ic_dim_);
        }
        truth_dims.push_back(truth_.grid().time_dim);
        return std::make_unique<NetcdfForecastSteps>(truth_.reader(variable.name, box, truth_dims),
                                                     prediction_.reader(variable.name, box, prediction_dims), layout_,
                                                     !truth_ic_dim_.empty());
    }

  private:
    // Which dims of the prediction number initial conditions and members, and how the truth is indexed.
    void resolve_layout(const io::VariableShape& p, const LayoutHints& hints) {
        first_ = p;
        const std::string where = "prediction '" + prediction_.path() + "' variable '" + p.name + "'";
        const std::vector<std::string> dims = ensemble_dims(p, hints.ensemble_dim);
        if (!hints.ensemble_dim.empty() && std::find(dims.begin(), dims.end(), hints.ensemble_dim) == dims.end()) {
            throw ArgumentError(setting_name("ensemble_dim") + ": " + where + " has no dim '" + hints.ensemble_dim +
                                "'");
        }
        if (dims.size() > 2) {
            throw ArgumentError(where + " has more than two ensemble dims; give " + setting_name("ensemble_dim"));
        }
        for (const std::string& dim : dims) {
            if (dim_size(p, dim) == 0) {
                throw ArgumentError(where + " has the dim '" + dim + "' of length 0: no samples or members to score");
            }
        }
        ForecastLayout& l = layout_;
        l.lead_times = p.ntime;
        if (dims.size() == 2) {
            // A sample (initial-condition) dim and a member dim.
            const bool first_is_member = hints.ensemble_dim.empty()
                                             ? (is_sample_name(dims[1]) && !is_sample_name(dims[0]))
                                             : dims[0] == hints.ensemble_dim;
            l.member_dim = first_is_member ? dims[0] : dims[1];
            l.initial_condition_dim = first_is_member ? dims[1] : dims[0];
            l.members = dim_size(p, l.member_dim);
            l.initial_conditions = dim_size(p, l.initial_condition_dim);
            l.members_from = "dim " + l.member_dim;
        } else if (dims.size() == 1 && (is_sample_name(dims[0]) && hints.ensemble_dim != dims[0])) {
            // ACE: initial conditions x members folded into one sample dim, member fastest.
            l.initial_condition_dim = dims[0];
            const std::int64_t samples = dim_size(p, dims[0]);
            bool from_init_time = false;
            const std::int64_t m = hints.ensemble_size > 0
                                       ? hints.ensemble_size
                                       : members_from_init_time(prediction_, dims[0], samples, from_init_time);
            if (samples % m != 0) {
                throw ArgumentError(setting_name("ensemble_size") + ": " + std::to_string(m) + " does not divide the " +
                                    std::to_string(samples) + " samples of " + where);
            }
            l.members = m;
            l.initial_conditions = samples / m;
            l.folded = true;
            l.members_from = hints.ensemble_size > 0 ? "ensemble_size" : from_init_time && m > 1 ? "init_time" : "none";
        } else if (dims.size() == 1) {
            // A member dim of one initial condition.
            l.member_dim = dims[0];
            l.members = dim_size(p, dims[0]);
            l.members_from = "dim " + l.member_dim;
        } else if (hints.ensemble_size > 0) {
            throw ArgumentError(setting_name("ensemble_size") + ": " + where + " has no sample or member dim");
        }
        if (hints.ensemble_size > 0 && l.members != hints.ensemble_size) {
            throw ArgumentError(setting_name("ensemble_size") + " " + std::to_string(hints.ensemble_size) + " but " +
                                where + " has " + std::to_string(l.members) + " members on dim '" + l.member_dim + "'");
        }
        if (l.initial_conditions < 1 || l.members < 1) {
            throw ArgumentError(where + " has no samples");
        }
        // The truth: one sample per initial condition, or (ACE) one per prediction sample; never members.
        const io::VariableShape t = truth_.variable(p.name);
        const std::string truth_where = "truth '" + truth_.path() + "' variable '" + p.name + "'";
        if (!l.member_dim.empty() && dim_size(t, l.member_dim) > 1) {
            throw ArgumentError(truth_where + " has the member dim '" + l.member_dim +
                                "': the truth needs one value per initial condition");
        }
        if (!l.initial_condition_dim.empty()) {
            truth_ic_dim_ = l.initial_condition_dim;
            truth_ic_size_ = dim_size(t, truth_ic_dim_);
            if (truth_ic_size_ == l.initial_conditions * l.members && l.members > 1) {
                l.truth_repeated = true;
            } else if (truth_ic_size_ != l.initial_conditions) {
                throw ArgumentError(truth_where + " has " + std::to_string(truth_ic_size_) + " entries on dim '" +
                                    truth_ic_dim_ + "', for " + std::to_string(l.initial_conditions) +
                                    " initial conditions of " + std::to_string(l.members) + " members");
            }
        }
        if (!l.member_dim.empty() && dim_size(t, l.member_dim) == 1) {
            throw ArgumentError(truth_where + " has the member dim '" + l.member_dim +
                                "' of size 1: drop it from the truth");
        }
    }

    // The initial times of both files must be the same instants, sample by sample (ACE's init_time(sample)), and
    // each file's valid_time(sample, time), where it has one, its init_time plus the lead of the row.
    void check_initial_times(bool allow_time_mismatch) {
        const ForecastLayout& l = layout_;
        if (l.initial_condition_dim.empty()) {
            return;
        }
        const auto per_sample = [](const io::NetcdfReader& file,
                                   const std::string& dim) -> std::optional<TimeVariable> {
            std::optional<io::WholeVariable> v = file.whole_variable("init_time");
            if (!v || v->dims != std::vector<std::string>{dim}) {
                return std::nullopt;
            }
            return TimeVariable(std::move(*v));
        };
        const std::optional<TimeVariable> p = per_sample(prediction_, l.initial_condition_dim);
        const std::optional<TimeVariable> t = per_sample(truth_, truth_ic_dim_);
        if (p) {
            for (std::int64_t ic = 0; ic < l.initial_conditions; ++ic) {
                lead_times_.init_times.push_back(
                    p->variable().values[static_cast<std::size_t>(l.folded ? ic * l.members : ic)]);
            }
            lead_times_.init_time_units = p->variable().units;
            lead_times_.calendar = p->variable().calendar;
        }
        if (allow_time_mismatch) {
            return;
        }
        const std::string regardless = " (" + setting_name("allow_time_mismatch") + " compares them regardless)";
        if (p && t) {
            // Every prediction sample against the truth sample it is scored with.
            const std::size_t samples = p->variable().values.size();
            for (std::size_t ps = 0; ps < samples; ++ps) {
                const std::size_t m = static_cast<std::size_t>(l.members);
                const std::size_t ic = l.folded ? ps / m : ps;
                const std::size_t ts = l.truth_repeated ? ic * m + (l.folded ? ps % m : 0) : ic;
                if (!p->same_instant(ps, *t, ts)) {
                    throw ArgumentError("init_time differs between the files: sample " + std::to_string(ps) +
                                        " of prediction '" + prediction_.path() + "' starts at " + p->text(ps) +
                                        ", sample " + std::to_string(ts) + " of truth '" + truth_.path() + "' at " +
                                        t->text(ts) + regardless);
                }
            }
        }
        check_valid_times(prediction_, "prediction", l.initial_condition_dim, p, regardless);
        check_valid_times(truth_, "truth", truth_ic_dim_, t, regardless);
    }

    // valid_time(sample, time) of `file`, where it has one, must be the sample's init_time plus the row's lead
    // time (a duration), or the row's own time (a lead-time axis of instants).
    static void check_valid_times(const io::NetcdfReader& file, const std::string& role, const std::string& sample_dim,
                                  const std::optional<TimeVariable>& init, const std::string& regardless) {
        const io::GridInfo& g = file.grid();
        std::optional<io::WholeVariable> whole = file.whole_variable("valid_time");
        if (!whole || whole->dims != std::vector<std::string>{sample_dim, g.time_dim} ||
            g.time_values.size() != static_cast<std::size_t>(g.ntime)) {
            return;
        }
        const TimeVariable valid(std::move(*whole));
        const double lead_seconds = io::seconds_per_unit(g.time_units);
        std::optional<io::TimeAxis> rows;  // a lead-time axis of instants
        if (lead_seconds == 0.0 && g.time_units.find(" since ") != std::string::npos) {
            try {
                rows = io::parse_time_units(g.time_units, g.time_calendar);
            } catch (const ArgumentError&) {  // "months since ...": no dates to compare with
                return;
            }
        }
        if (!valid.dated() || (!rows && (lead_seconds == 0.0 || !init || !init->dated()))) {
            return;  // nothing says what the valid times should be
        }
        const auto ntime = static_cast<std::size_t>(g.ntime);
        const std::size_t samples = valid.variable().values.size() / std::max<std::size_t>(ntime, 1);
        if (!rows && init->variable().values.size() != samples) {
            return;
        }
        for (std::size_t s = 0; s < samples; ++s) {
            for (std::size_t k = 0; k < ntime; ++k) {
                const std::size_t at = s * ntime + k;
                if (!valid.known(at) || (!rows && !init->known(s))) {
                    continue;
                }
                const io::DateTime expected =
                    rows ? rows->date_at(g.time_values[k]) : init->date(s, g.time_values[k] * lead_seconds);
                const io::DateTime got = valid.date(at);
                if (valid.same_date(got, expected)) {
                    continue;
                }
                char lead[64];
                std::snprintf(lead, sizeof lead, "%.17g", g.time_values[k]);
                const std::string should_be = rows ? "the time of its row, " + io::to_string(expected)
                                                   : "its init_time " + init->text(s) + " plus the lead " + lead + " " +
                                                         g.time_units + ", " + io::to_string(expected);
                throw ArgumentError(role + " '" + file.path() + "': valid_time of sample " + std::to_string(s) +
                                    " at row " + std::to_string(k) + " is " + valid.text(got) + ", but " + should_be +
                                    regardless);
            }
        }
    }

    io::NetcdfReader truth_;
    io::NetcdfReader prediction_;
    io::VariableShape first_;
    ForecastLayout layout_;
    LeadTimes lead_times_;
    std::string truth_ic_dim_;
    std::int64_t truth_ic_size_ = 0;
    std::vector<SourceVariable> variables_;
};

}  // namespace

bool is_forecast_file(const std::string& prediction_path, const LayoutHints& hints, const InputAccess& access) {
    if (!hints.ensemble_dim.empty() || hints.ensemble_size > 0) {
        return true;
    }
    const io::NetcdfReader reader = access.open(prediction_path);
    for (const std::string& name : reader.field_variables()) {
        if (!ensemble_dims(reader.variable(name), "").empty()) {
            return true;
        }
    }
    return false;
}

std::unique_ptr<ForecastSource> make_netcdf_forecast(const std::string& truth_path, const std::string& prediction_path,
                                                     const std::vector<std::string>& names, const LayoutHints& hints,
                                                     bool allow_time_mismatch, const InputAccess& access) {
    return std::make_unique<NetcdfForecast>(truth_path, prediction_path, names, hints, allow_time_mismatch, access);
}

}  // namespace gridshard::io
