// How the CLI's command line is read around CLI11: the mount.fuse3 form and
// the one line a parse error becomes.
#include "mount-tools/cli_parse.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "mount-tools/commands.h"
#include "util/test_files.h"

namespace stoker {
namespace {

// The stoker app as main builds it (without running a command).
class CliParse : public ::testing::Test {
 protected:
  CliParse() { app_.require_subcommand(0, 1); }
  // The line for argv's parse error; "" if it parsed.
  std::string ErrorLine(std::vector<std::string> argv) {
    std::reverse(argv.begin(), argv.end());  // CLI11 takes them in reverse
    try {
      app_.parse(argv);
    } catch (const CLI::ParseError& e) {
      return ParseErrorLine(app_, e);
    }
    return "";
  }
  CLI::App app_{"test"};
  // Kept: each holds the arguments its options write to.
  std::vector<Subcommand> commands_ = {AddMountCommand(app_), AddUnmountCommand(app_),
                                       AddStatCommand(app_), AddOrderCommand(app_)};
};

TEST(ClosestName, FindsATypoAndNothingFarther) {
  const std::vector<std::string> names = {"--cache", "--cache-size", "--chunk-size", "--json"};
  EXPECT_EQ(ClosestName("--cahce-size", names), "--cache-size");  // two letters swapped
  EXPECT_EQ(ClosestName("--cache-siz", names), "--cache-size");
  EXPECT_EQ(ClosestName("--cachesize", names), "--cache-size");
  EXPECT_EQ(ClosestName("--jsn", names), "--json");
  EXPECT_EQ(ClosestName("--cache", names), "--cache");
  EXPECT_EQ(ClosestName("--verbose", names), "");
  EXPECT_EQ(ClosestName("-x", {"-o", "-f"}), "") << "a short option is no typo of another";
  EXPECT_EQ(ClosestName("", names), "");
}

TEST_F(CliParse, AMistypedOptionGetsTheClosestName) {
  EXPECT_EQ(ErrorLine({"mount", "/o", "/m", "--cache", "/c", "--cahce-size", "5G"}),
            "unknown option '--cahce-size' (did you mean --cache-size?)");
  EXPECT_EQ(ErrorLine({"mount", "/o", "/m", "--cache", "/c", "--cahce-size=5G"}),
            "unknown option '--cahce-size' (did you mean --cache-size?)");
  // The typo is named, not the --cache it leaves missing.
  EXPECT_EQ(ErrorLine({"mount", "/o", "/m", "--cahce", "/c"}),
            "unknown option '--cahce' (did you mean --cache?)");
  EXPECT_EQ(ErrorLine({"mount", "/o", "/m", "--cache", "/c", "--no-supervice"}),
            "unknown option '--no-supervice' (did you mean --no-supervise?)");
  EXPECT_EQ(ErrorLine({"stat", "--jsn", "/m"}), "unknown option '--jsn' (did you mean --json?)");
  EXPECT_EQ(ErrorLine({"mount", "/o", "/m", "--cache", "/c", "--bogus"}),
            "unknown option '--bogus'");
}

TEST_F(CliParse, AnUnknownCommandGetsTheClosestName) {
  EXPECT_EQ(ErrorLine({"mout", "/o", "/m"}), "unknown command 'mout' (did you mean mount?)");
  EXPECT_EQ(ErrorLine({"umount", "/m"}), "");
  EXPECT_EQ(ErrorLine({"frobnicate"}), "unknown command 'frobnicate'");
}

TEST_F(CliParse, OtherErrorsAreCli11s) {
  EXPECT_NE(ErrorLine({"mount", "/o", "/m"}).find("--cache is required"), std::string::npos);
}

TEST_F(CliParse, TheFlagPairsExcludeEachOther) {
  EXPECT_NE(ErrorLine({"mount", "/o", "/m", "--cache", "/c", "--supervise", "--no-supervise"})
                .find("excludes"),
            std::string::npos);
  EXPECT_EQ(ErrorLine({"mount", "/o", "/m", "--cache", "/c", "--no-default-permissions"}), "");
}

TEST_F(CliParse, MountFuse3sForm) {
  testing::ScratchDir dir("cli");
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  ASSERT_EQ(mkdir("origin", 0755), 0);
  using Args = std::vector<std::string>;
  // An origin that holds a '/', or exists, or is followed by -o.
  EXPECT_TRUE(IsFuseHelperCall(app_, Args{"/nas/data", "/mnt", "-o", "cache=/c"}));
  EXPECT_TRUE(IsFuseHelperCall(app_, Args{"s3://b/p", "/mnt", "-o", "cache=/c"}));
  EXPECT_TRUE(IsFuseHelperCall(app_, Args{"origin", "mnt", "-o", "cache=c,dev,suid"}));
  EXPECT_TRUE(IsFuseHelperCall(app_, Args{"origin", "mnt"}));
  EXPECT_TRUE(IsFuseHelperCall(app_, Args{"missing", "mnt", "-ocache=c"}));
  // A command, an option, a typo of a command.
  EXPECT_FALSE(IsFuseHelperCall(app_, Args{"mount", "origin", "mnt", "--cache", "c"}));
  EXPECT_FALSE(IsFuseHelperCall(app_, Args{"umount", "mnt", "-o", "x"}));
  EXPECT_FALSE(IsFuseHelperCall(app_, Args{"--help"}));
  EXPECT_FALSE(IsFuseHelperCall(app_, Args{"origin", "--help"}));
  EXPECT_FALSE(IsFuseHelperCall(app_, Args{"mout", "origin", "mnt"}));
  EXPECT_FALSE(IsFuseHelperCall(app_, Args{"origin"}));
  std::filesystem::current_path(cwd);
}

}  // namespace
}  // namespace stoker
