"""Drive a headless Chromium over the DevTools protocol (websocket-client), for the HTML report's
browser test, the README screenshot (`make explorer-png`) and `benchmarks/bench_html.py`.

Chromium listens on 127.0.0.1 only (`--remote-debugging-port=0`: it picks a free port and
writes it to `DevToolsActivePort` in its profile folder); pages are opened from `file://`, so
nothing leaves the machine. Every console error, uncaught exception and browser log error is
collected (`Browser.errors`).
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One page of a headless Chromium, driven by DevTools protocol commands."""

    def __init__(self, ws: Any) -> None:
        self._ws = ws
        self._next = 0
        self.errors: list[str] = []
        self._events: list[dict[str, Any]] = []

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        self._next += 1
        ident = self._next
        self._ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv())
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._event(message)

    def _event(self, message: dict[str, Any]) -> None:
        method = message.get("method", "")
        params = message.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            text = (details.get("exception") or {}).get("description") or details.get("text")
            self.errors.append(f"uncaught: {text}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = [str(a.get("value", a.get("description", ""))) for a in params.get("args", [])]
            self.errors.append("console.error: " + " ".join(args))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            self.errors.append(
                f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}"
            )
        self._events.append(message)

    def wait_event(self, method: str, timeout_s: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        for i, message in enumerate(self._events):
            if message.get("method") == method:
                del self._events[: i + 1]
                return message
        self._ws.settimeout(timeout_s)
        while time.monotonic() < deadline:
            message = json.loads(self._ws.recv())
            self._event(message)
            if message.get("method") == method:
                self._events.clear()
                return message
        raise TimeoutError(f"no {method} within {timeout_s} s")

    def evaluate(self, expression: str) -> Any:
        """The value of a JS expression (JSON-serialisable), or raise with the page's error."""
        result = self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, path: Path, fragment: str = "", timeout_s: float = 30.0) -> float:
        """Load a file; returns seconds from navigation start until the explorer said it was
        ready (`window.explorerReadyMs`, after the page parsed its data and drew every table)."""
        url = path.resolve().as_uri() + (f"#{fragment}" if fragment else "")
        self.send("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired", timeout_s)
        ready = self.evaluate(
            "window.explorerReadyMs === undefined ? null : window.explorerReadyMs"
        )
        if ready is None:
            raise RuntimeError(f"{path}: the explorer never became ready; errors: {self.errors}")
        return float(ready) / 1000.0

    def select(self, element_id: str, value: str) -> None:
        """Choose an option the way a user's pick does: set the value, fire `change`."""
        self.evaluate(
            f"(() => {{ const s = document.getElementById({json.dumps(element_id)});"
            f" s.value = {json.dumps(value)};"
            " s.dispatchEvent(new Event('change', {bubbles: true})); return s.value; })()"
        )

    def click(self, selector: str) -> None:
        """A real mouse click (press and release) at the centre of the first match."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " if (!e) return null; e.scrollIntoView({block: 'center'});"
            " const r = e.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        if box is None:
            raise RuntimeError(f"nothing matches {selector}")
        for kind in ("mousePressed", "mouseReleased"):
            self.send(
                "Input.dispatchMouseEvent",
                type=kind,
                x=box[0],
                y=box[1],
                button="left",
                clickCount=1,
            )

    def screenshot(self, path: Path, selector: str | None = None) -> Path:
        """A PNG of the viewport, or of one element's box (scrolled into view)."""
        params: dict[str, Any] = {"format": "png"}
        if selector:
            box = self.evaluate(
                f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
                " e.scrollIntoView(); const r = e.getBoundingClientRect();"
                " return {x: r.left + scrollX, y: r.top + scrollY,"
                " width: r.width, height: r.height}; })()"
            )
            params.update(clip={**box, "scale": 1}, captureBeyondViewport=True)
        data = self.send("Page.captureScreenshot", **params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path


@contextmanager
def chromium(width: int = 1400, height: int = 1000, timeout_s: float = 30.0) -> Iterator[Browser]:
    """A headless Chromium with one blank page, closed (and its profile removed) on exit."""
    import websocket  # websocket-client: in the test extra

    binary = find_chromium()
    if binary is None:
        raise FileNotFoundError(f"no Chromium on PATH (looked for {', '.join(CANDIDATES)})")
    profile = Path(tempfile.mkdtemp(prefix="rb-chromium-"))
    proc = subprocess.Popen(
        [
            binary,
            "--headless",
            "--no-sandbox",  # root in containers and CI
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout_s
        while not port_file.is_file() or not port_file.read_text().strip():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{binary} did not start (exit {proc.poll()})")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            targets = json.loads(answer.read())
        page = next(t for t in targets if t.get("type") == "page")
        ws = websocket.create_connection(
            page["webSocketDebuggerUrl"], timeout=timeout_s, suppress_origin=True
        )
        try:
            browser = Browser(ws)
            for domain in ("Page", "Runtime", "Log"):
                browser.send(f"{domain}.enable")
            browser.send(
                "Emulation.setDeviceMetricsOverride",
                width=width,
                height=height,
                deviceScaleFactor=1,
                mobile=False,
            )
            yield browser
        finally:
            ws.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


# What the explorer shows, read back from the page: the query list after filtering, and for
# the opened query each system's stages (ids in order, those marked relevant, the metric line)
# and where its labelled passages were lost, and each system's lost-at table (overall).
_READ_PAGE = """(() => {
  const rows = [...document.querySelectorAll('#query-list tr[data-qid]')];
  const detail = {};
  for (const side of document.querySelectorAll('#query-detail .side')) {
    const stages = {};
    for (const st of side.querySelectorAll('.stage')) {
      stages[st.dataset.stage] = {
        ids: [...st.querySelectorAll('li > .pid')].map((e) => e.textContent),
        relevant: [...st.querySelectorAll('li.rel > .pid')].map((e) => e.textContent),
        line: (st.querySelector('small') || {}).textContent || st.textContent,
      };
    }
    const fates = [...side.querySelectorAll('ul.fates li')].map((e) => e.textContent);
    const lost_at = Object.fromEntries([...side.querySelectorAll('ul.fates li')].map((e) =>
      [e.textContent.slice(0, e.textContent.indexOf(': ')), e.dataset.stage]));
    detail[side.dataset.system] = {stages, fates, lost_at};
  }
  const loss_tables = {};
  for (const table of document.querySelectorAll('table.fates')) {
    loss_tables[table.dataset.system] = Object.fromEntries([...table.querySelectorAll(
      'tr[data-stage]')].map((r) => [r.dataset.stage, Number(r.children[1].textContent)]));
  }
  const head = document.querySelector('#query-detail h3');
  return {
    count: document.getElementById('query-count').textContent,
    listed: rows.map((r) => r.dataset.qid),
    cells: rows.map((r) => [...r.children].map((c) => c.textContent)),
    opened: head ? head.dataset.qid : null,
    detail,
    loss_tables,
    text: [...document.querySelectorAll('.ptext')].map((e) => e.textContent),
    left_out: [...document.querySelectorAll('.left-out')].map((e) => e.textContent),
  };
})()"""


def explore(html: Path, query_type: str, screenshot: Path) -> dict[str, Any]:
    """Use the explorer as a person would: open the file, pick a query type in the filter,
    click the first query listed, click its first labelled passage id for the text, and save
    a screenshot of the explorer. Returns what the page showed (`_READ_PAGE`), the seconds it
    took to be ready and every console error."""
    with chromium() as browser:
        ready_s = browser.open(html)
        browser.select("f-type", query_type)
        browser.click("#query-list tr[data-qid]")
        labelled = "#query-detail .side li.rel > .pid"
        has_labelled = browser.evaluate(f"!!document.querySelector({json.dumps(labelled)})")
        browser.click(labelled if has_labelled else "#query-detail .side li > .pid")
        shown = browser.evaluate(_READ_PAGE)
        browser.evaluate("document.getElementById('sec-explorer').scrollIntoView()")
        browser.screenshot(screenshot)
        return {**shown, "ready_s": ready_s, "errors": list(browser.errors)}


def embedded(html_path: Path) -> dict[str, Any]:
    """The JSON a page embeds, as the page's own script reads it."""
    return embedded_text(html_path.read_text(encoding="utf-8"))


def embedded_text(text: str) -> dict[str, Any]:
    """The JSON a page's text embeds."""
    match = re.search(
        r'<script type="application/json" id="explorer-data">(.*?)</script>', text, re.S
    )
    assert match, "no embedded data"
    return json.loads(match[1])
