// The CLI config file (src/cli/cli_config.h): where it is, what it holds, and the precedence of
// flags over the environment over the file over the built-in default.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "cli/cli_config.h"

namespace tessera::cli {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(CliConfigFile, PathFromTesseraConfigXdgOrHome) {
  bool explicit_path = false;
  EXPECT_EQ(cli_config_path(env_of({{"TESSERA_CONFIG", "/etc/t.yaml"}, {"HOME", "/home/a"}}), &explicit_path), "/etc/t.yaml");
  EXPECT_TRUE(explicit_path);
  EXPECT_EQ(cli_config_path(env_of({{"XDG_CONFIG_HOME", "/x"}, {"HOME", "/home/a"}}), &explicit_path), "/x/tessera/config.yaml");
  EXPECT_FALSE(explicit_path);
  EXPECT_EQ(cli_config_path(env_of({{"HOME", "/home/a"}})), "/home/a/.config/tessera/config.yaml");
  EXPECT_EQ(cli_config_path(env_of({{"HOME", "/home/a"}, {"TESSERA_CONFIG", ""}})), "/home/a/.config/tessera/config.yaml");
  EXPECT_EQ(cli_config_path(env_of({})), "");
}

TEST(CliConfigFile, ParsesTheFourSettings) {
  const auto env = env_of({{"HOME", "/home/a"}});
  auto c = parse_cli_config("server: http://head:8420\ntoken_file: ~/.config/tessera/token\nqueue: team-a\n",
                            "/home/a/.config/tessera/config.yaml", env);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->server, "http://head:8420");
  EXPECT_EQ(c->token_file, "/home/a/.config/tessera/token");
  EXPECT_EQ(c->queue, "team-a");
  EXPECT_EQ(c->token, "");
  // A relative token_file is next to the config file.
  c = parse_cli_config("token_file: tok\n", "/etc/tessera/cli.yaml", env);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->token_file, "/etc/tessera/tok");
  c = parse_cli_config("token: abc\n", "/x.yaml", env);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->token, "abc");
  // Empty file, comments only: nothing set.
  c = parse_cli_config("# nothing yet\n", "/x.yaml", env);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->server, "");
}

TEST(CliConfigFile, ErrorsNameTheFileAndTheKey) {
  const auto env = env_of({});
  auto c = parse_cli_config("sever: http://x\n", "/home/a/c.yaml", env);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("/home/a/c.yaml"), std::string::npos);
  EXPECT_NE(c.error().message.find("unknown setting 'sever'"), std::string::npos) << c.error().message;
  c = parse_cli_config("token: a\ntoken_file: b\n", "/c.yaml", env);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("not both"), std::string::npos);
  c = parse_cli_config("queue: [a, b]\n", "/c.yaml", env);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("queue: must be a string"), std::string::npos);
  c = parse_cli_config("- a\n- b\n", "/c.yaml", env);
  EXPECT_FALSE(c.ok());
  c = parse_cli_config("server: [unclosed\n", "/c.yaml", env);
  EXPECT_FALSE(c.ok());
}

TEST(CliConfigFile, PrecedenceFlagThenEnvThenFileThenDefault) {
  auto r = resolve_setting(std::string("http://flag:1"), std::string("http://env:2"), "http://file:3", kDefaultServer);
  EXPECT_EQ(r.value, "http://flag:1");
  EXPECT_EQ(r.source, Source::kFlag);
  r = resolve_setting(std::nullopt, std::string("http://env:2"), "http://file:3", kDefaultServer);
  EXPECT_EQ(r.value, "http://env:2");
  EXPECT_EQ(r.source, Source::kEnv);
  r = resolve_setting(std::nullopt, std::string(""), "http://file:3", kDefaultServer);  // an empty variable is unset
  EXPECT_EQ(r.value, "http://file:3");
  EXPECT_EQ(r.source, Source::kConfig);
  r = resolve_setting(std::nullopt, std::nullopt, "", kDefaultServer);
  EXPECT_EQ(r.value, "http://127.0.0.1:8420");
  EXPECT_EQ(r.source, Source::kDefault);
  r = resolve_setting(std::nullopt, std::nullopt, "", "");
  EXPECT_EQ(r.source, Source::kNone);
  EXPECT_STREQ(source_name(Source::kConfig), "config file");
}

TEST(CliConfigFile, LoadsTheFileOrNothing) {
  char tmpl[] = "/tmp/tessera-cli-config-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  // No file at the default place: an empty config, no error.
  auto c = load_cli_config(env_of({{"HOME", dir}}));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->path, "");
  // The default place.
  std::filesystem::create_directories(dir + "/.config/tessera");
  std::ofstream(dir + "/.config/tessera/config.yaml") << "queue: team-b\n";
  c = load_cli_config(env_of({{"HOME", dir}}));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->queue, "team-b");
  EXPECT_EQ(c->path, dir + "/.config/tessera/config.yaml");
  // TESSERA_CONFIG naming a missing file is an error that says so.
  c = load_cli_config(env_of({{"HOME", dir}, {"TESSERA_CONFIG", dir + "/nope.yaml"}}));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("TESSERA_CONFIG"), std::string::npos) << c.error().message;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera::cli
