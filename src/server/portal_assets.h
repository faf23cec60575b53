// The web portal's files (web/, built with npm), embedded in the binary at build time by
// cmake/web_assets.cmake into a generated portal_assets.cc. Paths start with "/" ("/index.html",
// "/assets/index-1a2b3c.js"); Vite puts a content hash in every asset name.
#pragma once

#include <cstddef>
#include <span>

namespace tessera::server {

struct PortalAsset {
  const char* path;
  const char* content_type;
  const unsigned char* data;
  std::size_t size;
};

std::span<const PortalAsset> portal_assets();

}  // namespace tessera::server
