"""ATIF-v1.7 export: the shipped schema, the RFC's rules, and trajectories of the
reference agent and of the recorded Claude Code, Codex and Copilot streams."""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
from pathlib import Path

import pytest
from test_report_golden import trajectory

from pytest_agentdrift.record import atif
from pytest_agentdrift.tasks.taskdirs import builtin_suite_dir, find_task_dirs

TRANSCRIPTS = Path(__file__).resolve().parents[1] / "data" / "transcripts"
PRODUCTS = {"claude-code": "claude_code", "codex": "codex", "copilot": "copilot"}


def rfc_example() -> dict:
    """Section IV of the RFC (its multi-step example), with this version's schema_version."""
    return {
        "schema_version": "ATIF-v1.7",
        "session_id": "025B810F-B3A2-4C67-93C0-FE7A142A947A",
        "agent": {
            "name": "harbor-agent",
            "version": "1.0.0",
            "model_name": "gemini-2.5-flash",
            "tool_definitions": [
                {
                    "type": "function",
                    "function": {
                        "name": "financial_search",
                        "description": "Search for financial data",
                        "parameters": {"type": "object", "properties": {"ticker": {"type": "string"}}},
                    },
                }
            ],
            "extra": {},
        },
        "notes": "example",
        "extra": {},
        "final_metrics": {
            "total_prompt_tokens": 1120,
            "total_completion_tokens": 124,
            "total_cached_tokens": 200,
            "total_cost_usd": 0.00078,
            "total_steps": 3,
            "extra": {},
        },
        "steps": [
            {
                "step_id": 1,
                "timestamp": "2025-10-11T10:30:00Z",
                "source": "user",
                "message": "What is GOOGL at?",
                "extra": {},
            },
            {
                "step_id": 2,
                "timestamp": "2025-10-11T10:30:02Z",
                "source": "agent",
                "model_name": "gemini-2.5-flash",
                "reasoning_effort": "medium",
                "message": "I will search.",
                "reasoning_content": "Two data points.",
                "tool_calls": [
                    {
                        "tool_call_id": "call_price_1",
                        "function_name": "financial_search",
                        "arguments": {"ticker": "GOOGL", "metric": "price"},
                    },
                    {
                        "tool_call_id": "call_volume_2",
                        "function_name": "financial_search",
                        "arguments": {"ticker": "GOOGL", "metric": "volume"},
                    },
                ],
                "observation": {
                    "results": [
                        {"source_call_id": "call_price_1", "content": "GOOGL is at $185.35"},
                        {"source_call_id": "call_volume_2", "content": "1.5M shares"},
                    ]
                },
                "metrics": {"prompt_tokens": 520, "completion_tokens": 80, "cached_tokens": 200, "cost_usd": 0.00045},
            },
            {
                "step_id": 3,
                "source": "agent",
                "message": [{"type": "text", "text": "It trades at $185.35."}],
                "metrics": {
                    "prompt_tokens": 600,
                    "completion_tokens": 44,
                    "completion_token_ids": [1722, 310],
                    "logprobs": [-0.1, -0.05],
                    "extra": {"reasoning_tokens": 12},
                },
                "llm_call_count": 1,
            },
        ],
    }


def test_the_schema_is_a_valid_json_schema_and_accepts_the_rfc_example():
    assert atif.validate(rfc_example()) == []


@pytest.mark.parametrize(
    "breakage, expected",
    [
        (lambda d: d.update(schema_version="ATIF-v1.4"), "schema_version"),
        (lambda d: d["agent"].pop("version"), "'version' is a required property"),
        (lambda d: d["steps"][0].update(source="tool"), "steps/0/source"),
        (lambda d: d["steps"][0].update(tool_calls=[]), "steps/0"),  # tool calls only on agent steps
        (lambda d: d["steps"][1].update(llm_call_count=0), "steps/1"),  # a no-LLM step has no metrics
        (lambda d: d["steps"][1]["tool_calls"][0].pop("arguments"), "'arguments' is a required property"),
        (lambda d: d["steps"][2].update(step_id=7), "step_id 7 where 3 was expected"),
        (
            lambda d: d["steps"][1]["observation"]["results"][0].update(source_call_id="call_nowhere"),
            "not a tool call of this step",
        ),
        (lambda d: d["steps"][1]["tool_calls"][1].update(tool_call_id="call_price_1"), "used twice"),
        (lambda d: d["steps"][1].update(timestamp="yesterday"), "steps/1/timestamp"),
        (lambda d: d.update(surprise=1), "Additional properties"),
        (
            lambda d: d["steps"][1]["observation"]["results"][0].update(subagent_trajectory_ref=[{"session_id": "s"}]),
            "subagent_trajectory_ref",
        ),  # v1.7: a ref needs trajectory_id or trajectory_path
        (lambda d: d["final_metrics"].update(total_prompt_tokens=-1), "total_prompt_tokens"),
    ],
)
def test_validation_catches_what_the_rfc_forbids(breakage, expected):
    doc = rfc_example()
    breakage(doc)
    problems = atif.validate(doc)
    assert problems and any(expected in p for p in problems), problems


