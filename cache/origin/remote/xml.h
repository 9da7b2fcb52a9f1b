// A small XML reader for what object stores answer (ListObjectsV2 pages and
// error documents): elements, text, and the predefined and numeric entities.
// Attributes are skipped; comments, processing instructions and the
// declaration are ignored; CDATA is text. Not a validating parser: it
// refuses what it cannot read (a tag left open, a bad entity) with EBADMSG.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace stoker {

struct XmlNode {
  std::string name;  // without a namespace prefix
  std::string text;  // the element's own text, entities decoded
  std::vector<XmlNode> children;

  // The first child named name, or null.
  const XmlNode* Child(std::string_view name) const;
  // The text of the first child named name, or "".
  std::string ChildText(std::string_view name) const;
};

// The document's root element.
Result<XmlNode> ParseXml(std::string_view doc);

// Decodes &amp; &lt; &gt; &quot; &apos; &#N; &#xN; (as UTF-8); false for an
// unknown or malformed entity.
bool DecodeEntities(std::string_view in, std::string* out);

}  // namespace stoker
