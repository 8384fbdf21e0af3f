#include "probes/peer_fabric.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <array>
#include <cstring>
#include <map>
#include <span>
#include <thread>

#include "core/errors.h"
#include "probes/dynamic_library.h"
#include "probes/libfabric_api.h"

namespace ncclguard::probes {
namespace {

using Clock = std::chrono::steady_clock;
// A ping: the magic, the sender's address length (2 bytes) and address, a nonce (8 bytes). A
// pong: the other magic and the nonce. Provider addresses are tens of bytes (efa: 32).
constexpr std::array<char, 4> kPing = {'N', 'G', 'P', '1'};
constexpr std::array<char, 4> kPong = {'N', 'G', 'O', '1'};
constexpr std::size_t kMaxAddress = 128;
constexpr std::size_t kBufferBytes = 4 + 2 + kMaxAddress + 8;
// Peers an answering endpoint keeps in its address vector at most (a round tests a few).
constexpr std::size_t kMaxPeers = 256;

std::string Hex(const std::string& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (const unsigned char c : bytes) {
    hex += kDigits[c >> 4];
    hex += kDigits[c & 0xf];
  }
  return hex;
}

std::string Unhex(const std::string& hex) {
  if (hex.empty() || hex.size() % 2 != 0 || hex.size() > 2 * kMaxAddress) {
    throw core::InputError("fabric address: expected hex of at most " +
                           std::to_string(kMaxAddress) + " bytes");
  }
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string bytes;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int high = digit(hex[i]);
    const int low = digit(hex[i + 1]);
    if (high < 0 || low < 0) throw core::InputError("fabric address: not hex");
    bytes += static_cast<char>(high * 16 + low);
  }
  return bytes;
}

class LibfabricEndpoint final : public FabricEndpoint {
 public:
  explicit LibfabricEndpoint(const FabricOptions& options) {
    library_ = OpenLibfabric();
    if (!library_.Loaded()) throw core::InputError("libfabric not loadable: " + library_.Error());
    api_ = LibfabricSymbols(library_);
    if (!api_.Complete())
      throw core::InputError(library_.Path() + ": missing fi_getinfo/fi_fabric");
    Build(options);
  }

  ~LibfabricEndpoint() override {
    // Children first: the endpoint, its MR, AV and CQ, then the domain and the fabric.
    if (endpoint_ != nullptr) fi_close(&endpoint_->fid);
    if (mr_ != nullptr) fi_close(&mr_->fid);
    if (av_ != nullptr) fi_close(&av_->fid);
    if (cq_ != nullptr) fi_close(&cq_->fid);
    if (domain_ != nullptr) fi_close(&domain_->fid);
    if (fabric_ != nullptr) fi_close(&fabric_->fid);
    if (info_ != nullptr) api_.free_info(info_);
  }

  std::string Address() const override { return Hex(address_); }
  std::string Provider() const override { return provider_; }

