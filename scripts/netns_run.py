#!/usr/bin/env python3
"""Runs a command in a network namespace of its own, its loopback the only interface there.

    scripts/netns_run.py PORT[,PORT...] -- COMMAND [ARG...]

Each PORT of that namespace's 127.0.0.1 is forwarded to the same port of this namespace's
127.0.0.1, so the command reaches a local API server while everything it listens on (a Go
binary that binds its webhook to every interface, say) stays inside, where no packet from
anywhere else arrives and from where none leaves. The namespace has no name and ends with the
command: nothing is left behind. Needs root (unshare(2) with CLONE_NEWNET).

SIGTERM and SIGINT are passed on to the command; this exits with its status.
"""
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading

CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1


def die(message):
    print(f"netns_run: {message}", file=sys.stderr)
    sys.exit(1)


def pump(source, sink):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        # The other direction may still be sending: close this one's half only.
        for end, how in ((sink, socket.SHUT_WR), (source, socket.SHUT_RD)):
            try:
                end.shutdown(how)
            except OSError:
                pass


def serve(listener, port):
    # Runs in this (the original) namespace: the connections it opens go to its 127.0.0.1.
    while True:
        try:
            inside, _ = listener.accept()
        except OSError:
            return
        try:
            outside = socket.create_connection(("127.0.0.1", port), timeout=10)
            outside.settimeout(None)
        except OSError:
            inside.close()
            continue
        for a, b in ((inside, outside), (outside, inside)):
            threading.Thread(target=pump, args=(a, b), daemon=True).start()


def main():
    args = sys.argv[1:]
    if len(args) < 3 or args[1] != "--":
        die("usage: netns_run.py PORT[,PORT...] -- COMMAND [ARG...]")
    try:
        ports = [int(p) for p in args[0].split(",")]
    except ValueError:
        die(f"not a port list: {args[0]}")
    if any(p <= 0 or p > 65535 for p in ports):
        die(f"not a port list: {args[0]}")
    command = args[2:]

    libc = ctypes.CDLL(None, use_errno=True)
    original = os.open("/proc/self/ns/net", os.O_RDONLY)
    if libc.unshare(CLONE_NEWNET) != 0:
        die(f"unshare(CLONE_NEWNET): {os.strerror(ctypes.get_errno())} (root needed)")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    listeners = []
    for port in ports:
        listeners.append(socket.create_server(("127.0.0.1", port), backlog=64))
    # In the new namespace, as are its children; killed with this process, however it ends (a
    # SIGKILL to this one would otherwise leave the command running).
    child = subprocess.Popen(command, preexec_fn=lambda: libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL))
    if libc.setns(original, CLONE_NEWNET) != 0:
        child.kill()
        die(f"setns back: {os.strerror(ctypes.get_errno())}")
    os.close(original)

    def forward(signum, _frame):
        child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for listener, port in zip(listeners, ports):
        threading.Thread(target=serve, args=(listener, port), daemon=True).start()
    status = child.wait()
    sys.exit(status if status >= 0 else 128 - status)


if __name__ == "__main__":
    main()
