// What the application takes back when it deregisters a region or invalidates a binding: the
// memory it covered and which region it was. An access that resolved through that region is cut
// off; one through another region that is still valid over the same bytes (libfabric's
// registration cache registers one region over two it holds, then deregisters those) goes on.
// Where an access keeps no record of the region it resolved through (a placement, a Send's
// gather list), the bytes decide.
#pragma once

#include "base/bytes.h"

namespace uwarp::proto {

struct RevokedRegion {
  ConstByteSpan memory;
  // The region's identity: the object that an access keeps alive while it uses the region
  // (ReadSource::keep). Compared, never dereferenced.
  const void* region = nullptr;
};

}  // namespace uwarp::proto
