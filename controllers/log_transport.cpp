#include "controllers/log_transport.h"

#include <algorithm>

#include "controllers/log_scan.h"

namespace ncclguard::controllers {
namespace {

// The names aws-ofi-nccl gives its network: "AWS Libfabric" up to 1.11, "Libfabric" after, or
// "OFI" when NCCL_NET says so.
bool IsPluginNetwork(std::string_view name) {
  return name == "AWS Libfabric" || name == "Libfabric" || name == "OFI";
}

bool IsBlank(char c) { return c == ' ' || IsControlByte(c); }

// The name in "Using network <name>": NCCL prints it with %s, so a control byte ends it (a log
// file cut while it was written holds NULs there), as the line's end does.
std::string_view NetworkName(std::string_view rest) {
  while (!rest.empty() && IsBlank(rest.front())) rest.remove_prefix(1);
  rest = rest.substr(0, std::find_if(rest.begin(), rest.end(), IsControlByte) - rest.begin());
  while (!rest.empty() && rest.back() == ' ') rest.remove_suffix(1);
  return rest;
}

// The word after `marker` in `text` (up to a space, comma, parenthesis or control byte).
std::string_view WordAfter(std::string_view text, std::size_t marker_end) {
  std::string_view rest = text.substr(marker_end);
  std::size_t end = 0;
  while (end < rest.size() && !IsBlank(rest[end]) && rest[end] != ',' && rest[end] != '(' &&
         rest[end] != ')') {
    ++end;
  }
  return rest.substr(0, end);
}

// "via NET/<name>/<dev>" in a channel line: the network between two ranks on different nodes.
std::optional<std::string_view> ChannelNetwork(std::string_view text) {
  const auto via = text.find(" via NET/");
  if (via == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(via + 9);
  const auto slash = rest.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  return rest.substr(0, slash);
}

}  // namespace

std::string_view TransportName(NcclTransportKind kind) {
  switch (kind) {
    case NcclTransportKind::Efa:
      return "EFA";
    case NcclTransportKind::Socket:
      return "Socket";
    case NcclTransportKind::Unknown:
      return "Unknown";
  }
  return "Unknown";
}

void TransportReader::Keep(std::optional<TransportLine>& slot, std::uint64_t number,
                           std::string_view text) {
  if (!slot) slot = TransportLine{number, RedactLine(text)};
}

void TransportReader::Feed(std::uint64_t number, std::string_view text) {
  // Every line that matters here is printed by NCCL's logger (aws-ofi-nccl uses it too).
  if (text.find("NCCL") == std::string_view::npos) return;
  bool changed = false;
  if (const auto at = text.find("Using network "); at != std::string_view::npos) {
    const std::string_view name = NetworkName(text.substr(at + 14));
    if (name == "Socket") {
      Keep(socket_network_, number, text);
    } else if (IsPluginNetwork(name)) {
      Keep(plugin_network_, number, text);
    } else {
      if (!other_network_) other_name_ = LogValue(name);
      Keep(other_network_, number, text);
    }
    changed = true;
  } else if (const auto network = ChannelNetwork(text)) {
    if (*network == "Socket") {
      Keep(socket_network_, number, text);
      changed = true;
    } else if (IsPluginNetwork(*network)) {
      Keep(plugin_network_, number, text);
      changed = true;
    }
  } else if (text.find("NET/OFI") != std::string_view::npos) {
    plugin_seen_ = true;
    changed = true;
    // "Selected Provider is efa (found 4 nics)"; aws-ofi-nccl >= 1.14: "Selected provider is
    // efa, fabric is efa-direct (found 16 nics)".
    std::string_view selected;
    for (const std::string_view marker : {"Selected Provider is ", "Selected provider is "}) {
      if (const auto hit = text.find(marker); hit != std::string_view::npos) {
        selected = WordAfter(text, hit + marker.size());
        break;
      }
    }
    if (!selected.empty() && !provider_line_) {
      provider_ = LogValue(selected);
      Keep(provider_line_, number, text);
    }
    if (const auto init = text.find("Initializing aws-ofi-nccl ");
        init != std::string_view::npos && verdict_.plugin_version.empty()) {
      verdict_.plugin_version = "aws-ofi-nccl " + LogValue(WordAfter(text, init + 26));
    }
  } else if (text.find("NET/Socket : Using") != std::string_view::npos) {
    Keep(socket_init_, number, text);
    changed = true;
  } else if (text.find("NET/Plugin") != std::string_view::npos) {
    if (text.find("No plugin found") != std::string_view::npos ||
        text.find("internal network plugin") != std::string_view::npos ||
        text.find("using internal implementation") != std::string_view::npos) {
      Keep(no_plugin_, number, text);
      changed = true;
    } else if (text.find("Loaded net plugin") != std::string_view::npos) {
      plugin_seen_ = true;
      changed = true;
    }
  }
  if (changed) Decide();
}

// A communicator on sockets makes the job slow, whatever the others use: sockets win. Without a
// "Using network" or channel line, the plugin's provider decides; "NET/Socket : Using" alone
// (NCCL initialises its socket network only when it falls back to it) means sockets too.
void TransportReader::Decide() {
  TransportVerdict& v = verdict_;
  v.provider = provider_;
  v.evidence.clear();
  const auto add = [&](const std::optional<TransportLine>& line) {
    if (line && v.evidence.size() < 3) v.evidence.push_back(*line);
  };
  const bool efa_provider = provider_ == "efa";
  if (socket_network_) {
    v.kind = NcclTransportKind::Socket;
    v.why = "NCCL uses its TCP socket network";
    add(socket_network_);
    add(no_plugin_);
    add(socket_init_);
  } else if (plugin_network_ && provider_line_ && !efa_provider) {
    v.kind = NcclTransportKind::Socket;
    v.why = "the aws-ofi-nccl plugin runs over libfabric provider " + provider_;
    add(provider_line_);
    add(plugin_network_);
  } else if (plugin_network_) {
    v.kind = NcclTransportKind::Efa;
    v.why = "NCCL uses the aws-ofi-nccl plugin" +
            (efa_provider ? std::string(" over libfabric provider efa") : std::string());
    add(plugin_network_);
    add(provider_line_);
  } else if (provider_line_) {
    v.kind = efa_provider ? NcclTransportKind::Efa : NcclTransportKind::Socket;
    v.why = "the aws-ofi-nccl plugin selected libfabric provider " + provider_;
    add(provider_line_);
  } else if (other_network_) {
    v.kind = NcclTransportKind::Unknown;
    v.why = "NCCL uses network " + other_name_ + ", neither EFA nor sockets";
    add(other_network_);
  } else if (socket_init_ && !plugin_seen_) {
    v.kind = NcclTransportKind::Socket;
    v.why = "NCCL initialised its TCP socket network";
    add(socket_init_);
    add(no_plugin_);
  } else {
    v.kind = NcclTransportKind::Unknown;
    v.why = "";
  }
}

}  // namespace ncclguard::controllers
