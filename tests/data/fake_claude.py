"""A stand-in for the `claude` CLI: enough of Claude Code's print mode and stream-json for the preset path.

The real CLI is not installed here and has no network; this program lets
the claude-code preset run end to end (argv, version probe, proxy relay,
private home, stream-json parsing) on tasks that test instruction bundles.

It behaves like an agent whose knowledge comes only from its instruction
files: it reads CLAUDE.md and .claude/CLAUDE.md in its working directory
and ~/.claude/CLAUDE.md in its (private) home at startup, as Claude Code
does, and the SKILL.md of a skill the prompt names with /skill-name. In
those files it follows three kinds of lines and ignores everything else:

    fix: PATH: OLD => NEW     replace OLD by NEW in PATH (an Edit tool call)
    run: COMMAND              run COMMAND in the work tree (a Bash tool call; its exit status is the result)
    say: TEXT                 end the final message with TEXT

Without instructions it reads the file the prompt names and gives up, as a
model that does not know the project would. It ends with a final report in
a ```json block (status complete when every fix applied), then a `result`
record with usage and cost, exactly in the shapes Claude Code prints.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

VERSION = "2.1.999 (Claude Code)"
SESSION = str(uuid.UUID(int=7))


def emit(record: dict) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    if "--version" in argv:
        print(VERSION)
        return 0
    if "-p" not in argv or argv[argv.index("-p") + 1 :][:1] == []:
        print("error: fake claude supports print mode only (-p PROMPT)", file=sys.stderr)
        return 2
    prompt = argv[argv.index("-p") + 1]
    if argv[argv.index("--output-format") + 1] != "stream-json" or "--verbose" not in argv:
        print("Error: --output-format=stream-json requires --verbose", file=sys.stderr)
        return 1
    model = argv[argv.index("--model") + 1] if "--model" in argv else "claude-fake-1"
    cwd = Path.cwd()
    home = Path(os.environ.get("HOME", "/nonexistent"))
    memory = [p for p in (home / ".claude" / "CLAUDE.md", cwd / "CLAUDE.md", cwd / ".claude" / "CLAUDE.md") if p.is_file()]
    emit({"type": "system", "subtype": "init", "cwd": str(cwd), "session_id": SESSION, "model": model,
          "tools": ["Bash", "Read", "Edit", "Skill"], "mcp_servers": [], "permissionMode": "acceptEdits",
          "memory_files": [str(p) for p in memory]})
    lines = [ln for p in memory for ln in p.read_text(encoding="utf-8").splitlines()]
    turn = [0]
    usage = {"input_tokens": 100, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 20}

    def assistant(content: list) -> None:
        turn[0] += 1
        emit({"type": "assistant", "message": {"id": f"msg_{turn[0]:02d}", "type": "message", "role": "assistant",
              "model": model, "content": content, "stop_reason": None, "usage": usage},
              "parent_tool_use_id": None, "session_id": SESSION})

    def tool(name: str, tool_input: dict, result: str, is_error: bool) -> None:
        tid = f"toolu_{turn[0] + 1:02d}"
        assistant([{"type": "tool_use", "id": tid, "name": name, "input": tool_input}])
        emit({"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid,
              "content": result[-2000:], "is_error": is_error}]}, "parent_tool_use_id": None, "session_id": SESSION})

    for skill in re.findall(r"(?<![\w/])/([a-z0-9][a-z0-9-]*)", prompt):
        skill_file = cwd / ".claude" / "skills" / skill / "SKILL.md"
        if skill_file.is_file():
            tool("Skill", {"skill": skill}, f"Launching skill: {skill}", False)
            lines += skill_file.read_text(encoding="utf-8").splitlines()
    assistant([{"type": "text", "text": f"I have {len(memory)} instruction file(s) and will follow them."}])
    fixes = failed = 0
    closing = []
    for line in lines:
        line = line.strip().lstrip("-* ").strip()
        if line.startswith("fix:"):
            m = re.fullmatch(r"fix:\s*(\S+):\s*(.*?)\s*=>\s*(.*)", line)
            if not m:
                continue
            rel, old, new = m.groups()
            target = cwd / rel
            if not target.is_file():
                continue  # a rule about a file this repository does not have
            fixes += 1
            text = target.read_text(encoding="utf-8")
            if old not in text:
                tool("Edit", {"file_path": str(target), "old_string": old, "new_string": new},
                     "<tool_use_error>String to replace not found in file.</tool_use_error>", True)
                failed += 1
                continue
            target.write_text(text.replace(old, new, 1), encoding="utf-8")
            tool("Edit", {"file_path": str(target), "old_string": old, "new_string": new},
                 f"The file {target} has been updated.", False)
        elif line.startswith("run:"):
            command = line[4:].strip()
            proc = subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True, timeout=120)
            tool("Bash", {"command": command, "description": "Run a command"}, proc.stdout + proc.stderr,
                 proc.returncode != 0)
        elif line.startswith("say:"):
            closing.append(line[4:].strip())
    if not memory and not fixes:
        named = re.findall(r"[\w./-]+\.py", prompt)
        if named and (cwd / named[0]).is_file():
            tool("Read", {"file_path": str(cwd / named[0])}, (cwd / named[0]).read_text(encoding="utf-8"), False)
    done = fixes > 0 and failed == 0
    report = {"status": "complete" if done else "blocked",
              "summary": "applied the project's fixes" if done else "no instruction says how to fix this",
              "checks_run": [], "checks_skipped": []}
    text = " ".join(["Done." if done else "I could not find what to change.", *closing])
    text += "\n\n```json\n" + json.dumps(report, indent=2) + "\n```\n"
    assistant([{"type": "text", "text": text}])
    emit({"type": "result", "subtype": "success", "is_error": False, "duration_ms": 1000, "duration_api_ms": 900,
          "num_turns": turn[0], "result": text, "session_id": SESSION, "total_cost_usd": 0.001 * turn[0],
          "usage": {"input_tokens": 100 * turn[0], "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                    "output_tokens": 20 * turn[0]}, "permission_denials": []})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
