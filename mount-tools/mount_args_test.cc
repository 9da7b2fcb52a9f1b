// `stoker mount` argument handling: what CLI11 accepts and what
// ToMountOptions checks before anything is forked.
#include <gtest/gtest.h>
#include <unistd.h>

#include "mount-tools/commands.h"
#include "util/duration.h"

namespace stoker {
namespace {

MountArgs Args() {
  MountArgs a;
  a.origin = "/nas/data";
  a.mountpoint = "/mnt/data";
  a.cache_dir = "/ssd/cache";
  return a;
}

TEST(SplitFuseOptions, SplitsCommaListsAndRepeats) {
  EXPECT_EQ(SplitFuseOptions({"allow_other,default_permissions", "max_read=131072"}),
            (std::vector<std::string>{"allow_other", "default_permissions", "max_read=131072"}));
  EXPECT_EQ(SplitFuseOptions({",a,,b,"}), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(SplitFuseOptions({}).empty());
  EXPECT_TRUE(SplitFuseOptions({""}).empty());
}

TEST(ToMountOptions, NoSuperviseTurnsTheSupervisorOff) {
  MountArgs a = Args();
  a.supervise = false;
  auto o = ToMountOptions(a);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_FALSE(o->supervise);
}

TEST(ToMountOptions, Defaults) {
  auto o = ToMountOptions(Args());
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->origin, "/nas/data");
  EXPECT_EQ(o->mountpoint, "/mnt/data");
  EXPECT_EQ(o->cache.dir, "/ssd/cache");
  EXPECT_EQ(o->cache.capacity_bytes, 10ull << 30);
  EXPECT_EQ(o->cache.chunk_size, 1ull << 20);
  EXPECT_EQ(o->cache.revalidate_seconds, 60u);
  EXPECT_EQ(o->cache.prefetch_bytes, 8ull << 20);
  EXPECT_EQ(o->cache.dir_prefetch_files, 16u);
  EXPECT_EQ(o->cache.io_backend, IoBackendKind::kAuto);
  EXPECT_EQ(o->log_level, "info");
  EXPECT_TRUE(o->supervise);
  EXPECT_EQ(o->ready_fd, -1);
  EXPECT_EQ(o->decoder.kind, DecoderKind::kAuto);
  EXPECT_TRUE(o->decoder.gpu.library_path.empty());
}

TEST(ToMountOptions, DecoderFlags) {
  MountArgs a = Args();
  a.decoder = "gpu";
  a.gpu_library_path = {"/opt/nvjpeg/lib", "rel/lib"};
  auto o = ToMountOptions(a);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->decoder.kind, DecoderKind::kGpu);
  ASSERT_EQ(2u, o->decoder.gpu.library_path.size());
  EXPECT_EQ("/opt/nvjpeg/lib", o->decoder.gpu.library_path[0]);
  EXPECT_EQ('/', o->decoder.gpu.library_path[1][0]);
  a.decoder = "cuda";
  auto bad = ToMountOptions(a);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string::npos, bad.status().message().find("--decoder")) << bad.status().message();
}

TEST(ToMountOptions, RemoteOriginFlags) {
  MountArgs a = Args();
  a.origin = "s3://bucket/prefix";
  a.s3_endpoint = "http://127.0.0.1:9000";
  a.s3_path_style = true;
  a.revalidate = "5";
  a.origin_retries = "2";
  auto o = ToMountOptions(a);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->origin, "s3://bucket/prefix");
  EXPECT_EQ(o->origin_options.s3_endpoint, "http://127.0.0.1:9000");
  EXPECT_TRUE(o->origin_options.s3_path_style);
  EXPECT_EQ(o->origin_options.listing_ttl_seconds, 5u);
  EXPECT_EQ(o->origin_options.retries, 2);

  a.manifest = "m.txt";  // an HTTP flag on an S3 origin
  EXPECT_EQ(ToMountOptions(a).status().code(), EINVAL);
  a.origin = "https://host/data/";
  a.s3_endpoint.clear();
  a.s3_path_style = false;
  o = ToMountOptions(a);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->origin_options.manifest.front(), '/');  // made absolute: the daemon runs in /
  a.s3_endpoint = "http://x";
  EXPECT_EQ(ToMountOptions(a).status().code(), EINVAL);

  MountArgs local = Args();
  local.manifest = "m.txt";
  EXPECT_EQ(ToMountOptions(local).status().code(), EINVAL);
  local = Args();
  local.s3_page_size = "0";
  EXPECT_EQ(ToMountOptions(local).status().code(), EINVAL);
  local = Args();
  local.origin_stall_timeout = "x";
  EXPECT_EQ(ToMountOptions(local).status().code(), EINVAL);
}

