#pragma once

#include <string_view>

namespace ncclguard::probes {

// Host-level fixes quoted from docs/guide.md (a unit test keeps the two identical). The probe
// only reports them; placeholders in <angle brackets> are filled in by the check.
struct HostFix {
  std::string_view command;
  std::string_view blast_radius;
};

// §14 gpu-p2p, per bridge.
inline constexpr HostFix kClearAcs{
    "setpci -s <bdf> ECAP_ACS+0x6.w=0000",
    "clears all ACS controls on that bridge, which affects every device below it; devices there "
    "can then DMA to each other without the IOMMU seeing it (weaker isolation, relevant if you "
    "pass devices to VMs). The change is lost on reboot, so apply it at boot (a systemd oneshot "
    "unit, or the AMI build), and do it when no GPU job is running on the node."};

// §15 stale-shm.
inline constexpr HostFix kRemoveIpcNo{
    "sed -i 's/^#\\?RemoveIPC=.*/RemoveIPC=no/' /etc/systemd/logind.conf\n"
    "grep -q '^RemoveIPC=' /etc/systemd/logind.conf || echo 'RemoveIPC=no' >> "
    "/etc/systemd/logind.conf\n"
    "systemctl restart systemd-logind",
    "that node's logind only; existing login sessions survive the restart on current systemd "
    "versions."};

inline constexpr HostFix kRemoveStaleShm{
    "find /dev/shm -maxdepth 1 -name 'nccl-*' -mmin +60 -print -delete",
    "deleting a segment in use crashes the job that owns it; run it only when no job is running "
    "on the node."};

// §17 memlock, containerd (EKS, HyperPod EKS).
inline constexpr HostFix kContainerdMemlock{
    "mkdir -p /etc/systemd/system/containerd.service.d\n"
    "printf '[Service]\\nLimitMEMLOCK=infinity\\n' > "
    "/etc/systemd/system/containerd.service.d/memlock.conf\n"
    "systemctl daemon-reload && systemctl restart containerd",
    "running containers keep their old limit until they are recreated; the restart briefly "
    "interrupts kubelet's view of the runtime. Do it on a drained node, or bake it into the AMI / "
    "node bootstrap."};

// §7 node-hardware and §21 gpu-row-remap: move the work off, then reboot or replace.
inline constexpr HostFix kDrainNode{
    "kubectl cordon <node>\nkubectl drain <node> --ignore-daemonsets --delete-emptydir-data",
    "every pod on the node is evicted, including other jobs."};

// §16 host-firewall: NCCL's TCP from the training subnet, on both paths (the guide's CIDR is an
// example the admin replaces).
inline constexpr HostFix kAllowNcclTcp{
    "iptables -I INPUT   -p tcp -s 10.1.0.0/16 --dport 1024:65535 -j ACCEPT\n"
    "iptables -I FORWARD -p tcp -s 10.1.0.0/16 --dport 1024:65535 -j ACCEPT",
    "every high TCP port on that node becomes reachable from the whole CIDR, for every process, "
    "not just NCCL. Use the narrowest CIDR that covers the training nodes (and pod IPs if pods "
    "get their own), and roll the change through your configuration management, not by hand on "
    "one node."};

}  // namespace ncclguard::probes
