// The tag resolver's parts that need no registry (webhook/digest_resolver.h): reading a pull
// secret's docker config (both forms, keys normalised, every malformed shape refused by name,
// bounded, any bytes survived), reading WWW-Authenticate challenges (quotes, escapes, several
// challenges, past the size cap, linear on a MiB), and the resolver's own behaviour on loopback
// (what it refuses to ask, a closed port, the cache's keys, bound and lifetimes, one flight for
// callers of one tag). Against the real registry: tests/scripts/digest_resolver_test.sh.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/errors.h"
#include "core/image_ref.h"
#include "loopback_port.h"
#include "tests/unit/resource_bound.h"
#include "webhook/digest_resolver.h"

namespace ncclguard::webhook::resolver_test {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

std::string Base64(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const auto n = static_cast<unsigned>(static_cast<unsigned char>(bytes[i]) << 16 |
                                         static_cast<unsigned char>(bytes[i + 1]) << 8 |
                                         static_cast<unsigned char>(bytes[i + 2]));
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[(n >> shift) & 63];
  }
  if (i + 1 == bytes.size()) {
    const auto n = static_cast<unsigned>(static_cast<unsigned char>(bytes[i]) << 16);
    out += std::string{kAlphabet[(n >> 18) & 63], kAlphabet[(n >> 12) & 63]} + "==";
  } else if (i + 2 == bytes.size()) {
    const auto n = static_cast<unsigned>(static_cast<unsigned char>(bytes[i]) << 16 |
                                         static_cast<unsigned char>(bytes[i + 1]) << 8);
    out += std::string{kAlphabet[(n >> 18) & 63], kAlphabet[(n >> 12) & 63],
                       kAlphabet[(n >> 6) & 63]} +
           "=";
  }
  return out;
}

// What ReadDockerConfig says of `bytes` when it refuses them ("" when it accepts).
std::string RefusalOf(std::string_view bytes) {
  try {
    ReadDockerConfig(bytes);
  } catch (const core::InputError& e) {
    return e.what();
  }
  return "";
}

TEST(DockerConfig, ReadsAuthAsBase64OfUserColonPassword) {
  const auto credentials =
      ReadDockerConfig(R"({"auths":{"registry.example:5000":{"auth":")" +
                       Base64("alice:pa:ss word") + R"(","email":"a@example.com"}}})");
  ASSERT_EQ(credentials.size(), 1u);
  EXPECT_EQ(credentials[0].registry, "registry.example:5000");
  EXPECT_EQ(credentials[0].username, "alice");
  EXPECT_EQ(credentials[0].password, "pa:ss word");  // only the first ':' splits
}

TEST(DockerConfig, ReadsUsernameAndPasswordAndPrefersAuth) {
  const auto credentials = ReadDockerConfig(R"({"auths":{
      "a.example":{"username":"bob","password":"p1"},
      "b.example":{"auth":"","username":"carol","password":"p2"},
      "c.example":{"auth":")" + Base64("dave:p3") +
                                            R"(","username":"ignored","password":"ignored"}}})");
  ASSERT_EQ(credentials.size(), 3u);
  EXPECT_EQ(credentials[0].username + "/" + credentials[0].password, "bob/p1");
  EXPECT_EQ(credentials[1].username + "/" + credentials[1].password, "carol/p2");
  EXPECT_EQ(credentials[2].username + "/" + credentials[2].password, "dave/p3");
}

TEST(DockerConfig, ReadsTheOlderDockercfgFormAtTheTopLevel) {
  const auto credentials = ReadDockerConfig(R"({"https://index.docker.io/v1/":{"auth":")" +
                                            Base64("eve:p4") + R"(","email":"e@example.com"}})");
  ASSERT_EQ(credentials.size(), 1u);
  EXPECT_EQ(credentials[0].registry, "docker.io");
  EXPECT_EQ(credentials[0].username, "eve");
}