TEST(ToMountOptions, SizesAndOptions) {
  MountArgs a = Args();
  a.cache_size = "200G";
  a.chunk_size = "4M";
  a.prefetch = "0";
  a.prefetch_files = "0";
  a.revalidate = "0";
  a.io_backend = "syscall";
  a.log_level = "debug";
  a.fuse_options = {"allow_other,default_permissions"};
  auto o = ToMountOptions(a);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->cache.capacity_bytes, 200ull << 30);
  EXPECT_EQ(o->cache.chunk_size, 4ull << 20);
  EXPECT_EQ(o->cache.prefetch_bytes, 0u);
  EXPECT_EQ(o->cache.dir_prefetch_files, 0u);
  EXPECT_EQ(o->cache.revalidate_seconds, 0u);
  EXPECT_EQ(o->cache.io_backend, IoBackendKind::kSyscall);
  EXPECT_EQ(o->log_level, "debug");
  EXPECT_EQ(o->fuse_options, (std::vector<std::string>{"allow_other", "default_permissions"}));
}

TEST(ToMountOptions, RevalidateNever) {
  MountArgs a = Args();
  a.revalidate = "never";
  auto o = ToMountOptions(a);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->cache.revalidate_seconds, kNeverSeconds);
  EXPECT_EQ(o->origin_options.listing_ttl_seconds, kNeverSeconds);
  a.revalidate = "Never";
  o = ToMountOptions(a);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("--revalidate: invalid duration 'Never'"), std::string::npos)
      << o.status().message();
  EXPECT_NE(o.status().message().find(", or never"), std::string::npos) << o.status().message();
}

TEST(ToMountOptions, Opens) {
  MountArgs a = Args();
  auto o = ToMountOptions(a);
  ASSERT_TRUE(o.ok());
  EXPECT_FALSE(o->kernel_opens);
  a.opens = "kernel";
  o = ToMountOptions(a);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_TRUE(o->kernel_opens);
  EXPECT_EQ(o->passthrough, PassthroughMode::kAuto);  // the mount says why it is off
  EXPECT_EQ(o->max_nodes, 100000u);
  a.max_nodes = "0";
  EXPECT_EQ(ToMountOptions(a)->max_nodes, 0u) << "0: no bound";
}

TEST(ToMountOptions, RelativePathsBecomeAbsoluteWithoutResolving) {
  MountArgs a = Args();
  a.origin = "some/origin/";
  a.mountpoint = "./mnt/../mnt2";
  a.cache_dir = "c";
  a.origin = "some/origin/";
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  std::string base = std::string(cwd) == "/" ? "" : cwd;
  auto o = ToMountOptions(a);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->origin, base + "/some/origin");
  EXPECT_EQ(o->mountpoint, base + "/mnt2");
  EXPECT_EQ(o->cache.dir, base + "/c");
}

TEST(ToMountOptions, UrlOriginsAreKept) {
  MountArgs a = Args();
  a.origin = "s3://bucket/prefix";
  auto o = ToMountOptions(a);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->origin, "s3://bucket/prefix");
}

// Each bad argument is refused with a message that names it.
struct BadCase {
  const char* what;
  void (*edit)(MountArgs&);
  const char* names;
};

