// The kernel's side: sockets and /proc files of the network namespace the calling thread is in.
// glibc's netinet/in.h first: the kernel's headers then leave out their own struct in_addr.
#include <netinet/in.h>

#include <fcntl.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter_ipv4/ip_tables.h>
#include <linux/netlink.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <sstream>
#include <thread>

#include "probes/netfilter.h"
#include "probes/netns.h"

namespace ncclguard::probes {
namespace {

class NetfilterSocket {
 public:
  explicit NetfilterSocket(int fd) : fd_(fd) {}
  ~NetfilterSocket() {
    if (fd_ >= 0) close(fd_);
  }
  NetfilterSocket(const NetfilterSocket&) = delete;
  NetfilterSocket& operator=(const NetfilterSocket&) = delete;
  int Fd() const { return fd_; }

 private:
  int fd_;
};

std::string Errno(std::string_view what) { return std::string(what) + ": " + std::strerror(errno); }

std::string PermissionHint(int error) {
  return error == EPERM || error == EACCES ? " (reading netfilter needs CAP_NET_ADMIN)" : "";
}

// /proc/thread-self/net/...: the calling thread's network namespace, whichever /proc this is.
// A /proc file's text (at most 1 MiB), or the errno of opening it.
struct ProcText {
  std::optional<std::string> content;
  int error = 0;
};

ProcText ReadProcFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {std::nullopt, errno};
  std::string text;
  char buffer[4096];
  ssize_t n = 0;
  while (text.size() < (1u << 20) && (n = read(fd, buffer, sizeof(buffer))) > 0)
    text.append(buffer, static_cast<std::size_t>(n));
  const int error = n < 0 ? errno : 0;
  close(fd);
  if (error != 0) return {std::nullopt, error};
  return {std::move(text), 0};
}

bool HasLine(const std::string& text, std::string_view line) {
  std::istringstream lines(text);
  std::string current;
  while (std::getline(lines, current))
    if (current == line) return true;
  return false;
}

void ReadLegacy(NetfilterRead& read) {
  // ip_tables_names lists the tables this namespace has; asking for one it lacks would create
  // it (and load its module), which a probe must not do.
  const ProcText names = ReadProcFile("/proc/thread-self/net/ip_tables_names");
  if (!names.content && names.error == ENOENT) {
    read.sources.push_back("iptables-legacy: not in use (ip_tables is not loaded)");
    return;
  }
  if (!names.content) {
    errno = names.error;
    read.errors.push_back(Errno("iptables-legacy: ip_tables_names") + PermissionHint(errno));
    return;
  }
  if (!HasLine(*names.content, "filter")) {
    read.sources.push_back("iptables-legacy: no filter table");
    return;
  }
  const NetfilterSocket socket(::socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW));
  if (socket.Fd() < 0) {
    read.errors.push_back(Errno("iptables-legacy: raw socket") + PermissionHint(errno));
    return;
  }
  for (int attempt = 0; attempt < 3; ++attempt) {
    ipt_getinfo info{};
    std::strncpy(info.name, "filter", sizeof(info.name) - 1);
    socklen_t length = sizeof(info);
    if (getsockopt(socket.Fd(), IPPROTO_IP, IPT_SO_GET_INFO, &info, &length) != 0) {
      read.errors.push_back(Errno("iptables-legacy: IPT_SO_GET_INFO filter") +
                            PermissionHint(errno));
      return;
    }
    if (info.size > kMaxNetfilterBytes) {
      read.errors.push_back("iptables-legacy: the filter table's " + std::to_string(info.size) +
                            " bytes are more than the " + std::to_string(kMaxNetfilterBytes) +
                            " read");
      return;
    }
    // The request's head (name, size) written into the buffer field by field: the struct ends
    // in a zero-length array, which is not standard C++ as a variable of its own.
    std::vector<unsigned char> buffer(sizeof(ipt_get_entries) + info.size);
    char name[XT_TABLE_MAXNAMELEN] = "filter";
    std::memcpy(buffer.data() + offsetof(ipt_get_entries, name), name, sizeof(name));
    const unsigned int size = info.size;
    std::memcpy(buffer.data() + offsetof(ipt_get_entries, size), &size, sizeof(size));
    length = static_cast<socklen_t>(buffer.size());
    if (getsockopt(socket.Fd(), IPPROTO_IP, IPT_SO_GET_ENTRIES, buffer.data(), &length) != 0) {
      if (errno == EAGAIN) continue;  // the table changed between the two calls
      read.errors.push_back(Errno("iptables-legacy: IPT_SO_GET_ENTRIES filter"));
      return;
    }
    IptTableInfo parsed;
    parsed.valid_hooks = info.valid_hooks;
    parsed.size = info.size;
    for (int hook = 0; hook < NF_INET_NUMHOOKS; ++hook) {
      parsed.hook_entry[hook] = info.hook_entry[hook];
      parsed.underflow[hook] = info.underflow[hook];
    }
    try {
      core::FirewallTable table = ParseIptEntries(
          std::span<const unsigned char>(buffer).subspan(sizeof(ipt_get_entries)), parsed);
      std::size_t rules = 0;
      for (const auto& chain : table.chains) rules += chain.rules.size();
      read.sources.push_back("iptables-legacy filter: " + std::to_string(rules) + " rules");
      read.tables.push_back(std::move(table));
    } catch (const NetfilterParseError& e) {
      read.errors.push_back("iptables-legacy filter: " + std::string(e.what()));
    }
    return;
  }
  read.errors.push_back("iptables-legacy: the filter table kept changing while read");
}

