// The commands the docs show, run as written against a real `tessera up` (issue 22: "every command in
// them is run by a test"). The commands are read from the markdown at test time, so the docs cannot
// drift from what the binary does:
//
//   * README.md: the quick start's CLI block (the ```sh block that exports TESSERA_SERVER with the
//     address of `tessera up`, http://127.0.0.1:8420).
//   * docs/from-slurm.md: every ```sh block (the mapping tables are not commands).
//
// (The README's other blocks are not run here: setup, build and the whole test suite; the openb trace
// kept outside the repository; the block of a second controller, `tessera server`, beside `up`.)
//
// Reading a block: a fenced block whose last text line before it ends with a file name in backticks
// and a colon ("saved as `job.sh`:") is a FILE: it is written into the working directory (`~/` into
// the test's HOME) before any command runs. Any other ```sh block holds COMMANDS: one per line (a
// trailing backslash continues it), comment lines ignored. A command's trailing comment may state what
// it does: every "..." after the word `prints` must appear in its output (stdout and stderr), and
// `exits N` is its exit status (else it must exit 0).
//
// How they run: each command is one `bash -c` in a working directory laid out as the docs assume
// (build/bin/tessera and `tessera` on PATH are a copy of the built binary, tessera-data is the
// running `up`'s data directory, examples/ is the repository's), with a fresh HOME and no TESSERA_*
// variables of ours; the exported environment carries from one command to the next (as in one
// terminal). The
// documented default address 127.0.0.1:8420 is replaced by the address of the test's `up`, which
// listens on a free port. Each command has a time limit (its process group is killed past it).
//
// Skipped, by rule (and listed in the test's output):
//   * `tessera up`, `tessera server`, `tessera agent`: daemons that run until stopped (the test runs
//     its own `tessera up` in their place);
//   * `--watch` / `-i` (refresh until Ctrl-C) and commands put in the background with `&`.
// `tessera logs ID -f` is run: it ends when the job ends.
//
// Retried, by rule: a command made only of read-only verbs (jobs, show, history, logs, nodes, queues,
// report) whose stated output has not appeared yet is run again for a while (the scheduler and the
// agent work on their own time); any other command runs exactly once.
#include <gtest/gtest.h>

#include <iomanip>
#include <regex>
#include <set>

#include "agent_process.h"