TEST(ToMountOptions, RefusesBadArguments) {
  const BadCase cases[] = {
      {"unparsable cache size", [](MountArgs& a) { a.cache_size = "lots"; }, "--cache-size"},
      {"unknown unit", [](MountArgs& a) { a.cache_size = "10Q"; }, "--cache-size"},
      {"unparsable chunk size", [](MountArgs& a) { a.chunk_size = "-1M"; }, "--chunk-size"},
      {"word revalidate", [](MountArgs& a) { a.revalidate = "soon"; },
       "--revalidate: invalid duration 'soon'"},
      {"unparsable prefetch", [](MountArgs& a) { a.prefetch = "x"; }, "--prefetch"},
      {"unparsable prefetch files", [](MountArgs& a) { a.prefetch_files = "-1"; },
       "--prefetch-files"},
      {"too many prefetch files", [](MountArgs& a) { a.prefetch_files = "5000"; },
       "--prefetch-files"},
      {"cache in the mountpoint", [](MountArgs& a) { a.cache_dir = "/mnt/data/c"; },
       "cache dir '/mnt/data/c' is inside the mountpoint"},
      {"cache is the mountpoint", [](MountArgs& a) { a.cache_dir = "/mnt/data/"; },
       "cache dir '/mnt/data' is the mountpoint"},
      {"mountpoint in the cache", [](MountArgs& a) { a.mountpoint = "/ssd/cache/m"; },
       "inside the cache dir"},
      {"mountpoint in the origin", [](MountArgs& a) { a.mountpoint = "/nas/data/sub/m"; },
       "is inside the origin"},
      {"origin in the mountpoint", [](MountArgs& a) { a.origin = "/mnt/data/x"; },
       "origin '/mnt/data/x' is inside the mountpoint"},
      {"chunk too small", [](MountArgs& a) { a.chunk_size = "32K"; }, "--chunk-size 32K"},
      {"chunk too large", [](MountArgs& a) { a.chunk_size = "128M"; }, "--chunk-size 128M"},
      {"chunk not 4K aligned", [](MountArgs& a) { a.chunk_size = "100000"; }, "multiple of 4"},
      {"cache smaller than a chunk", [](MountArgs& a) { a.cache_size = "512K"; }, "--cache-size"},
      {"cache under 4 chunks",
       [](MountArgs& a) {
         a.chunk_size = "4M";
         a.cache_size = "15M";
       },
       "at least 4 chunks"},
      {"io backend", [](MountArgs& a) { a.io_backend = "aio"; }, "--io-backend"},
      {"negative revalidate", [](MountArgs& a) { a.revalidate = "-5"; },
       "--revalidate: invalid duration '-5'"},
      {"fractional revalidate", [](MountArgs& a) { a.revalidate = "1.5"; }, "--revalidate"},
      {"revalidate unit", [](MountArgs& a) { a.revalidate = "1w"; }, "--revalidate: invalid"},
      {"stall timeout unit", [](MountArgs& a) { a.origin_stall_timeout = "5ms"; },
       "--origin-stall-timeout"},
      {"log level", [](MountArgs& a) { a.log_level = "loud"; }, "--log-level"},
      {"opens", [](MountArgs& a) { a.opens = "user"; }, "--opens user"},
      {"too few nodes", [](MountArgs& a) { a.max_nodes = "10"; }, "--max-nodes 10"},
      {"nodes not a number", [](MountArgs& a) { a.max_nodes = "many"; }, "--max-nodes"},
      {"kernel opens with passthrough on",
       [](MountArgs& a) {
         a.opens = "kernel";
         a.passthrough = "on";
       },
       "--passthrough on"},
      {"empty cache dir", [](MountArgs& a) { a.cache_dir = ""; }, "--cache"},
  };
  for (const auto& c : cases) {
    MountArgs a = Args();
    c.edit(a);
    auto o = ToMountOptions(a);
    ASSERT_FALSE(o.ok()) << c.what;
    EXPECT_EQ(o.status().code(), EINVAL) << c.what;
    EXPECT_NE(o.status().message().find(c.names), std::string::npos)
        << c.what << ": " << o.status().message();
    EXPECT_EQ(o.status().message().find('\n'), std::string::npos) << c.what;
  }
}

TEST(ToMountOptions, SecondsTakeUnits) {
  MountArgs a = Args();
  a.origin = "s3://bucket";
  a.revalidate = "1m";
  a.origin_connect_timeout = "90s";
  a.origin_stall_timeout = "1h";
  a.origin_backoff = "2";
  auto o = ToMountOptions(a);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->cache.revalidate_seconds, 60u);
  EXPECT_EQ(o->origin_options.listing_ttl_seconds, 60u);
  EXPECT_EQ(o->origin_options.connect_timeout_s, 90);
  EXPECT_EQ(o->origin_options.stall_timeout_s, 3600);
  EXPECT_EQ(o->origin_options.backoff_seconds, 2);
  a.revalidate = "1d";
  EXPECT_EQ(ToMountOptions(a)->cache.revalidate_seconds, 86400u);
  a.origin_backoff = "2h";  // past 3600 s, in any unit
  EXPECT_NE(ToMountOptions(a).status().message().find("--origin-backoff 2h"), std::string::npos);
}

