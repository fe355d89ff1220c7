"""Running a real agent CLI through the plugin against the scripted endpoint.

The CLIs are the pinned npm packages of tests/realcli/clis.txt, installed by
.ci/install-agent-clis into one prefix ($AGENTDRIFT_REALCLI_PREFIX, default
~/.cache/agentdrift-realcli). A CLI that is not there at its pinned version
skips its tests with the reason (npm missing, not installed, another
version), never silently.

A session is a subprocess `python -m pytest --agent PRESET --agent-suite
builtin` with the preset's defaults, under bubblewrap, in a scratch project
with a scratch HOME; the only thing pointed at the scripted endpoint is the
product's own documented environment (its base URL and a CA to trust).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from scripted_endpoint import ScriptedEndpoint

from pytest_agentdrift.testing import load_results

CLIS_FILE = Path(__file__).with_name("clis.txt")
PREFIX = Path(os.environ.get("AGENTDRIFT_REALCLI_PREFIX") or Path.home() / ".cache" / "agentdrift-realcli")
#: a key the CLIs send to the endpoint; a record must never contain it
PLANTED_KEY = "sk-agentdrift-PLANTED-0123456789abcdef"


def pinned(where: str = "") -> dict[str, tuple[str, str]]:
    """binary -> (npm package, version), from clis.txt; where="previous": the previous releases
    installed apart ($prefix/previous/BINARY)."""
    out = {}
    for line in CLIS_FILE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            pkg, version, binary, *rest = line.split()
            if (rest[0] if rest else "") == where:
                out[binary] = (pkg, version)
    return out


def previous_program(binary: str) -> Path:
    """The previous release of the pinned CLI `binary` (clis.txt's `previous` line)."""
    return PREFIX / "previous" / binary / "node_modules" / ".bin" / binary


def previous_missing_reason(binary: str) -> str | None:
    """Why the previous release of `binary` cannot be driven here, or None when it can."""
    pkg, version = pinned("previous")[binary]
    meta = PREFIX / "previous" / binary / "node_modules" / pkg / "package.json"
    have = json.loads(meta.read_text()).get("version") if meta.is_file() else None
    if have != version:
        return f"{pkg} {version} (the previous release) is not installed in {meta.parent} (run .ci/install-agent-clis)"
    return missing_reason(binary)


def missing_reason(binary: str) -> str | None:
    """Why the pinned `binary` cannot be driven here, or None when it can."""
    pkg, version = pinned()[binary]
    if shutil.which("npm") is None or shutil.which("node") is None:
        return f"npm/node are not installed: {pkg} {version} cannot be installed (.ci/install-agent-clis)"
    meta = PREFIX / "node_modules" / pkg / "package.json"
    if not meta.is_file():
        return f"{pkg} is not installed in {PREFIX} (run .ci/install-agent-clis)"
    have = json.loads(meta.read_text()).get("version")
    if have != version:
        return f"{pkg} {have} is installed in {PREFIX}, the tests pin {version} (run .ci/install-agent-clis)"
    if not (PREFIX / "node_modules" / ".bin" / binary).exists():
        return f"{pkg} installed no {binary} in {PREFIX}/node_modules/.bin"
    return bwrap_reason()


PYPI_FILE = Path(__file__).with_name("pypi-clis.txt")


def pypi_pinned() -> dict[str, tuple[str, str, str]]:
    """venv name -> (distribution, version, program), from pypi-clis.txt."""
    out = {}
    for line in PYPI_FILE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, requirement, program = line.split()
            dist, _, version = requirement.partition("==")
            out[name] = (dist, version, program)
    return out


def venv_program(name: str) -> Path:
    """The program of the pinned PyPI agent `name`, in its own virtualenv under the prefix."""
    return PREFIX / "venvs" / name / "bin" / pypi_pinned()[name][2]


def venv_missing_reason(name: str) -> str | None:
    """Why the pinned PyPI agent `name` cannot be driven here, or None when it can."""
    dist, version, program = pypi_pinned()[name]
    python = PREFIX / "venvs" / name / "bin" / "python"
    if not python.exists():
        return f"{dist} {version} has no virtualenv at {python.parent.parent} (run .ci/install-agent-clis)"
    probe = f"import importlib.metadata as m; print(m.version({dist!r}))"
    have = subprocess.run([str(python), "-c", probe], capture_output=True, text=True).stdout.strip()
    if have != version:
        found = f"{dist} {have}" if have else f"no {dist}"
        return f"{found} in {python.parent.parent}, the tests pin {version} (run .ci/install-agent-clis)"
    if not venv_program(name).exists():
        return f"{dist} installed no {program} in {python.parent}"
    return bwrap_reason()


def needs_venv(name: str) -> pytest.MarkDecorator:
    reason = venv_missing_reason(name)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def bwrap_reason() -> str | None:
    from pytest_agentdrift.errors import AgentDriftError
    from pytest_agentdrift.run import sandbox

    try:
        if sandbox.detect("bwrap").mode == "bwrap":
            return None
    except AgentDriftError as exc:
        return f"bubblewrap cannot run here: {exc}"
    return "bubblewrap (bwrap) is not installed or cannot create namespaces here"


def needs_cli(binary: str) -> pytest.MarkDecorator:
    reason = missing_reason(binary)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


@dataclass
class RealSession:
    root: Path
    ret: int
    out: str
    ep: ScriptedEndpoint
    elapsed: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def run_dir(self) -> Path:
        return self.root / "runs" / "r"

    @property
    def results(self) -> dict:
        return load_results(self.run_dir)

    @property
    def manifest(self) -> dict:
        return json.loads((self.run_dir / "runtime-manifest.json").read_text())

    def run(self, task_id: str) -> dict:
        runs = self.results["tasks"][task_id]["runs"]
        assert len(runs) == 1, runs
        return runs[0]

    def events(self, task_id: str, kind: str | None = None) -> list[dict]:
        path = self.run_dir / "raw" / task_id / "r1" / "events.jsonl"
        events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return [e for e in events if kind is None or e.get("type") == kind]

    def check(self, task_id: str, name: str) -> dict:
        return next(c for c in self.run(task_id)["checks"] if c["name"] == name)

    def closing_event(self, task_id: str) -> dict:
        """The run's one `final` event (how the product said the run ended), carrying the status of
        the report the agent's last message held."""
        (final,) = self.events(task_id, "final")
        assert final["status"] == self.run(task_id)["report"]["status"], final
        return final


def run_session(
    tmp: Path,
    agent: str,
    scripts: dict[str, list[dict[str, Any]]],
    endpoint_env: dict[str, str],
    tasks: tuple[str, ...],
    *args: str,
    model: str | None = None,
    home: Path | None = None,
    home_files: dict[str, str] | None = None,
    endpoint: ScriptedEndpoint | None = None,
    command: str | None = None,
) -> RealSession:
    """One session of `agent` on the builtin `tasks`, its model played by `scripts`.

    `endpoint_env` maps the product's environment names to "{url}" / "{ca}" / "{key}"
    templates (the endpoint's base URL, its CA file, the planted key); `home_files` are written
    into the scratch HOME with the same templates (a product's own config file). `endpoint`: an
    endpoint already serving (several sessions against the same one), else a new one.

    `command`: the agent is this `--agent-cmd` instead of the preset `agent` (then only a label):
    the generic path, as a user runs a product without a preset. The endpoint's host is allowed,
    so the harness's model gateway stands between them: the base-URL variable stays the host's
    (the gateway gives the agent its own), and what the agent is passed is named in `args`
    (`--agent-env`)."""
    root = tmp / agent
    root.mkdir(parents=True)
    home = home or root / "home"
    home.mkdir(exist_ok=True)
    with (
        contextlib.nullcontext(endpoint)
        if endpoint is not None
        else ScriptedEndpoint(scripts, root / "endpoint", model=model) as ep
    ):
        values = {"url": ep.base_url, "ca": str(ep.ca_pem), "key": PLANTED_KEY}
        for rel, text in (home_files or {}).items():
            (home / rel).parent.mkdir(parents=True, exist_ok=True)
            (home / rel).write_text(text.replace("{url}", ep.base_url))
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PYTEST_", "ANTHROPIC_", "OPENAI_", "COPILOT_", "GEMINI_", "GOOGLE_"))
        }
        env.update(
            HOME=str(home),
            # the session's own Python (with pytest) first, as a user's virtualenv would be
            PATH=os.pathsep.join(
                [str(PREFIX / "node_modules" / ".bin"), str(Path(sys.executable).parent), env["PATH"]]
            ),
        )
        env.update({k: v.format(**values) for k, v in endpoint_env.items()})
        argv = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            *(
                ("--agent", agent)
                if command is None
                else ("--agent-cmd", command, f"--agent-allow-host={ep.host_port}")
            ),
            "--agent-suite",
            "builtin",
            "--agent-isolation",
            "bwrap",
            "--agent-record",
            "runs/r",
            "-k",
            " or ".join(tasks),
            *args,
        ]
        start = time.monotonic()
        proc = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=1200)
        elapsed = time.monotonic() - start
    return RealSession(root, proc.returncode, proc.stdout + proc.stderr, ep, elapsed)


