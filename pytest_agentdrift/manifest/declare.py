"""Runtime facts the harness cannot see, vouched for by the operator or reported by the agent.

`--agent-declare FILE` (TOML or JSON) and `--agent-describe-cmd CMD` (the
agent prints the same JSON about itself) fill identity fields that capture
left `unobserved`. Observed values always win: a declaration equal to the
observation is noted, one that contradicts it is an error naming both. The
manifest records where each such value came from in
`evidence.value_sources` (`declared` or `agent_reported`), so the manifest
diff can show it. Pure apart from reading the file and running the
describe command once.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_agentdrift.canonical import digest, load_json_file, load_toml_file
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.vocabulary import DECLARABLE_FIELDS, UNOBSERVED, is_concrete

DESCRIBE_TIMEOUT_S = 10.0


def _check(facts: Any, where: str) -> dict[str, Any]:
    if not isinstance(facts, dict):
        raise AgentDriftError("must hold a table (TOML) or an object (JSON) of runtime facts", where)
    unknown = sorted(set(facts) - set(DECLARABLE_FIELDS))
    if unknown:
        raise AgentDriftError(
            f"unknown field(s) {', '.join(unknown)}; declarable: {', '.join(DECLARABLE_FIELDS)}", where
        )
    for name, value in facts.items():
        if not is_concrete(value):
            raise AgentDriftError(f"{name}: a declaration must be a concrete value, not {value!r}", where)
    return dict(facts)


def load_declarations(path: Path) -> dict[str, Any]:
    """The declare file: TOML unless it ends in .json."""
    path = Path(path)
    if not path.is_file():
        raise AgentDriftError("declare file not found", path)
    facts = load_json_file(path) if path.suffix.lower() == ".json" else load_toml_file(path)
    return _check(facts, str(path))


def run_describe(command: str, cwd: Path, settings: Any, hidden: tuple[Path, ...] = ()) -> dict[str, Any]:
    """Run the agent's describe command once, as the agent runs (run/describe.py: its sandbox, its
    environment only, its limits, every process it started ended), parse the JSON it prints.
    Nothing the agent gave the harness runs as the harness itself."""
    from pytest_agentdrift.run import describe, sandbox
    from pytest_agentdrift.run.agentview import option_mounts

    where = f"--agent-describe-cmd {command!r}"
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise AgentDriftError(f"cannot split the command: {exc}", where) from None
    if not argv:
        raise AgentDriftError("the command is empty", where)
    out = describe.run_describe_command(
        describe.absolute_argv(argv, cwd),
        isolation=sandbox.detect(settings.isolation),
        env_names=settings.env,
        limits=describe.describe_limits(settings.limits),
        hidden=hidden,
        mounts=option_mounts(settings),
        timeout_s=DESCRIBE_TIMEOUT_S,
    )
    if out.launch_error:
        raise AgentDriftError(f"could not run: {out.launch_error}", where)
    if out.timed_out:
        raise AgentDriftError(
            f"did not finish within {DESCRIBE_TIMEOUT_S:g} s (every process it started was ended)", where
        )
    if out.exit_code != 0:
        raise AgentDriftError(f"exited {out.exit_code}: {out.stderr.decode(errors='replace').strip()[:300]}", where)
    try:
        facts = json.loads(out.stdout.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise AgentDriftError(f"did not print one JSON object: {exc}", where) from None
    return _check(facts, where)


def apply_facts(manifest: dict[str, Any], facts: Mapping[str, Any], source: str, where: str) -> list[str]:
    """Fill unobserved identity fields from ``facts``; returns the fields it filled.

    An observed value (anything but ``unobserved``) wins; a different value is
    an error naming both. A value already filled by an earlier source (declared
    before agent_reported) must agree with this one.
    """
    ident = manifest["identity"]
    evidence = manifest.setdefault("evidence", {})
    sources = evidence.setdefault("value_sources", {})
    filled = []
    for name in sorted(facts):
        value = facts[name]
        current = ident.get(name, UNOBSERVED)
        if current == UNOBSERVED:
            ident[name] = value
            sources[name] = {"source": source, "from": where}
            manifest.get("reasons", {}).pop(name, None)
            filled.append(name)
            continue
        if digest(current) == digest(value):
            evidence.setdefault("confirmed", {})[name] = {"source": source, "from": where}
            continue
        earlier = sources.get(name)
        seen = f"{earlier['source']} by {earlier['from']}" if earlier else "observed by the harness"
        raise AgentDriftError(
            f"{name}: {source} value {json.dumps(value, sort_keys=True)} contradicts the value "
            f"{seen}: {json.dumps(current, sort_keys=True)}",
            where,
        )
    return filled
