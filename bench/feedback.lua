-- wrk script for POST /internal/retrieval/feedback: every request a new trace id
-- (`load-<thread>-<n>`) for tenant BENCH_TENANT (demo). done() prints one machine-readable line:
-- BENCH requests=… rps=… p50_ms=… p99_ms=… non2xx=… …

local tenant = os.getenv("BENCH_TENANT") or "demo"
local threads = {}
local counter = 0

function setup(thread)
  thread:set("id", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  counter = counter + 1
  local body = string.format(
    '{"tenant_id":"%s","trace_id":"load-%d-%d","query":"как сбросить пароль оператора",'
      .. '"used":["demo/docs/faq/login-problems.md#s1"],"shown":["demo/docs/faq/login-problems.md#s1",'
      .. '"demo/docs/admin/users.md#s2"],"verdict":"helpful"}',
    tenant, id, counter)
  return wrk.format(nil, "/internal/retrieval/feedback", nil, body)
end

function done(summary, latency, requests)
  local errors = summary.errors
  local seconds = summary.duration / 1e6
  io.write(string.format(
    "BENCH requests=%d rps=%.1f p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f max_ms=%.2f non2xx=%d connect=%d read=%d write=%d timeout=%d\n",
    summary.requests, summary.requests / seconds, latency:percentile(50) / 1000, latency:percentile(90) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000, errors.status, errors.connect, errors.read, errors.write,
    errors.timeout))
end
