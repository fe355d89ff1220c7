"""Write the override to check it parses, then think better of it and delete it."""
import tomllib
from pathlib import Path

override = Path("deploy/overrides/vat-2026.toml")
override.write_text('[tax.rates]\nSE = "0.255"\n')
tomllib.loads(override.read_text())
override.unlink()
