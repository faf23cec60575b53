// `tessera admin` (backup, restore, migrate, reload), a verb of tessera-full only: `admin restore`
// installs a backup into a data directory, and `admin migrate` copies a store into another (SQLite to
// PostgreSQL), with the server's store code, which the client-only `tessera` does not link
// (docs/performance.md, "CLI start"). Backup and reload are REST calls.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/api_client.h"
#include "cli/client_args.h"
#include "cli/client_util.h"
#include "cli/commands.h"
#include "server/data_dir.h"
#include "server/store.h"

namespace tessera::cli {
namespace {

using nlohmann::json;

// ---- admin ----

struct BackupArgs {
  ConnArgs conn;
  std::string file;
  bool force = false;
};

void run_backup(const BackupArgs& a) {
  const std::string verb = "admin backup";
  std::error_code ec;
  if (std::filesystem::exists(a.file, ec) && !a.force)
    fail(verb, a.file + " exists; pass --force to replace it or choose another name");
  auto api = connect(verb, a.conn, /*read_timeout=*/600);
  // Write next to FILE, then rename: FILE is either the old one or the complete new copy.
  const std::filesystem::path target(a.file);
  std::string tmpl = (target.has_parent_path() ? target.parent_path().string() + "/" : std::string()) + "." +
                     target.filename().string() + ".tmp.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  const int fd = mkstemp(buf.data());
  if (fd < 0) fail(verb, "cannot create a temporary file next to " + a.file + " (" + std::strerror(errno) + "); check the directory exists and is writable");
  const std::string tmp(buf.data());
  int64_t bytes = 0;
  int write_errno = 0;  // set when writing the temporary file failed
  std::string header;
  const Status s = api->download("/api/v1/admin/backup", [&](const char* data, size_t len) {
    if (header.size() < 16) header.append(data, std::min(len, 16 - header.size()));
    for (size_t off = 0; off < len;) {
      const ssize_t w = ::write(fd, data + off, len - off);
      if (w < 0) {
        if (errno == EINTR) continue;
        write_errno = errno;
        return false;
      }
      off += static_cast<size_t>(w);
    }
    bytes += static_cast<int64_t>(len);
    return true;
  });
  auto abandon = [&](const std::string& msg) {
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(verb, msg);
  };
  if (write_errno != 0)
    abandon("writing " + tmp + " failed (" + std::strerror(write_errno) + "); free some space or choose another place");
  if (!s.ok()) abandon(s.message());
  if (header.compare(0, 15, "SQLite format 3") != 0)
    abandon("the server's answer is not a SQLite file (" + std::to_string(bytes) + " bytes); nothing was written");
  if (::fsync(fd) != 0) abandon("fsync of " + tmp + " failed (" + std::strerror(errno) + ")");
  ::fchmod(fd, 0600);  // the store holds token hashes and job records
  ::close(fd);
  if (std::rename(tmp.c_str(), a.file.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    fail(verb, "cannot rename " + tmp + " to " + a.file + " (" + std::strerror(e) + ")");
  }
  std::cout << "Saved a backup of " << api->base_url() << " to " << a.file << " (" << bytes << " bytes)\n";
}

struct RestoreArgs {
  std::string file, data;
  bool force = false;
};

void run_restore(const RestoreArgs& a) {
  const std::string verb = "admin restore";
  if (a.data.empty()) fail(verb, "--data DIR is required: the server's data directory (the server must be stopped)", 2);
  const Status s = server::restore_sqlite_store(a.file, a.data, a.force);
  if (!s.ok()) fail(verb, s.message());
  std::cout << "Restored " << a.file << " into " << a.data << "; start the server with `tessera server --data " << a.data << "`\n";
}

struct MigrateArgs {
  std::string from, to;
};

// Offline: the source must not be in use by a server (a SQLite directory is locked while copying).
void run_migrate(const MigrateArgs& a) {
  const std::string verb = "admin migrate";
  auto from = server::parse_store_location(a.from);
  if (!from.ok()) fail(verb, "--from: " + from.error().message, 2);
  auto to = server::parse_store_location(a.to);
  if (!to.ok()) fail(verb, "--to: " + to.error().message, 2);
  if (from->kind == to->kind && from->describe() == to->describe()) fail(verb, "--from and --to name the same store", 2);
  std::optional<server::DataDirLock> lock;
  if (from->kind == server::StoreLocation::Kind::kSqlite) {
    if (!std::filesystem::exists(from->dir + "/tessera.db"))
      fail(verb, "--from: " + from->dir + " holds no store (no tessera.db)", 2);
    auto l = server::lock_data_dir(from->dir);
    if (!l.ok()) fail(verb, from->dir + " is in use (stop its server first): " + l.error().message);
    lock.emplace(std::move(*l));
  }
  auto src = server::open_store(*from);
  if (!src.ok()) fail(verb, "--from " + from->describe() + ": " + src.error().message);
  auto dst = server::open_store(*to);
  if (!dst.ok()) fail(verb, "--to " + to->describe() + ": " + dst.error().message);
  auto report = server::copy_store(**src, **dst, [](const std::string& line) { std::cout << "  " << line << std::endl; });
  if (!report.ok()) fail(verb, report.error().message);
  std::cout << "Migrated " << from->describe() << " to " << to->describe() << ": " << report->jobs << " jobs, "
            << report->events << " events, " << report->tokens << " tokens, " << report->meta
            << " metadata values (SHA-256 " << report->checksum << ", the same in both). Start the server with "
            << "`tessera server --data " << to->describe() << "`\n";
}

void run_reload(const ConnArgs& c) {
  const std::string verb = "admin reload";
  auto api = connect(verb, c);
  const ApiResponse r = call_post(verb, *api, "/api/v1/admin/reload", json::object());
  if (c.json) return print_json(r.body);
  std::cout << "Reloaded the configuration of " << api->base_url() << "\n";
}

}  // namespace

void register_admin(CLI::App& app) {
  CLI::App* admin = app.add_subcommand("admin", "Administration: backup, restore, migrate, reload");
  admin->require_subcommand(1);

  auto b = std::make_shared<BackupArgs>();
  CLI::App* backup = admin->add_subcommand("backup", "Save an online, consistent copy of the server's store to FILE");
  add_conn_options(backup, b->conn);
  backup->add_option("FILE", b->file, "where to write the copy (a SQLite file)")->required();
  backup->add_flag("--force", b->force, "replace FILE if it exists");
  backup->callback([b] { run_backup(*b); });

  auto r = std::make_shared<RestoreArgs>();
  CLI::App* restore = admin->add_subcommand("restore", "Install a backup as DIR's store (offline: the server must be stopped)");
  restore->add_option("FILE", r->file, "a file saved by `tessera admin backup`")->required()->check(CLI::ExistingFile);
  restore->add_option("--data", r->data, "the server's data directory")->required();
  restore->add_flag("--force", r->force, "replace DIR's existing store");
  restore->callback([r] { run_restore(*r); });

  auto m = std::make_shared<MigrateArgs>();
  CLI::App* migrate = admin->add_subcommand(
      "migrate", "Copy a stopped server's store into an empty one (e.g. SQLite to PostgreSQL), and verify counts and checksums");
  migrate->add_option("--from", m->from, "the store to copy: a data directory or sqlite:DIR (or postgres://...)")->required();
  migrate->add_option("--to", m->to, "an empty store: postgres://... (password from PGPASSWORD or a password file) or sqlite:DIR")
      ->required();
  migrate->callback([m] { run_migrate(*m); });

  auto rc = std::make_shared<ConnArgs>();
  CLI::App* reload = admin->add_subcommand("reload", "Re-read the server's config file (as SIGHUP does)");
  add_conn_options(reload, *rc);
  reload->callback([rc] { run_reload(*rc); });
}


}  // namespace tessera::cli
