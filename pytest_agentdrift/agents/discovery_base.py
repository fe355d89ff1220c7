"""The generic discovery machinery every product's discovery rules are written with.

Roots and labels, reading and normalising instruction text, instruction
entries, configuration parsing (JSON, JSONC, TOML, duplicate keys
rejected), allowlisting of configuration keys and the small helpers each
product's rules use (walking up, nested files, the highest-precedence
value). Each product's rules live in ``agents/<product>/discovery.py`` and
import from here, their shared pass is ``discover_product`` (a product gives
its table of configuration files and the order it reads in), and
``pytest_agentdrift.manifest.discovery`` runs them: user scope once,
project scope per task.
It sits in the agents stage so a product's rules never import a later stage
(pyproject.toml: the pipeline order). Imports no product, reads only what it
is given (see manifest/discovery.py for the normalisation and the outputs).

The jobs live in their own modules, re-exported here so a product's rules
import one name: ``discoveryfiles`` (roots and labels, reading and
normalising text, walking a tree), ``discoveryallow`` (which configuration
keys are recorded, and how), ``discoveryconfig`` (parsing configuration
files, one configuration source, config_hash, the highest-precedence
setting), ``discoveryentries`` (instruction entries, the instruction bundle
and instruction_hash) and ``discoverypass`` (one product's pass,
``discover_product``).
"""

from __future__ import annotations

from pytest_agentdrift.agents.discoveryallow import (
    MCP_JSON_SPEC,
    MCP_SERVER_SPEC,
    AllowRule,
    AllowSpec,
    allowlist,
)
from pytest_agentdrift.agents.discoveryconfig import (
    ConfigSource,
    Fact,
    Getter,
    canonical_config,
    config_hash,
    config_source,
    deep_merge,
    fact,
    format_for,
    highest,
    load_config_file,
    lookup,
    strip_jsonc,
)
from pytest_agentdrift.agents.discoveryentries import (
    RAW_ENTRY_KEYS,
    Discovery,
    EntryRecord,
    InstructionBundle,
    InstructionEntry,
    applies_to,
    entry_for,
    instruction_bundle,
    instruction_hash,
)
from pytest_agentdrift.agents.discoveryfiles import (
    NORMALISATION,
    SKIP_DIRS,
    Roots,
    default_roots,
    env_path,
    exists,
    find_marker_root,
    glob_files,
    is_file,
    is_under,
    nested_files,
    normalise_text,
    parse_frontmatter,
    read_bytes,
    split_patterns,
    unquote,
    walk_up,
)
from pytest_agentdrift.agents.discoverypass import (
    ConfigFile,
    Product,
    Scan,
    Where,
    discover_product,
)
from pytest_agentdrift.vocabulary import NOT_APPLICABLE, UNOBSERVED  # what a product's rules record for a fact

__all__ = [
    "AllowRule",
    "AllowSpec",
    "ConfigFile",
    "ConfigSource",
    "Discovery",
    "EntryRecord",
    "Fact",
    "Getter",
    "InstructionBundle",
    "InstructionEntry",
    "MCP_JSON_SPEC",
    "MCP_SERVER_SPEC",
    "NORMALISATION",
    "NOT_APPLICABLE",
    "Product",
    "RAW_ENTRY_KEYS",
    "Roots",
    "SKIP_DIRS",
    "Scan",
    "UNOBSERVED",
    "Where",
    "allowlist",
    "applies_to",
    "canonical_config",
    "config_hash",
    "config_source",
    "deep_merge",
    "default_roots",
    "discover_product",
    "entry_for",
    "env_path",
    "exists",
    "fact",
    "find_marker_root",
    "format_for",
    "glob_files",
    "highest",
    "instruction_bundle",
    "instruction_hash",
    "is_file",
    "is_under",
    "load_config_file",
    "lookup",
    "nested_files",
    "normalise_text",
    "parse_frontmatter",
    "read_bytes",
    "split_patterns",
    "strip_jsonc",
    "unquote",
    "walk_up",
]
