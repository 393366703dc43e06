#!/usr/bin/env python3
"""Hostile JSON-RPC at the MCP endpoint, one run: starts the binary in mock mode, sends 1,000
malformed or hostile messages (wrong types, huge and odd ids, unknown methods and tools, batches of
10,000, deep nesting, repeated keys, oversized bodies, bodies that stop half-way and connections
left open), and meanwhile times `/health` from a fresh connection every 50 ms. Fails when a message
gets a 5xx or no answer where an answer is due, when `/health` is ever slower than 1 s, or when a
search does not answer the demo question afterwards. Prints the counts by status and /health's p50
and max.

    python3 bench/mcp_hostile.py [--binary target/release/retrieval-service]

Needs only the standard library.
"""
import argparse
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter

MCP = "/internal/retrieval/mcp"
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def messages(rng):
    """(body bytes, whether an HTTP answer is due) for one hostile message."""
    kinds = [
        lambda: b'{"jsonrpc":"2.0","id":1,"method":',
        lambda: json.dumps({"jsonrpc": "2.0", "id": "9" * rng.randint(30, 5000), "method": "tools/list"}).encode(),
        lambda: ('{"jsonrpc":"2.0","id":' + "9" * rng.randint(30, 500) + ',"method":"tools/list"}').encode(),
        lambda: json.dumps({"jsonrpc": "2.0", "id": {"x": [1, 2]}, "method": "tools/list"}).encode(),
        lambda: json.dumps({"jsonrpc": "2.0", "id": 1, "method": f"no/such/{rng.random()}"}).encode(),
        lambda: json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": rng.choice([5, "x", [], None])}).encode(),
        lambda: json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                            "params": {"name": rng.choice(["search_docs", "outline", "nope"]),
                                       "arguments": {"query": rng.choice([7, [], "", "x" * 5000]), "tenant": rng.choice([1, "demo", "../x", None])}}}).encode(),
        lambda: ("[" + ",".join(['{"jsonrpc":"2.0","id":1,"method":"tools/list"}'] * 10_000) + "]").encode(),
        lambda: ("[" * 100_000 + "]" * 100_000).encode(),
        lambda: b'{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list","params":{"a":1,"a":2}}',
        lambda: b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"' + b"x" * (2 << 20) + b'"}}',
        lambda: bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300))),
    ]
    return rng.choice(kinds)()


def send(port, body, cut):
    """Sends one POST; with `cut` the body stops half-way and the connection is closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        head = (f"POST {MCP} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n")
        s.sendall(head.encode() + (body[: len(body) // 2] if cut else body))
        if cut:
            return None
        data = b""
        while chunk := s.recv(65536):
            data += chunk
        return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default="target/release/retrieval-service")
    parser.add_argument("--messages", type=int, default=1000)
    args = parser.parse_args()
    port = free_port()
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "RETR_MOCK_MODE": "true",
           "RETR_VECTOR_BACKEND": "memory", "RETR_HOST": "127.0.0.1", "RETR_REQUEST_LOG_LEVEL": "off", "RUST_LOG": "error"}
    rng = random.Random(7)
    statuses = Counter()
    health = []
    done = threading.Event()
    with tempfile.TemporaryFile() as log:
        service = subprocess.Popen([args.binary, "serve", "--port", str(port)], env=env, stdout=log, stderr=log)
        try:
            for _ in range(100):
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1):
                        break
                except OSError:
                    time.sleep(0.1)

            def probe():
                while not done.is_set():
                    started = time.perf_counter()
                    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                    connection.request("GET", "/health")
                    connection.getresponse().read()
                    connection.close()
                    health.append((time.perf_counter() - started) * 1000)
                    time.sleep(0.05)

            prober = threading.Thread(target=probe)
            prober.start()
            held = []
            for number in range(args.messages):
                body = messages(rng)
                if number % 50 == 0:
                    # A connection left open with half a body: the body deadline ends it.
                    s = socket.create_connection(("127.0.0.1", port))
                    s.sendall(f"POST {MCP} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{".encode())
                    held.append(s)
                    statuses["held open"] += 1
                    continue
                cut = number % 7 == 0
                status = send(port, body, cut)
                statuses["cut" if cut else status] += 1
            done.set()
            prober.join()
            for s in held:
                s.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.request("POST", "/internal/retrieval/search", body=json.dumps({"query": "как сбросить пароль", "tenant_id": "demo"}),
                               headers={"content-type": "application/json"})
            response = connection.getresponse()
            answer = json.loads(response.read())
        finally:
            done.set()
            service.terminate()
            service.wait()
    print("statuses:", dict(sorted(statuses.items(), key=str)))
    health.sort()
    print(f"/health during: n={len(health)} p50={health[len(health) // 2]:.1f} ms max={health[-1]:.1f} ms")
    print(f"search afterwards: HTTP {response.status}, {len(answer.get('hits', []))} hits")
    bad = [status for status in statuses if isinstance(status, int) and (status >= 500 or status == 0)]
    if bad or health[-1] > 1000 or response.status != 200 or not answer.get("hits"):
        sys.exit(f"FAIL: 5xx or no answer {bad}, /health max {health[-1]:.0f} ms, search {response.status}")
    print("ok")


if __name__ == "__main__":
    main()