def transcript_trajectory(product: str, path: Path) -> tuple[dict, object]:
    return trajectory(product, path, extra={"config_hash": "sha256:c", "instruction_hash": "sha256:i"})


@pytest.mark.parametrize(
    "product, path",
    [(product, path) for product, d in PRODUCTS.items() for path in sorted((TRANSCRIPTS / d).iterdir())],
    ids=lambda x: x if isinstance(x, str) else x.name,
)
def test_every_recorded_transcript_exports_to_a_valid_trajectory(product, path):
    doc, out = transcript_trajectory(product, path)
    assert atif.validate(doc) == []
    assert doc["steps"][0]["source"] == "user"
    assert doc["final_metrics"]["total_steps"] == len(doc["steps"])
    calls = [e for e in out.events if e["type"] == "tool_call"]
    exported = [c for s in doc["steps"] for c in s.get("tool_calls", [])]
    assert len(exported) == len(calls)  # every tool call the adapter saw is a tool call of the trajectory


def test_claude_code_mapping_steps_per_api_message_with_results_and_usage():
    doc, _ = transcript_trajectory("claude-code", TRANSCRIPTS / "claude_code" / "ok.jsonl")
    agent_steps = [s for s in doc["steps"] if s["source"] == "agent"]
    assert [s["extra"]["api_message_id"] for s in agent_steps] == ["msg_01", "msg_02", "msg_03", "msg_04", "msg_05"]
    first = agent_steps[0]
    assert first["message"] == "I'll look at the pricing module first."
    assert first["tool_calls"][0] == {
        "tool_call_id": "toolu_01",
        "function_name": "Read",
        "arguments": {"file_path": "/srv/agent/tree/pricing.py"},
    }
    assert first["observation"]["results"][0]["content"] == "def total(items):\n    ..."
    assert first["metrics"] == {"prompt_tokens": 110, "completion_tokens": 20, "cached_tokens": 100}
    assert first["model_name"] == "claude-sonnet-4-5-20250929" and first["llm_call_count"] == 1
    denied = agent_steps[2]["observation"]["results"][0]
    assert denied["extra"]["is_error"] is True and denied["extra"]["denied"] == "permission_denied"
    bash = agent_steps[3]
    assert bash["tool_calls"][0]["arguments"]["command"] == "python -m pytest -q tests/test_pricing.py"
    assert bash["observation"]["results"][0]["content"] == "3 passed in 0.02s"
    # prompt tokens count cache reads and cache writes, as ATIF defines them
    assert doc["final_metrics"]["total_prompt_tokens"] == 57 + 23000 + 1200
    assert doc["final_metrics"]["total_cached_tokens"] == 23000
    assert doc["final_metrics"]["total_cost_usd"] == 0.0421
    assert doc["agent"]["extra"]["instruction_hash"] == "sha256:i"


def test_codex_mapping_results_from_items_and_usage_per_turn():
    doc, _ = transcript_trajectory("codex", TRANSCRIPTS / "codex" / "ok.jsonl")
    calls = {c["tool_call_id"]: c for s in doc["steps"] for c in s.get("tool_calls", [])}
    results = {r["source_call_id"]: r for s in doc["steps"] for r in (s.get("observation") or {}).get("results", [])}
    assert calls["item_1"]["arguments"] == {"command": "bash -lc 'cat pricing.py'"}
    assert results["item_3"]["extra"] == {"is_error": True, "exit_code": 1, "status": "failed"}
    assert calls["item_2"]["arguments"]["changes"] == [{"path": "pricing.py", "kind": "update"}]
    assert results["item_2"]["extra"]["file_edits"] == ["pricing.py"]
    assert any(s["source"] == "system" and "Reconnecting" in s["message"] for s in doc["steps"])
    assert "metrics" not in json.dumps(doc["steps"])  # codex reports usage per turn, not per model call
    assert doc["final_metrics"]["total_prompt_tokens"] == 24763  # OpenAI input already includes the cached part
    assert doc["final_metrics"]["total_cached_tokens"] == 24448
    assert "model_name" not in doc["agent"]  # codex exec --json names no model


