"""A headless Chromium driven over the DevTools protocol (websocket-client), for the portal's browser tests.

It records every network request the page makes (file:// included, so a test can tell that nothing
went anywhere else), every console message and uncaught exception, and it clicks with real mouse
events at an element's position, as a user would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest


def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing (make test installs Debian's chromium)")
        pytest.skip("chromium is not installed (make test installs it)")
    return path


class Browser:
    def __init__(self, profile: Path, width: int = 1300, height: int = 1000) -> None:
        import websocket

        profile.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--disable-quic", "--remote-debugging-port=0",
             f"--window-size={width},{height}", f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.exists() or len(port_file.read_text().split()) < 2:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        import urllib.request

        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
        page = next(t for t in targets if t.get("type") == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        self.next_id = 0
        self.requests: list[str] = []
        self.console: list[tuple[str, str]] = []  # (level, text)
        self.exceptions: list[str] = []
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.call(f"{domain}.enable")

    def _event(self, msg: dict[str, Any]) -> None:
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Network.requestWillBeSent":
            self.requests.append(p["request"]["url"])
        elif method == "Runtime.consoleAPICalled":
            self.console.append((p.get("type", ""), " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))))
        elif method == "Runtime.exceptionThrown":
            self.exceptions.append(json.dumps(p.get("exceptionDetails", {}))[:500])
        elif method == "Log.entryAdded":
            e = p.get("entry", {})
            self.console.append((e.get("level", ""), f"{e.get('source', '')}: {e.get('text', '')}"))

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        mid = self.next_id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result", {}))
            self._event(msg)

    def pump(self, seconds: float) -> None:
        """Take events for a while (requests and console messages after a navigation)."""
        end = time.monotonic() + seconds
        self.ws.settimeout(0.2)
        try:
            while time.monotonic() < end:
                try:
                    self._event(json.loads(self.ws.recv()))
                except Exception:  # websocket timeout: nothing more yet
                    continue
        finally:
            self.ws.settimeout(30)

    def eval(self, expression: str) -> Any:
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression}: {res['exceptionDetails']}")
        return res.get("result", {}).get("value")

    def goto(self, url: str, settle: float = 1.0) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'")
        self.pump(settle)

    def wait_for(self, expression: str, timeout: float = 30) -> None:
        end = time.monotonic() + timeout
        while not self.eval(expression):
            if time.monotonic() > end:
                raise TimeoutError(expression)
            time.sleep(0.1)

    def click(self, selector: str) -> None:
        """A real left click (mouse pressed and released) at the middle of the first match."""
        box = self.eval(f"(function(){{var e=document.querySelector({json.dumps(selector)}); if(!e) return null; e.scrollIntoView();"
                        "var r=e.getBoundingClientRect(); return [r.left + r.width/2, r.top + r.height/2];})()")
        if box is None:
            raise LookupError(selector)
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def screenshot(self, path: Path) -> None:
        import base64

        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]))

    def close(self) -> None:
        try:
            if getattr(self, "ws", None):
                self.ws.close()
        finally:
            self.proc.kill()
            self.proc.wait(timeout=30)
