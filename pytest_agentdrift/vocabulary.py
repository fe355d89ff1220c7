"""The shared vocabulary: every name that more than one stage relies on, once.

Field sets of the runtime manifest, change classes, the run outcomes, the two
placeholder values and whether a value is concrete (`is_concrete`), the default
accepted-unobserved list and its group names, rollback states, gate modes,
fail-on modes, isolation modes, the exit codes and the file names of a record,
of the agent's protocol and of a task directory. Each name has one meaning; every other module
imports it from here (no literal exit code, outcome or file name anywhere else;
tests/unit/test_one_home.py checks). Pure: no pytest, no I/O, only the standard library's datetime.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Final

# ---------------------------------------------------------------- exit codes
#: everything good (or, under a gate, the gate passed)
EXIT_OK: Final = 0
#: a check failed, or the gate did not pass
EXIT_FAILED: Final = 1
#: a malformed task directory: pytest's own "interrupted" code for a collection error
EXIT_COLLECTION_ERROR: Final = 2
#: usage or operational error (bad input, unreadable baseline, I/O, incomplete record)
EXIT_USAGE: Final = 4
#: refused: the runs are not comparable
EXIT_REFUSED: Final = 6
#: the agent command could not be started (the shell's "command not found"); the agent's
#: exit status as the runner sees it, never the session's
EXIT_AGENT_NOT_STARTED: Final = 127
#: the agent command was found but could not be executed (the shell's "permission denied")
EXIT_AGENT_NOT_EXECUTABLE: Final = 126

#: the key of decision.json and refusal.json holding the closing line ({code, reason, line}): their
#: first key, so the verdict leads every output as it ends the terminal
EXIT_STATUS_KEY: Final = "exit_status"

# ---------------------------------------------------------------- run outcomes
#: every check passed (and nothing was tampered with)
PASSED_OUTCOME: Final = "passed"
#: a check failed, or the run tampered with what grades it: the agent's scored failure
FAILED_OUTCOME: Final = "failed"
#: the agent could not be started, or it ended without its final report (a crash)
ERROR_OUTCOME: Final = "error"
#: the agent ran out of time and its process tree was killed
TIMEOUT_OUTCOME: Final = "timeout"
#: stopped or refused by a resource limit, the agent's or its code's while graded
RESOURCE_EXCEEDED_OUTCOME: Final = "resource_exceeded"
#: a run lost to infrastructure (provider, network, sign-in): not the agent's failure, never
#: scored, retried under --agent-retries and re-run on --agent-resume
INFRA_OUTCOME: Final = "infra_error"
#: a run stopped for going over its per-run budget (--agent-budget run_tokens / run_cost_usd)
OVER_BUDGET_OUTCOME: Final = "over_budget"
#: a run the harness could not judge (its own error while handling the run, or an observation that
#: failed): never a pass, never scored; a session or gate that holds one is not decided (exit 4)
UNDECIDED_OUTCOME: Final = "undecided"
#: every outcome a run can have (results.json's `outcome` enum says the same; a test checks)
RUN_OUTCOMES: tuple[str, ...] = (
    PASSED_OUTCOME,
    FAILED_OUTCOME,
    ERROR_OUTCOME,
    TIMEOUT_OUTCOME,
    RESOURCE_EXCEEDED_OUTCOME,
    INFRA_OUTCOME,
    OVER_BUDGET_OUTCOME,
    UNDECIDED_OUTCOME,
)
#: outcomes where the run ended before the agent's work could be judged on its merits: each fails an
#: item even under --agent-fail-on critical, and is counted as an error in the summary
ERROR_LIKE_OUTCOMES: frozenset[str] = frozenset(
    {ERROR_OUTCOME, TIMEOUT_OUTCOME, RESOURCE_EXCEEDED_OUTCOME, OVER_BUDGET_OUTCOME}
)
#: outcomes that are never scored (not the agent's failure, not its pass)
UNSCORED_OUTCOMES: frozenset[str] = frozenset({INFRA_OUTCOME, UNDECIDED_OUTCOME})

# ---------------------------------------------------------------- placeholder values
#: the product does not expose the value, or it could not be read safely
UNOBSERVED: Final = "unobserved"
#: the field has no meaning for this agent (a reference agent has no model)
NOT_APPLICABLE: Final = "not_applicable"
#: the strings that stand for no value in a record read back: the two placeholders, the empty
#: string, and "unknown" (what hand-made and older records, and a rollback state nobody gave, say)
NO_VALUE_TEXTS: frozenset[str] = frozenset({"", UNOBSERVED, NOT_APPLICABLE, "unknown"})


def is_concrete(value: object) -> bool:
    """Whether `value` is a value at all: not None and not one of NO_VALUE_TEXTS.

    Any other value is concrete, whatever its type (a manifest field may be a list or an
    object); a caller that needs text checks for `str` beside this, visibly. Where the harness
    asks only whether it wrote one placeholder (`== UNOBSERVED`: an unobserved value is never
    shown equal; `== NOT_APPLICABLE`: the field has no meaning here), it names that placeholder.
    """
    return value is not None and not (isinstance(value, str) and value in NO_VALUE_TEXTS)


# ---------------------------------------------------------------- runtime-manifest fields
#: The run envelope: sampling and budget settings around the model.
ENVELOPE_FIELDS: tuple[str, ...] = (
    "temperature",
    "seed",
    "max_output_tokens",
    "budget_tokens_per_task",
    "tool_timeout_s",
)

#: The harness's own run protocol that changes which runs are scored: its retries of
#: runs lost to infrastructure (--agent-retries). Always observed, never declared.
PROTOCOL_FIELDS: tuple[str, ...] = ("retry_policy",)

#: How the agent is set up and run, in report order: the configuration change class but `agent`.
_AGENT_SETUP_FIELDS: tuple[str, ...] = (
    "permission_mode",
    "sandbox",
    "isolation",
    "built_in_tools",
    "external_tools",
    "config_hash",
    "command",
    "agent_files_hash",
    *ENVELOPE_FIELDS,
    *PROTOCOL_FIELDS,
)

#: The manifest's compared identity fields, in report order (their digest is runtime_id).
IDENTITY_FIELDS: tuple[str, ...] = (
    "surface",
    "product",
    "agent",
    "surface_rules",
    "extension_id",
    "extension_version",
    "model_id",
    "model_endpoint",
    "model_stamp",
    "server_revision",
    "model_options",
    "cli_version",
    "auto_update_state",
    *_AGENT_SETUP_FIELDS,
    "instruction_hash",
    "lockfile_hash",
    "os",
    "runtime_versions",
    "environment_allowlist",
    "env_image_digest",
    "working_directory",
    "source_id",
    "task_set_id",
    "evaluator_id",
    "scoring_script_digest",
    "harness_version",
)

#: Manifest fields recorded and noted when they differ, never blocking.
PROVENANCE_FIELDS: tuple[str, ...] = (
    "captured_at_utc",
    "run_id",
    "operator",
    "host",
    "region",
    "kernel",
    "pytest_argv",
    "source_git",
    "cli_executable",
    "instruction_sources_raw",
    "config_sources_raw",
)

#: Identity fields only known once the agent has answered (filled after the runs).
POST_RUN_FIELDS: tuple[str, ...] = ("model_stamp", "server_revision")

#: Identity fields an operator may vouch for (`--agent-declare`) or an agent may
#: report about itself (`--agent-describe-cmd`): runtime facts outside the harness's sight.
DECLARABLE_FIELDS: tuple[str, ...] = (
    "model_id",
    "model_endpoint",
    "model_options",
    "permission_mode",
    "sandbox",
    "built_in_tools",
    "external_tools",
    "cli_version",
    "auto_update_state",
    "server_revision",
    *ENVELOPE_FIELDS,
)

# Field groups behind the protocol's "Separate change classes" table.
SURFACE_FIELDS = frozenset({"surface", "product", "surface_rules", "extension_id", "extension_version"})
REBASELINE_FIELDS = frozenset({"task_set_id", "evaluator_id", "source_id", "scoring_script_digest", "harness_version"})
MODEL_FIELDS = frozenset({"model_id", "model_endpoint", "model_stamp", "server_revision", "model_options"})
#: the model fields the harness reads from an agent's model traffic itself (run/modelgateway.py:
#: the model asked for, the endpoint, the model that answered), whatever the agent is
GATEWAY_FIELDS = frozenset({"model_id", "model_endpoint", "model_stamp"})
CLIENT_FIELDS = frozenset({"cli_version", "auto_update_state"})
CONFIGURATION_FIELDS = frozenset({"agent", *_AGENT_SETUP_FIELDS})
INSTRUCTION_FIELDS = frozenset({"instruction_hash"})
ENVIRONMENT_FIELDS = frozenset(
    {"lockfile_hash", "os", "runtime_versions", "environment_allowlist", "env_image_digest", "working_directory"}
)
#: Fields whose absence of a value means the candidate cannot be identified (invalid comparison).
IDENTIFYING_FIELDS: tuple[str, ...] = ("cli_version", "instruction_hash")

#: Names `--agent-vary` accepts: identity fields that may be an experiment's independent variable.
VARY_FIELDS: tuple[str, ...] = tuple(f for f in IDENTITY_FIELDS if f not in SURFACE_FIELDS | REBASELINE_FIELDS)

#: The keys of results.json that identify a recorded run (not manifest fields).
RUN_IDENTITY_KEYS: tuple[str, ...] = ("runtime_id", "task_set_id", "evaluator_id")

# ---------------------------------------------------------------- accepting the unobservable
#: Group names `--agent-accept-unobserved` expands visibly. `unobservable` depends on the
#: adapter (what its product can never show), so it is resolved against the manifest;
#: `unreportable` is the part of it a product preset documents as beyond its product's
#: reporting (the envelope and options its CLI has no flag or record for).
ACCEPT_GROUP_ENVELOPE: Final = "envelope"
ACCEPT_GROUP_UNOBSERVABLE: Final = "unobservable"
ACCEPT_GROUP_UNREPORTABLE: Final = "unreportable"
ACCEPT_GROUPS: tuple[str, ...] = (ACCEPT_GROUP_ENVELOPE, ACCEPT_GROUP_UNOBSERVABLE, ACCEPT_GROUP_UNREPORTABLE)
#: Accepted as unobserved on both sides unless the operator clears the list with `none`:
#: a container cannot see its own image digest, no supported product reports a server
#: revision, and a preset's product cannot report what its preset lists as unreportable.
DEFAULT_ACCEPT_UNOBSERVED: tuple[str, ...] = ("env_image_digest", "server_revision", ACCEPT_GROUP_UNREPORTABLE)
#: Clears everything accepted before it (defaults and ini included).
ACCEPT_NONE: Final = "none"

# ---------------------------------------------------------------- change classes
#: What the manifest comparison (manifest.identity.classify) names a set of differing fields.
CHANGE_CLASSES: tuple[str, ...] = (
    "identical",
    "model_candidate",
    "client_candidate",
    "bundled_change",
    "surface_bundle_change",
    "instruction_change",
    "configuration_change",
    "environment_change",
    "invalid_comparison",
    "re_baseline",
)
#: Further names a caller of compare_runs may pass for a change class (hand-made or older inputs).
CHANGE_CLASS_ALIASES: tuple[str, ...] = ("unidentified", "task_set_change", "evaluator_change", "surface_change")

# ---------------------------------------------------------------- decisions
#: What returning to the baseline runtime would take.
ROLLBACK_STATES: tuple[str, ...] = ("verified", "prepared_unverified", "unavailable", "unknown")

GATE_REGRESSION: Final = "regression"
GATE_PROMOTE: Final = "promote"
GATE_DROP_IT: Final = "drop-it"
#: `--agent-gate`: regression (merge gating: only new failures fail), promote (ship / hold / don't ship;
#: what a bare `--agent-gate` means) or drop-it (an ablation: exit 0 only when the item may be dropped).
GATE_MODES: tuple[str, ...] = (GATE_REGRESSION, GATE_PROMOTE, GATE_DROP_IT)

GATE_FLAKES_STRICT: Final = "strict"
GATE_FLAKES_REPORT: Final = "report"
#: `--agent-gate-flakes`: what the regression gate does with a critical or safety failure that the design
#: (baseline runs against candidate runs) cannot tell from a flake: block it, saying it may be a flake
#: (strict, the default), or list it without blocking (report). compare/checkrates.py has the rule.
GATE_FLAKES: tuple[str, ...] = (GATE_FLAKES_STRICT, GATE_FLAKES_REPORT)

#: `--agent-max-infra-loss`'s default: a comparison where either arm lost more than this share of its
#: runs to infrastructure errors decides nothing (compare/status.py, compare/exitpolicy.py).
DEFAULT_MAX_INFRA_LOSS: Final = 0.10
#: the seed of the paired bootstrap and of the gate's simulations (--agent-seed)
DEFAULT_SEED: Final = 0
#: how long a run's model calls may all fail with provider errors (429, 5xx, unreachable) before the
#: harness stops the run as infrastructure (--agent-provider-patience; run/modelgateway.py)
DEFAULT_PROVIDER_PATIENCE_S: Final = 60.0
#: what returning to the baseline runtime would take, when nobody said (--agent-rollback-state)
DEFAULT_ROLLBACK_STATE: Final = "unknown"
#: --agent-confirm's cap when a gate reads a pooled baseline and the option is not given: the design
#: docs/statistics.md measures (12 tasks, a 5 % flake rate, a pool of 30 runs: 88 % and 81 % power at
#: 1.4x a fixed k = 3 per unchanged pull request); 0 turns confirmation off
DEFAULT_CONFIRM_CAP: Final = 30
#: re-runs of a run lost to infrastructure, and the seconds before the first (--agent-retries, --agent-retry-backoff)
DEFAULT_RETRIES: Final = 0
DEFAULT_RETRY_BACKOFF_S: Final = 30.0

#: `--agent-fail-on`: which failed checks fail an item and the exit status
#: (none: a recording run exits 0 whenever its record is complete).
FAIL_ON_MODES: tuple[str, ...] = ("any", "critical", "none")

#: Power at which the minimum detectable regression is stated.
MDE_POWER: Final = 0.8

# ---------------------------------------------------------------- isolation
#: `--agent-isolation` choices (run/sandbox.py implements them).
ISOLATION_MODES: tuple[str, ...] = ("auto", "bwrap", "unshare", "none")
#: Whether an enforced isolation mode denies the network (a private namespace).
_NETWORK_ENFORCED = {"bwrap": True, "unshare": True, "none": False}


def enforces_network(mode: str) -> bool:
    """True when runs under this enforced isolation mode cannot reach the network."""
    return _NETWORK_ENFORCED.get(mode, False)


# ---------------------------------------------------------------- record layout
#: a run's final work tree, beside its other raw files (run/finaltree.py)
FINAL_TREE_FILE: Final = "tree.json"
#: the record's content-addressed bytes of final trees: blobs/<first two hex>/<sha256>
BLOB_DIR: Final = "blobs"
#: the record's raw files, one directory per run: raw/<task>/r<rep> (record.store.raw_path)
RAW_DIR: Final = "raw"
#: a finished run's entry and its task's facts, written last into its raw directory: what
#: --agent-resume and a regrade read back
RUN_FILE: Final = "run.json"
#: a run's graded checks, in its raw directory
CHECKS_FILE: Final = "checks.json"
#: what the agent printed, the command it was started with and its changes, in its raw directory
STDOUT_FILE: Final = "stdout.txt"
STDERR_FILE: Final = "stderr.txt"
ARGV_FILE: Final = "argv.json"
PATCH_FILE: Final = "diff.patch"
#: the harness's own error while handling a run (the run is undecided), in its raw directory
HARNESS_ERROR_FILE: Final = "harness-error.txt"
#: the agent's own word (the protocol of docs/agents.md): its event log, one JSON object a line,
#: and its final report, at the paths AGENTDRIFT_EVENTS and AGENTDRIFT_REPORT name; kept under the
#: same names in its raw directory, and a task's reference solution holds them under them too
EVENTS_FILE: Final = "events.jsonl"
AGENT_REPORT_FILE: Final = "report.json"
#: the network attempts the harness observed for a run, one JSON object a line, beside the agent's word
NETWORK_FILE: Final = "network.jsonl"
#: the files of a record's top level
RESULTS_FILE: Final = "results.json"
#: results.json's SHA-256 (sha256sum's format), written after it: a changed results.json is refused
SEAL_FILE: Final = "results.json.sha256"
MANIFEST_FILE: Final = "runtime-manifest.json"
SOURCE_MANIFEST_FILE: Final = "source-manifest.json"
#: what the agent was told (instructions and configuration), beside the manifests
INSTRUCTION_BUNDLE_FILE: Final = "instruction-bundle.json"
#: the record's reports for a person: Markdown, and the self-contained page
REPORT_MD_FILE: Final = "report.md"
REPORT_HTML_FILE: Final = "report.html"
#: a refused comparison's record: the closing line and what blocked (there is no results.json)
REFUSAL_FILE: Final = "refusal.json"
#: a plan (`agentdrift plan --out`) recorded into the run it pre-registered
PLAN_FILE: Final = "plan.json"
#: a comparison's files, relative to the record (the comparison directory's own names below)
COMPARISON_DIR: Final = "comparison"
DECISION_FILE: Final = "comparison/decision.json"
COMPARISON_FILE: Final = "comparison/comparison.json"
MANIFEST_DIFF_FILE: Final = "comparison/manifest-diff.json"
#: a session compared with its baseline as an experiment, and a null experiment's result
EXPERIMENT_FILE: Final = "comparison/experiment.json"
NULL_FILE: Final = "comparison/null.json"

# ---------------------------------------------------------------- task directory layout
#: a task directory's files beside repo/ (docs/task-format.md): the instruction the agent is given,
#: its id, limits and checks, the paths it may change, the effects it must not have, the events
#: expected of it, the fixture's provenance, the digest of repo/ as frozen, the evaluator version
#: it was written for and how to rebuild it
TASK_MD_FILE: Final = "task.md"
TASK_TOML_FILE: Final = "task.toml"
ALLOWED_PATHS_FILE: Final = "allowed-paths.txt"
FORBIDDEN_EFFECTS_FILE: Final = "forbidden-effects.json"
EXPECTED_EVENTS_FILE: Final = "expected-events.json"
FIXTURE_MANIFEST_FILE: Final = "fixture-manifest.json"
INITIAL_TREE_FILE: Final = "initial-tree.sha256"
EVALUATOR_VERSION_FILE: Final = "evaluator-version.txt"
RESET_INSTRUCTIONS_FILE: Final = "reset-instructions.md"

# ---------------------------------------------------------------- record format
#: the version of every JSON document the harness writes with a `schema_version` (results.json,
#: runtime-manifest.json, decision.json, comparison.json, refusal.json, experiment and null
#: sections, plans); a reader refuses any other
SCHEMA_VERSION: Final = 1
#: how every document writes an instant: UTC to the second (results.json's started_at, the
#: manifest's captured_at_utc, a plan's created_at, a freeze's frozen_at, a regrade's at)
TIMESTAMP_FORMAT: Final = "%Y-%m-%dT%H:%M:%SZ"


def utc_timestamp(now: datetime | None = None) -> str:
    """`now` (the current time when None) as every document writes an instant."""
    return (now or datetime.now(timezone.utc)).astimezone(timezone.utc).strftime(TIMESTAMP_FORMAT)


__all__ = [name for name in dir() if name.isupper()] + ["enforces_network", "is_concrete", "utc_timestamp"]
