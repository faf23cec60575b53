#include "server/route_groups.h"

namespace tessera::server {

void register_metrics_routes(httplib::Server&, Controller&, const Authenticator&) {}
void observe_request(const httplib::Request&, const httplib::Response&, double) {}

}  // namespace tessera::server
