#!/usr/bin/env python3
"""The request-head probe: what connections that send a long head and never finish it cost the
server (issue: "Nothing lost, nothing stalled"), and what a head over the limit gets.

    python3 bench/head_memory.py [--binary target/release/retrieval-service] [--connections 1200] [--head-kb 390]

Serves the demo corpus in mock mode (RETR_MAX_CONNECTIONS raised above --connections), sends one
complete 138 KB head and prints the status line it gets, then opens --connections connections that
each send --head-kb KB of header lines without the blank line, and prints the service's RSS before
and 3 s after, and how long /health takes meanwhile. Needs `ulimit -n` above --connections.
Standard library only.
"""
import argparse
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import condition_bomb as probe  # noqa: E402  (health)
from hostile import free_port, rss_mb, start_service  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default="target/release/retrieval-service")
    parser.add_argument("--connections", type=int, default=1200)
    parser.add_argument("--head-kb", type=int, default=390)
    args = parser.parse_args()
    port = free_port()
    service = None
    sockets = []
    try:
        service = start_service(args.binary, port, subprocess.DEVNULL,
                                {"RUST_LOG": "warn", "RETR_MAX_CONNECTIONS": str(args.connections + 100)},
                                wait_seconds=30)
        line = lambda i: b"X-Pad-%d: %s\r\n" % (i, b"a" * 1000)  # noqa: E731
        with socket.create_connection(("127.0.0.1", port), timeout=15) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(line(i) for i in range(138)) + b"\r\n")
            print("one complete 138 KB head:", s.recv(200).split(b"\r\n")[0].decode(), flush=True)
        before = rss_mb(service.pid)
        partial = b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(line(i) for i in range(args.head_kb))
        for _ in range(args.connections):
            c = socket.create_connection(("127.0.0.1", port))
            c.setblocking(False)
            try:
                c.send(partial)
            except BlockingIOError:
                pass
            sockets.append(c)
        time.sleep(3)
        health = probe.health(port)
        print(f"{len(sockets)} connections with an unfinished {args.head_kb} KB head: RSS {before:.0f} -> "
              f"{rss_mb(service.pid):.0f} MB; /health {health:.1f} ms" if health is not None else "; /health failed",
              flush=True)
    finally:
        for c in sockets:
            c.close()
        if service is not None:
            service.kill()
            service.wait()


if __name__ == "__main__":
    main()
