"""The shapes of the JSON this package reads and writes: one home for the types of records and of the
free-form JSON it parses (agent streams, model traffic, tool payloads).

`JsonValue` is what `json.loads` can return; code that reads a value of it narrows it (isinstance) before
use, so a record or a stream that is not what we expect is found where it is read, not three calls later.
The record types (results.json, a run, a check, decision.json) are TypedDicts below: read a record
through them rather than by string keys into `dict[str, Any]`.
"""

from __future__ import annotations

from typing import TypeAlias

JsonScalar: TypeAlias = "None | bool | int | float | str"
JsonValue: TypeAlias = "JsonScalar | list[JsonValue] | dict[str, JsonValue]"
JsonObject: TypeAlias = "dict[str, JsonValue]"
