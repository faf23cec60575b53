#include "server/route_groups.h"

namespace tessera::server {

void register_portal_routes(httplib::Server&) {}

}  // namespace tessera::server
