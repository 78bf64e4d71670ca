#include "watchserver/watch_request.h"

#include <gtest/gtest.h>

#include <string>

namespace walwatch {
namespace {

ParsedRequest Get(const std::string& target) {
  return ParseRequest("GET", target);
}

// A request that must be rejected with `code`; returns the message.
std::string ExpectError(const ParsedRequest& parsed, int code,
                        const std::string& reason) {
  EXPECT_TRUE(parsed.error.has_value());
  if (!parsed.error) return "";
  EXPECT_EQ(parsed.error->code, code);
  EXPECT_EQ(parsed.error->reason, reason);
  return parsed.error->message;
}

TEST(WatchRequest, CoreResourceAllNamespaces) {
  ParsedRequest p = Get("/api/v1/pods?watch=1");
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.route, RouteKind::kWatch);
  EXPECT_EQ(p.watch.group, "");
  EXPECT_EQ(p.watch.version, "v1");
  EXPECT_EQ(p.watch.resource, "pods");
  EXPECT_EQ(p.watch.ns, "");
  EXPECT_EQ(p.watch.cluster, "");
  EXPECT_FALSE(p.watch.resource_version);
  EXPECT_FALSE(p.watch.timeout_seconds);
}

TEST(WatchRequest, CoreNamespaced) {
  ParsedRequest p = Get("/api/v1/namespaces/kube-system/configmaps?watch=true");
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.watch.ns, "kube-system");
  EXPECT_EQ(p.watch.resource, "configmaps");
}

TEST(WatchRequest, NamespacesResourceItself) {
  ParsedRequest p = Get("/api/v1/namespaces?watch=1");
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.watch.resource, "namespaces");
  EXPECT_EQ(p.watch.ns, "");
}

TEST(WatchRequest, GroupedResource) {
  ParsedRequest p = Get("/apis/apps/v1/deployments?watch=1");
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.watch.group, "apps");
  EXPECT_EQ(p.watch.version, "v1");
  EXPECT_EQ(p.watch.resource, "deployments");
}

TEST(WatchRequest, GroupedNamespacedWithCluster) {
  ParsedRequest p = Get(
      "/clusters/member-1/apis/batch/v1/namespaces/jobs-ns/cronjobs?watch=1");
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.watch.cluster, "member-1");
  EXPECT_EQ(p.watch.group, "batch");
  EXPECT_EQ(p.watch.ns, "jobs-ns");
  EXPECT_EQ(p.watch.resource, "cronjobs");
}

TEST(WatchRequest, CoreWithCluster) {
  ParsedRequest p = Get("/clusters/c1/api/v1/pods?watch=1");
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.watch.cluster, "c1");
  EXPECT_EQ(p.watch.resource, "pods");
}

TEST(WatchRequest, PercentDecodesPathSegments) {
  ParsedRequest p =
      Get("/clusters/my%20cluster/api/v1/namespaces/n%2Ds/pods?watch=1");
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.watch.cluster, "my cluster");
  EXPECT_EQ(p.watch.ns, "n-s");
}

TEST(WatchRequest, PlusIsLiteralInPathButSpaceInQuery) {
  ParsedRequest p =
      Get("/clusters/a+b/api/v1/pods?watch=1&labelSelector=app+in+(x%2Cy)");
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.watch.cluster, "a+b");
  EXPECT_EQ(p.watch.label_selector, "app in (x,y)");
}

TEST(WatchRequest, KeepsAllQueryOptions) {
  ParsedRequest p =
      Get("/api/v1/pods?watch=1&resourceVersion=12345&timeoutSeconds=30"
          "&allowWatchBookmarks=true&labelSelector=a%3Db&fieldSelector="
          "metadata.name%3Dx&sendInitialEvents=true"
          "&resourceVersionMatch=NotOlderThan");
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.watch.resource_version, 12345u);
  EXPECT_EQ(p.watch.timeout_seconds, 30);
  EXPECT_TRUE(p.watch.allow_watch_bookmarks);
  EXPECT_EQ(p.watch.label_selector, "a=b");
  EXPECT_EQ(p.watch.field_selector, "metadata.name=x");
  EXPECT_EQ(p.watch.send_initial_events, true);
  EXPECT_EQ(p.watch.resource_version_match, "NotOlderThan");
}

