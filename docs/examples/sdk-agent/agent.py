"""A minimal coding agent on the OpenAI Python SDK: what a team writes itself (docs/agents.md,
"Recipes").

It reads the task from $AGENTDRIFT_TASK_FILE, and gives its model three tools that act in its
working directory (read a file, write a file, run a shell command) until the model answers
without calling one. The SDK reads its endpoint and key from the environment (OPENAI_BASE_URL,
OPENAI_API_KEY); the model is the one argument (`--model NAME`). With each answer it appends a
`usage` event (the model the answer named and its tokens: the agent's own word, which the
harness keeps beside what its model gateway saw), and when the last answer holds a JSON report
it writes it to $AGENTDRIFT_REPORT. A provider error the SDK's own retries did not get past
ends the run with exit 3 and the error on stderr.

    venv/bin/python agent.py --model gpt-5.1-codex
"""

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import openai

SYSTEM = (
    "You are a coding agent working in the current directory, a software project. Use the tools to "
    "inspect and change it and to run its tests. When you are done, answer without a tool call and "
    'end with a JSON block: {"status": "complete|partial|blocked|failed", "summary": "...", '
    '"checks_run": ["..."]}.'
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file of the project.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Write a text file of the project (the whole content).",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_command",
            "description": "Run a shell command in the project directory; returns its exit code and output.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
        },
    },
]
MAX_TURNS = 40
REPORT = re.compile(r"```json\s*(\{.*?\})\s*```", re.DOTALL)


def run_tool(name: str, args: dict) -> str:
    try:
        if name == "read_file":
            return Path(args["path"]).read_text()
        if name == "write_file":
            Path(args["path"]).parent.mkdir(parents=True, exist_ok=True)
            Path(args["path"]).write_text(args["content"])
            return f"wrote {args['path']}"
        if name == "run_command":
            proc = subprocess.run(args["command"], shell=True, capture_output=True, text=True, timeout=300)
            return f"exit code {proc.returncode}\n{(proc.stdout + proc.stderr)[-8000:]}"
    except (OSError, KeyError, subprocess.TimeoutExpired) as exc:
        return f"error: {exc}"
    return f"error: no tool {name}"


def event(**fields) -> None:
    if os.environ.get("AGENTDRIFT_EVENTS"):
        with open(os.environ["AGENTDRIFT_EVENTS"], "a") as fh:
            fh.write(json.dumps({"type": "usage", **{k: v for k, v in fields.items() if v is not None}}) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    model = parser.parse_args().model
    client = openai.OpenAI()
    task = Path(os.environ["AGENTDRIFT_TASK_FILE"]).read_text()
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]
    for _ in range(MAX_TURNS):
        try:
            answer = client.chat.completions.create(model=model, messages=messages, tools=TOOLS)
        except openai.APIError as exc:
            print(f"agent: the model API failed: {exc}", file=sys.stderr)
            return 3
        usage = answer.usage
        event(
            model=answer.model,
            input_tokens=usage.prompt_tokens if usage else None,
            output_tokens=usage.completion_tokens if usage else None,
        )
        message = answer.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            found = REPORT.findall(message.content or "")
            if found and os.environ.get("AGENTDRIFT_REPORT"):
                Path(os.environ["AGENTDRIFT_REPORT"]).write_text(found[-1])
            print(message.content or "")
            return 0
        for call in message.tool_calls:
            result = run_tool(call.function.name, json.loads(call.function.arguments or "{}"))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    print(f"agent: no answer after {MAX_TURNS} model calls", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
