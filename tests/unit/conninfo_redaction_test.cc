#include "watchserver/conninfo_redaction.h"

#include <gtest/gtest.h>

#include <string>

namespace walwatch {
namespace {

TEST(ConninfoRedaction, RedactsKeywordPassword) {
  EXPECT_EQ(RedactConninfo("host=db user=u password=secret dbname=x"),
            "host=db user=u password=******** dbname=x");
  EXPECT_EQ(RedactConninfo("password=secret"), "password=********");
  EXPECT_EQ(RedactConninfo("host=db password = secret port=5432"),
            "host=db password = ******** port=5432");
  EXPECT_EQ(RedactConninfo("host=db password='se cret' port=5432"),
            "host=db password=******** port=5432");
  EXPECT_EQ(RedactConninfo("password='it\\'s secret' host=db"),
            "password=******** host=db");
  EXPECT_EQ(RedactConninfo("password=sec\\ ret host=db"),
            "password=******** host=db");
  EXPECT_EQ(RedactConninfo("sslpassword=keypass host=db"),
            "sslpassword=******** host=db");
  EXPECT_EQ(RedactConninfo("\tpassword=a\npassword=b"),
            "\tpassword=********\npassword=********");
  // Only the password key: another value mentioning it stays.
  EXPECT_EQ(RedactConninfo("application_name='password=x' host=db"),
            "application_name='password=x' host=db");
  // libpq skips blanks after '=', so here the password is "port=1".
  EXPECT_EQ(RedactConninfo("host=db password= port=1"),
            "host=db password= ********");
  EXPECT_EQ(RedactConninfo("host=db password="), "host=db password=");
  EXPECT_EQ(RedactConninfo("host=db port=5432"), "host=db port=5432");
  EXPECT_EQ(RedactConninfo(""), "");
}

TEST(ConninfoRedaction, UnparsableKeywordConninfoRedactedWhole) {
  EXPECT_EQ(RedactConninfo("host=db password='unterminated"), "********");
  EXPECT_EQ(RedactConninfo("host=db secret"), "********");
}

TEST(ConninfoRedaction, RedactsUriPassword) {
  EXPECT_EQ(
      RedactConninfo("postgresql://user:secret@db:5432/x?sslmode=require"),
      "postgresql://user:********@db:5432/x?sslmode=require");
  EXPECT_EQ(RedactConninfo("postgres://user:secret@db/x"),
            "postgres://user:********@db/x");
  EXPECT_EQ(RedactConninfo("postgresql://:secret@db"),
            "postgresql://:********@db");
  EXPECT_EQ(RedactConninfo("postgresql://user:s%40cret@[::1]:5432,h2/x"),
            "postgresql://user:********@[::1]:5432,h2/x");
  EXPECT_EQ(RedactConninfo("postgresql://db/x?sslmode=require&password=secret"
                           "&application_name=w"),
            "postgresql://db/x?sslmode=require&password=********"
            "&application_name=w");
  EXPECT_EQ(RedactConninfo("postgresql://db?pass%77ord=secret"),
            "postgresql://db?pass%77ord=********");
  EXPECT_EQ(RedactConninfo("postgresql://db?sslpassword=secret"),
            "postgresql://db?sslpassword=********");
  EXPECT_EQ(RedactConninfo("postgresql://user@db:5432/x"),
            "postgresql://user@db:5432/x");
  EXPECT_EQ(RedactConninfo("postgresql://db:5432/x"), "postgresql://db:5432/x");
}

TEST(ConninfoRedaction, UriPasswordWithRawSpecialCharactersDoesNotLeak) {
  // libpq wants these percent-encoded; typed raw, none of it may show.
  for (const char* conninfo :
       {"postgresql://u:p@ss@db/x", "postgresql://u:pa/ss@db/x",
        "postgresql://u:pa?ss@db/x"}) {
    const std::string redacted = RedactConninfo(conninfo);
    EXPECT_EQ(redacted.find("ss"), std::string::npos) << redacted;
    EXPECT_NE(redacted.find("********"), std::string::npos) << redacted;
  }
}

}  // namespace
}  // namespace walwatch
