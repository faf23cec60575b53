// Test harness: runs the real `tessera server` binary as a child process on loopback (any free
// port) with a temporary data directory, and talks to it over real HTTP. Not thread-safe; one
// instance per test. The directory is removed when the harness is destroyed.
#pragma once

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::testing {

using Json = nlohmann::json;

inline std::string make_temp_dir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) std::abort();
  return buf.data();
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct HttpReply {
  int status = 0;  // 0 = no answer (connection failed)
  Json body;
  std::string raw;
};

// One HTTP call to 127.0.0.1:port with a bearer token (empty: none); status 0 when nothing answered.
inline HttpReply http_call(int port, const std::string& method, const std::string& path, const std::string& token,
                           const std::string& body = "", const std::string& content_type = "application/json",
                           httplib::Headers extra = {}) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(30, 0);
  httplib::Headers h = std::move(extra);
  if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
  httplib::Result r = method == "GET"    ? cli.Get(path.c_str(), h)
                      : method == "DELETE" ? cli.Delete(path.c_str(), h)
                                           : cli.Post(path.c_str(), h, body, content_type.c_str());
  HttpReply out;
  if (!r) return out;
  out.status = r->status;
  out.raw = r->body;
  out.body = Json::parse(r->body, nullptr, false);
  return out;
}

// Sends `sig` to a child and waits for it to exit; returns the wait status (-1 if none). Clears pid.
inline int signal_and_wait(pid_t& pid, int sig) {
  if (pid <= 0) return -1;
  ::kill(pid, sig);
  int status = 0;
  waitpid(pid, &status, 0);
  pid = -1;
  return status;
}

