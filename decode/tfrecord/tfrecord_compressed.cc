#include "decode/tfrecord/tfrecord_compressed.h"

#include <cstring>

#include "decode/tfrecord/crc32c.h"
#include "util/path.h"

namespace stoker {
namespace {

constexpr size_t kInputBuffer = 256 << 10;

}  // namespace

TfRecordCompression CompressionFromName(std::string_view name) {
  if (EndsWith(name, ".gz") || EndsWith(name, ".gzip")) return TfRecordCompression::kGzip;
  if (EndsWith(name, ".zlib") || EndsWith(name, ".zz")) return TfRecordCompression::kZlib;
  return TfRecordCompression::kNone;
}

TfRecordCompression SniffCompression(const uint8_t* p, size_t n) {
  if (n >= 3 && p[0] == 0x1f && p[1] == 0x8b && p[2] == 8) return TfRecordCompression::kGzip;
  if (n >= 2 && (p[0] & 0x0f) == 8 && (p[0] >> 4) <= 7 && ((p[0] << 8) | p[1]) % 31 == 0) {
    return TfRecordCompression::kZlib;
  }
  return TfRecordCompression::kNone;
}

InflatingStream::InflatingStream(ByteSource* src, TfRecordCompression kind)
    : src_(src), zs_(std::make_unique<z_stream>()) {
  STOKER_CHECK(kind != TfRecordCompression::kNone, "InflatingStream needs a compression");
  std::memset(zs_.get(), 0, sizeof(z_stream));
  // 16 + MAX_WBITS: gzip wrapper only, as TensorFlow's ZlibInputStream does.
  int bits = kind == TfRecordCompression::kGzip ? 16 + MAX_WBITS : MAX_WBITS;
  if (inflateInit2(zs_.get(), bits) != Z_OK) {
    broken_ = Status::Error(ENOMEM, "inflateInit2 failed");
    zs_.reset();
  }
}

InflatingStream::~InflatingStream() {
  if (zs_) inflateEnd(zs_.get());
}

Result<size_t> InflatingStream::Read(void* buf, size_t len) {
  if (!broken_.ok()) return broken_;
  // An empty file is an empty stream, as TensorFlow reads it, not a
  // truncated one.
  if (src_->size() == 0) ended_ = true;
  z_stream* zs = zs_.get();
  // zlib counts in uInt; larger requests are simply filled in several rounds.
  size_t done = 0;
  while (done < len && !ended_) {
    zs->next_out = static_cast<Bytef*>(buf) + done;
    zs->avail_out = static_cast<uInt>(std::min<size_t>(len - done, 1u << 30));
    if (zs->avail_in == 0) {
      if (in_.empty()) in_.resize(kInputBuffer);
      auto got = src_->ReadAt(in_.data(), in_.size(), src_off_);
      if (!got.ok()) return got.status();  // an I/O error may be retried
      src_off_ += *got;
      zs->next_in = in_.data();
      zs->avail_in = static_cast<uInt>(*got);
    }
    const uInt before = zs->avail_out;
    const bool no_input = zs->avail_in == 0;
    int rc = inflate(zs, Z_NO_FLUSH);
    done += before - zs->avail_out;
    if (rc == Z_STREAM_END) {
      // Another gzip member may follow; anything else after the end is junk
      // that TensorFlow would also reject.
      if (zs->avail_in == 0 && src_off_ < src_->size()) {
        auto got = src_->ReadAt(in_.data(), in_.size(), src_off_);
        if (!got.ok()) return got.status();
        src_off_ += *got;
        zs->next_in = in_.data();
        zs->avail_in = static_cast<uInt>(*got);
      }
      if (zs->avail_in == 0) {
        ended_ = true;
      } else if (inflateReset(zs) != Z_OK) {
        broken_ = Status::Corruption("compressed tfrecord: cannot restart after stream end");
        return broken_;
      }
      continue;
    }
    if (rc == Z_BUF_ERROR && no_input) {
      broken_ = Status::Corruption("compressed tfrecord: stream truncated at compressed offset " +
                                   std::to_string(src_off_));
      return broken_;
    }
    // With input and output space inflate either progresses or fails, so any
    // other code is corruption; treating it so also rules out a spin.
    if (rc != Z_OK) {
      broken_ = Status::Corruption(std::string("compressed tfrecord: ") +
                                   (zs->msg ? zs->msg : "inflate error " + std::to_string(rc)) +
                                   " near compressed offset " + std::to_string(src_off_));
      return broken_;
    }
  }
  position_ += done;
  return done;
}

Result<bool> CompressedTfRecordReader::Next(TfRecordExtent* extent, std::string* data) {
  if (!broken_.ok()) return broken_;
  auto fail = [&](Status s) -> Status {
    broken_ = s;
    return s;
  };
  const uint64_t at = stream_.position();
  auto truncated = [&](const char* what) {
    return Status::Corruption("compressed tfrecord: record at offset " + std::to_string(at) +
                              ": truncated " + what);
  };
  uint8_t header[kTfRecordHeaderSize];
  auto got = stream_.Read(header, sizeof(header));
  if (!got.ok()) return fail(got.status());
  if (*got == 0) return false;
  if (*got < sizeof(header)) return fail(truncated("header"));
  auto len = DecodeTfRecordHeader(header, at);
  if (!len.ok()) return fail(len.status());
  if (*len > options_.max_record_length) {
    return fail(Status::Corruption("compressed tfrecord: record at offset " + std::to_string(at) +
                                   ": length " + std::to_string(*len) + " exceeds the limit"));
  }
  std::string local;
  std::string* payload = data ? data : &local;
  payload->resize(*len);
  got = stream_.Read(payload->data(), *len);
  if (!got.ok()) return fail(got.status());
  if (*got < *len) return fail(truncated("data"));
  uint8_t footer[kTfRecordFooterSize];
  got = stream_.Read(footer, sizeof(footer));
  if (!got.ok()) return fail(got.status());
  if (*got < sizeof(footer)) return fail(truncated("footer"));
  extent->offset = at;
  extent->length = *len;
  if (options_.verify_data_crc) {
    uint32_t want = 0;
    for (int i = 3; i >= 0; --i) want = (want << 8) | footer[i];
    if (TfRecordMaskedCrc(payload->data(), payload->size()) != want) {
      return Status::Corruption("compressed tfrecord: record at offset " + std::to_string(at) +
                                ": bad data crc");
    }
  }
  return true;
}

bool IsCompressedTfRecord(ByteSource& src, TfRecordCompression kind) {
  if (kind == TfRecordCompression::kNone) return false;
  InflatingStream stream(&src, kind);
  uint8_t header[kTfRecordHeaderSize];
  auto got = stream.Read(header, sizeof(header));
  return got.ok() && *got == sizeof(header) && DecodeTfRecordHeader(header, 0).ok();
}

}  // namespace stoker