def assert_no_planted_key(session: RealSession) -> None:
    """The key the CLI sent to its endpoint reached no artifact of the record."""
    for path in session.run_dir.rglob("*"):
        if path.is_file():
            assert PLANTED_KEY.encode() not in path.read_bytes(), path
    assert PLANTED_KEY not in session.out


@dataclass
class Recipe:
    """A product run through the generic path as docs/agents.md's recipes write it: the command,
    the harness flags beside it, and the host environment its endpoint is named by ("{url}",
    "{ca}", "{key}" templates, as run_session's `endpoint_env`)."""

    label: str
    command: str
    env: dict[str, str]
    args: tuple[str, ...] = ()
    #: the product declares no tools: its turns are text (ScriptedEndpoint's toolless mode)
    toolless: bool = False


#: what an endpoint that rate-limits every attempt answers
RATE_LIMITED = {"error": {"status": 429, "message": "rate limit reached, slow down"}}
#: the tests' --agent-provider-patience: a product that retries a failing provider for minutes is
#: stopped after this many seconds (the default is a minute; what is shown is the same, sooner)
PATIENCE_S = 10.0
PATIENCE = ("--agent-provider-patience", str(PATIENCE_S))


def recipe_sessions(
    tmp: Path, recipe: Recipe, marker: str, turns: list[dict[str, Any]], task: str, swapped: str
) -> dict[str, RealSession]:
    """The sessions that show what the generic path records of `recipe` on `task`, against one
    scripted endpoint: `base` (recorded), `same` (compared with it, nothing changed), `swapped`
    (the endpoint answers with the model `swapped` instead, compared with `base`) and `limited`
    (the endpoint answers every attempt 429). `turns` name no model: the endpoint answers with
    the one asked for until it is swapped."""
    out: dict[str, RealSession] = {}
    with ScriptedEndpoint({marker: turns}, tmp / "endpoint", toolless=recipe.toolless) as ep:

        def session(name: str, *args: str) -> RealSession:
            return run_session(
                tmp / name,
                recipe.label,
                ep.scripts,
                recipe.env,
                (task,),
                *recipe.args,
                *args,
                home=tmp / "home",
                endpoint=ep,
                command=recipe.command,
            )

        out["base"] = session("base")
        out["base"].extra["log"] = list(ep.log)
        baseline = str(out["base"].run_dir)
        out["same"] = session("same", "--agent-baseline", baseline)
        ep.model = swapped
        out["swapped"] = session("swapped", "--agent-baseline", baseline)
        ep.model = None
        ep.scripts = {marker: [RATE_LIMITED]}
        start = len(ep.log)
        out["limited"] = session("limited", *PATIENCE)
        out["limited"].extra["log"] = ep.log[start:]
    return out


