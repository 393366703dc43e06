"""The official MCP Python SDK (PyPI `mcp`) against the service's MCP endpoint: connects over
streamable HTTP with an API key, lists the tools, calls each one, and checks that `search_docs`
returns the same first page as `POST /search` for the demo questions; a wrong key must be refused.
Run by scripts/mcp_clients.sh; exits non-zero on the first failure.

    python mcp_client.py <base_url> <api_key>
"""

import asyncio
import json
import sys
import urllib.request

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

TOOLS = {"search_docs", "read_passage", "get_context", "list_topics", "outline"}
# The first twelve newcomer questions of tests/it/scenarios.rs (demo tenant, mock mode).
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


def fail(message):
    print(f"mcp_client.py: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def search(base_url, key, question):
    body = json.dumps({"query": question, "tenant_id": "demo"}).encode()
    request = urllib.request.Request(
        f"{base_url}/internal/retrieval/search",
        data=body,
        headers={"content-type": "application/json", "authorization": f"Bearer {key}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def structured(result, tool):
    if result.is_error:
        fail(f"{tool} answered a tool error: {result.content}")
    if not result.content or not result.content[0].text:
        fail(f"{tool} has no text rendering")
    content = result.structured_content
    if not isinstance(content, dict):
        fail(f"{tool} has no structured content: {result}")
    return content


async def check(base_url, key):
    url = f"{base_url}/internal/retrieval/mcp"
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                listed = await client.list_tools()
                names = {tool.name for tool in listed.tools}
                if not TOOLS <= names:
                    fail(f"tools/list lacks {sorted(TOOLS - names)}: {sorted(names)}")
                for tool in listed.tools:
                    if tool.name in TOOLS:
                        if not tool.output_schema or not tool.annotations or tool.annotations.read_only_hint is not True:
                            fail(f"{tool.name}: no output schema or not read-only: {tool}")
                print(f"tools/list: {sorted(names)}")

                same = 0
                for question in QUESTIONS:
                    expected = [hit["id"] for hit in search(base_url, key, question)["hits"]]
                    found = structured(await client.call_tool("search_docs", {"query": question, "tenant": "demo"}), "search_docs")
                    got = [hit["id"] for hit in found["hits"]]
                    if got != expected:
                        fail(f"search_docs {question!r}: {got} != /search {expected}")
                    same += 1
                print(f"search_docs: the same first page as /search for {same} of {len(QUESTIONS)} questions")

                hit = found["hits"][0]
                passage = structured(
                    await client.call_tool("read_passage", {"tenant": "demo", "doc_id": hit["doc_id"], "hit_id": hit["id"]}),
                    "read_passage",
                )
                if not passage["chunks"]:
                    fail(f"read_passage: no chunks around {hit['id']}")
                context = structured(
                    await client.call_tool("get_context", {"query": QUESTIONS[0], "tenant": "demo", "max_tokens": 500}),
                    "get_context",
                )
                if "[1]" not in context["context"] or not context["sources"]:
                    fail(f"get_context: no numbered source: {context}")
                topics = structured(await client.call_tool("list_topics", {"tenant": "demo"}), "list_topics")
                if topics["pages"] < 1 or not topics["topics"]:
                    fail(f"list_topics: {topics}")
                outline = structured(await client.call_tool("outline", {"tenant": "demo", "doc_id": hit["doc_id"]}), "outline")
                if not outline["headings"]:
                    fail(f"outline: no headings for {hit['doc_id']}")
                print("read_passage, get_context, list_topics, outline: ok")

                refused = await client.call_tool("search_docs", {"query": QUESTIONS[0], "tenant": "acme"})
                if not refused.is_error or refused.structured_content:
                    fail(f"another tenant's search was not refused: {refused}")
                print(f"another tenant: tool error {refused.content[0].text!r}")

    # A wrong key: the connection is refused (401), no tool is reached.
    try:
        async with httpx2.AsyncClient(headers={"Authorization": "Bearer wrong-key-0123456789"}, timeout=30) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as client:
                    await client.initialize()
                    await client.list_tools()
    except Exception as error:  # noqa: BLE001 - any refusal will do; a tool list would not
        print(f"wrong key: refused ({type(error).__name__})")
    else:
        fail("a wrong key listed the tools")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        fail("usage: mcp_client.py <base_url> <api_key>")
    asyncio.run(check(sys.argv[1], sys.argv[2]))
    print("mcp_client.py: ok")
