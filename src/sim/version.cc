// Version string of the simulator layer.
namespace tessera::sim {
const char* version() { return "0.1.0"; }
}  // namespace tessera::sim
