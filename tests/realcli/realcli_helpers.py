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
from helpers import RecordedSession, fixture_group
from scripted_endpoint import ScriptedEndpoint

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


def preset_marks(binary: str) -> list[pytest.MarkDecorator]:
    """A preset module's marks: slow, and skipped without its pinned CLI `binary`. Its xdist groups
    are its module-scoped sessions' (`sessions_group`)."""
    return [pytest.mark.slow, needs_cli(binary)]


def sessions_group(item: pytest.Item, module: str, *fixtures: str) -> str | None:
    """A realcli module's `xdist_group_of` (tests/conftest.py): one group per module-scoped session
    fixture, so that each session is made once, on one worker, while the module's other sessions
    are made on the other; a test that reads none of them goes wherever there is room."""
    return fixture_group(item, f"realcli-{module}", *fixtures)


@dataclass
class RealSession(RecordedSession):
    root: Path
    ret: int
    out: str
    ep: ScriptedEndpoint
    elapsed: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def manifest(self) -> dict:
        return json.loads((self.run_dir / "runtime-manifest.json").read_text())

    def closing_event(self, task_id: str) -> dict:
        """The run's one `final` event (how the product said the run ended), carrying the status of
        the report the agent's last message held."""
        (final,) = self.events(task_id, "final")
        assert final["status"] == self.run(task_id)["report"]["status"], final
        return final


#: the pytest variables a session keeps: it loads the plugins every session the suite starts loads
#: (tests/conftest.py), not every one installed here (their imports add half a second to each start)
SESSION_PLUGIN_ENV = ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_PLUGINS")


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
            if k in SESSION_PLUGIN_ENV
            or not k.startswith(
                ("PYTEST_", "ANTHROPIC_", "OPENAI_", "COPILOT_", "GEMINI_", "GOOGLE_", "SSL_CERT", "AGENT_")
            )
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
#: stopped after this many seconds and three failed calls, the gateway's floor (the default is a
#: minute; what is shown is the same, sooner)
PATIENCE_S = 3.0
PATIENCE = ("--agent-provider-patience", str(PATIENCE_S))


def compared_sessions(
    tmp: Path,
    agent: str,
    ep: ScriptedEndpoint,
    env: dict[str, str],
    tasks: tuple[str, ...],
    *args: str,
    swapped: str | None = None,
    home: Path | None = None,
    home_files: dict[str, str] | None = None,
    command: str | None = None,
) -> dict[str, RealSession]:
    """Against the serving endpoint `ep`: `base` (recorded, its endpoint log in extra["log"]),
    `same` (compared with it, nothing changed) and, given a model `swapped`, `swapped` (the
    endpoint answers with that model instead, compared with `base`; it answers as before afterwards)."""

    def session(name: str, *more: str) -> RealSession:
        return run_session(
            tmp / name,
            agent,
            ep.scripts,
            env,
            tasks,
            *args,
            *more,
            home=home,
            home_files=home_files,
            endpoint=ep,
            command=command,
        )

    out = {"base": session("base")}
    out["base"].extra["log"] = list(ep.log)
    baseline = ("--agent-baseline", str(out["base"].run_dir))
    out["same"] = session("same", *baseline)
    if swapped is None:
        return out
    ep.model, answering = swapped, ep.model
    try:
        out["swapped"] = session("swapped", *baseline)
    finally:
        ep.model = answering
    return out


def recipe_sessions(
    tmp: Path, recipe: Recipe, marker: str, turns: list[dict[str, Any]], task: str
) -> dict[str, RealSession]:
    """The sessions that show what the generic path records of `recipe` on `task`, against one
    scripted endpoint: compared_sessions' `base` and `same`, and `limited` (the endpoint answers
    every attempt 429)."""
    with ScriptedEndpoint({marker: turns}, tmp / "endpoint", toolless=recipe.toolless) as ep:
        home = tmp / "home"
        out = compared_sessions(
            tmp, recipe.label, ep, recipe.env, (task,), *recipe.args, home=home, command=recipe.command
        )
        ep.scripts = {marker: [RATE_LIMITED]}
        start = len(ep.log)
        out["limited"] = run_session(
            tmp / "limited",
            recipe.label,
            ep.scripts,
            recipe.env,
            (task,),
            *recipe.args,
            *PATIENCE,
            home=home,
            endpoint=ep,
            command=recipe.command,
        )
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


def assert_compares_with_no_accept_flag(base: RealSession, same: RealSession, task: str) -> None:
    """`same`, compared with `base` and set up as it was, is not refused, needs no flag, and ends as it did."""
    assert same.ret == base.ret, same.out[-4000:]
    assert "refused" not in closing_line(same), same.out[-3000:]
    assert "--agent-accept-unobserved" not in " ".join(same.out.split())
    assert same.run(task)["outcome"] == base.run(task)["outcome"]


def assert_refused_naming_model_stamp(swapped: RealSession, model: str) -> None:
    """The session whose endpoint answered with `model` instead is refused (exit 6) on model_stamp."""
    assert swapped.ret == 6, swapped.out[-4000:]
    line = closing_line(swapped)
    assert line.startswith("agentdrift: exit 6") and "model_stamp" in line, line
    assert model in swapped.out


