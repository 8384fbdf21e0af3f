#!/usr/bin/env python3
"""A TCP proxy on 127.0.0.1 in front of kube-apiserver for bench/scale_faults.sh: bytes pass
through untouched (TLS end to end: the API server's certificate names 127.0.0.1), one upstream
connection per client connection. SIGUSR1 cuts a random 10% (at least one) of the connections
that have been open for 5 s or more: the controller's watches each ride a connection of their own,
so this drops watches mid-stream (and now and then an idle keep-alive connection).

  scale_fault_proxy.py <upstream port> <port file> <cut log>
"""
import asyncio
import random
import signal
import sys
import time

UPSTREAM = int(sys.argv[1])
connections = {}  # writer -> (opened at, upstream writer)


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def handle(client_reader, client_writer):
    try:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", UPSTREAM)
    except OSError:
        client_writer.close()
        return
    connections[client_writer] = (time.monotonic(), up_writer)
    try:
        await asyncio.gather(pipe(client_reader, up_writer), pipe(up_reader, client_writer))
    finally:
        connections.pop(client_writer, None)


def cut():
    now = time.monotonic()
    old = [w for w, (at, _) in connections.items() if now - at >= 5]
    victims = random.sample(old, max(1, len(old) // 10)) if old else []
    for writer in victims:
        _, upstream = connections.pop(writer)
        for w in (writer, upstream):
            w.transport.abort()
    with open(sys.argv[3], "a") as log:
        log.write(f"{time.time():.3f} cut {len(victims)} of {len(old)} long-lived connections\n")


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    with open(sys.argv[2], "w") as f:
        f.write(str(server.sockets[0].getsockname()[1]))
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, cut)
    stop = loop.create_future()
    loop.add_signal_handler(signal.SIGTERM, stop.set_result, None)
    async with server:
        await stop


asyncio.run(main())
