"""A tiny Chrome DevTools Protocol client over --remote-debugging-pipe (stdlib only).

Chromium reads NUL-terminated JSON messages on fd 3 and writes its answers
and events on fd 4, so no websocket library and no listening port is needed.
Every request a page makes is paused (Fetch domain) and recorded; only the
page's own file is let through, anything else is failed and stays on the list
the test asserts on.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class CDPError(RuntimeError):
    pass


@dataclass
class PageLog:
    url: str
    requests: list[str] = field(default_factory=list)  # every URL the page asked for (Network + Fetch)
    blocked: list[str] = field(default_factory=list)  # requests failed by us (anything but the page itself)
    console_errors: list[str] = field(default_factory=list)


class Chromium:
    def __init__(self, exe: str, timeout: float = 60.0):
        self.timeout = timeout
        self.user_data = tempfile.mkdtemp(prefix="agentdrift-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def child_fds() -> None:
            # fds 3 and 4 by the protocol; dup first so the numbers cannot collide
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        argv = [
            exe,
            "--headless",
            "--remote-debugging-pipe",
            f"--user-data-dir={self.user_data}",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-gpu",
            "--disable-extensions",
            "--disable-sync",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-default-apps",
            "--hide-scrollbars",
            "--mute-audio",
            "about:blank",
        ]
        if os.geteuid() == 0:
            argv.insert(1, "--no-sandbox")  # Chromium refuses to start as root with its sandbox
        # preexec_fn: the only stdlib way to place the pipes on fds 3 and 4 (tests start no threads here)
        self.proc = subprocess.Popen(
            argv,
            preexec_fn=child_fds,
            close_fds=False,  # noqa: PLW1509
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self._next_id = 0
        self._pending: list[dict[str, Any]] = []  # events not yet consumed
        self.logs: dict[str, PageLog] = {}  # session id -> log

    # -- transport ------------------------------------------------------------------
    def _send(self, msg: dict[str, Any]) -> None:
        try:
            os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        except BrokenPipeError:
            raise CDPError(
                f"Chromium is not reading its debugging pipe (process exit status {self.proc.poll()})"
            ) from None

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CDPError("timed out waiting for Chromium")
            ready, _, _ = select.select([self._from_chrome], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise CDPError("Chromium closed the debugging pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def _dispatch(self, msg: dict[str, Any]) -> None:
        method, sid, params = msg.get("method"), msg.get("sessionId"), msg.get("params") or {}
        log = self.logs.get(sid) if sid else None
        if log is not None:
            if method == "Fetch.requestPaused":
                url = params["request"]["url"]
                log.requests.append(url)
                if url.split("#", 1)[0] == log.url:
                    self._send(
                        {
                            "id": self._new_id(),
                            "sessionId": sid,
                            "method": "Fetch.continueRequest",
                            "params": {"requestId": params["requestId"]},
                        }
                    )
                else:
                    log.blocked.append(url)
                    self._send(
                        {
                            "id": self._new_id(),
                            "sessionId": sid,
                            "method": "Fetch.failRequest",
                            "params": {"requestId": params["requestId"], "errorReason": "BlockedByClient"},
                        }
                    )
            elif method == "Network.requestWillBeSent":
                log.requests.append(params["request"]["url"])
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                log.console_errors.append(
                    " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
                )
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails") or {}
                log.console_errors.append(
                    str((details.get("exception") or {}).get("description") or details.get("text"))
                )
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                log.console_errors.append(f"{params['entry'].get('source')}: {params['entry'].get('text')}")
        self._pending.append(msg)

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        msg_id = self._new_id()
        msg: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self._send(msg)
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise CDPError(f"{method}: {reply['error']}")
                return reply.get("result") or {}
            if "method" in reply:
                self._dispatch(reply)

    def wait_for(self, method: str, session: str | None = None) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            for i, msg in enumerate(self._pending):
                if msg.get("method") == method and (session is None or msg.get("sessionId") == session):
                    del self._pending[i]
                    return msg.get("params") or {}
            self._pending.clear()
            msg = self._read_message(deadline)
            if "method" in msg:
                self._dispatch(msg)

    # -- pages ----------------------------------------------------------------------
    def open(self, path: Path, fragment: str = "", width: int = 1280, height: int = 900) -> str:
        url = Path(path).absolute().as_uri()
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        sid = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.logs[sid] = PageLog(url)
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=sid)
        self.call("Fetch.enable", {"patterns": [{"urlPattern": "*"}]}, session=sid)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=sid,
        )
        self.call("Page.navigate", {"url": url + (f"#{fragment}" if fragment else "")}, session=sid)
        self.wait_for("Page.loadEventFired", sid)
        self.evaluate(
            sid, "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))", await_promise=True
        )
        return sid

    def evaluate(self, session: str, expression: str, await_promise: bool = False) -> Any:
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": await_promise},
            session=session,
        )
        if "exceptionDetails" in result:
            raise CDPError(f"evaluate {expression!r}: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def screenshot(self, session: str, out: Path) -> Path:
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": False}, session=session)[
            "data"
        ]
        out.write_bytes(base64.b64decode(data))
        return out

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (CDPError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.user_data, ignore_errors=True)