class ServerProcess {
 public:
  // `data_dir` empty: a fresh temporary directory. Either way the directory is removed at the end.
  explicit ServerProcess(std::string config = TESSERA_SOURCE_DIR "/tests/server/data/e2e_cluster.yaml",
                         std::string data_dir = "")
      : config_(std::move(config)), dir_(data_dir.empty() ? make_temp_dir("tessera-e2e") : std::move(data_dir)) {}
  ~ServerProcess() {
    kill(SIGKILL);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // By default the server runs --agentless (nodes ready without agents). with_agents() makes it
  // wait for real agents, with these extra flags (kept across restarts), e.g. a short agent timeout.
  void with_agents(std::vector<std::string> flags) {
    agentless_ = false;
    persistent_ = std::move(flags);
  }

  // Another store than the directory (e.g. a PostgreSQL DSN): `--data spec`, with the first admin
  // token written to dir()/admin.token (--admin-token-file).
  // Such a server may start as a standby: start() then waits until it leads (/readyz 200, 15 s at
  // most) unless `wait_to_lead` is false.
  void use_store(std::string spec, bool wait_to_lead = true) {
    data_spec_ = std::move(spec);
    wait_to_lead_ = wait_to_lead;
  }
  // Another server's admin token (controllers sharing one PostgreSQL store share its tokens).
  void set_admin_token(std::string token) { admin_ = std::move(token); }

  const std::string& dir() const { return dir_; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }

  // Starts the server and waits until it prints its address. Returns false (and the output) on failure.
  bool start(std::string* output = nullptr, std::vector<std::string> extra = {}) {
    int out[2];
    if (pipe(out) != 0) return false;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      dup2(out[1], 2);
      close(out[0]);
      std::vector<std::string> args = {TESSERA_BINARY, "server", "--data", data_spec_.empty() ? dir_ : data_spec_,
                                        "--listen", "127.0.0.1:" + std::to_string(port_), "--log-level", "warn"};
      if (!data_spec_.empty()) args.insert(args.end(), {"--admin-token-file", dir_ + "/admin.token"});
      if (!config_.empty()) args.insert(args.end(), {"--config", config_});
      if (agentless_) args.push_back("--agentless");
      args.insert(args.end(), persistent_.begin(), persistent_.end());
      args.insert(args.end(), extra.begin(), extra.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    // Read until the "listening on http://HOST:PORT" line (or the child exits).
    std::string text;
    char buf[512];
    for (;;) {
      const ssize_t n = read(out[0], buf, sizeof buf);
      if (n <= 0) break;
      text.append(buf, size_t(n));
      const auto at = text.find("listening on http://");
      if (at != std::string::npos && text.find('\n', at) != std::string::npos) {
        const auto colon = text.find(':', at + 20);
        port_ = std::stoi(text.substr(colon + 1));
        break;
      }
    }
    // Keep draining the child's output so it never blocks on a full pipe.
    const int fd = out[0];
    drain_ = std::make_shared<std::thread>([fd] {
      char b[512];
      while (read(fd, b, sizeof b) > 0) {
      }
      close(fd);
    });
    drain_->detach();
    if (output) *output = text;
    if (port_ == 0) {
      int status = 0;
      waitpid(pid_, &status, 0);
      pid_ = -1;
      return false;
    }
    if (!data_spec_.empty() && wait_to_lead_) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
      while (http_call(port_, "GET", "/readyz", "").status != 200 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    // A restored store keeps its tokens and gets no admin.token file: admin_token() is then empty.
    if (const std::string t = read_file(dir_ + "/admin.token"); !t.empty() || data_spec_.empty()) admin_ = t;
    while (!admin_.empty() && admin_.back() == '\n') admin_.pop_back();
    return true;
  }

  // Sends a signal and, for SIGKILL/SIGTERM, waits for the exit. Returns the exit status (or -1).
  int kill(int sig) {
    if (sig == SIGHUP) return pid_ > 0 ? ::kill(pid_, sig) : -1;
    return signal_and_wait(pid_, sig);
  }
  // Restarts on the same port and data directory.
  bool restart() { return start(); }

  const std::string& admin_token() const { return admin_; }

  HttpReply call(const std::string& method, const std::string& path, const std::string& token, const std::string& body = "",
                 const std::string& content_type = "application/json", httplib::Headers extra = {}) const {
    return http_call(port_, method, path, token, body, content_type, std::move(extra));
  }
  HttpReply get(const std::string& path, const std::string& token) const { return call("GET", path, token); }
  HttpReply post(const std::string& path, const std::string& token, const Json& body) const {
    return call("POST", path, token, body.dump());
  }
  // Creates a token with the admin token.
  std::string token(const std::string& user, const std::string& role, const std::string& queue = "") const {
    Json body{{"user", user}, {"role", role}, {"queue", queue}};
    if (role == "agent") body["node"] = "*";  // tests that bind a node create the token themselves
    auto r = post("/api/v1/tokens", admin_, body);
    return r.status == 201 ? r.body["token"].get<std::string>() : "";
  }

 private:
  std::string config_;
  bool agentless_ = true;
  std::vector<std::string> persistent_;
  std::string data_spec_;
  bool wait_to_lead_ = true;
  std::string dir_;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string admin_;
  std::shared_ptr<std::thread> drain_;
};

// Polls pred() every 20 ms until it holds or `seconds` pass (cycles and agents run on their own).
template <class F>
bool eventually(F pred, double seconds = 10) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(seconds * 1000));
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

struct CliResult {
  int status = -1;  // exit status; -1 when it did not exit normally
  std::string out, err;
};

// Runs `tessera ARGS...` with TESSERA_SERVER/TESSERA_TOKEN removed from its environment unless
// given in `env`. Output goes to files (no pipe can fill up).
// A run still going after `timeout_s` is killed (status -1).
inline CliResult run_cli(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {},
                  int timeout_s = 60) {
  const std::string dir = make_temp_dir("tessera-cli");
  const std::string out_path = dir + "/out", err_path = dir + "/err";
  const pid_t pid = fork();
  if (pid == 0) {
    const int o = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int e = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(o, 1);
    dup2(e, 2);
    unsetenv("TESSERA_SERVER");
    unsetenv("TESSERA_TOKEN");
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<std::string> all = {TESSERA_BINARY};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  CliResult r;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (WIFEXITED(status)) r.status = WEXITSTATUS(status);
  r.out = read_file(out_path);
  r.err = read_file(err_path);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return r;
}

// A minimal job spec.
inline Json job(const std::string& name, const std::string& queue, Json resources = Json{{"gpus", 1}}) {
  return Json{{"name", name}, {"queue", queue}, {"resources", std::move(resources)}, {"command", {"sleep", "60"}}};
}

}  // namespace tessera::testing
