#!/usr/bin/env python3
"""The only door into the test node's network namespace: a TCP relay.

    forward.py <netns-path> <listen-port> <target-ip> <target-port> <port-file>

Listens on 127.0.0.1:<listen-port> (0: any free port, written to <port-file>)
in the namespace it was started in, then moves into <netns-path> and connects
each accepted client to <target-ip>:<target-port> there. A socket keeps the
network namespace it was created in, so the listener stays on the host's
loopback while every outgoing connection is made inside the node's namespace,
which has no interface leading anywhere else. kubectl, helm and the tests on
the host reach the node's kube-apiserver through it; nothing is routed.
"""

import ctypes
import os
import signal
import socket
import sys
import threading

CLONE_NEWNET = 0x40000000
BUFFER = 65536


def enter_netns(path):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


def pump(src, dst):
    """Copies src to dst until src ends, then half-closes dst."""
    try:
        while True:
            data = src.recv(BUFFER)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def serve(client, target):
    upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        upstream.settimeout(5)
        upstream.connect(target)
        upstream.settimeout(None)
    except OSError as e:
        print(f"forward: connecting to {target[0]}:{target[1]}: {e}", file=sys.stderr, flush=True)
        upstream.close()
        client.close()
        return
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def main():
    if len(sys.argv) != 6:
        print(__doc__, file=sys.stderr)
        return 2
    netns, port, target_ip, target_port, port_file = sys.argv[1:]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(port)))
    listener.listen(128)
    # Sockets created from here on, by this thread and the threads it starts,
    # belong to the node's namespace; the listener stays where it was made.
    enter_netns(netns)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{listener.getsockname()[1]}\n")
    os.rename(tmp, port_file)
    target = (target_ip, int(target_port))
    while True:
        client, _ = listener.accept()
        threading.Thread(target=serve, args=(client, target), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
