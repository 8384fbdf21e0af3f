#include "manager/webhook_certs.h"

#include <algorithm>
#include <ctime>

namespace ncclguard::manager {
namespace {

std::string Required(const std::map<std::string, std::string>& data, const char* key) {
  auto found = data.find(key);
  if (found == data.end() || found->second.empty()) {
    throw CertError(std::string("the Secret has no ") + key);
  }
  return found->second;
}

std::string Time(std::int64_t unix_seconds) {
  const time_t seconds = static_cast<time_t>(unix_seconds);
  struct tm parts {};
  gmtime_r(&seconds, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

}  // namespace

CertState ParseCertSecret(const std::map<std::string, std::string>& data) {
  const std::string bundle = Required(data, kCaCertKey);
  const std::string ca_key = Required(data, kCaKeyKey);
  const std::string cert = Required(data, kTlsCertKey);
  const std::string key = Required(data, kTlsKeyKey);

  CertState state;
  state.cas = InspectCertificates(bundle, kCaCertKey);
  for (std::size_t i = 0; i < state.cas.size(); ++i) {
    if (!state.cas[i].is_ca) {
      throw CertError(std::string(kCaCertKey) + ": certificate " + std::to_string(i + 1) +
                      " is not a CA");
    }
  }
  CheckPrivateKey(ca_key, kCaKeyKey);
  const std::string newest_ca = LastCertificate(bundle);
  if (!KeyMatchesCertificate(newest_ca, ca_key)) {
    throw CertError(std::string(kCaKeyKey) + " does not match the newest CA in " + kCaCertKey);
  }
  state.serving = InspectCertificates(cert, kTlsCertKey).front();
  CheckPrivateKey(key, kTlsKeyKey);
  if (!KeyMatchesCertificate(cert, key)) {
    throw CertError(std::string(kTlsKeyKey) + " does not match " + kTlsCertKey);
  }
  state.serving_under_newest_ca = SignedBy(cert, newest_ca);
  bool signed_by_bundle = state.serving_under_newest_ca;
  for (std::size_t i = 0; !signed_by_bundle && i + 1 < state.cas.size(); ++i) {
    signed_by_bundle = SignedBy(cert, SelectCertificates(bundle, {i}));
  }
  if (!signed_by_bundle) {
    throw CertError(std::string(kTlsCertKey) + " was not signed by a CA in " + kCaCertKey);
  }
  return state;
}

CertDecision DecideCertAction(const CertState& state, std::int64_t now, bool bundle_published,
                              const std::vector<std::string>& hosts,
                              const CertLifetimes& lifetimes) {
  const CertFacts& newest = state.cas.back();
  if (newest.not_after <= now) {
    return {CertAction::kCreate, "the CA expired at " + Time(newest.not_after)};
  }
  if (newest.not_after - now < lifetimes.ca_rollover_before.count()) {
    return {CertAction::kAddCa, "the CA expires at " + Time(newest.not_after) +
                                    "; a new CA joins the bundle before it signs"};
  }
  for (std::size_t i = 0; i + 1 < state.cas.size(); ++i) {
    if (state.cas[i].not_after <= now) {
      return {CertAction::kDropExpiredCas,
              "a CA in the bundle expired at " + Time(state.cas[i].not_after)};
    }
  }

  const CertFacts& serving = state.serving;
  const bool expired = serving.not_after <= now;
  const std::int64_t lifetime = serving.not_after - serving.not_before;
  const std::int64_t renew_at = serving.not_after - lifetime / 3;
  std::string why;
  for (const std::string& host : hosts) {
    const auto& names = IsIpAddress(host) ? serving.ip_addresses : serving.dns_names;
    if (std::find(names.begin(), names.end(), host) == names.end()) {
      why = "the serving certificate lacks the host " + host;
      break;
    }
  }
  if (expired) {
    why = "the serving certificate expired at " + Time(serving.not_after);
  } else if (why.empty() && now >= renew_at) {
    why = "less than a third of the serving certificate's lifetime is left (it expires at " +
          Time(serving.not_after) + ")";
  } else if (why.empty() && !state.serving_under_newest_ca) {
    why = "the serving certificate is not from the newest CA";
  }
  if (why.empty()) {
    return {CertAction::kNone, "the serving certificate is valid until " + Time(serving.not_after) +
                                   "; renewal at " + Time(renew_at)};
  }
  if (!state.serving_under_newest_ca && !bundle_published && !expired) {
    // Only the newest CA's key is kept, and the API server must trust it before it serves.
    return {CertAction::kNone, why +
                                   "; waiting until every webhook configuration carries the "
                                   "bundle with the new CA"};
  }
  return {CertAction::kRenewServing, why};
}

std::map<std::string, std::string> ApplyCertAction(const CertDecision& decision,
                                                   const std::map<std::string, std::string>& old,
                                                   std::int64_t now,
                                                   const std::vector<std::string>& hosts,
                                                   const CertLifetimes& lifetimes) {
  const std::int64_t not_before = now - lifetimes.backdate.count();
  auto new_ca = [&](std::map<std::string, std::string>& data, const std::string& prior_bundle) {
    std::string key = GeneratePrivateKeyPem();
    data[kCaCertKey] =
        prior_bundle + IssueCaCertificate(key, "ncclguard-webhook-ca-" + std::to_string(now),
                                          not_before, now + lifetimes.ca_validity.count());
    data[kCaKeyKey] = std::move(key);
  };
  auto renew_serving = [&](std::map<std::string, std::string>& data) {
    const std::string ca = LastCertificate(data.at(kCaCertKey));
    const std::int64_t ca_end = InspectCertificates(ca, kCaCertKey).front().not_after;
    std::string key = GeneratePrivateKeyPem();
    data[kTlsCertKey] =
        IssueServingCertificate(ca, data.at(kCaKeyKey), key, hosts, not_before,
                                std::min(now + lifetimes.serving_validity.count(), ca_end));
    data[kTlsKeyKey] = std::move(key);
  };

  std::map<std::string, std::string> data = old;
  switch (decision.action) {
    case CertAction::kNone:
      break;
    case CertAction::kCreate:
      data.clear();
      new_ca(data, "");
      renew_serving(data);
      break;
    case CertAction::kAddCa:
      new_ca(data, data.at(kCaCertKey));
      break;
    case CertAction::kDropExpiredCas: {
      std::vector<CertFacts> cas = InspectCertificates(data.at(kCaCertKey), kCaCertKey);
      std::vector<std::size_t> keep;
      for (std::size_t i = 0; i < cas.size(); ++i) {
        if (i + 1 == cas.size() || cas[i].not_after > now) keep.push_back(i);
      }
      data[kCaCertKey] = SelectCertificates(data.at(kCaCertKey), keep);
      break;
    }
    case CertAction::kRenewServing:
      renew_serving(data);
      break;
  }
  return data;
}

const char* CertActionName(CertAction action) {
  switch (action) {
    case CertAction::kNone:
      return "none";
    case CertAction::kCreate:
      return "create";
    case CertAction::kAddCa:
      return "add-ca";
    case CertAction::kDropExpiredCas:
      return "drop-expired-cas";
    case CertAction::kRenewServing:
      return "renew-serving";
  }
  return "unknown";
}

}  // namespace ncclguard::manager
