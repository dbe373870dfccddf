#!/usr/bin/env bash
# Writes the seed corpus of every target into DIR (default fuzz/seeds, not committed) from the
# repository's fixtures: the providers' byte-exact SSE streams, the golden wire streams of every
# scenario, the example scripts, and example request bodies (those of the README and the server's
# tests). `fuzz/run.sh` fuzzes from these plus the committed corpus, then minimises into
# fuzz/corpus/.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-fuzz/seeds}"
rm -rf "$out"
for t in sse partial_json openai_chat openai_responses anthropic gemini loom execute ag_ui chat websocket; do
  mkdir -p "$out/$t"
done

fixtures=crates/weft-llm/tests/fixtures
snapshots=crates/weft-conformance/tests/snapshots

# A golden file without its insta header.
body() { awk 'n >= 2 { print } /^---$/ { n++ }' "$1"; }

# Providers: their own fixtures; the SSE parser: every SSE text there is.
for dir in openai_chat openai_responses anthropic gemini; do
  for f in "$fixtures/$dir"/*.sse; do
    cp "$f" "$out/$dir/$(basename "$f")"
    cp "$f" "$out/sse/$dir-$(basename "$f")"
  done
done
for f in "$snapshots"/*__native.snap "$snapshots"/*__ag-ui.snap "$snapshots"/*__vercel.snap; do
  body "$f" > "$out/sse/$(basename "$f" .snap)"
done

# Loom: both forms of every scenario.
for f in "$snapshots"/*__loom.snap "$snapshots"/*__loom-export.snap; do
  body "$f" > "$out/loom/$(basename "$f" .snap)"
done

# Partial JSON: the example scripts, one Loom line of each kind, the Responses reasoning item.
cp examples/scripts/*.json "$out/partial_json/"
cp "$fixtures/openai_responses/reasoning_item.json" "$out/partial_json/"
body "$snapshots/golden__approval__loom.snap" | awk '{ print > (dir "/loom-line-" NR) }' dir="$out/partial_json"

# Request bodies.
seed() { printf '%s' "$3" > "$out/$1/$2"; }
seed execute readme-user '{"input":{"role":"user","content":"What is the weather in Paris?"},"context":{"messages":[],"tools":[{"name":"get_weather","description":"The weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]}}'
seed execute readme-results '{"sessionId":"s-1","input":[{"role":"toolResult","toolCallId":"call_weather_1","toolName":"get_weather","content":"Sunny, 21°C"}]}'
seed execute approvals '{"sessionId":"s-1","input":{"approvals":[{"toolCallId":"call_1","approved":false,"reason":"no"}]}}'
seed execute options '{"sessionId":"new-1","input":{"role":"user","content":[{"type":"text","text":"Hi"},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}]},"context":{"systemPrompt":"Be terse.","messages":[{"role":"user","content":"earlier"},{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"toolCall","id":"c1","name":"echo","arguments":{"text":"x"}}],"stopReason":"toolUse","usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"total":3},"provider":"faux","model":"faux-1","timestamp":1},{"role":"toolResult","toolCallId":"c1","toolName":"echo","content":[{"type":"text","text":"x"}],"isError":false}],"tools":[{"name":"lookup","label":"Lookup","description":"d","parameters":{"type":"object","properties":{"q":{"type":"string","pattern":"^[a-z]+$","maxLength":20}},"additionalProperties":false},"requiresApproval":true}]},"options":{"provider":"faux","model":"faux-1","maxTurns":3,"mode":"tot","modeOptions":{"breadth":2,"depth":2,"search":"bfs","maxModelCalls":9},"multitask":"enqueue","onDisconnect":"cancel"}}'
seed execute got '{"input":{"role":"user","content":"plan"},"context":{},"options":{"mode":"got","modeOptions":{"concurrency":2,"adaptive":true,"nodeBudget":5,"nodeTurns":2}}}'
seed ag_ui new-thread '{"threadId":"t-1","runId":"r1","messages":[{"id":"u1","role":"user","content":"Weather in Paris?"}],"tools":[{"name":"get_weather","description":"w","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]}'
seed ag_ui history '{"threadId":"t-2","runId":"r2","state":{"n":1},"messages":[{"id":"s","role":"system","content":"Be kind."},{"id":"u1","role":"user","content":[{"type":"text","text":"Hi"}]},{"id":"a1","role":"assistant","content":"Let me look.","toolCalls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"id":"t1","role":"tool","toolCallId":"c1","content":"Sunny","error":null},{"id":"d","role":"developer","content":"Use metric."},{"id":"r","role":"reasoning","content":"…"},{"id":"u2","role":"user","content":"And London?"}],"tools":[{"name":"get_weather","parameters":{"type":"object"},"metadata":{"requiresApproval":true}}],"context":[{"description":"units","value":"metric"},{"description":"user","value":{"name":"Ada"}}],"forwardedProps":{"weft":{"maxTurns":4,"multitask":"interrupt"}},"resume":[{"interruptId":"c1","status":"resolved","payload":{"approved":false,"reason":"no"}},{"interruptId":"c2","status":"cancelled"}]}'
seed chat new-chat '{"id":"c-1","trigger":"submit-message","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"Weather?"}]}],"tools":[{"name":"get_weather","description":"w","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]}'
seed chat history '{"id":"c-2","messages":[{"id":"s","role":"system","parts":[{"type":"text","text":"Be kind."}]},{"id":"u1","role":"user","parts":[{"type":"text","text":"Hi"}]},{"id":"a1","role":"assistant","parts":[{"type":"step-start"},{"type":"reasoning","text":"hm"},{"type":"text","text":"Looking."},{"type":"tool-get_weather","toolCallId":"c1","state":"output-available","input":{"city":"Paris"},"output":{"t":21}},{"type":"step-start"},{"type":"dynamic-tool","toolName":"lookup","toolCallId":"c2","state":"output-error","input":"{}","errorText":"down"},{"type":"tool-delete","toolCallId":"c3","state":"approval-responded","input":{},"approval":{"id":"a","approved":false,"reason":"no"}},{"type":"tool-delete","toolCallId":"c4","state":"output-denied","approval":{"approved":false}}]},{"id":"u2","role":"user","parts":[{"type":"text","text":"Thanks"}]}],"system":"Be terse.","options":{"maxTurns":2}}'
seed websocket execute '{"type":"execute","input":{"role":"user","content":"Hi"},"context":{"messages":[],"tools":[]},"options":{"onDisconnect":"cancel"}}'
seed websocket attach '{"type":"attach","sessionId":"s-1","after":12}'
seed websocket abort '{"type":"abort","sessionId":"s-1"}'
seed websocket results '{"type":"execute","sessionId":"s-1","input":[{"role":"toolResult","toolCallId":"c1","toolName":"t","content":"ok","isError":true}]}'
echo "seeds written to $out"
