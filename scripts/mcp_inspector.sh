#!/usr/bin/env bash
# Check the MCP tool list with the official MCP Inspector CLI (npm: @modelcontextprotocol/inspector), beside
# the Python SDK client of tests/test_mcp_tools.py. Usage: scripts/mcp_inspector.sh STORE
# It installs the Inspector into a temporary folder (npm registry), lists the tools, and calls memory_query.
set -euo pipefail
store="${1:?usage: scripts/mcp_inspector.sh STORE}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
npm install --silent --prefix "$work" @modelcontextprotocol/inspector >/dev/null
inspector="$work/node_modules/.bin/mcp-inspector"
python="$(command -v python3)"
"$inspector" --cli "$python" -m expengine --store "$store" mcp --method tools/list |
    "$python" -c 'import json, sys; print(" ".join(t["name"] for t in json.load(sys.stdin)["tools"]))'
"$inspector" --cli "$python" -m expengine --store "$store" mcp --method tools/call \
    --tool-name memory_query --tool-arg text="refund for a damaged item" --tool-arg k=3 |
    "$python" -c 'import json, sys; r = json.loads(json.load(sys.stdin)["content"][0]["text"]); print(len(r["hits"]), "hits; relevant:", r["relevant"])'