bool NfTablesLoaded() {
  const ProcText modules = ReadProcFile("/proc/modules");
  if (!modules.content) return true;  // no modules: built in, if at all; asking loads nothing
  const std::string& text = *modules.content;
  if (text.starts_with("nf_tables ") || text.find("\nnf_tables ") != std::string::npos) return true;
  return access("/sys/module/nf_tables", F_OK) == 0;
}

// A netlink attribute holding a NUL-terminated string, padded.
void AppendString(std::vector<unsigned char>& to, std::uint16_t type, const std::string& text) {
  nlattr header{};
  header.nla_len = static_cast<std::uint16_t>(NLA_HDRLEN + text.size() + 1);
  header.nla_type = type;
  const auto* bytes = reinterpret_cast<const unsigned char*>(&header);
  to.insert(to.end(), bytes, bytes + sizeof(header));
  to.insert(to.end(), text.begin(), text.end());
  to.push_back(0);
  while (to.size() % NLA_ALIGNTO) to.push_back(0);
}

// One dump (GETTABLE, GETCHAIN, GETRULE or GETSET of every family; GETSETELEM of one set) fed to
// `ruleset`.
void Dump(int fd, std::uint16_t message, std::uint32_t sequence, NftRuleset& ruleset,
          std::uint8_t family = AF_UNSPEC, const std::vector<unsigned char>& attributes = {}) {
  std::vector<unsigned char> request(sizeof(nlmsghdr) + sizeof(nfgenmsg));
  request.insert(request.end(), attributes.begin(), attributes.end());
  nlmsghdr header{};
  header.nlmsg_len = static_cast<std::uint32_t>(request.size());
  header.nlmsg_type = static_cast<std::uint16_t>((NFNL_SUBSYS_NFTABLES << 8) | message);
  header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  header.nlmsg_seq = sequence;
  nfgenmsg generic{};
  generic.nfgen_family = family;
  generic.version = NFNETLINK_V0;
  std::memcpy(request.data(), &header, sizeof(header));
  std::memcpy(request.data() + sizeof(header), &generic, sizeof(generic));
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(fd, request.data(), request.size(), 0, reinterpret_cast<sockaddr*>(&kernel),
             sizeof(kernel)) < 0)
    throw NetfilterParseError(Errno("sending the dump request") + PermissionHint(errno));
  std::vector<unsigned char> buffer(1 << 16);
  for (;;) {
    const ssize_t received = recv(fd, buffer.data(), buffer.size(), MSG_TRUNC);
    if (received < 0) {
      if (errno == EINTR) continue;
      throw NetfilterParseError(Errno("reading the dump") + PermissionHint(errno));
    }
    if (static_cast<std::size_t>(received) > buffer.size())
      throw NetfilterParseError("a netlink datagram of " + std::to_string(received) +
                                " bytes, more than " + std::to_string(buffer.size()));
    if (ruleset.Feed(
            std::span<const unsigned char>(buffer).first(static_cast<std::size_t>(received))))
      return;
  }
}

