"""Debian's headless ``chromium`` driven over the Chrome DevTools Protocol (a websocket), nothing else.

``Chromium(tmp)`` starts the browser on a free debugging port with a profile of its own;
:meth:`Chromium.page` attaches to its first tab. Only the calls the view's browser test needs.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect

from eventhubs_local.ports import free_port


class Page:
    def __init__(self, ws_url: str):
        self.ws = connect(ws_url, max_size=None, open_timeout=30)
        self.ids = itertools.count(1)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        msg_id = next(self.ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv(timeout=60))
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def eval(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.eval(expression)
            except RuntimeError:
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"not true in {timeout} s: {expression}\npage text: {self.text()[:2000]}")
            time.sleep(0.3)

    def type(self, selector: str, text: str) -> None:
        """Focus the element and type ``text`` into it as keyboard input."""
        self.eval(f"document.querySelector({json.dumps(selector)}).focus()")
        self.call("Input.insertText", text=text)

    def click(self, selector: str) -> None:
        """A mouse click in the middle of the element."""
        box = self.eval(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def text(self) -> str:
        try:
            return str(self.eval("document.body ? document.body.innerText : ''"))
        except RuntimeError as exc:
            return str(exc)

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=False)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        self.ws.close()


class Chromium:
    def __init__(self, workdir: Path, width: int = 1400, height: int = 1100):
        binary = shutil.which("chromium") or shutil.which("chromium-browser")
        if binary is None:
            raise RuntimeError("Debian's `chromium` is not installed: `apt-get install -y chromium` (.ci/run does)")
        self.port = free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        self.log = open(workdir / "chromium.log", "wb")
        self.proc = subprocess.Popen(
            [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--disable-extensions", "--disable-background-networking", f"--remote-debugging-port={self.port}",
             "--remote-debugging-address=127.0.0.1", f"--user-data-dir={workdir / 'profile'}",
             f"--window-size={width},{height}", "about:blank"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )

    def page(self, timeout: float = 60) -> Page:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}; see {self.log.name}")
            try:
                targets = httpx.get(f"http://127.0.0.1:{self.port}/json/list", timeout=5).json()
                pages = [t for t in targets if t.get("type") == "page"]
                if pages:
                    page = Page(pages[0]["webSocketDebuggerUrl"])
                    page.call("Page.enable")
                    page.call("Runtime.enable")
                    return page
            except (httpx.HTTPError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"chromium's debugging port did not answer in {timeout} s")
            time.sleep(0.3)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
