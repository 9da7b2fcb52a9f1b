// Producing decoded view bytes: one TFRecord view record, or a whole .npy
// view, written into a buffer the caller owns (later: a derived object's
// write buffer in the cache), exactly as the layout predicted.
//
// Contract: out_len must be the entry's out_size (the layout's size for
// .npy). The raw input is re-planned (view_record.h) and must give the
// layout's shape and sizes, or production fails with EBADMSG ("does not
// match its layout": the raw bytes are not what was laid out) before any
// byte is written. A kFailed entry fails with EIO. Decoder errors pass
// through (EBADMSG for a JPEG whose data is corrupt past its header). On
// any error out holds garbage and must not be published.
//
// Thread-safety: pure functions; the decoder must be thread-safe (all
// JpegDecoders are), so many records may be produced at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "decode/jpeg/jpeg_decoder.h"
#include "decode/view/view_layout.h"
#include "decode/view/view_options.h"
#include "util/status.h"

namespace stoker {

// raw_payload: the raw record's payload (its CRC already checked by the
// reader that fetched it).
Status ProduceTfRecordViewRecord(const ViewRecord& record, std::string_view raw_payload,
                                 const ViewOptions& options, JpegDecoder& decoder, uint8_t* out,
                                 size_t out_len);

// jpeg_file: the whole raw JPEG file.
Status ProduceNpyView(const ViewLayout& layout, std::string_view jpeg_file,
                      const ViewOptions& options, JpegDecoder& decoder, uint8_t* out,
                      size_t out_len);

}  // namespace stoker
