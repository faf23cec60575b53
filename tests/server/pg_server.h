// A throwaway PostgreSQL server for tests: its own data directory under /tmp, listening only on a
// Unix socket in that directory, removed when the object goes. PostgreSQL refuses to run as root:
// when the tests run as root, the server's files and processes belong to the `postgres` user (made
// by Debian's package) or `nobody`. initdb runs once per PostgreSQL version and user into a template
// directory (under a lock, shared by every test process), and each server starts from a copy of it.
// Not thread-safe; one PgServer per test.
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace tessera::testing {

class PgServer {
 public:
  // The directory holding initdb and postgres (the newest /usr/lib/postgresql/N/bin), or "".
  static std::string bin_dir() {
    std::string best;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
      const std::string bin = e.path().string() + "/bin";
      if (::access((bin + "/initdb").c_str(), X_OK) == 0 && ::access((bin + "/postgres").c_str(), X_OK) == 0 &&
          bin > best)
        best = bin;
    }
    return best;
  }

  // Starts a server; on failure returns null and says why in *why (a missing installation starts
  // with "not installed", which tests turn into a skip).
  static std::unique_ptr<PgServer> start(std::string* why) {
    auto s = std::unique_ptr<PgServer>(new PgServer());
    s->bin_ = bin_dir();
    if (s->bin_.empty()) {
      *why = "not installed: no /usr/lib/postgresql/*/bin/initdb (apt install postgresql-15)";
      return nullptr;
    }
    if (::geteuid() == 0) {
      const passwd* pw = ::getpwnam("postgres");
      if (!pw) pw = ::getpwnam("nobody");
      if (!pw) {
        *why = "running as root and no unprivileged user (postgres, nobody) to run PostgreSQL as";
        return nullptr;
      }
      s->uid_ = pw->pw_uid;
      s->gid_ = pw->pw_gid;
    }
    if (!s->make_template(why)) return nullptr;
    char tmpl[] = "/tmp/tessera_pg_XXXXXX";
    if (!::mkdtemp(tmpl)) {
      *why = "mkdtemp failed";
      return nullptr;
    }
    s->dir_ = tmpl;
    s->chown_r(s->dir_);
    if (s->as_user({"/bin/cp", "-a", s->template_dir() + "/.", s->data()}) != 0) {
      *why = "cannot copy the template data directory";
      return nullptr;
    }
    if (!s->start_postmaster(why)) return nullptr;
    return s;
  }

  ~PgServer() {
    stop();
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  // A connection string for database `db` (no password: the server trusts local connections).
  std::string dsn(const std::string& db) const {
    return "host=" + dir_ + " port=" + std::to_string(kPort) + " user=tessera dbname=" + db;
  }
  std::string uri(const std::string& db) const {
    return "postgresql://tessera@/" + db + "?host=" + dir_ + "&port=" + std::to_string(kPort);
  }

  // A new empty database; returns its name ("" and *why on failure).
  std::string create_database(std::string* why) {
    const std::string name = "t" + std::to_string(++databases_);
    if (!sql("postgres", "CREATE DATABASE " + name, why)) return "";
    return name;
  }

  // Runs one statement on `db` as the superuser; false and *why on error.
  bool sql(const std::string& db, const std::string& statement, std::string* why) const {
    PGconn* c = PQconnectdb(dsn(db).c_str());
    bool ok = PQstatus(c) == CONNECTION_OK;
    if (ok) {
      PGresult* r = PQexec(c, statement.c_str());
      ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
      if (!ok && why) *why = PQresultErrorMessage(r);
      PQclear(r);
    } else if (why) {
      *why = PQerrorMessage(c);
    }
    PQfinish(c);
    return ok;
  }

  // Stops the server (fast shutdown: running transactions are rolled back), or kills it.
  void stop(bool kill = false) {
    if (pid_ <= 0) return;
    ::kill(pid_, kill ? SIGKILL : SIGINT);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
  }
  bool restart(std::string* why) {
    stop();
    return start_postmaster(why);
  }
  bool running() const { return pid_ > 0; }
  const std::string& dir() const { return dir_; }

 private:
  static constexpr int kPort = 5432;  // only the socket's name: it lives in our own directory
  PgServer() = default;

  std::string data() const { return dir_ + "/data"; }
  std::string template_dir() const {
    return "/tmp/tessera_pg_template_" + std::to_string(uid_) + "_" + std::filesystem::path(bin_).parent_path().filename().string();
  }

  void chown_r(const std::string& path) const {
    if (::geteuid() != 0) return;
    (void)::chown(path.c_str(), uid_, gid_);
    std::error_code ec;
    for (const auto& e : std::filesystem::recursive_directory_iterator(path, ec))
      (void)::lchown(e.path().c_str(), uid_, gid_);
  }

  // Runs argv as the server's user and waits; returns the exit status (-1 if it could not run).
  int as_user(const std::vector<std::string>& argv, const std::string& log = "/dev/null") const {
    const pid_t pid = spawn(argv, log);
    if (pid < 0) return -1;
    int st = 0;
    ::waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }

  pid_t spawn(const std::vector<std::string>& argv, const std::string& log) const {
    const pid_t pid = ::fork();
    if (pid != 0) return pid;
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    if (::geteuid() == 0) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(gid_) != 0 || ::setuid(uid_) != 0) ::_exit(126);
    }
    ::setenv("LC_ALL", "C", 1);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }

  bool make_template(std::string* why) {
    const std::string t = template_dir();
    const std::string lock = t + ".lock";
    const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0) {
      *why = "cannot lock " + lock;
      if (fd >= 0) ::close(fd);
      return false;
    }
    bool ok = ::access((t + "/PG_VERSION").c_str(), F_OK) == 0 && ::access((t + ".ready").c_str(), F_OK) == 0;
    if (!ok) {
      std::error_code ec;
      std::filesystem::remove_all(t, ec);
      ::mkdir(t.c_str(), 0700);
      chown_r(t);
      ok = as_user({bin_ + "/initdb", "-D", t, "-U", "tessera", "-A", "trust", "-E", "UTF8", "--no-sync"},
                   "/dev/null") == 0;
      if (ok) std::ofstream(t + ".ready") << "ok\n";
      else *why = "initdb failed in " + t;
    }
    ::close(fd);
    return ok;
  }

  bool start_postmaster(std::string* why) {
    const std::string log = dir_ + "/server.log";
    if (::geteuid() == 0) {
      (void)::close(::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600));
      (void)::chown(log.c_str(), uid_, gid_);
    }
    pid_ = spawn({bin_ + "/postgres", "-D", data(), "-k", dir_, "-p", std::to_string(kPort), "-c", "listen_addresses=",
                  "-c", "max_connections=100", "-c", "shared_buffers=16MB"},
                 log);
    // Ready when it accepts a connection (10 s at most).
    const std::string ping = dsn("postgres") + " connect_timeout=2";
    for (int i = 0; i < 200; ++i) {
      if (PQping(ping.c_str()) == PQPING_OK) return true;
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    *why = "PostgreSQL did not start: " + text.substr(text.size() > 2000 ? text.size() - 2000 : 0);
    stop(true);
    return false;
  }

  std::string bin_;
  std::string dir_;
  uid_t uid_ = ::geteuid();
  gid_t gid_ = ::getegid();
  pid_t pid_ = -1;
  int databases_ = 0;
};

}  // namespace tessera::testing