void ReadNftables(NetfilterRead& read) {
  if (!NfTablesLoaded()) {
    read.sources.push_back("nftables: not in use (nf_tables is not loaded)");
    return;
  }
  std::string last_error;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const NetfilterSocket socket(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER));
    if (socket.Fd() < 0) {
      read.errors.push_back(Errno("nftables: netlink socket"));
      return;
    }
    const timeval timeout{2, 0};
    setsockopt(socket.Fd(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    NftRuleset ruleset;
    try {
      Dump(socket.Fd(), NFT_MSG_GETTABLE, 1, ruleset);
      Dump(socket.Fd(), NFT_MSG_GETCHAIN, 2, ruleset);
      Dump(socket.Fd(), NFT_MSG_GETRULE, 3, ruleset);
      Dump(socket.Fd(), NFT_MSG_GETSET, 4, ruleset);
      std::uint32_t sequence = 5;
      for (const auto& set : ruleset.Sets()) {
        std::vector<unsigned char> attributes;
        AppendString(attributes, NFTA_SET_ELEM_LIST_TABLE, set.table);
        AppendString(attributes, NFTA_SET_ELEM_LIST_SET, set.name);
        Dump(socket.Fd(), NFT_MSG_GETSETELEM, sequence++, ruleset,
             static_cast<std::uint8_t>(set.family), attributes);
      }
    } catch (const NetfilterParseError& e) {
      last_error = e.what();
      if (last_error.find("interrupted") != std::string::npos) continue;  // changed mid-dump
      break;
    }
    std::vector<core::FirewallTable> tables;
    try {
      tables = ruleset.Tables();
    } catch (const NetfilterParseError& e) {
      read.errors.push_back("nftables: " + std::string(e.what()));
      return;
    }
    read.sources.push_back("nftables: " + std::to_string(tables.size()) + " tables, " +
                           std::to_string(ruleset.RuleCount()) + " rules");
    for (auto& table : tables) read.tables.push_back(std::move(table));
    return;
  }
  const bool denied = last_error.find(std::strerror(EPERM)) != std::string::npos;
  read.errors.push_back("nftables: " + last_error + PermissionHint(denied ? EPERM : 0));
}

std::optional<core::PortRange> EphemeralPorts() {
  const ProcText text = ReadProcFile("/proc/sys/net/ipv4/ip_local_port_range");
  if (!text.content) return std::nullopt;
  std::istringstream fields(*text.content);
  unsigned first = 0, last = 0;
  if (!(fields >> first >> last) || first > last || last > 65535) return std::nullopt;
  return core::PortRange{static_cast<std::uint16_t>(first), static_cast<std::uint16_t>(last)};
}

}  // namespace

NetfilterRead ReadNetfilter() {
  NetfilterRead read;
  read.ephemeral_ports = EphemeralPorts();
  ReadLegacy(read);
  ReadNftables(read);
  return read;
}

NetfilterRead ReadNetfilterIn(const std::filesystem::path& netns) {
  if (netns.empty()) return ReadNetfilter();
  NetfilterRead read;
  RunInNetworkNamespace(netns.string(), [&] {
    try {
      read = ReadNetfilter();
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string("reading netfilter: ") + e.what());
    }
  });
  return read;
}

}  // namespace ncclguard::probes
