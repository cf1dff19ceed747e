#pragma once
/// @file
/// Exact per-point sums of squares into TimeMeanAccumulator's running sums (each square as its two-product, so the
/// sum is the exact sum of the exact squares while their span allows): ACE's extended video's sums of the squared
/// errors and of the fields' squares, with the least and greatest errors, in one pass. No MPI calls.
///
/// @code
///   #include <cmath>
///   #include <vector>
///
///   #include "gridshard/metrics/square_sums.hpp"
///   void one_pair(const gridshard::ShardedGrid& grid, std::span<const float> truth, std::span<const float> members) {
///       gridshard::TimeMeanAccumulator errors(grid, 1), squares(grid, 1);
///       std::vector<double> least(truth.size(), INFINITY), greatest(truth.size(), -INFINITY);
///       gridshard::add_error_squares<float>(truth, members, errors, squares, least, greatest);
///   }
/// @endcode

#include <span>

#include "gridshard/metrics/time_mean.hpp"

namespace gridshard {

/// Per point of `truth` (one field: channels x box) and of each of `members` (whole such fields): the error
/// e = member - truth (in doubles) squared into `squared_errors` and the member squared into `squares`, one step a
/// member, and e into `least` and `greatest` (NaN once one is NaN, as torch's minimum and maximum). Throws
/// ArgumentError for sizes that do not fit. No MPI calls.
template <class T>
void add_error_squares(std::span<const T> truth, std::span<const T> members, TimeMeanAccumulator& squared_errors,
                       TimeMeanAccumulator& squares, std::span<double> least, std::span<double> greatest);

/// Per point the square of `values` (one field) into `squares`, one step. Throws ArgumentError for a size that does
/// not fit. No MPI calls.
template <class T>
void add_squares(std::span<const T> values, TimeMeanAccumulator& squares);

}  // namespace gridshard