namespace tessera::testing {
namespace {

// ---- reading the markdown ---------------------------------------------------------------------

struct Block {
  std::string doc;
  std::string lang;       // after the fence: sh, yaml, ...
  std::string file;       // non-empty: this block is the content of that file
  int line = 0;           // 1-based line of the opening fence
  std::vector<std::string> lines;
};

struct Command {
  std::string where;      // DOC:LINE
  std::string code;       // what bash runs (continuations joined)
  std::string comment;    // the trailing comment, without '#'
  std::vector<std::string> prints;
  int exit = 0;
};

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::vector<Block> read_blocks(const std::string& doc) {
  std::vector<Block> out;
  std::istringstream in(read_file(std::string(TESSERA_SOURCE_DIR) + "/" + doc));
  std::string line, last_text;
  Block* open = nullptr;
  int n = 0;
  static const std::regex names_file(R"(`(~?[A-Za-z0-9_./-]*[./][A-Za-z0-9_./-]+)`:\s*$)");
  while (std::getline(in, line)) {
    ++n;
    const std::string t = trim(line);
    if (t.rfind("```", 0) == 0) {
      if (open) {
        open = nullptr;
      } else {
        out.push_back(Block{doc, trim(t.substr(3)), "", n, {}});
        open = &out.back();
        std::smatch m;
        if (std::regex_search(last_text, m, names_file)) open->file = m[1];
      }
      last_text.clear();
      continue;
    }
    if (open) open->lines.push_back(line);
    else if (!t.empty()) last_text = t;
  }
  return out;
}

// Where an unquoted `#` that starts a word begins a comment (npos: none).
size_t comment_start(const std::string& s) {
  bool single = false, dbl = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\\' && !single) { ++i; continue; }
    if (c == '\'' && !dbl) single = !single;
    else if (c == '"' && !single) dbl = !dbl;
    else if (c == '#' && !single && !dbl && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t')) return i;
  }
  return std::string::npos;
}

std::vector<Command> commands_of(const Block& b) {
  std::vector<Command> out;
  std::string acc;
  int first = 0;
  for (size_t i = 0; i < b.lines.size(); ++i) {
    std::string l = b.lines[i];
    while (!l.empty() && (l.back() == '\r' || l.back() == ' ')) l.pop_back();
    if (acc.empty()) {
      if (trim(l).empty() || trim(l)[0] == '#') continue;
      first = b.line + 1 + int(i);
    }
    if (!l.empty() && l.back() == '\\') {
      l.pop_back();
      acc += trim(l) + " ";
      continue;
    }
    acc += trim(l);
    Command c;
    c.where = b.doc + ":" + std::to_string(first);
    const size_t hash = comment_start(acc);
    c.code = trim(acc.substr(0, hash));
    if (hash != std::string::npos) c.comment = trim(acc.substr(hash + 1));
    const size_t prints = c.comment.find("prints");
    if (prints != std::string::npos) {
      static const std::regex quoted("\"([^\"]*)\"");
      const std::string rest = c.comment.substr(prints);
      for (std::sregex_iterator it(rest.begin(), rest.end(), quoted), end; it != end; ++it) c.prints.push_back((*it)[1]);
    }
    static const std::regex exits(R"(\bexits ([0-9]+))");
    std::smatch m;
    if (std::regex_search(c.comment, m, exits)) c.exit = std::stoi(m[1]);
    out.push_back(std::move(c));
    acc.clear();
  }
  return out;
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The tessera verbs a command runs (`build/bin/tessera jobs && tessera logs 1` → jobs, logs).
std::vector<std::string> verbs_of(const std::string& code) {
  const auto w = words(code);
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < w.size(); ++i) {
    const std::string base = w[i].substr(w[i].rfind('/') == std::string::npos ? 0 : w[i].rfind('/') + 1);
    if (base == "tessera") out.push_back(w[i + 1]);
  }
  return out;
}

// Why a command is not run (empty: it is run). See the rules at the top of the file.
std::string skip_reason(const Command& c) {
  for (const std::string& v : verbs_of(c.code))
    if (v == "up" || v == "server" || v == "agent") return "`tessera " + v + "` runs until stopped (the test runs its own `tessera up`)";
  for (const std::string& w : words(c.code))
    if (w == "--watch" || w == "-i" || w.rfind("--watch=", 0) == 0) return "--watch refreshes until Ctrl-C";
  if (c.code.size() >= 2 && c.code.back() == '&' && c.code[c.code.size() - 2] != '&') return "runs in the background";
  return "";
}

bool read_only(const Command& c) {
  static const std::set<std::string> ro = {"jobs", "show", "history", "logs", "nodes", "queues", "report"};
  const auto v = verbs_of(c.code);
  if (v.empty()) return false;
  for (const std::string& x : v)
    if (!ro.count(x)) return false;
  return true;
}

// ---- the cluster and the shell ----------------------------------------------------------------


// A working directory laid out as the docs assume, a `tessera up` on a free port with its data in
// DIR/tessera-data, and a shell whose exported environment carries from one command to the next.
class DocSession {
 public:
  DocSession() : root_(make_temp_dir("tessera-docs")) {
    ::chmod(root_.c_str(), 0755);  // run as root, tasks run as nobody: they read $PWD/examples
    namespace fs = std::filesystem;
    for (const char* d : {"/build/bin", "/bin", "/home", "/.shell"}) fs::create_directories(root_ + d);
    // A copy of the binary, so that a rebuild while the test runs does not pull it from under the
    // commands (a copy taken while the linker writes it does not run: take it again).
    eventually([&] {
      std::error_code ec;
      fs::copy_file(TESSERA_BINARY, binary(), fs::copy_options::overwrite_existing, ec);
      return !ec && std::system((binary() + " --help >/dev/null 2>&1").c_str()) == 0;
    }, 60);
    fs::create_symlink(binary(), root_ + "/build/bin/tessera");
    fs::create_symlink(std::string(TESSERA_SOURCE_DIR) + "/examples", root_ + "/examples");
    std::ofstream(root_ + "/.shell/env").flush();
  }
  ~DocSession() {
    // Still up (a failed test): Ctrl-C first, so that it stops the tasks it started; then SIGKILL.
    if (up_ > 0) {
      ::kill(up_, SIGINT);
      int status = 0;
      if (eventually([&] { return waitpid(up_, &status, WNOHANG) == up_; }, 20)) up_ = -1;
      else stop(SIGKILL);
    }
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
    if (::geteuid() == 0) std::filesystem::remove_all(up_task_dir(root_ + "/tessera-data"), ec);
  }

