#include "server/route_groups.h"

namespace tessera::server {

void register_report_routes(httplib::Server&, Controller&, const Authenticator&) {}

}  // namespace tessera::server
