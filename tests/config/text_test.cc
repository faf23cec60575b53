// The text checks at the trust boundary (config/text.h) and the YAML look-ahead that bounds the
// parser's memory (yaml_precheck).
#include <gtest/gtest.h>

#include "config/job_spec.h"
#include "config/text.h"
#include "config/yaml_fields.h"

namespace tessera::config {
namespace {

TEST(Utf8, AcceptsWellFormedTextAndRefusesEveryMalformedKind) {
  EXPECT_TRUE(valid_utf8(""));
  EXPECT_TRUE(valid_utf8("plain ascii"));
  EXPECT_TRUE(valid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));  // é € 😀
  EXPECT_FALSE(valid_utf8("\xFF"));
  EXPECT_FALSE(valid_utf8("\xC3\x28"));          // a bad continuation byte
  EXPECT_FALSE(valid_utf8("\xC0\xAF"));          // an overlong '/'
  EXPECT_FALSE(valid_utf8("\xE0\x80\xAF"));      // overlong, 3 bytes
  EXPECT_FALSE(valid_utf8("\xED\xA0\x80"));      // a UTF-16 surrogate
  EXPECT_FALSE(valid_utf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(valid_utf8("\xE2\x82"));          // cut short
  EXPECT_TRUE(printable_utf8("node-1 \xC3\xA9"));
  EXPECT_FALSE(printable_utf8("a\nb"));
  EXPECT_FALSE(printable_utf8(std::string("a\0b", 3)));
  EXPECT_FALSE(printable_utf8("\x7F"));
}

TEST(Utf8, LogEscapingKeepsOneLineAndValidUtf8) {
  EXPECT_EQ(escape_for_log("a\nlevel=error forged"), "a\\nlevel=error forged");
  EXPECT_EQ(escape_for_log("tab\there\r"), "tab\\there\\r");
  EXPECT_EQ(escape_for_log("\xFF\x01"), "\\xff\\x01");
  EXPECT_EQ(escape_for_log("back\\slash"), "back\\\\slash");
  EXPECT_EQ(escape_for_log("caf\xC3\xA9"), "caf\xC3\xA9");
  const std::string hostile = "x\n\xC3\x28\x7F\xF0\x9F\x98";
  const std::string e = escape_for_log(hostile);
  EXPECT_TRUE(printable_utf8(e)) << e;
}

TEST(Utf8, TruncationStopsOnACharacterBoundary) {
  EXPECT_EQ(truncate_utf8("short", 10), "short");
  EXPECT_EQ(truncate_utf8("abcdef", 3), "abc...");
  EXPECT_EQ(truncate_utf8("\xC3\xA9\xC3\xA9", 3), "\xC3\xA9...");  // never half an é
}

TEST(YamlPrecheck, RefusesDeepOrHugeDocumentsBeforeParsingThem) {
  EXPECT_TRUE(yaml_precheck("name: j\nqueue: q\ncommand: [sleep, '10']\nenv: {A: 'it''s: [not, nested'}\n", 1000).ok());
  const Status deep = yaml_precheck(std::string(1 << 20, '['), 50000);
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.message().find("nested too deeply"), std::string::npos);
  std::string dashes;
  for (int i = 0; i < 100; ++i) dashes += "- ";
  EXPECT_FALSE(yaml_precheck(dashes + "x\n", 50000).ok());
  std::string wide = "[";
  for (int i = 0; i < 60000; ++i) wide += "[],";
  wide += "]";
  const Status many = yaml_precheck(wide, 50000);
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.message().find("too many"), std::string::npos);
  // A quote inside a plain scalar does not hide what follows it.
  EXPECT_FALSE(yaml_precheck("name: it's\nx: " + std::string(100, '[') + "\n", 50000).ok());
  // Quoted brackets are text, not nesting; comments are skipped.
  EXPECT_TRUE(yaml_precheck("a: \"" + std::string(200, '[') + "\"\n# " + std::string(200, '{') + "\n", 50000).ok());
}

TEST(YamlPrecheck, AJobSpecOfABracketFloodIsRefusedCheaply) {
  auto r = parse_job_spec_yaml(std::string(1 << 20, '['));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("nested too deeply"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace tessera::config
