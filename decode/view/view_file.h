// A decoded view's file as an OriginFile (what ViewOrigin::Open gives the
// cache): it produces the bytes of a range from the raw file, read through
// the cache, by decoding the records the range covers in the decode pool;
// and the helpers the view's file and its origin share.
//
// Thread-safety: an open view file may be read from many threads at once;
// concurrent reads of one record produce it once.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "cache/origin/origin.h"
#include "cache/raw_reader.h"
#include "decode/jpeg/decode_pool.h"
#include "decode/view/view_origin.h"

namespace stoker {

// What one open view file reads and produces with.
struct ViewFileParts {
  RawReader* reader = nullptr;
  RawReader::Opened raw;
  std::shared_ptr<const ViewLayout> layout;
  ViewOptions options;
  RawViewKind kind = RawViewKind::kNone;
  OriginIdentity identity;
  std::shared_ptr<DecodePool> pool;
  std::shared_ptr<JpegDecoder> decoder;
  std::shared_ptr<ViewStats> stats;
  std::string view_path;        // as the mount shows it, for messages
  std::string path;             // relative to the view's root, for Expedite
  ViewOrigin* owner = nullptr;  // outlives every ViewFile (view_namespace.h)
  std::string raw_path;
};

std::unique_ptr<OriginFile> OpenViewFile(ViewFileParts parts);

// What a JPEG file's view file adds to its name: "a.jpg" -> "a.jpg.npy".
inline constexpr std::string_view kNpySuffix = ".npy";

// Not the data's fault: passed through to the reader as it is. (ENOMEM is
// the data's: a JPEG over the decoder's memory limit.)
bool IsWorldError(int code);

// The decode priority of work done for who.
DecodePriority DecodePriorityFor(Urgency who);

// The compression a raw TFRecord kind is read with.
TfRecordCompression CompressionOf(RawViewKind kind);

// A decode batch that ViewOrigin::Expedite finds under a view path while
// it lives: from before the raw bytes it decodes are read until it has run.
class RegisteredBatch {
 public:
  RegisteredBatch(ViewOrigin* owner, std::string path)
      : owner_(owner), path_(std::move(path)), batch_(DecodePool::NewBatch()) {
    owner_->AddBatch(path_, batch_);
  }
  ~RegisteredBatch() { owner_->RemoveBatch(path_, batch_.get()); }
  RegisteredBatch(const RegisteredBatch&) = delete;
  RegisteredBatch& operator=(const RegisteredBatch&) = delete;
  const std::shared_ptr<DecodePool::Batch>& get() const { return batch_; }

 private:
  ViewOrigin* const owner_;
  const std::string path_;
  const std::shared_ptr<DecodePool::Batch> batch_;
};

}  // namespace stoker
