// Which network NCCL uses, from one process's log (or one pod's, or one file's): EFA through the
// aws-ofi-nccl plugin, or NCCL's built-in TCP sockets. NCCL prints it with NCCL_DEBUG=INFO
// (NCCL_DEBUG_SUBSYS including INIT or NET), the same way in 2.18 to 2.23:
//   host:pid:tid [dev] NCCL INFO Using network AWS Libfabric        (plugin <= 1.11; "Libfabric"
//                                                                     or "OFI" after)
//   host:pid:tid [dev] NCCL INFO Using network Socket
//   ... NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0
//   ... NCCL INFO NET/OFI Selected Provider is efa (found 32 nics)  (tcp or sockets: no EFA)
//   ... NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.7.4-aws
// "Bootstrap : Using eth0:..." and NCCL_SOCKET_IFNAME lines are the out-of-band socket every
// run uses: they say nothing about the data path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ncclguard::controllers {

enum class NcclTransportKind { Unknown, Efa, Socket };

// "EFA", "Socket", "Unknown": the NcclTransport condition's status-like reason.
std::string_view TransportName(NcclTransportKind kind);

struct TransportLine {
  std::uint64_t line;
  std::string text;  // redacted
};

struct TransportVerdict {
  NcclTransportKind kind = NcclTransportKind::Unknown;
  std::string why;                      // one phrase: "Using network Socket", ...
  std::vector<TransportLine> evidence;  // at most 3 lines
  std::string plugin_version;           // "aws-ofi-nccl 1.7.4-aws", when printed (LogValue)
  std::string provider;  // libfabric provider the plugin selected, when printed (LogValue)
};

class TransportReader {
 public:
  void Feed(std::uint64_t number, std::string_view text);
  const TransportVerdict& Verdict() const { return verdict_; }

 private:
  void Decide();
  void Keep(std::optional<TransportLine>& slot, std::uint64_t number, std::string_view text);

  std::optional<TransportLine> plugin_network_;  // Using network <plugin> / via NET/<plugin>/
  std::optional<TransportLine> socket_network_;  // Using network Socket / via NET/Socket/
  std::optional<TransportLine> other_network_;   // Using network IB, ...
  std::optional<TransportLine> provider_line_;   // NET/OFI Selected Provider is X
  std::optional<TransportLine> socket_init_;     // NET/Socket : Using [0]eth0...
  std::optional<TransportLine> no_plugin_;       // NET/Plugin: no plugin found / internal
  bool plugin_seen_ = false;                     // any NET/OFI line
  std::string provider_;                         // LogValue
  std::string other_name_;                       // LogValue
  TransportVerdict verdict_;
};

}  // namespace ncclguard::controllers