TEST(ToMountOptions, S3EndpointNeedsAScheme) {
  MountArgs a = Args();
  a.origin = "s3://bucket";
  for (const char* good : {"http://127.0.0.1:9000", "https://minio.local", "http://h:9/"}) {
    a.s3_endpoint = good;
    EXPECT_TRUE(ToMountOptions(a).ok()) << good;
  }
  for (const char* bad : {"127.0.0.1:9", "ftp://h", "http://h/bucket", "http://"}) {
    a.s3_endpoint = bad;
    auto o = ToMountOptions(a);
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_EQ(o.status().code(), EINVAL);
    EXPECT_NE(o.status().message().find(std::string("--s3-endpoint ") + bad), std::string::npos)
        << o.status().message();
  }
}

TEST(ToMountOptions, ChunkLimitsAreInclusive) {
  MountArgs a = Args();
  a.chunk_size = "64K";
  a.cache_size = "256K";
  EXPECT_TRUE(ToMountOptions(a).ok());
  a.chunk_size = "64M";
  a.cache_size = "256M";
  EXPECT_TRUE(ToMountOptions(a).ok());
  a.cache_size = "268435455";  // one byte short of 4 chunks
  EXPECT_FALSE(ToMountOptions(a).ok());
}

// The subcommand as CLI11 parses it (without running it).
class MountCommandParse : public ::testing::Test {
 protected:
  void Parse(std::vector<std::string> argv) {
    // CLI11 takes the arguments in reverse order.
    std::reverse(argv.begin(), argv.end());
    app_.parse(argv);
  }
  CLI::App app_{"test"};
  Subcommand mount_ = AddMountCommand(app_);
};

TEST_F(MountCommandParse, RepeatedDashOStopsAtOneValue) {
  Parse({"mount", "-o", "allow_other,ro", "/o", "/m", "--cache", "/c", "-o", "fsname=x"});
  EXPECT_TRUE(mount_.app->parsed());
  EXPECT_EQ(mount_.app->get_option("ORIGIN")->as<std::string>(), "/o");
  EXPECT_EQ(mount_.app->get_option("MOUNTPOINT")->as<std::string>(), "/m");
  EXPECT_EQ(mount_.app->get_option("-o")->as<std::vector<std::string>>(),
            (std::vector<std::string>{"allow_other,ro", "fsname=x"}));
}

TEST_F(MountCommandParse, MissingCacheIsAParseError) {
  EXPECT_THROW(Parse({"mount", "/o", "/m"}), CLI::RequiredError);
}

TEST_F(MountCommandParse, MissingMountpointIsAParseError) {
  EXPECT_THROW(Parse({"mount", "/o", "--cache", "/c"}), CLI::RequiredError);
}

TEST_F(MountCommandParse, ExtraPositionalIsAParseError) {
  EXPECT_THROW(Parse({"mount", "/o", "/m", "/x", "--cache", "/c"}), CLI::ParseError);
}

TEST(ToMountOptions, ViewsAreParsedAndChecked) {
  MountArgs a = Args();
  a.views = {"decoded", "small:channels=3,dct=accurate,on_error=skip"};
  auto o = ToMountOptions(a);
  ASSERT_TRUE(o.ok()) << o.status().message();
  ASSERT_EQ(o->views.size(), 2u);
  EXPECT_EQ(o->views[0].name, "decoded");
  EXPECT_EQ(o->views[1].name, "small");
  EXPECT_EQ(o->views[1].options.decode.channels, 3);
  EXPECT_EQ(o->views[1].options.decode.dct, DctMethod::kAccurate);
  EXPECT_EQ(o->views[1].options.on_error, OnError::kSkip);
  for (auto [spec, why] : std::vector<std::pair<std::string, std::string>>{
           {"x:channels=2", "--view x:channels=2: view option channels"},
           {"x:bogus=1", "unknown view option 'bogus'"},
           {"", "not a plain file name"},
           {"stoker", ".stoker is the mount's control directory"}}) {
    a.views = {spec};
    auto bad = ToMountOptions(a);
    ASSERT_FALSE(bad.ok()) << spec;
    EXPECT_EQ(bad.status().code(), EINVAL);
    EXPECT_NE(bad.status().message().find(why), std::string::npos) << bad.status().message();
  }
  a.views = {"d", "d:dct=accurate"};
  EXPECT_NE(ToMountOptions(a).status().message().find("given twice"), std::string::npos);
}

TEST_F(MountCommandParse, ViewIsRepeatable) {
  Parse({"mount", "/o", "/m", "--cache", "/c", "--view", "decoded", "--view", "b:dct=accurate"});
  EXPECT_EQ(mount_.app->get_option("--view")->as<std::vector<std::string>>(),
            (std::vector<std::string>{"decoded", "b:dct=accurate"}));
}

}  // namespace
}  // namespace stoker