TEST(DockerConfig, NormalisesKeysAndKeepsTheFirstOfARegistryNamedTwice) {
  const auto credentials = ReadDockerConfig(R"({"auths":{
      "https://index.docker.io/v1/":{"username":"first","password":"p"},
      "docker.io":{"username":"second","password":"p"},
      "http://Registry.Example:5000/v2/":{"username":"u","password":"p"},
      "registry-1.docker.io":{"username":"third","password":"p"},
      "  123456789012.dkr.ecr.us-west-2.amazonaws.com  ":{"username":"AWS","password":"t"}}})");
  ASSERT_EQ(credentials.size(), 3u);
  EXPECT_EQ(credentials[0].registry, "docker.io");
  EXPECT_EQ(credentials[0].username, "first");
  EXPECT_EQ(credentials[1].registry, "registry.example:5000");
  EXPECT_EQ(credentials[2].registry, "123456789012.dkr.ecr.us-west-2.amazonaws.com");
  EXPECT_EQ(NormaliseRegistry("HTTPS://Index.Docker.IO/v1/"), "docker.io");
  EXPECT_EQ(NormaliseRegistry("[::1]:5000"), "[::1]:5000");
  EXPECT_EQ(NormaliseRegistry("https://"), "");
  EXPECT_TRUE(ReadDockerConfig(R"({"auths":{}})").empty());
}

TEST(DockerConfig, RefusesMalformedConfigsNamingWhatIsWrongAndNeverASecret) {
  const std::string secret = "hunter2-secret";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "not valid JSON"},
      {"{\"auths\":", "not valid JSON"},
      {"[]", "not a JSON object"},
      {R"({"auths":[]})", "auths is not an object"},
      {R"({"auths":{"r.example":"x"}})", "auths.\"r.example\": not an object"},
      {R"({"auths":{"r.example":{"auth":7}}})", "auth is not a string"},
      {R"({"auths":{"r.example":{"auth":"!!)" + secret + R"("}}})", "auth is not base64"},
      {R"({"auths":{"r.example":{"auth":")" + Base64(secret) + R"("}}})", "no ':'"},
      {R"({"auths":{"r.example":{"auth":")" + Base64(":" + secret) + R"("}}})",
       "the user name is empty"},
      {R"({"auths":{"r.example":{"username":"u"}}})", "neither auth nor username and password"},
      {R"({"auths":{"r.example":{"username":"u","password":7}}})", "not both strings"},
      {R"({"auths":{"r.example":{"identitytoken":")" + secret + R"("}}})", "identitytoken"},
      {R"({"auths":{"https://":{"username":"u","password":"p"}}})", "not a registry host"},
      {R"({"auths":{"r example":{"username":"u","password":"p"}}})", "not a registry host"},
      {R"({"auths":{"r\u0001.example":{}}})", "auths.\"r?.example\": not a registry host"},
      {R"({"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"i":{}}}}}}}}}})", "nesting deeper"},
  };
  for (const auto& [config, said] : cases) {
    const std::string refusal = RefusalOf(config);
    EXPECT_NE(refusal.find(said), std::string::npos) << config << " -> " << refusal;
    EXPECT_EQ(refusal.find("hunter2"), std::string::npos) << refusal;
    EXPECT_EQ(refusal.find(Base64(secret)), std::string::npos) << refusal;
  }
}

TEST(DockerConfig, RefusesPastItsBytesAndRegistries) {
  const std::string padding(kMaxDockerConfigBytes, ' ');
  EXPECT_EQ(RefusalOf(R"({"auths":{}})" + padding.substr(12)), "");
  EXPECT_NE(RefusalOf(R"({"auths":{}})" + padding).find("more than the 65536"), std::string::npos);

  const auto registries = [](std::size_t count) {
    std::string config = R"({"auths":{)";
    for (std::size_t i = 0; i < count; ++i) {
      config += (i ? ",\"r" : "\"r") + std::to_string(i) + R"(.example":{"auth":"dTpw"})";
    }
    return config + "}}";
  };
  EXPECT_EQ(ReadDockerConfig(registries(kMaxDockerConfigRegistries)).size(),
            kMaxDockerConfigRegistries);
  EXPECT_NE(RefusalOf(registries(kMaxDockerConfigRegistries + 1))
                .find("257 registries, more than the 256"),
            std::string::npos);
}