  // Starts `tessera up --data DIR/tessera-data --listen 127.0.0.1:0 --node local`; the port, 0 on failure.
  int start_up() {
    up_ = fork();
    if (up_ == 0) {
      const int fd = ::open((root_ + "/.shell/up.out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      const std::string data = root_ + "/tessera-data";
      execl(binary().c_str(), binary().c_str(), "up", "--data", data.c_str(), "--listen", "127.0.0.1:0", "--node", "local",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    eventually([&] {
      std::smatch m;
      const std::string text = up_output();
      static const std::regex up("Tessera is up: http://127\\.0\\.0\\.1:([0-9]+)");
      if (std::regex_search(text, m, up)) port_ = std::stoi(m[1]);
      return port_ > 0;
    }, 30);
    token_ = trim(read_file(root_ + "/tessera-data/admin.token"));
    return port_;
  }
  int stop(int sig) { return signal_and_wait(up_, sig); }

  std::string binary() const { return root_ + "/bin/tessera"; }
  std::string up_output() const { return read_file(root_ + "/.shell/up.out"); }
  const std::string& root() const { return root_; }
  const std::string& token() const { return token_; }
  int port() const { return port_; }

  // Writes a file block (a relative name: in the working directory; `~/`: in HOME).
  void write(const Block& b) {
    std::string path = b.file.rfind("~/", 0) == 0 ? root_ + "/home/" + b.file.substr(2) : root_ + "/" + b.file;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream out(path);
    for (const std::string& l : b.lines) out << l << "\n";
  }

  // Runs one command as the docs would in a terminal; status -1 when it did not exit (time limit).
  CliResult run(const std::string& code, const std::map<std::string, std::string>& env, int timeout_s) {
    const std::string dir = root_ + "/.shell";
    const std::string script = "source " + dir + "/env\n" + code + "\n__doc_rc=$?\nexport -p > " + dir + "/env\nexit $__doc_rc\n";
    const pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      if (chdir(root_.c_str()) != 0) _exit(126);
      const int o = ::open((dir + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      const int e = ::open((dir + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      const int in = ::open("/dev/null", O_RDONLY);
      dup2(in, 0);
      dup2(o, 1);
      dup2(e, 2);
      for (const char* v : {"TESSERA_SERVER", "TESSERA_TOKEN", "TESSERA_CONFIG", "XDG_CONFIG_HOME"}) unsetenv(v);
      setenv("HOME", (root_ + "/home").c_str(), 1);
      const char* path = getenv("PATH");
      setenv("PATH", (root_ + "/bin:" + (path ? path : "/usr/bin:/bin")).c_str(), 1);
      for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
      execl("/bin/bash", "bash", "-c", script.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    bool killed = false;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
        killed = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!killed) ::kill(-pid, SIGKILL);  // anything it left behind in its group
    CliResult r;
    if (!killed && WIFEXITED(status)) r.status = WEXITSTATUS(status);
    r.out = read_file(dir + "/out");
    r.err = read_file(dir + "/err");
    return r;
  }

 private:
  std::string root_;
  pid_t up_ = -1;
  int port_ = 0;
  std::string token_;
};

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

std::string tail(const std::string& s, size_t n = 3000) { return s.size() > n ? "..." + s.substr(s.size() - n) : s; }

// Writes the file blocks, then runs the commands in order; stops at the first that fails (the later
// ones build on it). Returns the number of commands run.
int run_doc(DocSession& s, const std::vector<Block>& blocks, const std::map<std::string, std::string>& env) {
  for (const Block& b : blocks)
    if (!b.file.empty()) {
      s.write(b);
      std::cout << "[docs] " << b.doc << ":" << b.line << " file " << b.file << "\n";
    }
  int ran = 0;
  for (const Block& b : blocks) {
    if (!b.file.empty()) continue;
    for (Command c : commands_of(b)) {
      if (const std::string why = skip_reason(c); !why.empty()) {
        std::cout << "[docs] " << c.where << " SKIPPED (" << why << "): " << c.code << "\n";
        continue;
      }
      const std::string code = replace_all(c.code, "127.0.0.1:8420", "127.0.0.1:" + std::to_string(s.port()));
      const auto started = std::chrono::steady_clock::now();
      const auto retry_until = started + std::chrono::seconds(30);
      CliResult r;
      std::vector<std::string> missing;
      int tries = 0;
      for (;;) {
        ++tries;
        r = s.run(code, env, 60);
        missing.clear();
        for (const std::string& p : c.prints)
          if ((r.out + r.err).find(p) == std::string::npos) missing.push_back(p);
        if ((r.status == c.exit && missing.empty()) || !read_only(c) || std::chrono::steady_clock::now() > retry_until) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
      }
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      std::cout << "[docs] " << c.where << " ran (exit " << r.status << ", " << tries << (tries == 1 ? " try, " : " tries, ")
                << std::fixed << std::setprecision(1) << secs << " s): " << c.code << "\n";
      ++ran;
      std::string why;
      if (r.status != c.exit)
        why = r.status < 0 ? "did not end within its time limit" : "exited " + std::to_string(r.status) + ", the doc says " + std::to_string(c.exit);
      for (const std::string& p : missing) why += (why.empty() ? "" : "; ") + std::string("did not print \"") + p + "\"";
      if (!why.empty()) {
        ADD_FAILURE() << c.where << ": `" << c.code << "` " << why << "\n--- stdout:\n" << tail(r.out) << "\n--- stderr:\n"
                      << tail(r.err) << "\n--- tessera up:\n" << tail(s.up_output());
        return ran;
      }
    }
  }
  return ran;
}

// The README's quick start: `tessera up` in one terminal, this block in another.
TEST(DocsCommands, ReadmeQuickStartCliBlockRunsAgainstTesseraUp) {
  std::vector<Block> chosen;
  for (const Block& b : read_blocks("README.md"))
    if (b.lang == "sh" && b.file.empty()) {
      std::string text;
      for (const std::string& l : b.lines) text += l + "\n";
      if (text.find("export TESSERA_SERVER=http://127.0.0.1:8420") != std::string::npos) chosen.push_back(b);
    }
  ASSERT_EQ(chosen.size(), 1u) << "README.md: expected one ```sh block exporting TESSERA_SERVER=http://127.0.0.1:8420 (the "
                                  "quick start's CLI block, against `tessera up`)";
  const bool ddp_out_existed = std::filesystem::exists("/tmp/ddp.json");
  DocSession s;
  ASSERT_GT(s.start_up(), 0) << s.up_output();
  const int ran = run_doc(s, chosen, {});
  EXPECT_GE(ran, 3) << "the block's export, submit, and jobs/logs";
  if (!::testing::Test::HasFailure()) {
    // What the block set up: job 1, the DDP example, trained to the end (`logs 1 -f` waited for it).
    const Json j = http_call(s.port(), "GET", "/api/v1/jobs/1", s.token()).body;
    EXPECT_EQ(j.value("name", ""), "ddp") << j.dump(2);
    EXPECT_EQ(j.value("state", ""), "succeeded") << j.dump(2);
    const std::string log = http_call(s.port(), "GET", "/api/v1/jobs/1/logs", s.token()).raw;
    EXPECT_NE(log.find("done: 100 steps"), std::string::npos)
        << log << (std::system("/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null") == 0
                       ? ""
                       : "\nPyTorch is missing from /usr/bin/python3: install Debian's python3-torch (scripts/setup.sh does)");
  }
  const int status = s.stop(SIGINT);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << tail(s.up_output());
  if (!ddp_out_existed) {
    std::error_code ec;
    std::filesystem::remove("/tmp/ddp.json", ec);
  }
}

// docs/from-slurm.md: its files and every command of its ```sh blocks, against a fresh `tessera up`
// with TESSERA_SERVER and TESSERA_TOKEN exported as the README shows.
TEST(DocsCommands, FromSlurmCommandsRunAgainstTesseraUp) {
  const std::vector<Block> blocks = read_blocks("docs/from-slurm.md");
  std::vector<Block> chosen;
  int files = 0, commands = 0, stated = 0;
  for (const Block& b : blocks) {
    if (!b.file.empty()) {
      chosen.push_back(b);
      ++files;
    } else if (b.lang == "sh") {
      chosen.push_back(b);
      for (const Command& c : commands_of(b)) {
        ++commands;
        if (!c.prints.empty() || c.exit != 0) ++stated;
      }
    }
  }
  ASSERT_GE(files, 1) << "docs/from-slurm.md: the batch script its commands submit, in a block after a line naming it";
  ASSERT_GE(commands, 5) << "docs/from-slurm.md: its ```sh blocks of commands";
  EXPECT_GE(stated, commands / 2) << "most commands say what they print";
  DocSession s;
  ASSERT_GT(s.start_up(), 0) << s.up_output();
  const std::map<std::string, std::string> env = {{"TESSERA_SERVER", "http://127.0.0.1:" + std::to_string(s.port())},
                                                  {"TESSERA_TOKEN", s.token()}};
  run_doc(s, chosen, env);
  const int status = s.stop(SIGINT);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << tail(s.up_output());
}

}  // namespace
}  // namespace tessera::testing