TEST(WatchRequest, ResourceVersionEdgeValues) {
  EXPECT_EQ(
      Get("/api/v1/pods?watch=1&resourceVersion=0").watch.resource_version, 0u);
  EXPECT_EQ(Get("/api/v1/pods?watch=1&resourceVersion=18446744073709551615")
                .watch.resource_version,
            18446744073709551615u);
  ParsedRequest empty = Get("/api/v1/pods?watch=1&resourceVersion=");
  ASSERT_FALSE(empty.error);
  EXPECT_FALSE(empty.watch.resource_version);
}

TEST(WatchRequest, RejectsBadResourceVersions) {
  for (const char* bad :
       {"-1", "abc", "12a", "+5", " 5", "5 ", "1.5", "0x10", "%2B5", "007",
        "00", "18446744073709551616", "99999999999999999999999"}) {
    ParsedRequest p =
        Get(std::string("/api/v1/pods?watch=1&resourceVersion=") + bad);
    std::string message = ExpectError(p, 400, "BadRequest");
    EXPECT_NE(message.find("resourceVersion"), std::string::npos) << bad;
  }
  std::string message = ExpectError(
      Get("/api/v1/pods?watch=1&resourceVersion=-7"), 400, "BadRequest");
  EXPECT_NE(message.find("\"-7\""), std::string::npos) << message;
}

// As apimachinery reads booleans: "0" and "false" (any case) are false,
// anything else, an empty value included, is true.
TEST(WatchRequest, ReadsBooleansAsApimachineryDoes) {
  for (const char* t : {"?watch", "?watch=", "?watch=1", "?watch=TRUE",
                        "?watch=yes", "?watch=2"}) {
    EXPECT_FALSE(Get(std::string("/api/v1/pods") + t).error) << t;
  }
  for (const char* f : {"?watch=0", "?watch=false", "?watch=FALSE"}) {
    ExpectError(Get(std::string("/api/v1/pods") + f), 400, "BadRequest");
  }
  EXPECT_TRUE(Get("/api/v1/pods?watch&allowWatchBookmarks=")
                  .watch.allow_watch_bookmarks);
  EXPECT_TRUE(Get("/api/v1/pods?watch&allowWatchBookmarks=maybe")
                  .watch.allow_watch_bookmarks);
  EXPECT_FALSE(Get("/api/v1/pods?watch&allowWatchBookmarks=False")
                   .watch.allow_watch_bookmarks);
  EXPECT_EQ(Get("/api/v1/pods?watch&sendInitialEvents=0&"
                "resourceVersionMatch=NotOlderThan")
                .watch.send_initial_events,
            false);
  EXPECT_EQ(Get("/api/v1/pods?watch&sendInitialEvents&"
                "resourceVersionMatch=NotOlderThan")
                .watch.send_initial_events,
            true);
}

TEST(WatchRequest, RejectsBadTimeoutSeconds) {
  for (const char* bad : {"-1", "x", "1.5", "+3", "9223372036854775808"}) {
    std::string message = ExpectError(
        Get(std::string("/api/v1/pods?watch=1&timeoutSeconds=") + bad), 400,
        "BadRequest");
    EXPECT_NE(message.find("timeoutSeconds"), std::string::npos);
  }
  EXPECT_EQ(Get("/api/v1/pods?watch=1&timeoutSeconds=0").watch.timeout_seconds,
            0);
}