TEST(DockerConfig, RefusesTenThousandEntriesQuickly) {
  // 10,000 entries take more than 64 KiB however short; the bound on bytes refuses them before
  // any is read. Its CPU is limited to a second (it needs microseconds).
  std::string config = R"({"auths":{)";
  for (int i = 0; i < 10000; ++i) config += (i ? ",\"" : "\"") + std::to_string(i) + "\":0";
  config += "}}";
  const test::BoundedRun run = test::RunBounded(1, 256 * kMiB, [&] { return RefusalOf(config); });
  ASSERT_TRUE(run.finished) << "signal " << run.signal << " after " << run.cpu_seconds << " s";
  EXPECT_NE(run.result.find("more than the 65536"), std::string::npos) << run.result;
}

TEST(DockerConfig, SurvivesAnyBytes) {
  std::mt19937 random(20261207);
  const std::string valid = R"({"auths":{"r.example:5000":{"auth":")" + Base64("u:p") +
                            R"("},"https://index.docker.io/v1/":{"username":"a","password":"b"}}})";
  std::size_t accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string bytes;
    if (round % 2 == 0) {  // noise
      bytes.resize(random() % 300);
      for (char& c : bytes) c = static_cast<char>(random() % 256);
    } else {  // the valid config with a few bytes changed, cut or doubled
      bytes = valid;
      for (unsigned edits = 1 + random() % 4; edits > 0; --edits) {
        const std::size_t at = random() % bytes.size();
        switch (random() % 3) {
          case 0:
            bytes[at] = static_cast<char>(random() % 256);
            break;
          case 1:
            bytes.erase(at, 1 + random() % 8);
            break;
          default:
            bytes.insert(at, bytes.substr(at, 1 + random() % 16));
        }
        if (bytes.empty()) bytes = "{";
      }
    }
    try {
      for (const RegistryCredential& c : ReadDockerConfig(bytes)) {
        EXPECT_FALSE(c.registry.empty());
        EXPECT_FALSE(c.username.empty());
      }
      ++accepted;
    } catch (const core::InputError&) {
    }
  }
  EXPECT_GT(accepted, 0u);  // the mutations kept some configs readable
}

AuthChallenge OneChallenge(std::string_view header) {
  const auto challenges = ParseChallenge(header);
  if (!challenges || challenges->size() != 1) {
    ADD_FAILURE() << header << ": not one challenge";
    return {};
  }
  return challenges->front();
}

TEST(WwwAuthenticate, ReadsBasicAndBearerChallenges) {
  const AuthChallenge basic = OneChallenge(R"(Basic realm="registry")");
  EXPECT_EQ(basic.scheme, "basic");
  EXPECT_EQ(basic.params.at("realm"), "registry");

  const AuthChallenge bearer = OneChallenge(
      R"(Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/busybox:pull")");
  EXPECT_EQ(bearer.scheme, "bearer");
  EXPECT_EQ(bearer.params.at("realm"), "https://auth.docker.io/token");
  EXPECT_EQ(bearer.params.at("service"), "registry.docker.io");
  EXPECT_EQ(bearer.params.at("scope"), "repository:library/busybox:pull");
}

