#!/usr/bin/env python3
"""What the MCP tool `search_docs` costs over `POST /search` for the same question, side by side in
one run: starts the binary in mock mode (bundled demo corpus), then for each round sends each of
the twelve demo questions once to `/search` and once as a `tools/call` of `search_docs` (the order
alternating between rounds), each on its own kept-alive connection, one request at a time, and
prints p50 and p99 of both and the p99 difference. Checks first that both answer the same hits.

    python3 bench/mcp_overhead.py [--binary target/release/retrieval-service] [--rounds 100]

Needs only the standard library.
"""
import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

# The first twelve newcomer questions of tests/it/scenarios.rs (scripts/mcp_client.py asks the same).
QUESTIONS = [
    "как сбросить пароль",
    "как сбросить пароль оператора",
    "не могу войти в систему",
    "как подключить Android SDK через gradle",
    "как установить сдк на айфон",
    "как настроить пуши на андроиде",
    "как оператору перевести чат на коллегу",
    "как добавить нового сотрудника",
    "почему не получается закрыть чат без тега",
    "как выгрузить отчёт в excel",
    "как настроить автоответ в нерабочее время",
    "как подключить телеграм",
]
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values, share):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def post(connection, path, body, headers):
    started = time.perf_counter()
    connection.request("POST", path, body=body, headers=headers)
    response = connection.getresponse()
    payload = response.read()
    elapsed = (time.perf_counter() - started) * 1000
    if response.status != 200:
        sys.exit(f"{path}: HTTP {response.status}: {payload[:300]!r}")
    return elapsed, json.loads(payload)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default="target/release/retrieval-service")
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    port = free_port()
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "RETR_MOCK_MODE": "true",
           "RETR_VECTOR_BACKEND": "memory", "RETR_HOST": "127.0.0.1", "RETR_REQUEST_LOG_LEVEL": "off",
           "RUST_LOG": "warn"}
    with tempfile.TemporaryFile() as log:
        service = subprocess.Popen([args.binary, "serve", "--port", str(port)], env=env, stdout=log, stderr=log)
        try:
            for _ in range(100):
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1):
                        break
                except OSError:
                    time.sleep(0.1)
            search = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            mcp = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            bodies = []
            for number, question in enumerate(QUESTIONS):
                plain = json.dumps({"query": question, "tenant_id": "demo"})
                tool = json.dumps({"jsonrpc": "2.0", "id": number, "method": "tools/call",
                                   "params": {"name": "search_docs", "arguments": {"query": question, "tenant": "demo"}}})
                _, expected = post(search, "/internal/retrieval/search", plain, {"content-type": "application/json"})
                _, called = post(mcp, "/internal/retrieval/mcp", tool, MCP_HEADERS)
                got = [hit["id"] for hit in called["result"]["structuredContent"]["hits"]]
                if got != [hit["id"] for hit in expected["hits"]]:
                    sys.exit(f"{question!r}: search_docs answered other hits than /search")
                bodies.append((plain, tool))
            timings = {"search": [], "search_docs": []}
            for round_number in range(args.rounds):
                for plain, tool in bodies:
                    pair = [("search", search, "/internal/retrieval/search", plain, {"content-type": "application/json"}),
                            ("search_docs", mcp, "/internal/retrieval/mcp", tool, MCP_HEADERS)]
                    if round_number % 2:
                        pair.reverse()
                    for name, connection, path, body, headers in pair:
                        elapsed, _ = post(connection, path, body, headers)
                        timings[name].append(elapsed)
        finally:
            service.terminate()
            service.wait()
    p99 = {name: percentile(values, 0.99) for name, values in timings.items()}
    for name, values in timings.items():
        print(f"{name:12} n={len(values)} p50={percentile(values, 0.5):.2f} ms p99={p99[name]:.2f} ms")
    print(f"search_docs over /search at p99: {p99['search_docs'] - p99['search']:+.2f} ms")


if __name__ == "__main__":
    main()