  std::uint64_t Answer(Clock::time_point deadline, const std::atomic<bool>* stop) override {
    std::uint64_t answered = 0;
    std::map<std::string, fi_addr_t> peers;
    // One pong at a time: the next ping is taken once the last pong's send completed, so the
    // one send buffer is never reused under a send in flight.
    sending_ = false;
    while (Clock::now() < deadline && (stop == nullptr || !stop->load())) {
      if (!sending_ && !receive_posted_ && !PostReceive()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      fi_cq_msg_entry entry{};
      const ssize_t got = fi_cq_read(cq_, &entry, 1);
      if (got == -FI_EAGAIN) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      if (got < 0) {
        ReadError();  // a failed pong or receive: the next ping is answered all the same
        continue;
      }
      if (entry.op_context == &send_context_) {
        sending_ = false;
        continue;
      }
      if (entry.op_context != &receive_context_) continue;
      receive_posted_ = false;
      std::string peer;
      std::uint64_t nonce = 0;
      if (!ParsePing(entry.len, peer, nonce)) continue;
      auto known = peers.find(peer);
      if (known == peers.end()) {
        if (peers.size() >= kMaxPeers) continue;
        fi_addr_t address = FI_ADDR_UNSPEC;
        if (fi_av_insert(av_, peer.data(), 1, &address, 0, nullptr) != 1) continue;
        known = peers.emplace(peer, address).first;
      }
      std::memcpy(send_buffer_.data(), kPong.data(), kPong.size());
      std::memcpy(send_buffer_.data() + kPong.size(), &nonce, sizeof nonce);
      if (Send(kPong.size() + sizeof nonce, known->second,
               std::min(deadline, Clock::now() + std::chrono::seconds(1)))) {
        ++answered;
      }
    }
    return answered;
  }

  FabricTest Ping(const std::string& peer_address, std::chrono::milliseconds timeout) override {
    const std::string peer = Unhex(peer_address);
    const Clock::time_point start = Clock::now();
    FabricTest test;
    const auto done = [&](FabricOutcome outcome, std::string detail) {
      test.outcome = outcome;
      test.detail = std::move(detail);
      test.took = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
      return test;
    };
    fi_addr_t address = FI_ADDR_UNSPEC;
    if (fi_av_insert(av_, peer.data(), 1, &address, 0, nullptr) != 1) {
      return done(FabricOutcome::kFailed, "the provider does not take that address");
    }
    const std::uint64_t nonce = static_cast<std::uint64_t>(start.time_since_epoch().count());
    if (!receive_posted_ && !PostReceive()) return done(FabricOutcome::kFailed, last_error_);
    if (sending_) return done(FabricOutcome::kFailed, "the last ping's send has not completed");
    std::size_t at = 0;
    std::memcpy(send_buffer_.data(), kPing.data(), kPing.size());
    at += kPing.size();
    const auto length = static_cast<std::uint16_t>(address_.size());
    std::memcpy(send_buffer_.data() + at, &length, sizeof length);
    at += sizeof length;
    std::memcpy(send_buffer_.data() + at, address_.data(), address_.size());
    at += address_.size();
    std::memcpy(send_buffer_.data() + at, &nonce, sizeof nonce);
    at += sizeof nonce;
    if (!Send(at, address, start + timeout)) {
      return done(
          Clock::now() - start >= timeout ? FabricOutcome::kTimedOut : FabricOutcome::kFailed,
          last_error_);
    }
    while (Clock::now() - start < timeout) {
      fi_cq_msg_entry entry{};
      const ssize_t got = fi_cq_read(cq_, &entry, 1);
      if (got == -FI_EAGAIN) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      if (got < 0) return done(FabricOutcome::kFailed, ReadError());
      if (entry.op_context == &send_context_) {
        sending_ = false;  // the ping's send completed
        continue;
      }
      if (entry.op_context != &receive_context_) continue;
      receive_posted_ = false;
      std::uint64_t echoed = 0;
      if (entry.len == kPong.size() + sizeof echoed &&
          std::memcmp(receive_buffer_.data(), kPong.data(), kPong.size()) == 0) {
        std::memcpy(&echoed, receive_buffer_.data() + kPong.size(), sizeof echoed);
        if (echoed == nonce) return done(FabricOutcome::kPassed, "");
      }
      if (!PostReceive()) return done(FabricOutcome::kFailed, last_error_);
    }
    return done(FabricOutcome::kTimedOut, "no pong within the timeout");
  }

 private:
  [[noreturn]] void Fail(const std::string& step, int rc) const {
    throw core::InputError("libfabric " + step + ": " + api_.str_error(rc < 0 ? -rc : rc));
  }

  void Build(const FabricOptions& options) {
    fi_info* hints = api_.dup_info(nullptr);
    if (hints == nullptr) throw core::InputError("fi_dupinfo failed");
    hints->fabric_attr->prov_name = strdup(options.provider.c_str());
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_MSG;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    std::uint64_t flags = 0;
    const char* node = nullptr;
    const char* service = nullptr;
    if (!options.source.empty()) {
      node = options.source.c_str();
      flags = FI_SOURCE;
    }
    if (!options.service.empty()) {
      service = options.service.c_str();
      flags = FI_SOURCE;
    }
    const int rc = api_.get_info(kLibfabricApiVersion, node, service, flags, hints, &info_);
    api_.free_info(hints);
    if (rc != 0 || info_ == nullptr) Fail("fi_getinfo(provider " + options.provider + ")", rc);
    provider_ = info_->fabric_attr->prov_name != nullptr ? info_->fabric_attr->prov_name : "";

    int step = api_.open_fabric(info_->fabric_attr, &fabric_, nullptr);
    if (step != 0) Fail("fi_fabric", step);
    if ((step = fi_domain(fabric_, info_, &domain_, nullptr)) != 0) Fail("fi_domain", step);
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_MSG;
    cq_attr.size = 16;
    if ((step = fi_cq_open(domain_, &cq_attr, &cq_, nullptr)) != 0) Fail("fi_cq_open", step);
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    if ((step = fi_av_open(domain_, &av_attr, &av_, nullptr)) != 0) Fail("fi_av_open", step);
    if ((step = fi_endpoint(domain_, info_, &endpoint_, nullptr)) != 0) Fail("fi_endpoint", step);
    if ((step = fi_ep_bind(endpoint_, &av_->fid, 0)) != 0) Fail("fi_ep_bind(av)", step);
    if ((step = fi_ep_bind(endpoint_, &cq_->fid, FI_TRANSMIT | FI_RECV)) != 0) {
      Fail("fi_ep_bind(cq)", step);
    }
    if ((info_->domain_attr->mr_mode & FI_MR_LOCAL) != 0) {
      // One registration over both buffers, which live side by side in `buffers_`.
      step = fi_mr_reg(domain_, buffers_.data(), buffers_.size(), FI_SEND | FI_RECV, 0, 0, 0, &mr_,
                       nullptr);
      if (step != 0) Fail("fi_mr_reg", step);
      descriptor_ = fi_mr_desc(mr_);
    }
    if ((step = fi_enable(endpoint_)) != 0) Fail("fi_enable", step);
    std::array<char, kMaxAddress> name{};
    std::size_t length = name.size();
    if ((step = fi_getname(&endpoint_->fid, name.data(), &length)) != 0) Fail("fi_getname", step);
    address_.assign(name.data(), length);
  }

  bool PostReceive() {
    const ssize_t rc = fi_recv(endpoint_, receive_buffer_.data(), receive_buffer_.size(),
                               descriptor_, FI_ADDR_UNSPEC, &receive_context_);
    if (rc != 0) last_error_ = std::string("fi_recv: ") + api_.str_error(static_cast<int>(-rc));
    receive_posted_ = rc == 0;
    return rc == 0;
  }

  // Sends until `deadline`: a provider answers EAGAIN while it cannot send yet (rxm while its
  // connection to the peer is not up), and makes progress when its queue is read.
  bool Send(std::size_t length, fi_addr_t to, Clock::time_point deadline) {
    ssize_t rc = fi_send(endpoint_, send_buffer_.data(), length, descriptor_, to, &send_context_);
    while (rc == -FI_EAGAIN && Clock::now() < deadline) {
      fi_cq_msg_entry progress{};
      const ssize_t got = fi_cq_read(cq_, &progress, 1);
      if (got == -FI_EAVAIL) ReadError();
      if (got > 0 && progress.op_context == &receive_context_) receive_posted_ = false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      rc = fi_send(endpoint_, send_buffer_.data(), length, descriptor_, to, &send_context_);
    }
    if (rc == -FI_EAGAIN) {
      last_error_ = "the provider could not send to the peer within the timeout";
    } else if (rc != 0) {
      last_error_ = std::string("fi_send: ") + api_.str_error(static_cast<int>(-rc));
    }
    sending_ = rc == 0;
    return rc == 0;
  }

  // The completion error the provider holds, in its words; the operation it ends is over.
  std::string ReadError() {
    fi_cq_err_entry error{};
    if (fi_cq_readerr(cq_, &error, 0) < 0) return "an error the provider did not describe";
    if (error.op_context == &send_context_) sending_ = false;
    if (error.op_context == &receive_context_) receive_posted_ = false;
    std::array<char, 256> words{};
    const char* provider_words =
        fi_cq_strerror(cq_, error.prov_errno, error.err_data, words.data(), words.size());
    last_error_ = std::string(api_.str_error(error.err)) + " (provider error " +
                  std::to_string(error.prov_errno) + ": " +
                  (provider_words != nullptr ? provider_words : "") + ")";
    return last_error_;
  }

  bool ParsePing(std::size_t length, std::string& peer, std::uint64_t& nonce) const {
    if (length < kPing.size() + 2 + 8 ||
        std::memcmp(receive_buffer_.data(), kPing.data(), kPing.size()) != 0) {
      return false;
    }
    std::uint16_t address_length = 0;
    std::memcpy(&address_length, receive_buffer_.data() + kPing.size(), sizeof address_length);
    if (address_length == 0 || address_length > kMaxAddress ||
        length != kPing.size() + 2 + address_length + 8) {
      return false;
    }
    peer.assign(receive_buffer_.data() + kPing.size() + 2, address_length);
    std::memcpy(&nonce, receive_buffer_.data() + kPing.size() + 2 + address_length, sizeof nonce);
    return true;
  }

  DynamicLibrary library_;
  LibfabricApi api_;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  fid_ep* endpoint_ = nullptr;
  fid_mr* mr_ = nullptr;
  void* descriptor_ = nullptr;
  std::string provider_;
  std::string address_;
  std::string last_error_;
  bool receive_posted_ = false;
  bool sending_ = false;
  // The send and receive buffers, side by side so that one registration covers both.
  std::array<char, 2 * kBufferBytes> buffers_{};
  std::span<char> send_buffer_{buffers_.data(), kBufferBytes};
  std::span<char> receive_buffer_{buffers_.data() + kBufferBytes, kBufferBytes};
  fi_context2 send_context_{};
  fi_context2 receive_context_{};
};

}  // namespace

std::unique_ptr<FabricEndpoint> FabricEndpoint::Open(const FabricOptions& options) {
  return std::make_unique<LibfabricEndpoint>(options);
}

std::string_view FabricOutcomeName(FabricOutcome outcome) {
  switch (outcome) {
    case FabricOutcome::kPassed:
      return "passed";
    case FabricOutcome::kTimedOut:
      return "timed-out";
    case FabricOutcome::kFailed:
      return "failed";
  }
  return "failed";
}

}  // namespace ncclguard::probes