// apimachinery's validateWatchOptions, answered as the apiserver answers
// it: 422 Invalid on ListOptions.meta.k8s.io, with one cause per error.
TEST(WatchRequest, RejectsInvalidWatchOptionsAsTheApiserverDoes) {
  const std::string kPrefix = "ListOptions.meta.k8s.io \"\" is invalid: ";
  const std::string kNeedsMatch =
      "resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
      "resourceVersionMatch to NotOlderThan";
  const std::string kNeedsInitial =
      "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for "
      "watch unless sendInitialEvents is provided";
  // "x" is true, and so needs resourceVersionMatch.
  for (const char* target : {"/api/v1/pods?watch=1&sendInitialEvents=x",
                             "/api/v1/pods?watch=1&sendInitialEvents=false"}) {
    EXPECT_EQ(ExpectError(Get(target), 422, "Invalid"), kPrefix + kNeedsMatch)
        << target;
  }
  EXPECT_EQ(ExpectError(Get("/api/v1/pods?watch=1&resourceVersionMatch="
                            "NotOlderThan"),
                        422, "Invalid"),
            kPrefix + kNeedsInitial);

  // Two errors: aggregated in brackets, one cause each, in order.
  ParsedRequest p = Get(
      "/api/v1/pods?watch=1&resourceVersionMatch=Exact&sendInitialEvents=true");
  EXPECT_EQ(ExpectError(p, 422, "Invalid"),
            kPrefix + "[" + kNeedsMatch +
                ", resourceVersionMatch: Unsupported value: \"Exact\": "
                "supported values: \"NotOlderThan\"]");
  ASSERT_TRUE(p.error && p.error->details);
  EXPECT_EQ(p.error->details->group, "meta.k8s.io");
  EXPECT_EQ(p.error->details->kind, "ListOptions");
  EXPECT_EQ(p.error->details->name, "");
  ASSERT_EQ(p.error->details->causes.size(), 2u);
  EXPECT_EQ(p.error->details->causes[0].reason, "FieldValueForbidden");
  EXPECT_EQ(p.error->details->causes[0].field, "resourceVersionMatch");
  EXPECT_EQ(p.error->details->causes[0].message,
            "Forbidden: sendInitialEvents requires setting "
            "resourceVersionMatch to NotOlderThan");
  EXPECT_EQ(p.error->details->causes[1].reason, "FieldValueNotSupported");
  EXPECT_EQ(p.error->details->causes[1].message,
            "Unsupported value: \"Exact\": supported values: "
            "\"NotOlderThan\"");
  // Go's field order: details before code, group and kind before causes.
  EXPECT_EQ(
      StatusJson(*p.error),
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
      R"("message":"ListOptions.meta.k8s.io \"\" is invalid: [)"
      R"(resourceVersionMatch: Forbidden: sendInitialEvents requires setting )"
      R"(resourceVersionMatch to NotOlderThan, resourceVersionMatch: )"
      R"(Unsupported value: \"Exact\": supported values: \"NotOlderThan\"]",)"
      R"("reason":"Invalid","details":{"group":"meta.k8s.io",)"
      R"("kind":"ListOptions","causes":[{"reason":"FieldValueForbidden",)"
      R"("message":"Forbidden: sendInitialEvents requires setting )"
      R"(resourceVersionMatch to NotOlderThan","field":"resourceVersionMatch"},)"
      R"({"reason":"FieldValueNotSupported","message":"Unsupported value: )"
      R"(\"Exact\": supported values: \"NotOlderThan\"",)"
      R"("field":"resourceVersionMatch"}]},"code":422})");

  // continue is ignored on a watch, except beside resourceVersionMatch.
  EXPECT_FALSE(Get("/api/v1/pods?watch=1&continue=abc").error);
  EXPECT_EQ(ExpectError(Get("/api/v1/pods?watch=1&sendInitialEvents=true&"
                            "resourceVersionMatch=NotOlderThan&continue=abc"),
                        422, "Invalid"),
            kPrefix +
                "resourceVersionMatch: Forbidden: resourceVersionMatch is "
                "forbidden when continue is provided");
}

TEST(WatchRequest, IgnoresUnknownParametersAndTakesFirstValue) {
  ParsedRequest p = Get(
      "/api/v1/"
      "pods?pretty=true&watch=1&limit=500&resourceVersion=7&resourceVersion=9");
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.watch.resource_version, 7u);
}

TEST(WatchRequest, GetWithoutWatchIsBadRequest) {
  std::string message = ExpectError(Get("/api/v1/pods"), 400, "BadRequest");
  EXPECT_NE(message.find("serves only watches"), std::string::npos) << message;
  ExpectError(Get("/api/v1/pods?watch=false"), 400, "BadRequest");
  ExpectError(Get("/api/v1/pods?watch=0&resourceVersion=5"), 400, "BadRequest");
}

TEST(WatchRequest, NonGetIsMethodNotAllowed) {
  for (const char* method : {"POST", "PUT", "DELETE", "PATCH", "HEAD"}) {
    ExpectError(ParseRequest(method, "/api/v1/pods?watch=1"), 405,
                "MethodNotAllowed");
  }
  ExpectError(ParseRequest("POST", "/healthz"), 405, "MethodNotAllowed");
}

