// --kv-policy parsing and its errors.
#include "kv/kv_policy.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace mlarun {
namespace {

TEST(KvPolicyTest, ParsesCombinations) {
  const KvPolicy p = ParseKvPolicy("window:512,sinks:4,compress:16");
  EXPECT_EQ(p.window, 512);
  EXPECT_EQ(p.sinks, 4);
  EXPECT_EQ(p.compress, 16);
  EXPECT_EQ(p.ToString(), "window:512,sinks:4,compress:16");
  EXPECT_TRUE(ParseKvPolicy("full").IsFull());
  EXPECT_EQ(ParseKvPolicy("sinks:2,window:8").ToString(), "window:8,sinks:2");
}

void ExpectErrorMentions(const std::string& policy, const std::string& needle) {
  try {
    ParseKvPolicy(policy);
    FAIL() << "no error for " << policy;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-policy"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(KvPolicyTest, RejectsBadPolicies) {
  ExpectErrorMentions("ring:4", "unknown policy 'ring'");
  ExpectErrorMentions("window:0", "window must be >= 1");
  ExpectErrorMentions("window:x", "non-integer");
  ExpectErrorMentions("window:999999999999", "out of range");
  ExpectErrorMentions("window", "needs a value");
  ExpectErrorMentions("compress:1,window:4", "compress must be >= 2");
  ExpectErrorMentions("compress:4", "needs a window");
}

}  // namespace
}  // namespace mlarun