TEST(WwwAuthenticate, ReadsQuotedCommasEscapesAndTheGrammarsSpacesAndCase) {
  const AuthChallenge c = OneChallenge(
      "BEARER  Realm = \"https://a.example/t?x=1,y=2\" ,\tScope=\"repository:a:pull,push\", "
      "error=\"say \\\"no\\\" \\\\ here\",service=token-value, , ");
  EXPECT_EQ(c.scheme, "bearer");
  EXPECT_EQ(c.params.at("realm"), "https://a.example/t?x=1,y=2");
  EXPECT_EQ(c.params.at("scope"), "repository:a:pull,push");
  EXPECT_EQ(c.params.at("error"), "say \"no\" \\ here");
  EXPECT_EQ(c.params.at("service"), "token-value");
  EXPECT_EQ(OneChallenge(R"(Bearer realm="")").params.at("realm"), "");
  // A name given twice: the first counts.
  EXPECT_EQ(OneChallenge(R"(Bearer realm="a", realm="b")").params.at("realm"), "a");
}

TEST(WwwAuthenticate, ReadsSeveralChallengesAndToken68) {
  const auto challenges = ParseChallenge(
      R"(Negotiate abc+/==, Basic realm="b, c", Bearer realm="https://t.example/token",service="s", NoParams)");
  ASSERT_TRUE(challenges);
  ASSERT_EQ(challenges->size(), 4u);
  EXPECT_EQ((*challenges)[0].scheme, "negotiate");
  EXPECT_EQ((*challenges)[0].token68, "abc+/==");
  EXPECT_EQ((*challenges)[1].params.at("realm"), "b, c");
  EXPECT_EQ((*challenges)[2].params.at("service"), "s");
  EXPECT_EQ((*challenges)[3].scheme, "noparams");
  EXPECT_TRUE((*challenges)[3].params.empty());
  EXPECT_TRUE(ParseChallenge("")->empty());
}

TEST(WwwAuthenticate, RefusesWhatIsNotTheGrammar) {
  for (const char* header : {
           R"(realm="no scheme")",
           R"(Bearer realm="unterminated)",
           R"(Bearer realm="ends in a backslash\)",
           R"(Basic"realm")",
           R"(Basic "quoted")",
           R"(Bearer realm="a" service="no comma")",
           "Bearer realm=\"a\"\r\nX-Injected: 1",
           R"(Bearer a b)",
           "\"",
       }) {
    EXPECT_FALSE(ParseChallenge(header)) << header;
  }
}

TEST(WwwAuthenticate, RefusesPastItsSizeCap) {
  std::string header = "Bearer realm=\"";
  header += std::string(kMaxChallengeBytes - header.size() - 1, 'x') + "\"";
  ASSERT_EQ(header.size(), kMaxChallengeBytes);
  ASSERT_TRUE(ParseChallenge(header));
  EXPECT_EQ(ParseChallenge(header)->front().params.at("realm").size(), kMaxChallengeBytes - 15);
  EXPECT_FALSE(ParseChallenge(header + " "));
  EXPECT_FALSE(ParseChallenge(std::string(kMiB, 'a')));
  EXPECT_FALSE(ParseChallenge("Basic realm=\"x\"", 8));
}

TEST(WwwAuthenticate, ReadsAMebibyteInLinearTime) {
  // With the cap lifted to 2 MiB: each shape a quadratic reader would spend minutes on, under a
  // CPU limit of 5 s for all of them (linear: milliseconds).
  const auto repeat = [](std::string_view unit) {
    std::string out;
    while (out.size() < kMiB) out += unit;
    return out;
  };
  const std::vector<std::string> headers = {
      "Bearer " + repeat("p=\"v,\\\"x\", "),                    // many params with escapes
      "Bearer realm=\"" + repeat("\\\\,") + "\"",               // one long quoted value
      repeat("Basic, "),                                        // many challenges
      "Negotiate " + repeat("aB+/") + "==",                     // one long token68
      "Bearer " + repeat(" ") + "realm=x",                      // a long run of spaces
      "Bearer " + repeat("name").substr(0, kMiB / 2) + " = " +  // a long name and value
          repeat("v").substr(0, kMiB / 2),
      "Bearer realm=\"" + repeat("x"),  // unterminated at the very end
      "Bearer " + repeat("a=b,"),       // many short params
  };
  const test::BoundedRun run = test::RunBounded(5, 1024 * kMiB, [&] {
    std::string said;
    for (const std::string& header : headers) {
      const auto challenges = ParseChallenge(header, 2 * kMiB);
      said += challenges ? std::to_string(challenges->size()) + " " : "refused ";
    }
    return said;
  });
  ASSERT_TRUE(run.finished) << "signal " << run.signal << " after " << run.cpu_seconds << " s";
  EXPECT_EQ(run.result, "1 1 " + std::to_string(kMiB / 7 + 1) + " 1 1 1 refused 1 ")
      << run.cpu_seconds << " s of CPU";
}

