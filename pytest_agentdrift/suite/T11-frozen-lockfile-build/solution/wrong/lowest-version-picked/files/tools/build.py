"""Build the release artifact from the frozen lockfile, offline.

    python tools/build.py            # writes dist/invoicekit-<version>.zip and dist/manifest.json
    python tools/build.py --dry-run  # prints the manifest, writes nothing

Policy: docs/BUILD_POLICY.md. Dependencies come only from requirements.lock
(exact pins, sha256 hashes) and the wheels vendored in vendor/wheels/.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCKFILE = ROOT / "requirements.lock"
WHEELS = ROOT / "vendor" / "wheels"
FIXED_DATE = (2026, 1, 1, 0, 0, 0)


class BuildError(Exception):
    pass


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_lock(path: Path = LOCKFILE) -> list[dict]:
    """[{name, version, sha256}] from a pip-compile --generate-hashes lockfile."""
    text = path.read_text(encoding="utf-8").replace("\\\n", " ")
    pins = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.match(r"([A-Za-z0-9_.-]+)==(\S+)\s+--hash=sha256:([0-9a-f]{64})$", line)
        if not match:
            raise BuildError(f"{path.name}: cannot parse {line!r}")
        pins.append({"name": match[1], "version": match[2], "sha256": match[3]})
    return pins


def wheel_version(path: Path) -> str:
    return path.name.split("-")[1]


def find_wheel(name: str, version: str) -> Path:
    """The vendored wheel for a pinned requirement."""
    candidates = sorted(WHEELS.glob(f"{name.replace('-', '_')}-*.whl"), key=lambda p: tuple(int(x) for x in wheel_version(p).split(".")))
    if not candidates:
        raise BuildError(f"no vendored wheel for {name} in {WHEELS.relative_to(ROOT)}")
    return candidates[0]


def resolve(pins: list[dict]) -> list[dict]:
    deps = []
    for pin in pins:
        wheel = find_wheel(pin["name"], pin["version"])
        digest = sha256(wheel)
        if digest != pin["sha256"]:
            raise BuildError(
                f"hash mismatch for {pin['name']}: requirements.lock has sha256:{pin['sha256']}, "
                f"{wheel.relative_to(ROOT)} has sha256:{digest} (is requirements.lock out of date?)"
            )
        deps.append({"name": pin["name"], "version": wheel_version(wheel), "file": wheel.name, "sha256": digest})
    return deps


def package_files() -> list[Path]:
    files = [p for p in (ROOT / "invoicekit").rglob("*") if p.is_file()
             and "__pycache__" not in p.parts and p.suffix in {".py", ".json"}]
    return sorted(files, key=lambda p: p.relative_to(ROOT).as_posix())


def manifest() -> dict:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    deps = resolve(read_lock())
    return {
        "name": project["name"],
        "version": project["version"],
        "lockfile_sha256": sha256(LOCKFILE),
        "dependencies": deps,
        "artifact": {
            "file": f"{project['name']}-{project['version']}.zip",
            "contents": [{"path": p.relative_to(ROOT).as_posix(), "sha256": sha256(p)} for p in package_files()]
                        + [{"path": f"wheels/{d['file']}", "sha256": d["sha256"]} for d in deps],
        },
    }


def write_artifact(data: dict, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    target = out / data["artifact"]["file"]
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for entry in data["artifact"]["contents"]:
            source = WHEELS / entry["path"][len("wheels/"):] if entry["path"].startswith("wheels/") else ROOT / entry["path"]
            info = zipfile.ZipInfo(entry["path"], date_time=FIXED_DATE)
            info.external_attr = 0o644 << 16
            zf.writestr(info, source.read_bytes())
    (out / "manifest.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the manifest and write nothing")
    parser.add_argument("--out", default=str(ROOT / "dist"), help="output directory (default: dist/)")
    args = parser.parse_args(argv)
    try:
        data = manifest()
    except BuildError as exc:
        print(f"build failed: {exc}", file=sys.stderr)
        return 1
    if args.dry_run:
        print(json.dumps(data, indent=2))
        return 0
    target = write_artifact(data, Path(args.out))
    print(f"built {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
