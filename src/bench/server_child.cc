#include "bench/server_child.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <httplib.h>

namespace tessera::bench {

namespace fs = std::filesystem;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int64_t status_kib(pid_t pid, const char* field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  const size_t len = std::strlen(field);
  while (std::getline(in, line))
    if (line.compare(0, len, field) == 0 && line.size() > len && line[len] == ':') return std::atoll(line.c_str() + len + 1);
  return -1;
}

}  // namespace

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

Result<std::unique_ptr<ServerChild>> ServerChild::start(const ServerChildOptions& o) {
  if (o.dir.empty()) return invalid_argument("server: no work directory");
  std::unique_ptr<ServerChild> c(new ServerChild());
  c->data_dir_ = o.dir + "/data";
  c->log_path_ = o.dir + "/server.log";
  c->agent_port_ = free_loopback_port();
  if (c->agent_port_ <= 0) return internal_error("server: no free loopback port for the agents' listener");
  // The running binary by its real path, so that the child shows as `tessera server` in ps and top.
  std::string binary = o.binary;
  if (binary == "/proc/self/exe") {
    std::error_code ec;
    const fs::path real = fs::read_symlink(binary, ec);
    if (!ec) binary = real.string();
  }
  const std::string token_path = o.store.empty() ? c->data_dir_ + "/admin.token" : o.dir + "/admin.token";
  std::vector<std::string> args = {binary, "server", "--data", o.store.empty() ? c->data_dir_ : o.store, "--listen",
                                   "127.0.0.1:0", "--agent-listen", "127.0.0.1:" + std::to_string(c->agent_port_)};
  if (!o.store.empty()) args.insert(args.end(), {"--admin-token-file", token_path});
  if (!o.config_path.empty()) args.insert(args.end(), {"--config", o.config_path});
  args.insert(args.end(), o.args.begin(), o.args.end());
  const int log_fd = ::open(c->log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (log_fd < 0) return internal_error("server: cannot create " + c->log_path_ + ": " + std::strerror(errno));
  const pid_t parent = ::getpid();
  c->pid_ = ::fork();
  if (c->pid_ < 0) {
    ::close(log_fd);
    return internal_error(std::string("server: fork: ") + std::strerror(errno));
  }
  if (c->pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the benchmark
    if (::getppid() != parent) _exit(1);
    if (o.nice && ::setpriority(PRIO_PROCESS, 0, *o.nice) != 0) _exit(126);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  ::close(log_fd);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(o.start_timeout_s);
  const std::string mark = "listening on http://";
  while (std::chrono::steady_clock::now() < until) {
    const std::string log = read_all(c->log_path_);
    if (const size_t at = log.find(mark); at != std::string::npos && log.find('\n', at) != std::string::npos) {
      const size_t colon = log.find(':', at + mark.size());
      c->port_ = std::atoi(log.c_str() + colon + 1);
      break;
    }
    if (!c->running()) return internal_error("server: `tessera server` exited at start: " + c->log_tail());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (c->port_ <= 0) return internal_error("server: not listening after " + std::to_string(o.start_timeout_s) + " s: " + c->log_tail());
  std::string token;
  // With PostgreSQL the server serves once it leads (and then writes the token on a first start).
  while (std::chrono::steady_clock::now() < until) {
    token = read_all(token_path);
    if (!token.empty() && token.back() == '\n' &&
        (o.store.empty() || read_all(c->log_path_).find("tessera server leads") != std::string::npos))
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  if (token.empty()) return internal_error("server: no admin token in " + token_path);
  c->admin_token_ = token;
  return c;
}

ServerChild::~ServerChild() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

bool ServerChild::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

double ServerChild::cpu_seconds() const {
  if (pid_ <= 0) return 0;
  const std::string stat = read_all("/proc/" + std::to_string(pid_) + "/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream in(stat.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {  // fields 14 and 15: utime, stime (clock ticks)
    if (i == 14) utime = std::atof(field.c_str());
    if (i == 15) stime = std::atof(field.c_str());
  }
  return (utime + stime) / double(::sysconf(_SC_CLK_TCK));
}

int64_t ServerChild::peak_rss_bytes() const { return pid_ > 0 ? status_kib(pid_, "VmHWM") * 1024 : -1; }
int64_t ServerChild::rss_bytes() const { return pid_ > 0 ? status_kib(pid_, "VmRSS") * 1024 : -1; }

int64_t ServerChild::store_bytes() const {
  int64_t sum = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(data_dir_, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file(ec)) sum += int64_t(it->file_size(ec));
  return sum;
}

std::string ServerChild::stop(int grace_s) {
  if (pid_ <= 0) return "not running";
  ::kill(pid_, SIGTERM);
  int status = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(grace_s);
  while (std::chrono::steady_clock::now() < until) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status)) : "signal " + std::to_string(WTERMSIG(status));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return "killed after " + std::to_string(grace_s) + " s";
}

std::string ServerChild::log_tail(size_t bytes) const {
  const std::string log = read_all(log_path_);
  return log.size() > bytes ? "..." + log.substr(log.size() - bytes) : log;
}

RestClient::RestClient(int port, std::string token, int read_timeout_s)
    : cli_(std::make_unique<httplib::Client>("127.0.0.1", port)), token_(std::move(token)) {
  cli_->set_keep_alive(true);
  cli_->set_tcp_nodelay(true);
  cli_->set_connection_timeout(5, 0);
  cli_->set_read_timeout(read_timeout_s, 0);
  cli_->set_bearer_token_auth(token_);
}

RestClient::~RestClient() = default;

namespace {
RestReply to_reply(const httplib::Result& r) {
  RestReply out;
  if (!r) {
    out.error = httplib::to_string(r.error());
    return out;
  }
  out.status = r->status;
  out.raw = r->body;
  out.body = nlohmann::json::parse(r->body, nullptr, false);
  return out;
}
}  // namespace

RestReply RestClient::get(const std::string& path) { return to_reply(cli_->Get(path)); }
RestReply RestClient::post(const std::string& path, const std::string& body) {
  return to_reply(cli_->Post(path, body, "application/json"));
}
std::string RestClient::metrics_text() {
  auto r = cli_->Get("/metrics");
  return r && r->status == 200 ? r->body : "";
}

}  // namespace tessera::bench
