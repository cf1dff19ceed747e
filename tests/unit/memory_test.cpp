// ZeroedArray (core/memory.hpp): zeros whatever its size, its own pages where large, values kept through copies and
// moves, and an allocation it cannot have refused with a message naming it. No MPI.

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "gridshard/core/error.hpp"
#include "gridshard/core/memory.hpp"

namespace gridshard {
namespace {

TEST(ZeroedArray, HoldsZerosSmallAndLargeAndKeepsWhatIsWritten) {
    for (const std::size_t count : {std::size_t{3}, std::size_t{100}, std::size_t{1} << 20}) {
        ZeroedArray<double> values(count, "a test array");
        ASSERT_EQ(values.size(), count);
        for (std::size_t k = 0; k < count; k += 97) {
            EXPECT_EQ(values[k], 0.0) << k << " of " << count;
        }
        values[count - 1] = 2.5;
        values[count / 2] = -1.0;
        EXPECT_EQ(values.data()[count - 1], 2.5);

        const ZeroedArray<double> copy(values);
        values[count - 1] = 7.0;  // the copy has values of its own
        EXPECT_EQ(copy[count - 1], 2.5);
        EXPECT_EQ(copy[count / 2], -1.0);

        ZeroedArray<double> moved(std::move(values));
        EXPECT_EQ(moved[count - 1], 7.0);
        EXPECT_EQ(values.size(), 0U);  // NOLINT(bugprone-use-after-move): a moved-from array is empty
        EXPECT_EQ(values.data(), nullptr);
    }
    const ZeroedArray<double> none(0, "an empty array");
    EXPECT_EQ(none.size(), 0U);
}

TEST(ZeroedArray, AnAllocationBeyondTheAddressSpaceNamesWhatItWasFor) {
    const std::size_t count = std::numeric_limits<std::size_t>::max() / 4;
    try {
        const ZeroedArray<double> values(count, "the sums of a test");
        FAIL() << "an array of " << count << " doubles was allocated";
    } catch (const SystemError& e) {
        EXPECT_NE(std::string(e.what()).find("out of memory allocating the sums of a test"), std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace gridshard