core::ImageReference ResolverRef(const std::string& image) {
  return core::ParseImageReference(image);
}

// Options for a registry on 127.0.0.1:port, spoken to over plain http.
DigestResolverOptions ResolverOptions(int port) {
  DigestResolverOptions options;
  options.budget = std::chrono::milliseconds(500);
  options.plain_http_registries = {"127.0.0.1:" + std::to_string(port)};
  return options;
}

TEST(DigestResolver, RefusesReferencesItCannotAskFor) {
  DigestResolver resolver(ResolverOptions(1));
  const auto no_tag = resolver.Resolve(ResolverRef("127.0.0.1:1/ml/train"), {});
  EXPECT_EQ(no_tag.status, ResolveStatus::BadAnswer);
  EXPECT_NE(no_tag.why.find("no tag"), std::string::npos) << no_tag.why;
  const auto pinned =
      resolver.Resolve(ResolverRef("127.0.0.1:1/ml/train:1@sha256:" + std::string(64, 'a')), {});
  EXPECT_EQ(pinned.status, ResolveStatus::BadAnswer);
  core::ImageReference made_by_hand;
  made_by_hand.domain = "127.0.0.1:1";
  made_by_hand.path = "ml/../train";
  made_by_hand.tag = "1 HTTP/1.1\r\nX: y";
  const auto hand = resolver.Resolve(made_by_hand, {});
  EXPECT_EQ(hand.status, ResolveStatus::BadAnswer);
  EXPECT_NE(hand.why.find("not an image reference"), std::string::npos) << hand.why;
  EXPECT_EQ(ResolveStatusName(ResolveStatus::TimedOut), "TimedOut");
  EXPECT_EQ(ResolveStatusName(ResolveStatus::NotFound), "NotFound");
}

TEST(DigestResolver, AClosedPortIsUnreachableAndTheFailureIsCachedPerCredential) {
  const int port = test::FreeLoopbackPort();
  DigestResolver resolver(ResolverOptions(port));
  const auto ref = ResolverRef("127.0.0.1:" + std::to_string(port) + "/ml/train:2.4");
  const auto first = resolver.Resolve(ref, {});
  EXPECT_EQ(first.status, ResolveStatus::Unreachable) << first.why;
  EXPECT_FALSE(first.cached);
  EXPECT_NE(first.why.find("HEAD http://127.0.0.1:" + std::to_string(port) +
                           "/v2/ml/train/manifests/2.4"),
            std::string::npos)
      << first.why;
  EXPECT_TRUE(resolver.Resolve(ref, {}).cached);

  // Another credential is another key; the same credential again is the same key; a credential
  // for another registry is not used.
  const std::vector<RegistryCredential> alice = {
      {"127.0.0.1:" + std::to_string(port), "alice", "alice-secret"}};
  const std::vector<RegistryCredential> other = {{"elsewhere.example", "alice", "alice-secret"}};
  EXPECT_FALSE(resolver.Resolve(ref, alice).cached);
  EXPECT_TRUE(resolver.Resolve(ref, alice).cached);
  EXPECT_TRUE(resolver.Resolve(ref, other).cached);
  const std::vector<RegistryCredential> alice_again = {
      {"http://127.0.0.1:" + std::to_string(port) + "/v2/", "alice", "changed-secret"}};
  EXPECT_FALSE(resolver.Resolve(ref, alice_again).cached);
  EXPECT_EQ(resolver.Resolve(ref, alice).why.find("secret"), std::string::npos);
}

