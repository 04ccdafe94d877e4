// The tensor name rule every binding applies (hvrun.h: validate_tensor_name).
#include <gtest/gtest.h>

#include <string>

#include "hvrun/hvrun.h"

namespace hvrun {
namespace {

TEST(TensorName, Utf8TextIsAcceptedWhateverItsScript) {
  for (const std::string name :
       {"w", "layer.0/weight:grad", "\xc3\xa9t\xc3\xa9", "\xe2\x88\x91", "\xf0\x9f\x98\x80",
        "\xf4\x8f\xbf\xbf" /* U+10FFFF */, "tab\there"})
    EXPECT_TRUE(validate_tensor_name(name).is_ok()) << escaped_tensor_name(name);
}

TEST(TensorName, AnythingElseIsRefusedSayingWhereAndShowingTheNameEscaped) {
  struct Case {
    std::string name;
    std::string says;
  };
  for (const Case& c : {
           Case{"", "empty tensor name"},
           Case{std::string("a\0b", 3), "\"a\\x00b\" contains a NUL character at byte 1"},
           Case{"grad.\xff", "\"grad.\\xff\" is not valid UTF-8 (byte 0xff at offset 5)"},
           Case{"\xed\xa0\x80", "(byte 0xed at offset 0)"},        // a surrogate
           Case{"\xc0\xaf", "(byte 0xc0 at offset 0)"},            // overlong
           Case{"\xe0\x80\xaf", "(byte 0xe0 at offset 0)"},        // overlong, 3 bytes
           Case{"\xf4\x90\x80\x80", "(byte 0xf4 at offset 0)"},    // above U+10FFFF
           Case{"ok\xe2\x82", "(byte 0xe2 at offset 2)"},          // cut short
           Case{"\x80", "(byte 0x80 at offset 0)"},                // a lone continuation byte
       }) {
    Status s = validate_tensor_name(c.name);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << escaped_tensor_name(c.name);
    EXPECT_NE(s.message().find(c.says), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("UTF-8 text without NUL"), std::string::npos) << s.message();
  }
}

TEST(TensorName, EscapingKeepsPrintableAsciiAndBoundsTheLength) {
  EXPECT_EQ(escaped_tensor_name("a\"b\\c\n\xff"), "\"a\\\"b\\\\c\\x0a\\xff\"");
  const std::string shown = escaped_tensor_name(std::string(5000, 'x'));
  EXPECT_LT(shown.size(), 300u);
  EXPECT_NE(shown.find("(5000 bytes, first 200 shown)"), std::string::npos) << shown;
}

}  // namespace
}  // namespace hvrun