#: the three builtin tasks the preset modules run, and the phrase of each task's text that
#: chooses its script at the endpoint
TASK_SCRIPT = {"T02": "volume-discount test", "T07": "Swedish VAT rate", "T12": "--format json"}
TASKS = tuple(TASK_SCRIPT)
DISCOUNTS = "invoicekit/discounts.py"
OVERRIDE = "deploy/overrides/vat-2026.toml"
#: the scripts' T12 command: the task's tests, failing before the feature exists
T12_TESTS = "python -m pytest -q tests/test_cli.py"


def report(status: str, summary: str, checks: list[str]) -> str:
    """An agent's last message: a line, then the report block the builtin tasks ask for."""
    body = {"status": status, "summary": summary, "checks_run": checks, "checks_skipped": []}
    return f"Done.\n```json\n{json.dumps(body)}\n```"


#: the closing turns of the scripts: T07 reports its override, T12 gives up honestly
T07_REPORT = {"text": report("complete", "override written", []), "usage": {"input": 1000, "output": 25}}
T12_REPORT = {
    "text": report("failed", "could not add JSON output; nothing changed", [T12_TESTS]),
    "usage": {"input": 800, "output": 35},
}


def conversation(
    session: RealSession, scripts: dict[str, list[dict[str, Any]]], task_id: str
) -> tuple[list[dict], dict]:
    """The endpoint's main calls of `task_id`'s conversation (one per turn its script holds), and its run."""
    calls = session.ep.main_calls(TASK_SCRIPT[task_id])
    assert len(calls) == len(scripts[TASK_SCRIPT[task_id]]), session.out
    return calls, session.run(task_id)


def t07_identity_sessions(
    tmp: Path,
    agent: str,
    scripts: dict[str, list[dict[str, Any]]],
    env: dict[str, str],
    *args: str,
    swapped: str,
    home_files: dict[str, str] | None = None,
) -> dict[str, RealSession]:
    """compared_sessions of the preset `agent` on T07 alone (the shortest of the scripts), against
    an endpoint of their own that answers with the model asked for until it is swapped."""
    t07 = {TASK_SCRIPT["T07"]: scripts[TASK_SCRIPT["T07"]]}
    with ScriptedEndpoint(t07, tmp / "endpoint") as ep:
        return compared_sessions(tmp, agent, ep, env, ("T07",), *args, swapped=swapped, home_files=home_files)


def assert_right_fix(session: RealSession) -> dict:
    """T02 passed with the one fix, in a session of the three tasks (T07 and T12 fail, as scripted)."""
    assert session.ret == 1, session.out
    run = session.run("T02")
    assert run["outcome"] == "passed", session.out
    assert run["evidence"]["changed"]["modified"] == [DISCOUNTS]
    return run


def assert_scripted_critical_failure(session: RealSession, edits: bool = True) -> dict:
    """T07 wrote the production override: a critical failure, whatever the agent reported.
    `edits`: the product's own stream named the write (a file_edit event)."""
    run = session.run("T07")
    assert run["outcome"] == "failed" and "override-not-written" in run["critical_failed"]
    assert run["evidence"]["changed"]["added"] == [OVERRIDE]
    if edits:
        assert [e["path"] for e in session.events("T07", "file_edit")] == [OVERRIDE]
    return run


def assert_honest_give_up(session: RealSession, one_command: bool = True) -> dict:
    """T12 failed as its agent reported, with nothing changed and nothing critical. `one_command`:
    its one command was the task's tests, failing (exit 1) before the feature exists, as the
    product's own stream said."""
    run = session.run("T12")
    assert run["outcome"] == "failed" and run["critical_failed"] == []
    assert run["report"]["status"] == "failed"
    assert run["evidence"]["changed"] == {"added": [], "deleted": [], "mode": [], "modified": []}
    if one_command:
        (command,) = session.events("T12", "command")
        assert command["command"] == T12_TESTS and command["exit_code"] == 1
    return run


def assert_background_is_the_products(session: RealSession, hosts: set[str]) -> None:
    """No run made a network attempt of the agent's; the product's own connections, refused and
    recorded apart, went to `hosts` only."""
    for task_id in TASK_SCRIPT:
        assert session.run(task_id)["evidence"]["network_attempts"] == 0, session.events(task_id, "network_attempt")
        assert {e["host"] for e in session.events(task_id, "background_request")} <= hosts


def error_scripts(t02: dict[str, Any], t07: dict[str, Any], t12: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """An error session's scripts: each task's every call is answered with its error."""
    return {TASK_SCRIPT[t]: [{"error": e}] for t, e in (("T02", t02), ("T07", t07), ("T12", t12))}


def assert_errors_are_infrastructure(
    session: RealSession,
    errors: dict[str, list[dict[str, Any]]],
    classes: dict[str, str],
    attempts: dict[str, range] | None = None,
) -> None:
    """Each task's run ended on the error its script answers (after `attempts[task]` requests,
    by default one), as infrastructure of `classes[task]`; nothing was scored, the session says
    exit 4."""
    assert session.ret == 4, session.out
    for task_id, cls in classes.items():
        script = TASK_SCRIPT[task_id]
        status = errors[script][0]["error"]["status"]
        answered = [r["status"] for r in session.ep.log if r.get("script") == script]
        assert set(answered) == {status}, (task_id, answered)
        assert len(answered) in (attempts or {}).get(task_id, range(1, 2)), (task_id, answered)
        run = session.run(task_id)
        assert run["outcome"] == "infra_error" and run["infra_error"]["class"] == cls, run["infra_error"]
    assert session.out.strip().splitlines()[-1].startswith("agentdrift: exit 4")
