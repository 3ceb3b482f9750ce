// The web UI of `tracedb view` (view/web/), embedded in the binary at build time by
// view/embed_assets.cmake.
#pragma once

#include <cstddef>
#include <string_view>

namespace tracedb::view {

struct Asset {
  const char* path;  // "/index.html"
  const char* content_type;
  const unsigned char* data;
  size_t size;
};

// The asset served at `path`, or nullptr.
const Asset* FindAsset(std::string_view path);

}  // namespace tracedb::view
