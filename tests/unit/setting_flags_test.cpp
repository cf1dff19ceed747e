// The library's messages name settings, the tool shows its flags: a library error reaches the tool's user with the
// flag that sets what it is about. No MPI.

#include <gtest/gtest.h>

#include <string>

#include "gridshard/core/error.hpp"
#include "gridshard/geometry/regions.hpp"
#include "setting_flags.hpp"

namespace gridshard::cli {
namespace {

TEST(SettingFlags, EachNamedSettingBecomesItsFlag) {
    EXPECT_EQ(with_flags(setting_name("variables") + ": no 't2m'; " + setting_name("normalize_stds") + " too"),
              "--vars: no 't2m'; --normalize STDS too");
    EXPECT_EQ(with_flags("give " + setting_name("ensemble_size")), "give --ensemble-size");
    EXPECT_EQ(with_flags(setting_name("data_split") + setting_name("allow_time_mismatch")),
              "--data-split--allow-time-mismatch");
}

TEST(SettingFlags, OtherTextIsKept) {
    EXPECT_EQ(with_flags(""), "");
    EXPECT_EQ(with_flags("no setting here"), "no setting here");
    EXPECT_EQ(with_flags("`not_a_setting` and `regions`"), "`not_a_setting` and --region");
    EXPECT_EQ(with_flags("an unclosed ` quote and `regions"), "an unclosed ` quote and `regions");
}

TEST(SettingFlags, ALibraryErrorNamesTheSettingAndTheToolItsFlag) {
    try {
        (void)parse_region("tropics:1,2");
        FAIL() << "parse_region accepted a box of two numbers";
    } catch (const ArgumentError& error) {
        const std::string library = error.what();
        EXPECT_EQ(library.rfind("`regions` 'tropics:1,2': ", 0), 0U) << library;
        EXPECT_EQ(library.find("--"), std::string::npos) << library;
        EXPECT_EQ(with_flags(library).rfind("--region 'tropics:1,2': ", 0), 0U) << with_flags(library);
    }
}

}  // namespace
}  // namespace gridshard::cli
