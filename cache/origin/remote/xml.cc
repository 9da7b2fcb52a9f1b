#include "cache/origin/remote/xml.h"

#include <cstdint>

namespace stoker {
namespace {

constexpr int kMaxDepth = 64;

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Reader {
 public:
  explicit Reader(std::string_view doc) : s_(doc) {}

  Result<XmlNode> Document() {
    SkipMisc();
    if (!At("<")) return Bad("no root element");
    XmlNode root;
    STOKER_RETURN_IF_ERROR(Element(&root, 0));
    return root;
  }

 private:
  bool At(std::string_view p) const { return s_.substr(pos_, p.size()) == p; }
  Status Bad(const std::string& why) const {
    return Status::Corruption("XML at byte " + std::to_string(pos_) + ": " + why);
  }

  // Whitespace, the declaration, comments, processing instructions, DOCTYPE.
  void SkipMisc() {
    for (;;) {
      while (pos_ < s_.size() && std::string_view(" \t\r\n").find(s_[pos_]) != std::string::npos) {
        ++pos_;
      }
      if (At("<?")) {
        size_t e = s_.find("?>", pos_);
        pos_ = e == std::string_view::npos ? s_.size() : e + 2;
      } else if (At("<!--")) {
        size_t e = s_.find("-->", pos_);
        pos_ = e == std::string_view::npos ? s_.size() : e + 3;
      } else if (At("<!DOCTYPE")) {
        size_t e = s_.find('>', pos_);
        pos_ = e == std::string_view::npos ? s_.size() : e + 1;
      } else {
        return;
      }
    }
  }

  // At '<' of a start tag.
  Status Element(XmlNode* node, int depth) {
    if (depth > kMaxDepth) return Bad("nested too deep");
    ++pos_;
    size_t name_end = s_.find_first_of(" \t\r\n/>", pos_);
    if (name_end == std::string_view::npos || name_end == pos_) return Bad("bad tag");
    std::string_view qname = s_.substr(pos_, name_end - pos_);
    size_t colon = qname.find(':');
    node->name = std::string(colon == std::string_view::npos ? qname : qname.substr(colon + 1));
    // Skip attributes (values may hold '>' only inside quotes).
    pos_ = name_end;
    char quote = 0;
    for (; pos_ < s_.size(); ++pos_) {
      char c = s_[pos_];
      if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '>') {
        break;
      }
    }
    if (pos_ >= s_.size()) return Bad("tag not closed");
    if (s_[pos_ - 1] == '/') {
      ++pos_;
      return Status::OK();  // <Empty/>
    }
    ++pos_;
    for (;;) {
      if (pos_ >= s_.size()) return Bad("element '" + node->name + "' not closed");
      if (At("</")) {
        size_t e = s_.find('>', pos_);
        if (e == std::string_view::npos) return Bad("end tag not closed");
        std::string_view name = s_.substr(pos_ + 2, e - pos_ - 2);
        while (!name.empty() && (name.back() == ' ' || name.back() == '\t' || name.back() == '\n' ||
                                 name.back() == '\r')) {
          name.remove_suffix(1);
        }
        if (size_t colon = name.rfind(':'); colon != std::string_view::npos) {
          name.remove_prefix(colon + 1);  // a namespace prefix, dropped as from start tags
        }
        if (name != node->name) {
          return Bad("</" + std::string(name) + "> does not close <" + node->name + ">");
        }
        pos_ = e + 1;
        return Status::OK();
      }
      if (At("<!--")) {
        size_t e = s_.find("-->", pos_);
        if (e == std::string_view::npos) return Bad("comment not closed");
        pos_ = e + 3;
      } else if (At("<![CDATA[")) {
        size_t e = s_.find("]]>", pos_);
        if (e == std::string_view::npos) return Bad("CDATA not closed");
        node->text.append(s_.substr(pos_ + 9, e - pos_ - 9));
        pos_ = e + 3;
      } else if (At("<?")) {
        size_t e = s_.find("?>", pos_);
        if (e == std::string_view::npos) return Bad("instruction not closed");
        pos_ = e + 2;
      } else if (At("<")) {
        node->children.emplace_back();
        STOKER_RETURN_IF_ERROR(Element(&node->children.back(), depth + 1));
      } else {
        size_t e = s_.find('<', pos_);
        if (e == std::string_view::npos) e = s_.size();
        std::string decoded;
        if (!DecodeEntities(s_.substr(pos_, e - pos_), &decoded)) return Bad("bad entity");
        node->text += decoded;
        pos_ = e;
      }
    }
  }

  const std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

const XmlNode* XmlNode::Child(std::string_view n) const {
  for (const XmlNode& c : children) {
    if (c.name == n) return &c;
  }
  return nullptr;
}

std::string XmlNode::ChildText(std::string_view n) const {
  const XmlNode* c = Child(n);
  return c ? c->text : "";
}

Result<XmlNode> ParseXml(std::string_view doc) { return Reader(doc).Document(); }

bool DecodeEntities(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '&') {
      *out += in[i];
      continue;
    }
    size_t semi = in.find(';', i);
    if (semi == std::string_view::npos || semi - i > 12) return false;
    std::string_view ent = in.substr(i + 1, semi - i - 1);
    if (ent == "amp") {
      *out += '&';
    } else if (ent == "lt") {
      *out += '<';
    } else if (ent == "gt") {
      *out += '>';
    } else if (ent == "quot") {
      *out += '"';
    } else if (ent == "apos") {
      *out += '\'';
    } else if (ent.size() >= 2 && ent[0] == '#') {
      bool hex = ent[1] == 'x' || ent[1] == 'X';
      std::string_view digits = ent.substr(hex ? 2 : 1);
      if (digits.empty()) return false;
      uint32_t cp = 0;
      for (char c : digits) {
        int d;
        if (c >= '0' && c <= '9') {
          d = c - '0';
        } else if (hex && c >= 'a' && c <= 'f') {
          d = c - 'a' + 10;
        } else if (hex && c >= 'A' && c <= 'F') {
          d = c - 'A' + 10;
        } else {
          return false;
        }
        cp = cp * (hex ? 16 : 10) + static_cast<uint32_t>(d);
        if (cp > 0x10FFFF) return false;
      }
      if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
      AppendUtf8(cp, out);
    } else {
      return false;
    }
    i = semi;
  }
  return true;
}

}  // namespace stoker
