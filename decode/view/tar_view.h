// The decoded view of a tar archive (a WebDataset shard): the same members
// in the same order, each image member KEY.jpg / KEY.jpeg (any case, a
// regular file) replaced by KEY.npy, the decoded pixels as an .npy array
// (npy.h), with its headers rewritten for the new name and size and every
// other field kept (tar_format.h); every other member, the extension headers
// of those members and the end-of-archive blocks copied byte for byte.
//
// Its layout (a ViewLayout of kind kTar) is a sequence of entries in raw
// order:
//  - kCopy: raw bytes copied (runs of members that are not images merge).
//  - kImage: one image member: in_offset/in_size its raw headers, data and
//    padding; out_size = rewritten headers + .npy header + pixels, padded to
//    a block; prefix_size = the bytes before the pixels.
//  - kFailed (on_error=fail): an image member whose JPEG does not probe (or,
//    with a check, does not decode), or the rest of an archive whose headers
//    broke; it occupies its raw size and reads as EIO.
//  - kZeros (on_error=skip only): the end-of-archive blocks after the last
//    good member of an archive whose headers broke.
// Under on_error=skip an image member that does not decode is left out (the
// archive stays one tar readers accept). Either way each problem is listed
// in the layout's errors. Laying out reads every header and every image
// member's bytes (to probe them) but decodes nothing; other members' data is
// not read.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "decode/jpeg/jpeg_decoder.h"
#include "decode/tar/tar_format.h"
#include "decode/view/view_layout.h"
#include "decode/view/view_options.h"
#include "util/status.h"

namespace stoker {

// The suffix an image member's name ends in (".jpg", ".JPEG", ...), or
// empty: the member stays as it is.
std::string_view TarImageSuffix(const TarMember& member);

// One image member planned, from its raw bytes (its first header block to
// the end of its data): what both the layout and the producer derive from
// them, so that their sizes agree.
struct PlannedTarImage {
  std::string_view jpeg;  // inside the raw bytes
  ImageShape shape;
  std::string headers;  // the rewritten tar headers
  std::string npy_header;
  uint64_t prefix_size() const { return headers.size() + npy_header.size(); }
  uint64_t out_size() const {
    return headers.size() + TarPadded(npy_header.size() + shape.pixel_bytes());
  }
};
// Errors: the tar's (EBADMSG), the probe's and OutputShape's (view_record.h).
Result<PlannedTarImage> PlanTarImage(std::string_view member_raw, const ViewOptions& options);

// Scans a whole raw tar file and lays out its view. Data problems end up in
// the layout; only ByteSource errors are returned. check: as for
// LayoutTfRecordView (used under on_error=skip only).
Result<ViewLayout> LayoutTarView(ByteSource& src, const ViewOptions& options,
                                 const std::string& decoder_name, const JpegCheck& check = nullptr);

// Produces one kImage entry of a tar view from the member's raw bytes, as
// view_producer.h produces a TFRecord record (same contract and errors).
Status ProduceTarViewMember(const ViewRecord& record, std::string_view member_raw,
                            const ViewOptions& options, JpegDecoder& decoder, uint8_t* out,
                            size_t out_len);

}  // namespace stoker