TEST(WatchRequest, UnknownPathsAreNotFound) {
  for (const char* path :
       {"/", "/api", "/api/v2/pods?watch=1", "/apis/apps?watch=1",
        "/apis/apps/v1?watch=1", "/api/v1/namespaces/default?watch=1",
        "/api/v1/namespaces/default/pods/name?watch=1", "/api/v1/watch/pods",
        "/clusters/c1", "/clusters/c1/healthz", "/metrics",
        "/apis/apps/v1/foo/bar?watch=1"}) {
    ExpectError(Get(path), 404, "NotFound");
  }
}

TEST(WatchRequest, RejectsBadSegments) {
  for (const char* path :
       {"/api/v1/namespaces/../pods?watch=1",
        "/api/v1/namespaces/./pods?watch=1",
        "/api/v1/namespaces/%2E%2E/pods?watch=1", "/api//pods?watch=1",
        "/api/v1/pods/?watch=1", "/api/v1/namespaces/a%2Fb/pods?watch=1",
        "/api/v1/namespaces/a%00b/pods?watch=1",
        "/api/v1/namespaces/a%0Ab/pods?watch=1",
        "/clusters/%zz/api/v1/pods?watch=1", "/clusters/%4/api/v1/pods?watch=1",
        "/clusters/abc%/api/v1/pods?watch=1", "pods", "",
        // Not UTF-8, raw or escaped: PostgreSQL would refuse it as a text
        // parameter of the initial-state query.
        "/api/v1/namespaces/\xff\xfe/pods?watch=1",
        "/clusters/a%C3/api/v1/pods?watch=1"}) {
    ExpectError(Get(path), 400, "BadRequest");
  }
  EXPECT_FALSE(Get("/clusters/caf%C3%A9/api/v1/pods?watch=1").error);
  std::string long_name(kMaxPathSegmentBytes + 1, 'a');
  ExpectError(Get("/api/v1/namespaces/" + long_name + "/pods?watch=1"), 400,
              "BadRequest");
  std::string max_name(kMaxPathSegmentBytes, 'a');
  EXPECT_FALSE(Get("/api/v1/namespaces/" + max_name + "/pods?watch=1").error);
}

TEST(WatchRequest, RejectsBadQueryEscape) {
  ExpectError(Get("/api/v1/pods?watch=1&labelSelector=%zz"), 400, "BadRequest");
}

TEST(WatchRequest, HealthRoutes) {
  EXPECT_EQ(Get("/healthz").route, RouteKind::kHealthz);
  EXPECT_EQ(Get("/readyz?verbose").route, RouteKind::kReadyz);
  EXPECT_EQ(Get("/livez").route, RouteKind::kLivez);
  EXPECT_FALSE(Get("/healthz").error);
}

TEST(WatchRequest, HandoffRoute) {
  ParsedRequest p =
      Get("/walwatch/v1/handoff?snapshot=700:712:701,705&insertLSN=0/16B3748");
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.route, RouteKind::kHandoff);
  EXPECT_EQ(p.handoff.snapshot, "700:712:701,705");
  EXPECT_EQ(p.handoff.insert_lsn, 0x16B3748u);

  // Percent-encoded, as Go's url.Values.Encode writes it; no insertLSN.
  p = Get("/walwatch/v1/handoff?snapshot=700%3A700%3A");
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.handoff.snapshot, "700:700:");
  EXPECT_EQ(p.handoff.insert_lsn, 0u);
  p = Get("/walwatch/v1/handoff?snapshot=1:2:&insertLSN=");
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.handoff.insert_lsn, 0u);
}

TEST(WatchRequest, HandoffNeedsAValidSnapshotAndLsn) {
  EXPECT_NE(ExpectError(Get("/walwatch/v1/handoff"), 400, "BadRequest")
                .find("snapshot is required"),
            std::string::npos);
  ExpectError(Get("/walwatch/v1/handoff?snapshot="), 400, "BadRequest");
  for (const char* bad : {"abc", "5:4:", "1:2", "1:9:12", "1:9:3,", "-1:2:"}) {
    std::string message = ExpectError(
        Get(std::string("/walwatch/v1/handoff?snapshot=") + bad), 400,
        "BadRequest");
    EXPECT_NE(message.find("snapshot"), std::string::npos) << bad;
  }
  for (const char* bad : {"16B3748", "0/", "/1", "0/123456789", "g/1",
                          "0/16B3748x", "-0/1"}) {
    std::string message = ExpectError(
        Get(std::string("/walwatch/v1/handoff?snapshot=1:2:&insertLSN=") + bad),
        400, "BadRequest");
    EXPECT_NE(message.find("insertLSN"), std::string::npos) << bad;
  }
  ExpectError(ParseRequest("POST", "/walwatch/v1/handoff?snapshot=1:2:"), 405,
              "MethodNotAllowed");
}

