#include "decode/tfrecord/tfrecord.h"

#include <cstring>
#include <vector>

#include "decode/tfrecord/crc32c.h"

namespace stoker {
namespace {

void PutLe32(uint32_t v, uint8_t* p) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void PutLe64(uint64_t v, uint8_t* p) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t GetLe32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t GetLe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string At(uint64_t offset) { return "tfrecord: record at offset " + std::to_string(offset); }

}  // namespace

void EncodeTfRecordHeader(uint64_t length, uint8_t out[kTfRecordHeaderSize]) {
  PutLe64(length, out);
  PutLe32(MaskCrc(Crc32c(out, 8)), out + 8);
}

uint32_t TfRecordMaskedCrc(const void* data, size_t len) { return MaskCrc(Crc32c(data, len)); }

void EncodeTfRecordFooter(uint32_t masked_crc, uint8_t out[kTfRecordFooterSize]) {
  PutLe32(masked_crc, out);
}

void AppendTfRecord(std::string_view payload, std::string* out) {
  uint8_t header[kTfRecordHeaderSize];
  uint8_t footer[kTfRecordFooterSize];
  EncodeTfRecordHeader(payload.size(), header);
  EncodeTfRecordFooter(TfRecordMaskedCrc(payload.data(), payload.size()), footer);
  out->append(reinterpret_cast<const char*>(header), sizeof(header));
  out->append(payload);
  out->append(reinterpret_cast<const char*>(footer), sizeof(footer));
}

Result<uint64_t> DecodeTfRecordHeader(const uint8_t header[kTfRecordHeaderSize], uint64_t offset) {
  if (MaskCrc(Crc32c(header, 8)) != GetLe32(header + 8)) {
    return Status::Corruption(At(offset) + ": bad length crc");
  }
  return GetLe64(header);
}

bool IsTfRecord(const uint8_t* first, size_t n, uint64_t file_size) {
  if (n < kTfRecordHeaderSize || file_size < kTfRecordOverhead) return false;
  auto len = DecodeTfRecordHeader(first, 0);
  return len.ok() && *len <= file_size - kTfRecordOverhead;
}

Result<bool> TfRecordReader::Next(TfRecordExtent* extent, std::string* data) {
  if (!broken_.ok()) return broken_;
  const uint64_t size = src_->size();
  const uint64_t at = offset_;
  if (at >= size) return false;
  auto fail = [&](Status s) -> Status {
    broken_ = s;
    return s;
  };

  uint8_t header[kTfRecordHeaderSize];
  if (size - at < kTfRecordHeaderSize) {
    return fail(Status::Corruption(At(at) + ": truncated header (" + std::to_string(size - at) +
                                   " of 12 bytes before the end)"));
  }
  STOKER_RETURN_IF_ERROR(ReadExactly(*src_, header, sizeof(header), at, "tfrecord header"));
  auto len = DecodeTfRecordHeader(header, at);
  if (!len.ok()) return fail(len.status());
  const uint64_t length = *len;
  if (length > size - at - kTfRecordHeaderSize ||
      size - at - kTfRecordHeaderSize - length < kTfRecordFooterSize) {
    return fail(Status::Corruption(At(at) + ": length " + std::to_string(length) +
                                   " past end of file (size " + std::to_string(size) + ")"));
  }
  if (length > options_.max_record_length) {
    return fail(Status::Corruption(At(at) + ": length " + std::to_string(length) +
                                   " exceeds the limit of " +
                                   std::to_string(options_.max_record_length)));
  }

  const uint64_t data_at = at + kTfRecordHeaderSize;
  uint32_t crc = 0;
  if (data != nullptr) {
    data->resize(length);
    STOKER_RETURN_IF_ERROR(ReadExactly(*src_, data->data(), length, data_at, "tfrecord data"));
    if (options_.verify_data_crc) crc = Crc32c(data->data(), length);
  } else if (options_.verify_data_crc) {
    std::vector<uint8_t> buf(std::min<uint64_t>(length, 256 << 10));
    for (uint64_t done = 0; done < length;) {
      size_t n = std::min<uint64_t>(buf.size(), length - done);
      STOKER_RETURN_IF_ERROR(ReadExactly(*src_, buf.data(), n, data_at + done, "tfrecord data"));
      crc = Crc32cExtend(crc, buf.data(), n);
      done += n;
    }
  }
  extent->offset = at;
  extent->length = length;
  offset_ = extent->end();
  if (options_.verify_data_crc) {
    uint8_t footer[kTfRecordFooterSize];
    STOKER_RETURN_IF_ERROR(
        ReadExactly(*src_, footer, sizeof(footer), data_at + length, "tfrecord footer"));
    if (MaskCrc(crc) != GetLe32(footer)) {
      return Status::Corruption(At(at) + ": bad data crc");  // framing intact: not sticky
    }
  }
  return true;
}

Result<std::string> ReadTfRecordAt(ByteSource& src, uint64_t offset,
                                   const TfRecordReaderOptions& options) {
  TfRecordReader reader(&src, options);
  reader.Seek(offset);
  TfRecordExtent extent;
  std::string data;
  STOKER_ASSIGN_OR_RETURN(bool got, reader.Next(&extent, &data));
  if (!got) {
    return Status::Corruption(At(offset) + ": no record there (end of file at " +
                              std::to_string(src.size()) + ")");
  }
  return data;
}

}  // namespace stoker
