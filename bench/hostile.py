#!/usr/bin/env python3
"""Hostile-caller figures of the release binary in mock mode (README "Hardening"), one run:

- the id-list repro (a 1 MB body of 174k short doc ids): status and time to the answer;
- a repeated `tenant_id` key on every JSON endpoint: the status of each;
- 20,000 idle TCP connections opened as fast as possible and held: `/health` latency from a fresh
  connection every 50 ms meanwhile, the service's RSS before, at the peak and after they close;
- logs and metrics as weapons: 200 requests with a 400 KB `X-Request-Id` (log bytes written and
  the id echoed), 100 requests with 65 KB method names (the size of /metrics after), and a service
  whose stderr is a full disk (/dev/full): how many of 100 searches it answers;
- availability: 600 connections sending a search body 1 byte every 2 s (more than the 512 work
  slots): what a real search gets meanwhile and what the slow ones get; a head with both
  Content-Length and Transfer-Encoding, alone and pipelined behind a search; `gzip, chunked`; a
  connection over RETR_MAX_CONNECTIONS (2 here) when both are receiving bodies;
- with RETR_API_KEYS: `Expect: 100-continue` without a key, and 1,200 connections trickling
  search bodies without a key (reconnecting when closed) while a keyed client runs 204 searches.

    python3 bench/hostile.py [--binary target/release/retrieval-service] [--idle 20000]

Needs only the standard library; raises its own open-file limit for the idle connections.
"""
import argparse
import http.client
import multiprocessing
import itertools
import json
import os
import resource
import socket
import statistics
import string
import subprocess
import sys
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def post(port, path, body, timeout=30):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    started = time.perf_counter()
    connection.request("POST", path, body=body, headers={"content-type": "application/json"})
    response = connection.getresponse()
    payload = response.read()
    elapsed = (time.perf_counter() - started) * 1000
    connection.close()
    return response.status, payload, elapsed


FAILURES = []


def health_ms(port, timeout=5):
    started = time.perf_counter()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        connection.request("GET", "/health")
        status = connection.getresponse().status
        connection.close()
    except (OSError, http.client.HTTPException) as error:
        FAILURES.append(f"{type(error).__name__}: {error} after {(time.perf_counter() - started) * 1000:.0f} ms")
        return None
    if status != 200:
        FAILURES.append(f"status {status}")
        return None
    return (time.perf_counter() - started) * 1000


def hold_connections(port, count, ready, release):
    """Opens `count` idle connections (in a process of its own: one process may not hold 20k
    descriptors here), reports how many opened, and holds them until `release` is set."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    sockets = []
    for _ in range(count):
        try:
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            sockets.append(s)
        except OSError:
            break
    ready.put(len(sockets))
    release.wait()
    for s in sockets:
        s.close()


def start_service(binary, port, stderr, extra_env=None, wait_seconds=10):
    """`binary serve` in mock mode on `port` with `extra_env` (no other RETR_ variable), once
    /health answers (at most `wait_seconds`; else it is killed and the script exits). The other
    probes in bench/ start the service with it too."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETR_")}
    env.update({"RETR_MOCK_MODE": "true", "RETR_LOG_FORMAT": "json", "RUST_LOG": "info"})
    env.update(extra_env or {})
    service = subprocess.Popen([binary, "serve", "--port", str(port)], env=env,
                               stdout=subprocess.DEVNULL, stderr=stderr)
    for _ in range(int(wait_seconds * 10)):
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/health")
            connection.getresponse().read()
            return service
        except (OSError, http.client.HTTPException):
            time.sleep(0.1)
    service.kill()
    sys.exit("the service did not start")