// The MySQL/MariaDB form: binlog_snapshot_file and binlog_snapshot_position
// of the list's consistent snapshot.
TEST(WatchRequest, HandoffInTheBinlogForm) {
  ParsedRequest p = Get(
      "/walwatch/v1/handoff?binlogFile=mariadb-bin.000003&binlogPosition=1234");
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.route, RouteKind::kHandoff);
  EXPECT_TRUE(p.handoff.binlog());
  EXPECT_EQ(p.handoff.binlog_file, "mariadb-bin.000003");
  EXPECT_EQ(p.handoff.binlog_position, 1234u);
  EXPECT_FALSE(p.handoff.binlog_server_id.has_value());
  EXPECT_TRUE(p.handoff.snapshot.empty());
  // With the server the list was read on.
  p = Get(
      "/walwatch/v1/handoff?binlogFile=mariadb-bin.000003&binlogPosition=1234"
      "&serverId=4294967295");
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.handoff.binlog_server_id, 4294967295u);
  // A file name with its folder, as some servers report it.
  p =
      Get("/walwatch/v1/handoff?binlogFile=%2Fvar%2Flib%2Fmysql%2Fbinlog."
          "000012&binlogPosition=4");
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.handoff.binlog_file, "/var/lib/mysql/binlog.000012");

  for (const char* bad : {"binlogFile=mariadb-bin.000003", "binlogPosition=4",
                          "binlogFile=mariadb-bin&binlogPosition=4",
                          "binlogFile=.000003&binlogPosition=4",
                          "binlogFile=b.0000000001&binlogPosition=4",
                          "binlogFile=b.1&binlogPosition=x",
                          "binlogFile=b.1&binlogPosition=10000000000",
                          "binlogFile=b.1&binlogPosition=-1"}) {
    std::string message = ExpectError(
        Get(std::string("/walwatch/v1/handoff?") + bad), 400, "BadRequest");
    EXPECT_NE(message.find("binlog"), std::string::npos) << bad;
  }
  for (const char* bad :
       {"serverId=x", "serverId=", "serverId=-1", "serverId=4294967296"}) {
    std::string message =
        ExpectError(Get(std::string("/walwatch/v1/handoff?binlogFile=b.1&"
                                    "binlogPosition=4&") +
                        bad),
                    400, "BadRequest");
    EXPECT_NE(message.find("serverId"), std::string::npos) << bad;
  }
  // One form or the other.
  EXPECT_NE(ExpectError(Get("/walwatch/v1/handoff?snapshot=1:2:&binlogFile="
                            "b.1&binlogPosition=4"),
                        400, "BadRequest")
                .find("not both"),
            std::string::npos);
}

TEST(WatchRequest, FreshRvRoute) {
  ParsedRequest p = Get("/walwatch/v1/freshrv");
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.route, RouteKind::kFreshRv);
  ExpectError(ParseRequest("PUT", "/walwatch/v1/freshrv"), 405,
              "MethodNotAllowed");
  ExpectError(Get("/walwatch/v1/other"), 404, "NotFound");
  ExpectError(Get("/walwatch/v2/freshrv"), 404, "NotFound");
}

TEST(WatchRequest, ParsePgLsn) {
  uint64_t lsn = 1;
  EXPECT_TRUE(ParsePgLsn("0/0", &lsn));
  EXPECT_EQ(lsn, 0u);
  EXPECT_TRUE(ParsePgLsn("0/1558570", &lsn));
  EXPECT_EQ(lsn, 22381936u);
  EXPECT_TRUE(ParsePgLsn("FFFFFFFF/ffffffff", &lsn));
  EXPECT_EQ(lsn, UINT64_MAX);
  EXPECT_TRUE(ParsePgLsn("1/0", &lsn));
  EXPECT_EQ(lsn, uint64_t{1} << 32);
  for (const char* bad : {"", "/", "1", "1/", "/1", "1//1", "1/1/1",
                          "100000000/0", "0/100000000", " 0/1", "0/1 "}) {
    EXPECT_FALSE(ParsePgLsn(bad, &lsn)) << bad;
  }
}

}  // namespace
}  // namespace walwatch
