// JSON output helpers. See json_out.h.
#include "shell/json_out.h"

namespace tracedb::shell {

void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
      ++i;
    } else if (c < 0x20) {
      char buf[8];
      switch (c) {
        case '\n':
          out->append("\\n");
          break;
        case '\r':
          out->append("\\r");
          break;
        case '\t':
          out->append("\\t");
          break;
        default:
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out->append(buf);
      }
      ++i;
    } else if (c < 0x80) {
      out->push_back(static_cast<char>(c));
      ++i;
    } else {
      // Validate one UTF-8 sequence.
      int len = (c >= 0xf0 && c <= 0xf4) ? 4 : (c >= 0xe0) ? 3 : (c >= 0xc2 && c < 0xe0) ? 2 : 0;
      bool ok = len > 0 && i + static_cast<size_t>(len) <= s.size() && c < 0xf5;
      for (int k = 1; ok && k < len; ++k) {
        ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
      }
      if (ok) {
        out->append(s.substr(i, static_cast<size_t>(len)));
        i += static_cast<size_t>(len);
      } else {
        out->append("\xef\xbf\xbd");
        ++i;
      }
    }
  }
  out->push_back('"');
}

}  // namespace tracedb::shell
