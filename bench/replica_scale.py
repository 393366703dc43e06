"""Helpers of bench/replica_scale.sh (standard library only).

  raw-bytes CHROMA_URL PREFIX            vector + text bytes of the three collections
  latency URL TENANT QUERIES N           p50/p99 ms of N sequential searches with precomputed vectors
  wait-version URL TENANT VERSION DIM    seconds until a search with min_index_version answers 200
  metric URL NAME                        the value of one /metrics sample
  rss PID                                VmRSS and VmHWM of a process, in MB
"""
import json
import random
import sys
import time
import urllib.request

SEARCH = "/internal/retrieval/search"


def post(url, body, timeout=60):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def get_json(url):
    with urllib.request.urlopen(url, timeout=60) as response:
        return json.loads(response.read())


def raw_bytes(chroma, prefix):
    base = f"{chroma}/api/v2/tenants/default_tenant/databases/default_database/collections"
    records = text = 0
    dimension = None
    for level in ("docs", "sections", "chunks"):
        collection = get_json(f"{base}/{prefix}_{level}")
        offset = 0
        while True:
            _, page = post(f"{base}/{collection['id']}/get",
                           {"limit": 5000, "offset": offset, "include": ["documents", "metadatas"]})
            ids = page["ids"]
            for document, metadata in zip(page["documents"], page["metadatas"]):
                text += len((document or "").encode())
                text += sum(len(str(value).encode()) for value in (metadata or {}).values())
            records += len(ids)
            offset += len(ids)
            if len(ids) < 5000:
                break
        if dimension is None:
            _, one = post(f"{base}/{collection['id']}/get", {"limit": 1, "include": ["embeddings"]})
            dimension = len(one["embeddings"][0])
    vectors = records * dimension * 4
    print(json.dumps({"records": records, "vector_bytes": vectors, "text_bytes": text, "raw_bytes": vectors + text}))


def latency(url, tenant, queries_path, count):
    bodies = []
    with open(queries_path) as lines:
        for line in lines:
            query = json.loads(line)
            bodies.append({"query": query["query"], "query_embedding": query["embedding"]})
    random.Random(7).shuffle(bodies)
    timings = []
    for number in range(count):
        body = dict(bodies[number % len(bodies)], tenant_id=tenant)
        started = time.perf_counter()
        status, answer = post(url + SEARCH, body)
        timings.append((time.perf_counter() - started) * 1000)
        if status != 200:
            sys.exit(f"search for {tenant} answered {status}: {answer}")
    timings.sort()
    pick = lambda q: timings[min(len(timings) - 1, int(q * len(timings)))]
    print(f"{pick(0.5):.2f} {pick(0.99):.2f}")


def wait_version(url, tenant, version, dimension):
    vector = [1.0 / dimension ** 0.5] * dimension
    body = {"tenant_id": tenant, "query": "страница", "query_embedding": vector, "min_index_version": version}
    started = time.perf_counter()
    while True:
        status, answer = post(url + SEARCH, body)
        if status == 200:
            print(f"{time.perf_counter() - started:.3f}")
            return
        if time.perf_counter() - started > 120:
            sys.exit(f"version {version} not visible after 120 s: {status} {answer}")


def metric(url, name):
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                print(line.rsplit(" ", 1)[1])
                return
    print("0")


def rss(pid):
    values = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(value.split()[0]) // 1024
    print(values["VmRSS"], values["VmHWM"])


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    {"raw-bytes": lambda: raw_bytes(*args),
     "latency": lambda: latency(args[0], args[1], args[2], int(args[3])),
     "wait-version": lambda: wait_version(args[0], args[1], args[2], int(args[3])),
     "metric": lambda: metric(*args),
     "rss": lambda: rss(*args)}[command]()
