// Runs SQL directly on a database file, outside the store (to forge versions, damage or inspect a
// store in tests). Test-only; opens and closes the file on every call.
#pragma once

#include <sqlite3.h>

#include <string>

namespace tessera::testing {

// The first column of the first row `sql` yields, or "" (no rows, or the file cannot be opened).
inline std::string sqlite_query(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string result;
  if (sqlite3_open(path.c_str(), &db) == SQLITE_OK) {
    sqlite3_exec(
        db, sql.c_str(),
        [](void* out, int, char** values, char**) {
          auto* text = static_cast<std::string*>(out);
          if (text->empty() && values[0]) *text = values[0];
          return 0;
        },
        &result, nullptr);
  }
  sqlite3_close(db);
  return result;
}

}  // namespace tessera::testing
