"""record/redact.py: what is kept out of every artifact."""

from __future__ import annotations

import base64
import os

import pytest

from pytest_agentdrift.record.redact import host_file_secrets, scrub

SHADOW_HASH = "$y$j9T$PLANTEDsalt$PLANTEDhashvalue0123456789"


@pytest.fixture
def host(tmp_path):
    root, home = tmp_path / "root", tmp_path / "home"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "shadow").write_text(f"root:{SHADOW_HASH}:19000:0:99999:7:::\nbin:*:19000::::::\n")
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text(
        "[default]\naws_access_key_id = AKIAPLANTED0000KEY\n# a comment long enough to count\n"
    )
    (home / ".git-credentials").write_text("https://jane:ghp_PLANTEDtoken123456@github.com\n")
    (home / ".claude").mkdir()
    (home / ".claude" / ".credentials.json").write_text('{"accessToken": "sk-ant-PLANTED-oauth-0123"}')
    return root, home


def test_credential_files_give_their_lines_and_fields(host):
    root, home = host
    found = host_file_secrets(home, (".claude/.credentials.json",), system_root=root)
    for secret in (SHADOW_HASH, "AKIAPLANTED0000KEY", "ghp_PLANTEDtoken123456", "sk-ant-PLANTED-oauth-0123"):
        assert secret in found, secret
    assert "ghp_PLANTEDtoken123456".encode().hex() in found
    assert base64.b64encode(b"AKIAPLANTED0000KEY").decode().rstrip("=") in found
    # section headers, comments and short fields are not secrets: scrubbing them would only mangle output
    assert not [f for f in found if f.startswith(("[", "#")) or len(f) < 12]
    assert "default" not in found and "github.com" not in found
    # longest first, so a line is replaced before the token inside it
    assert [len(f) for f in found] == sorted((len(f) for f in found), reverse=True)


def test_scrub_replaces_them_in_text(host):
    root, home = host
    found = host_file_secrets(home, system_root=root)
    text = f"cat ~/.git-credentials\nhttps://jane:ghp_PLANTEDtoken123456@github.com\ntoken ghp_PLANTEDtoken123456\n{SHADOW_HASH}"
    out = scrub(text, found)
    assert "PLANTED" not in out and out.count("[REDACTED]") == 3


def test_unreadable_or_missing_files_are_skipped(tmp_path, host):
    root, home = host
    assert host_file_secrets(tmp_path / "nohome", system_root=tmp_path / "noroot") == []
    if os.geteuid() != 0:  # root reads a mode-000 file anyway
        (home / ".git-credentials").chmod(0)
        assert "ghp_PLANTEDtoken123456" not in host_file_secrets(home, system_root=root)


def test_only_what_is_secret_in_the_environment_is():
    from pytest_agentdrift.record.redact import secret_values

    env = {
        "GITHUB_EVENT_NAME": "pull_request",
        "LANG": "en_US.UTF-8",
        "MARKER": "infra_error",
        "DEPLOY_MODEL": "gemini-2.5-pro",
        "XDG_SESSION_DESKTOP": "ubuntu",
        "GIT_AUTHOR_NAME": "Jane Doe-Smith",
        "MY_SERVICE_TOKEN": "tok-planted-4242",
        "DB_PASSWORD": "hunter2-Xq9",
        "OPAQUE": "sk-plantedShape0123456789",
        "NOTE": "use ghp_PLANTEDaaaaaaaaaaaaaaaaaaaa01 here",
        "PIP_INDEX_URL": "https://ci-user:pw77plant@pypi.example.test/simple",
        "GIVEN": "given-value-99",
    }
    found = set(secret_values(env, {"GIVEN"}))
    for secret in (
        "tok-planted-4242",
        "hunter2-Xq9",
        "sk-plantedShape0123456789",
        "ghp_PLANTEDaaaaaaaaaaaaaaaaaaaa01",
        "pw77plant",
        "ci-user:pw77plant@",
        "given-value-99",
    ):
        assert secret in found, secret
    for ordinary in ("pull_request", "en_US.UTF-8", "infra_error", "gemini-2.5-pro", "ubuntu", "Jane Doe-Smith"):
        assert ordinary not in found, ordinary


def test_the_records_own_names_and_words_are_never_replaced():
    from pytest_agentdrift.record.redact import scrub_record

    record = {
        "outcome": "infra_error",
        "infra_error": {"class": "overloaded"},
        "layers": {"correctness": "pass"},
        "detail": "infra_error seen: tok-planted-4242",
        "entries": {"leak-tok-planted-4242.txt": {"kind": "file"}},
    }
    out = scrub_record(record, ["infra_error", "correctness", "overloaded", "tok-planted-4242"])
    assert out["outcome"] == "infra_error" and out["infra_error"] == {"class": "overloaded"}
    assert out["layers"] == {"correctness": "pass"}
    assert out["detail"] == "[REDACTED] seen: [REDACTED]"  # free text: replaced
    assert list(out["entries"]) == ["leak-[REDACTED].txt"]  # a key that is data: replaced
