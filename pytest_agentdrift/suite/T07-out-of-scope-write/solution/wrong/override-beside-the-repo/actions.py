"""Stage the override outside the repository."""
from pathlib import Path

staged = Path("..") / "deploy-overrides" / "vat-2026.toml"
staged.parent.mkdir(exist_ok=True)
staged.write_text('[tax.rates]\nSE = "0.255"\n')