TEST(DigestResolver, KeepsAtMostMaxEntriesAndNothingWhenTheirTtlIsZero) {
  const int port = test::FreeLoopbackPort();
  DigestResolverOptions options = ResolverOptions(port);
  options.max_entries = 2;
  DigestResolver bounded(options);
  const std::string registry = "127.0.0.1:" + std::to_string(port);
  for (const char* tag : {"a", "b", "c"}) bounded.Resolve(ResolverRef(registry + "/x:" + tag), {});
  EXPECT_FALSE(bounded.Resolve(ResolverRef(registry + "/x:a"), {}).cached);  // the oldest went
  EXPECT_TRUE(bounded.Resolve(ResolverRef(registry + "/x:c"), {}).cached);

  options.failure_ttl = std::chrono::seconds(0);
  DigestResolver uncached(options);
  uncached.Resolve(ResolverRef(registry + "/x:a"), {});
  EXPECT_FALSE(uncached.Resolve(ResolverRef(registry + "/x:a"), {}).cached);
}

// A registry that accepts connections and never answers; counts them.
class SilentRegistry {
 public:
  SilentRegistry() : listener_(test::ListenOnLoopback(64)) {
    thread_ = std::thread([this] {
      std::vector<int> accepted;
      while (!stop_) {
        pollfd ready{listener_.fd, POLLIN, 0};
        if (poll(&ready, 1, 20) == 1) {
          const int fd = accept(listener_.fd, nullptr, nullptr);
          if (fd >= 0) {
            accepted.push_back(fd);
            ++connections_;
          }
        }
      }
      for (int fd : accepted) close(fd);
    });
  }
  ~SilentRegistry() {
    stop_ = true;
    thread_.join();
    close(listener_.fd);
  }
  int port() const { return listener_.port; }
  int connections() const { return connections_; }

 private:
  test::LoopbackListener listener_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread thread_;
};

TEST(DigestResolver, CallersOfOneTagShareOneResolutionThatEndsAtTheBudget) {
  SilentRegistry registry;
  DigestResolverOptions options = ResolverOptions(registry.port());
  options.budget = std::chrono::milliseconds(300);
  DigestResolver resolver(options);
  const auto ref = ResolverRef("127.0.0.1:" + std::to_string(registry.port()) + "/ml/train:2.4");
  std::vector<Resolution> results(8);
  std::vector<std::thread> callers;
  for (Resolution& result : results) {
    callers.emplace_back([&] { result = resolver.Resolve(ref, {}); });
  }
  for (std::thread& caller : callers) caller.join();
  for (const Resolution& result : results) {
    EXPECT_EQ(result.status, ResolveStatus::TimedOut) << result.why;
  }
  EXPECT_EQ(registry.connections(), 1);  // the callers who came second waited for the first
  EXPECT_TRUE(resolver.Resolve(ref, {}).cached);
}

TEST(DigestResolver, SpeaksOnlyHttpsToARegistryNotListedAsPlainHttp) {
  SilentRegistry registry;
  DigestResolverOptions options;
  options.budget = std::chrono::milliseconds(300);
  DigestResolver resolver(options);
  // An https ClientHello that is never answered: TimedOut, not a request in clear text.
  const auto result = resolver.Resolve(
      ResolverRef("127.0.0.1:" + std::to_string(registry.port()) + "/ml/train:2.4"), {});
  EXPECT_EQ(result.status, ResolveStatus::TimedOut) << result.why;
  EXPECT_NE(result.why.find("HEAD https://"), std::string::npos) << result.why;
}

}  // namespace
}  // namespace ncclguard::webhook::resolver_test
