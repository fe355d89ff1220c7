"""A home-made agent on the Anthropic Messages API (stdlib only): what a team writes itself.

It reads its base URL and key from its environment (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY), the
task from $AGENTDRIFT_TASK_FILE, and runs one tool, `Bash`, in its working directory until the
model stops calling tools; the last answer's JSON block is its report. A 429 or 5xx is retried
twice (a product's own retries; AGENT_ATTEMPTS and AGENT_BACKOFF_S make them more and slower),
then it gives up with exit 3. It reports the model that answered
on a `usage` event (the generic protocol), so the harness has the agent's word beside its own;
AGENT_CLAIM_MODEL=1 makes it claim another model (a witness that disagrees).
"""

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

BASE = os.environ["ANTHROPIC_BASE_URL"].rstrip("/")
KEY = os.environ.get("ANTHROPIC_API_KEY", "")
MODEL = os.environ.get("AGENT_MODEL", "claude-home-made")
STREAM = os.environ.get("AGENT_STREAM") == "1"
TOOLS = [
    {
        "name": "Bash",
        "description": "run a shell command",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
    }
]


def event(kind, **fields):
    with open(os.environ["AGENTDRIFT_EVENTS"], "a") as fh:
        fh.write(json.dumps({"type": kind, **fields}) + "\n")


def read_stream(resp):
    """One streamed answer put back together (text and tool_use blocks, model, usage)."""
    msg, blocks, partial = {}, [], {}
    for raw in resp:
        line = raw.decode().strip()
        if line.startswith("data:"):
            msg = on_event(json.loads(line[5:]), msg, blocks, partial)
    for i, b in enumerate(blocks):
        if b.get("type") == "tool_use" and partial.get(i):
            b["input"] = json.loads(partial[i])
    msg["content"] = blocks
    return msg


def on_event(data, msg, blocks, partial):
    kind = data.get("type")
    if kind == "message_start":
        return data["message"]
    if kind == "content_block_start":
        blocks.append(dict(data["content_block"]))
        partial[data["index"]] = ""
    elif kind == "content_block_delta":
        delta = data["delta"]
        if delta.get("type") == "text_delta":
            blocks[data["index"]]["text"] = blocks[data["index"]].get("text", "") + delta["text"]
        elif delta.get("type") == "input_json_delta":
            partial[data["index"]] += delta["partial_json"]
    elif kind == "message_delta":
        msg.setdefault("usage", {}).update(data.get("usage") or {})
    return msg


def call(messages):
    body = json.dumps(
        {"model": MODEL, "max_tokens": 1024, "stream": STREAM, "tools": TOOLS, "messages": messages}
    ).encode()
    for attempt in range(int(os.environ.get("AGENT_ATTEMPTS") or 3)):
        req = urllib.request.Request(
            BASE + "/v1/messages",
            data=body,
            headers={"content-type": "application/json", "x-api-key": KEY, "anthropic-version": "2023-06-01"},
        )
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return read_stream(resp) if STREAM else json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            exc.read()
            if exc.code != 429 and exc.code < 500:
                raise
            print(f"provider answered {exc.code} (attempt {attempt + 1})", file=sys.stderr)
            time.sleep(float(os.environ.get("AGENT_BACKOFF_S") or 0.2))
    sys.exit(3)


def main():
    task = open(os.environ["AGENTDRIFT_TASK_FILE"]).read()
    messages = [{"role": "user", "content": f"Primary working directory: {os.getcwd()}\n\n{task}"}]
    while True:
        answer = call(messages)
        usage = answer.get("usage") or {}
        event(
            "usage",
            model="claude-claimed-by-the-agent" if os.environ.get("AGENT_CLAIM_MODEL") == "1" else answer.get("model"),
            input_tokens=usage.get("input_tokens"),
            output_tokens=usage.get("output_tokens"),
        )
        messages.append({"role": "assistant", "content": answer["content"]})
        uses = [b for b in answer["content"] if b.get("type") == "tool_use"]
        if not uses:
            break
        results = []
        for use in uses:
            done = subprocess.run(use["input"]["command"], shell=True, capture_output=True, text=True)
            event("tool_call", tool="Bash", command=use["input"]["command"], exit_code=done.returncode)
            results.append(
                {"type": "tool_result", "tool_use_id": use["id"], "content": (done.stdout + done.stderr)[-4000:]}
            )
        messages.append({"role": "user", "content": results})
    text = "".join(b.get("text", "") for b in answer["content"] if b.get("type") == "text")
    found = re.search(r"```json\s*(\{.*?\})\s*```", text, re.S)
    if found:
        with open(os.environ["AGENTDRIFT_REPORT"], "w") as fh:
            fh.write(found.group(1))


if __name__ == "__main__":
    main()