def test_copilot_mapping_results_and_totals_from_shutdown():
    doc, _ = transcript_trajectory("copilot", TRANSCRIPTS / "copilot" / "ok.jsonl")
    results = {r["source_call_id"]: r for s in doc["steps"] for r in (s.get("observation") or {}).get("results", [])}
    assert results["call_1"]["content"] == "def total..."
    assert results["call_3"]["extra"]["is_error"] is True and results["call_3"]["extra"]["error_code"] == "denied"
    assert doc["agent"]["model_name"] == "claude-sonnet-4.5"
    assert doc["final_metrics"]["total_prompt_tokens"] == 3000
    assert "total_cost_usd" not in doc["final_metrics"]  # premium requests, not dollars


def reference_trajectory(task_dir: Path) -> dict:
    """The reference agent replays the task's solution/events.jsonl and report.json verbatim."""
    sol = task_dir / "solution"
    events = [json.loads(line) for line in (sol / "events.jsonl").read_text().splitlines() if line.strip()]
    report = json.loads((sol / "report.json").read_text())
    return atif.build(
        session_id=f"ref/{task_dir.name}",
        agent={"name": "reference", "version": "reference-1.0.0"},
        events=events,
        product="pytest-agentdrift/reference",
        instruction=(task_dir / "task.md").read_text(),
        report=report,
        usage={},
    )


@pytest.mark.parametrize("task_dir", find_task_dirs(builtin_suite_dir()), ids=lambda d: d.name[:3])
def test_reference_agent_trajectories_validate(task_dir):
    doc = reference_trajectory(task_dir)
    assert atif.validate(doc) == []
    agent_steps = [s for s in doc["steps"] if s["source"] == "agent"]
    assert agent_steps and all(s["llm_call_count"] == 0 and "metrics" not in s for s in agent_steps)
    assert agent_steps[-1]["extra"]["final_report"]["status"] in ("complete", "partial", "blocked", "failed")


def test_find_instruction_only_with_the_recorded_bytes(tmp_path):
    t08 = next(d for d in find_task_dirs(builtin_suite_dir()) if d.name.startswith("T08"))
    digest = hashlib.sha256((t08 / "task.md").read_bytes()).hexdigest()
    manifest = {"files": [{"path": "T08/task.md", "sha256": digest}]}
    text, info = atif.find_instruction("T08", manifest, [builtin_suite_dir()])
    assert text == (t08 / "task.md").read_text() and info["task_md_sha256"] == digest
    changed = {"files": [{"path": "T08/task.md", "sha256": "0" * 64}]}
    text, info = atif.find_instruction("T08", changed, [builtin_suite_dir()])
    assert text is None and "no task directory with the recorded task.md bytes" in info["instruction_text"]
    assert atif.find_instruction("T08", None, [builtin_suite_dir()])[0] is None


def load_bench():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_html_report.py"
    spec = importlib.util.spec_from_file_location("bench_html_report", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_export_run_writes_one_valid_file_per_run(tmp_path):
    results = load_bench().write_synthetic_record(tmp_path / "run", 3, 2)
    paths = atif.export_run(tmp_path / "run", tmp_path / "out")
    assert sorted(p.name for p in paths) == sorted(f"S000{i}-r{k}.json" for i in range(3) for k in (1, 2))
    for p in paths:
        doc = json.loads(p.read_text())
        assert atif.validate(doc) == []
        ad = doc["extra"]["agentdrift"]
        run = results["tasks"][ad["task_id"]]["runs"][ad["rep"] - 1]
        assert ad["outcome"] == run["outcome"] and ad["evidence"] == run["evidence"]
        assert doc["agent"]["extra"]["config_hash"] == "not recorded"  # the synthetic record has no manifest
        assert doc["final_metrics"]["total_prompt_tokens"] == run["usage"]["input_tokens"]


def test_a_record_without_raw_artifacts_still_exports(tmp_path):
    mod = load_bench()
    results = mod.synthetic_results(1, 1)
    run = copy.deepcopy(results["tasks"]["S0000"]["runs"][0])
    run["raw"] = "raw/nowhere"
    doc = atif.run_trajectory(tmp_path, results, "S0000", run)
    assert atif.validate(doc) == []
    assert "events.jsonl was not recorded" in doc["notes"]


def test_harbor_accepts_every_exported_trajectory():
    """Harbor's own models (harbor.models.trajectories.Trajectory, pydantic) read what we export.
    Harbor needs Python >= 3.12: on an older interpreter this skips and says so."""
    import sys

    if sys.version_info < (3, 12):
        pytest.skip(f"Harbor needs Python >= 3.12; this is {sys.version_info.major}.{sys.version_info.minor}")
    import harbor.models.trajectories as models  # the test extra on Python >= 3.12

    docs = [
        transcript_trajectory(p, path)[0] for p, d in PRODUCTS.items() for path in sorted((TRANSCRIPTS / d).iterdir())
    ]
    docs += [reference_trajectory(d) for d in find_task_dirs(builtin_suite_dir())[:3]]
    for doc in docs:
        models.Trajectory.model_validate(doc)
