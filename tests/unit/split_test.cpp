// The split rules of docs/design.md §2, exhaustively for n in 1..300 and parts in 1..16. No MPI.

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "gridshard/core/error.hpp"
#include "gridshard/geometry/split.hpp"

namespace gridshard {
namespace {

using Sizes = std::vector<std::int64_t>;

TEST(Split, DocumentedExamples) {
    EXPECT_EQ(split_sizes(721, 4, SplitRule::balanced), (Sizes{181, 180, 180, 180}));
    EXPECT_EQ(split_sizes(10, 4, SplitRule::balanced), (Sizes{3, 3, 2, 2}));
    EXPECT_EQ(split_sizes(15, 2, SplitRule::balanced), (Sizes{8, 7}));
    EXPECT_EQ(split_sizes(721, 4, SplitRule::div_up), (Sizes{181, 181, 181, 178}));
    EXPECT_EQ(split_sizes(9, 4, SplitRule::div_up), (Sizes{2, 2, 2, 3}));
    EXPECT_EQ(split_sizes(3, 4, SplitRule::div_up), (Sizes{0, 0, 0, 3}));
}

TEST(Split, ExhaustiveTilingAndRules) {
    for (std::int64_t n = 1; n <= 300; ++n) {
        for (int parts = 1; parts <= 16; ++parts) {
            for (SplitRule rule : {SplitRule::balanced, SplitRule::div_up}) {
                SCOPED_TRACE("n=" + std::to_string(n) + " parts=" + std::to_string(parts) +
                             " rule=" + std::string(to_string(rule)));
                if (rule == SplitRule::balanced && n < parts) {
                    EXPECT_THROW((void)split_sizes(n, parts, rule), ArgumentError);
                    continue;
                }
                const Sizes sizes = split_sizes(n, parts, rule);
                ASSERT_EQ(sizes.size(), static_cast<std::size_t>(parts));
                // The ranges tile [0, n) exactly once: contiguous, non-negative, summing to n.
                std::int64_t next = 0;
                for (int k = 0; k < parts; ++k) {
                    const Range r = split_range(n, parts, rule, k);
                    ASSERT_EQ(r.begin, next);
                    ASSERT_GE(r.size(), 0);
                    ASSERT_EQ(r.size(), sizes[static_cast<std::size_t>(k)]);
                    next = r.end;
                }
                ASSERT_EQ(next, n);
                const auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
                if (rule == SplitRule::balanced) {
                    EXPECT_LE(*hi - *lo, 1);
                    EXPECT_GE(*lo, 1);
                    // The larger parts come first.
                    EXPECT_TRUE(std::is_sorted(sizes.rbegin(), sizes.rend()));
                } else {
                    const std::int64_t up = (n + parts - 1) / parts;
                    const std::int64_t chunk = (n - up * (parts - 1) > 0) ? up : n / parts;
                    for (int k = 0; k + 1 < parts; ++k) {
                        EXPECT_EQ(sizes[static_cast<std::size_t>(k)], chunk);
                    }
                    EXPECT_EQ(sizes.back(), n - chunk * (parts - 1));
                    EXPECT_GT(sizes.back(), 0);
                }
            }
        }
    }
}

TEST(Split, DivUpCanLeaveEmptyParts) {
    int with_empty = 0;
    for (std::int64_t n = 1; n <= 300; ++n) {
        for (int parts = 1; parts <= 16; ++parts) {
            const Sizes sizes = split_sizes(n, parts, SplitRule::div_up);
            with_empty += std::count(sizes.begin(), sizes.end(), 0) > 0 ? 1 : 0;
        }
    }
    EXPECT_GT(with_empty, 0);
}

TEST(Split, RejectsBadArguments) {
    EXPECT_THROW((void)split_sizes(10, 0, SplitRule::balanced), ArgumentError);
    EXPECT_THROW((void)split_sizes(-1, 2, SplitRule::div_up), ArgumentError);
    EXPECT_THROW((void)split_range(10, 4, SplitRule::balanced, 4), ArgumentError);
    EXPECT_THROW((void)split_range(10, 4, SplitRule::balanced, -1), ArgumentError);
    try {
        (void)split_sizes(3, 4, SplitRule::balanced);
        FAIL() << "expected ArgumentError";
    } catch (const ArgumentError& error) {
        EXPECT_NE(std::string(error.what()).find("n=3"), std::string::npos) << error.what();
        EXPECT_NE(std::string(error.what()).find("parts=4"), std::string::npos) << error.what();
    }
}

TEST(Split, ParseRule) {
    EXPECT_EQ(parse_split_rule("balanced"), SplitRule::balanced);
    EXPECT_EQ(parse_split_rule("div_up"), SplitRule::div_up);
    EXPECT_THROW((void)parse_split_rule("divup"), ArgumentError);
}

TEST(DataBlock, EqualBlocksAndUnevenOnRequest) {
    EXPECT_EQ(data_block(12, 3, 1), (Range{4, 8}));
    EXPECT_THROW((void)data_block(10, 3, 0), ArgumentError);
    EXPECT_EQ(data_block(10, 3, 0, true), (Range{0, 4}));
    EXPECT_EQ(data_block(10, 3, 2, true), (Range{7, 10}));
    EXPECT_EQ(data_block(2, 3, 2, true), (Range{2, 2}));
    EXPECT_EQ(data_block(0, 3, 1), (Range{0, 0}));
    EXPECT_THROW((void)data_block(4, 0, 0), ArgumentError);
    for (std::int64_t n = 0; n <= 40; ++n) {
        for (int parts = 1; parts <= 9; ++parts) {
            std::int64_t next = 0;
            for (int k = 0; k < parts; ++k) {
                const Range r = data_block(n, parts, k, true);
                ASSERT_EQ(r.begin, next);
                next = r.end;
            }
            ASSERT_EQ(next, n);
        }
    }
}

}  // namespace
}  // namespace gridshard
