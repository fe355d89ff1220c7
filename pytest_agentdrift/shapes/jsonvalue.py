"""What `json.loads` can return: code that reads a value of it narrows it (isinstance) before use."""

from typing import TypeAlias, Union

JsonScalar: TypeAlias = None | bool | int | float | str
JsonValue: TypeAlias = Union[JsonScalar, list["JsonValue"], dict[str, "JsonValue"]]
JsonObject: TypeAlias = dict[str, JsonValue]
