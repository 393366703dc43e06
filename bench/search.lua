-- wrk script for POST /internal/retrieval/search with precomputed query embeddings, so the
-- embedder is not measured. Env: BENCH_DIMENSION (384), BENCH_TENANTS (10), BENCH_BODIES (200),
-- BENCH_SEED (7). Bodies are pre-generated at init and rotated; tenants rotate tenant0..tenantN-1.
-- With BENCH_BODIES_FILE, the bodies are that file's lines instead (one JSON body per line).
-- done() prints one machine-readable line: BENCH requests=… rps=… p50_ms=… p99_ms=… non2xx=… …

local dimension = tonumber(os.getenv("BENCH_DIMENSION") or "384")
local tenants = tonumber(os.getenv("BENCH_TENANTS") or "10")
local body_count = tonumber(os.getenv("BENCH_BODIES") or "200")
local seed = tonumber(os.getenv("BENCH_SEED") or "7")

-- Words of the synthetic corpus (examples/chroma_bench.rs), so BM25 finds lexical matches too.
local words = { "фрагмент", "раздела", "документа", "раздел", "документ" }

local bodies = {}
local next_body = 1

local function embedding()
  local values, norm = {}, 0
  for i = 1, dimension do
    local v = math.random() * 2 - 1
    values[i] = v
    norm = norm + v * v
  end
  norm = math.sqrt(norm)
  for i = 1, dimension do
    values[i] = string.format("%.6f", values[i] / norm)
  end
  return table.concat(values, ",")
end

function init(args)
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  local file = os.getenv("BENCH_BODIES_FILE")
  if file then
    for line in io.lines(file) do bodies[#bodies + 1] = line end
    return
  end
  math.randomseed(seed)
  for n = 1, body_count do
    local query = string.format("%s %d %s %d", words[(n % #words) + 1], n % 4, words[((n + 2) % #words) + 1], n % 5)
    bodies[n] = string.format(
      '{"query":"%s","tenant_id":"tenant%d","max_results":10,"query_embedding":[%s]}',
      query, (n - 1) % tenants, embedding())
  end
end

function request()
  local body = bodies[next_body]
  next_body = next_body % #bodies + 1
  return wrk.format(nil, "/internal/retrieval/search", nil, body)
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
