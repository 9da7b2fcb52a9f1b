// What the ViewOrigin tests share: small makers of JPEGs, Examples and
// shards, the view a piece of raw data must read as (made without the
// cache), and a fixture mounting views over a real ObjectCache and local
// origin in a scratch directory.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache_test_util.h"
#include "cache/worker_pool.h"
#include "decode/jpeg/cpu_jpeg_decoder.h"
#include "decode/jpeg/decode_pool_test_util.h"
#include "decode/testing/test_jpegs.h"
#include "decode/tfrecord/tfrecord.h"
#include "decode/view/npy.h"
#include "decode/view/view_namespace.h"
#include "decode/view/view_origin.h"
#include "decode/view/view_producer.h"
#include "util/eventually.h"

namespace stoker {
namespace view_test {

using testing::EncodeTj;
using testing::Eventually;
using testing::MakeImage;
using testing::Materialize;
using testing::ScratchDir;
using testing::WriteFile;

inline std::string Record(const std::string& jpeg, int label) {
  tf::Example ex;
  AddFeature(&ex, "image/encoded")->mutable_bytes_list()->add_value(jpeg);
  AddFeature(&ex, "image/format")->mutable_bytes_list()->add_value("JPEG");
  AddFeature(&ex, "image/class/label")->mutable_int64_list()->add_value(label);
  return ex.SerializeAsString();
}

inline std::string Jpeg(int w, int h, int seed, bool gray = false) {
  return EncodeTj(MakeImage(w, h, gray ? 1 : 3, seed), w, h, gray ? TJPF_GRAY : TJPF_RGB,
                  gray ? TJSAMP_GRAY : TJSAMP_420, 90);
}

inline std::string Shard(const std::vector<std::string>& payloads) {
  std::string out;
  for (const auto& p : payloads) AppendTfRecord(p, &out);
  return out;
}

// What the view of data must read as, made without the cache.
inline std::string Expected(const std::string& data, bool npy, const ViewOptions& o) {
  auto decoder = NewCpuJpegDecoder();
  MemoryByteSource src(data);
  ViewLayout l = npy ? *LayoutJpegNpyView(src, o, decoder->name())
                     : *LayoutTfRecordView(src, TfRecordCompression::kNone, o, decoder->name());
  std::string out(l.size, '\0');
  if (npy) {
    EXPECT_TRUE(
        ProduceNpyView(l, data, o, *decoder, reinterpret_cast<uint8_t*>(out.data()), out.size())
            .ok());
    return out;
  }
  for (const ViewRecord& r : l.records) {
    auto payload = ReadTfRecordAt(src, r.in_offset);
    EXPECT_TRUE(payload.ok());
    EXPECT_TRUE(ProduceTfRecordViewRecord(r, *payload, o, *decoder,
                                          reinterpret_cast<uint8_t*>(out.data() + r.out_offset),
                                          r.out_size)
                    .ok());
  }
  return out;
}

class ViewOriginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.Sub("origin/train"));
    shard_ = Shard({Record(Jpeg(120, 80, 1), 0), Record(Jpeg(33, 17, 2, true), 1),
                    Record(Jpeg(200, 150, 3), 2)});
    jpeg_ = Jpeg(90, 60, 4);
    WriteFile(dir_.Sub("origin/train/shard-0"), shard_);
    WriteFile(dir_.Sub("origin/train/a.jpg"), jpeg_);
    WriteFile(dir_.Sub("origin/train/notes.txt"), "not a view file");
  }

  void Mount(const std::vector<std::string>& specs) {
    cache_.reset();
    views_ = ViewMount{};
    std::vector<ViewSpec> v;
    for (const auto& s : specs) v.push_back(*ParseViewSpec(s));
    auto raw = MakeOrigin(dir_.Sub("origin"));
    ASSERT_TRUE(raw.ok()) << raw.status().message();
    CacheOptions o;
    o.dir = dir_.Sub("cache");
    o.capacity_bytes = 64ull << 20;
    o.chunk_size = 16 << 10;
    o.revalidate_seconds = 0;
    if (prefetch_bytes_) o.prefetch_bytes = *prefetch_bytes_;
    if (dir_prefetch_files_) o.dir_prefetch_files = *dir_prefetch_files_;
    auto make_views = [&](RawReader& reader) -> Result<ObjectCache::Derived> {
      STOKER_ASSIGN_OR_RETURN(views_,
                              MakeViewMount(*raw, v, reader, DecodePoolOptions{pool_threads_}));
      return ObjectCache::Derived{views_.origin, views_.derived};
    };
    auto c = ObjectCache::Open(o, *raw, make_views);
    ASSERT_TRUE(c.ok()) << c.status().message();
    cache_ = std::move(c).value();
  }
  void TearDown() override {
    cache_.reset();
    if (views_.pool) views_.pool->Stop();
  }

  // The body of RecordFailingAtDecodeBecomesFailedForGood.
  void FailingRecordReadsEio(const std::vector<std::string>& payloads);

  // Reads path whole through the cache, piece by piece. With eio, a piece
  // that reads as EIO (a record that did not decode) is read again byte by
  // byte, and each byte that reads as EIO comes back as '\0' with its
  // offset in *eio; without, EIO fails the read.
  Result<std::string> ReadAll(const std::string& path, size_t piece = 5000,
                              std::set<uint64_t>* eio = nullptr) {
    STOKER_ASSIGN_OR_RETURN(ObjectCache::Opened o, cache_->Open(path, false));
    std::string out;
    for (uint64_t off = 0; off < static_cast<uint64_t>(o.st.st_size); off += piece) {
      ReadReply r;
      Status st = cache_->Read(*o.file, off, piece, &r);
      if (st.code() == EIO && eio != nullptr) {
        const uint64_t end = std::min<uint64_t>(off + piece, o.st.st_size);
        for (uint64_t b = off; b < end; ++b) {
          ReadReply one;
          Status bst = cache_->Read(*o.file, b, 1, &one);
          if (bst.code() == EIO) {
            eio->insert(b);
            out.push_back('\0');
            continue;
          }
          STOKER_RETURN_IF_ERROR(bst);
          out += Materialize(one);
        }
        continue;
      }
      STOKER_RETURN_IF_ERROR(st);
      out += Materialize(r);
    }
    return out;
  }

  const ViewCounters& counters() { return views_.stats->counters; }

  ScratchDir dir_{"views"};
  std::optional<uint64_t> prefetch_bytes_;
  std::optional<uint64_t> dir_prefetch_files_;
  int pool_threads_ = 2;
  std::string shard_;
  std::string jpeg_;
  ViewMount views_;
  std::unique_ptr<ObjectCache> cache_;
};

inline std::vector<OriginDirEntry> List(Origin& origin, const std::string& dir) {
  std::vector<OriginDirEntry> entries;
  Status s = origin.ReadDir(dir, [&](const OriginDirEntry& e) {
    entries.push_back(e);
    return true;
  });
  EXPECT_TRUE(s.ok()) << s.message();
  return entries;
}

}  // namespace view_test
}  // namespace stoker
