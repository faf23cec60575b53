#include "server/store.h"

#include <future>

namespace tessera::server {

Status Store::write_sync(WriteBatch batch) {
  std::promise<Status> p;
  auto f = p.get_future();
  write(std::move(batch), [&p](Status s) { p.set_value(std::move(s)); });
  return f.get();
}

}  // namespace tessera::server