def closing_line(session: RealSession) -> str:
    """The session's one closing line (`agentdrift: exit N — why`)."""
    return next(ln for ln in session.out.splitlines() if ln.startswith("agentdrift: exit"))


def assert_record_holds_what_the_endpoint_served(session: RealSession, task: str) -> None:
    """Call by call, the record's model calls are the requests the endpoint logged (path, status,
    the model asked for and the one that answered, the tokens), and their sums are the run's."""
    served = [e for e in session.extra["log"] if e["kind"] in ("turn", "side", "exhausted", "error")]
    run = session.run(task)
    calls = run["evidence"]["model_calls"]
    assert [(c["path"], c["status"], c["requested_model"]) for c in calls] == [
        (e["path"].split("?", 1)[0], e["status"], e["model"]) for e in served
    ], (calls, served)
    # (the recipes' scripts serve no cached or reasoning tokens: input and output are the whole of it)
    answered = [(c["answered_model"], c["input_tokens"], c["output_tokens"]) for c in calls if c["status"] == 200]
    assert answered == [
        (e["answered_model"], e["usage"]["input"], e["usage"]["output"]) for e in served if e["status"] == 200
    ]
    assert all(c["source"] == "harness" for c in calls)
    traffic = run["evidence"]["model_traffic"]
    assert traffic["statuses"] == {
        str(s): sum(1 for e in served if e["status"] == s) for s in {e["status"] for e in served}
    }
    assert run["usage"]["input_tokens"] == sum(a[1] for a in answered)
    assert run["usage"]["output_tokens"] == sum(a[2] for a in answered)