def raw_request(port, head, timeout=10):
    """Sends a raw request head; returns the response's status line and headers as text."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(head)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        return data.split(b"\r\n\r\n", 1)[0].decode("latin-1")


def log_and_metric_probes(binary):
    import tempfile
    port = free_port()
    with tempfile.TemporaryFile() as log:
        service = start_service(binary, port, log)
        try:
            huge_id = "a" * 400_000
            echoed = 0
            for _ in range(200):
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                connection.request("GET", "/health", headers={"x-request-id": huge_id})
                response = connection.getresponse()
                response.read()
                echoed = max(echoed, len(response.getheader("x-request-id") or ""))
                connection.close()
            time.sleep(0.5)
            log.seek(0, os.SEEK_END)
            print(f"400 KB X-Request-Id x200: {log.tell() / 1e6:.2f} MB of logs, longest id echoed {echoed} bytes")
            for n in range(100):
                raw_request(port, b"X" * 65_000 + str(n).encode() + b" /health HTTP/1.1\r\nhost: x\r\n\r\n")
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            connection.request("GET", "/metrics")
            size = len(connection.getresponse().read())
            print(f"65 KB methods x100: /metrics is {size / 1e3:.1f} KB after")
        finally:
            service.terminate()
            service.wait(timeout=10)
    port = free_port()
    with open("/dev/full", "wb") as full:
        service = start_service(binary, port, full, {"RUST_LOG": "debug"})
        try:
            body = json.dumps({"query": "reset password", "tenant_id": "demo"})
            answered = 0
            for _ in range(100):
                try:
                    status, _, _ = post(port, "/internal/retrieval/search", body, timeout=5)
                    answered += status == 200
                except (OSError, http.client.HTTPException):
                    pass
            print(f"stderr on a full disk (/dev/full): {answered} of 100 searches answered 200")
        finally:
            service.terminate()
            service.wait(timeout=10)


def first_lines(port, data, timeout=10):
    """Sends `data` on a new connection; returns the status line of every response until the
    server closes it ("reset" if it resets)."""
    received, reset = b"", []
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        try:
            while chunk := s.recv(65536):
                received += chunk
        except OSError:
            reset = ["reset"]
    return ["HTTP/1.1 " + part.split(b"\r\n", 1)[0].decode() for part in received.split(b"HTTP/1.1 ")[1:]] + reset


def keyless_trickle_probe(binary):
    """1,200 connections (over the default limit of 1,024) trickling search bodies without a key,
    reconnecting when closed, while a keyed client runs 204 searches on fresh connections."""
    import tempfile
    key = "hostile-probe-key-0123456789"
    keys = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
    keys.write(f"{key}: *\n")
    keys.close()
    port = free_port()
    service = start_service(binary, port, subprocess.DEVNULL, {"RUST_LOG": "warn", "RETR_API_KEYS": keys.name})
    try:
        lines = first_lines(port, b"POST /internal/retrieval/search HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n"
                                  b"expect: 100-continue\r\n\r\n")
        print(f"Expect: 100-continue without a key: {lines}")
        stop = threading.Event()
        head = (b"POST /internal/retrieval/search HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                b"content-length: 1000\r\n\r\n{")

        def trickler():
            while not stop.is_set():
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                        s.sendall(head)
                        while not stop.wait(0.5):
                            s.sendall(b" ")
                except OSError:
                    stop.wait(0.5)
        threads = [threading.Thread(target=trickler, daemon=True) for _ in range(1200)]
        for thread in threads:
            thread.start()
        time.sleep(3)
        served, started = 0, time.perf_counter()
        for i in range(204):
            body = json.dumps({"query": f"reset password {i}", "tenant_id": "demo"})
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                connection.request("POST", "/internal/retrieval/search", body=body,
                                   headers={"content-type": "application/json", "authorization": f"Bearer {key}"})
                served += connection.getresponse().status == 200
                connection.close()
            except (OSError, http.client.HTTPException):
                pass
        elapsed = time.perf_counter() - started
        stop.set()
        print(f"1,200 keyless connections trickling bodies: a keyed client's searches 200: {served} of 204 "
              f"({elapsed:.1f} s)")
    finally:
        service.terminate()
        service.wait(timeout=15)
        os.unlink(keys.name)


def availability_probes(binary):
    port = free_port()
    service = start_service(binary, port, subprocess.DEVNULL, {"RUST_LOG": "warn"})
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        head = (b"POST /internal/retrieval/search HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                b"content-length: 40\r\n\r\n")
        slow = []
        for _ in range(600):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(head + b"{")
            slow.append(s)
        stop = threading.Event()

        def trickle():
            while not stop.wait(2):
                for s in slow:
                    try:
                        s.sendall(b" ")
                    except OSError:
                        pass
        threading.Thread(target=trickle, daemon=True).start()
        time.sleep(1)
        body = json.dumps({"query": "reset password", "tenant_id": "demo"})
        status, _, elapsed = post(port, "/internal/retrieval/search", body)
        print(f"600 slow bodies (1 byte / 2 s): a real search meanwhile {status} in {elapsed:.1f} ms")
        answers = {}
        for s in slow:
            try:
                line = s.recv(200).split(b"\r\n", 1)[0].decode() or "closed"
            except OSError as error:
                line = type(error).__name__
            answers[line] = answers.get(line, 0) + 1
            s.close()
        stop.set()
        print(f"  the slow ones got: {answers}")
        head = raw_request(port, b"POST /internal/retrieval/search HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\n"
                                 b"transfer-encoding: chunked\r\n\r\n0\r\n\r\n")
        print(f"Content-Length with Transfer-Encoding: {head.splitlines()[0]}")
        search = json.dumps({"query": "reset password", "tenant_id": "demo"}).encode()
        first = (b"POST /internal/retrieval/search HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                 b"content-length: %d\r\n\r\n%s" % (len(search), search))
        both = (b"POST /internal/retrieval/search HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\n"
                b"transfer-encoding: chunked\r\n\r\n0\r\n\r\n")
        print(f"  pipelined behind a search, in one write: {first_lines(port, first + both)}")
        gzip = (b"POST /internal/retrieval/search HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                b"transfer-encoding: gzip, chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(search), search))
        print(f"Transfer-Encoding: gzip, chunked: {first_lines(port, gzip)}")
    finally:
        service.terminate()
        service.wait(timeout=10)
    port = free_port()
    service = start_service(binary, port, subprocess.DEVNULL, {"RUST_LOG": "warn", "RETR_MAX_CONNECTIONS": "2"})
    try:
        busy = []
        for _ in range(2):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"POST /internal/retrieval/search HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{")
            busy.append(s)
        time.sleep(0.3)
        head = raw_request(port, b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
        print("over the connection limit, both receiving bodies: " + head.splitlines()[0])
        for s in busy:
            s.close()
    finally:
        service.terminate()
        service.wait(timeout=10)
    keyless_trickle_probe(binary)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default="target/release/retrieval-service")
    parser.add_argument("--idle", type=int, default=20000)
    args = parser.parse_args()
    log_and_metric_probes(args.binary)
    availability_probes(args.binary)

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETR_")}
    env.update({"RETR_MOCK_MODE": "true", "RETR_LOG_FORMAT": "json", "RUST_LOG": "warn"})
    service = subprocess.Popen([args.binary, "serve", "--port", str(port)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if health_ms(port) is not None:
                break
            time.sleep(0.1)
        else:
            sys.exit("the service did not start")

        # 1. The id-list repro.
        alphabet = string.ascii_letters + string.digits
        ids = ["".join(p) for p in itertools.product(alphabet, repeat=3)][:174000]
        body = json.dumps({"query": "x", "tenant_id": "demo", "doc_ids": ids}, separators=(",", ":"))
        times, statuses = [], set()
        for _ in range(5):
            status, _, elapsed = post(port, "/internal/retrieval/search", body)
            statuses.add(status)
            times.append(elapsed)
        print(f"id-list repro ({len(body) / 1e6:.2f} MB, {len(ids)} ids): status {sorted(statuses)}, "
              f"median {statistics.median(times):.1f} ms, max {max(times):.1f} ms over 5")

        # 2. A repeated key on every JSON endpoint.
        duplicate = '{"query":"a","tenant_id":"demo","tenant_id":"acme","doc_id":"d","anchor_chunk_id":"c"}'
        results = []
        for path in ["/internal/retrieval/search", "/internal/retrieval/context",
                     "/internal/retrieval/chunks/window", "/internal/retrieval/config"]:
            status, payload, _ = post(port, path, duplicate)
            results.append(f"{path.rsplit('/', 1)[-1]} {status}")
        print("repeated tenant_id key: " + ", ".join(results))

        # 3. Idle connections.
        rss_before = rss_mb(service.pid)
        FAILURES.clear()
        latencies, failures, stop = [], [0], threading.Event()
        phase = ["opening"]
        by_phase = {"opening": [], "held": []}

        def probe():
            while not stop.is_set():
                current = phase[0]
                value = health_ms(port, timeout=5)
                if value is None:
                    failures[0] += 1
                else:
                    latencies.append(value)
                    if current in by_phase:
                        by_phase[current].append(value)
                time.sleep(0.05)

        prober = threading.Thread(target=probe, daemon=True)
        prober.start()
        workers, per_worker = 4, (args.idle + 3) // 4
        ready, release = multiprocessing.Queue(), multiprocessing.Event()
        started = time.perf_counter()
        holders = [multiprocessing.Process(target=hold_connections, args=(port, per_worker, ready, release))
                   for _ in range(workers)]
        for holder in holders:
            holder.start()
        opened_count = sum(ready.get(timeout=120) for _ in holders)
        opened = time.perf_counter() - started
        phase[0] = "held"
        peak = rss_before
        for _ in range(40):  # hold them for ~4 s
            peak = max(peak, rss_mb(service.pid))
            time.sleep(0.1)
        phase[0] = "closing"
        release.set()
        for holder in holders:
            holder.join(timeout=60)
        time.sleep(3)
        stop.set()
        prober.join()
        rss_after = rss_mb(service.pid)
        latencies.sort()
        p99 = latencies[int(0.99 * (len(latencies) - 1))] if latencies else float("nan")
        print(f"{opened_count} idle connections opened in {opened:.1f} s; "
              f"/health meanwhile: {len(latencies)} answered, {failures[0]} failed, "
              f"median {statistics.median(latencies) if latencies else float('nan'):.1f} ms, "
              f"p99 {p99:.1f} ms, max {max(latencies) if latencies else float('nan'):.1f} ms")
        for name, values in by_phase.items():
            if values:
                values.sort()
                print(f"  /health while {name}: {len(values)} answered, median {statistics.median(values):.1f} ms, "
                      f"p99 {values[int(0.99 * (len(values) - 1))]:.1f} ms, max {values[-1]:.1f} ms")
        for failure in sorted(set(FAILURES)):
            print(f"  /health failure: {failure}")
        print(f"service RSS: {rss_before:.0f} MB before, {peak:.0f} MB peak, {rss_after:.0f} MB after they closed")
        metrics = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        metrics.request("GET", "/metrics")
        text = metrics.getresponse().read().decode()
        for line in text.splitlines():
            if line.startswith(("retrieval_connections_", "retrieval_requests_shed_total")):
                print("  " + line)
    finally:
        service.terminate()
        service.wait(timeout=10)


if __name__ == "__main__":
    main()
