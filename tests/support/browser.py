"""A real headless Chromium (Debian's package) for page tests, with networking disabled.

``ensure_chromium_installed()`` installs it with apt when missing (root and apt-get needed,
else ``BrowserUnavailable`` says why). ``visit(path)`` opens a local file and returns what a
user's browser would show and do: a full-page screenshot (PNG), console errors, uncaught
exceptions, failed loads, and every request to a URL that is not the page's own file or an
inline data: URI. The DevTools protocol is spoken over ``--remote-debugging-pipe`` (file
descriptors 3 and 4), so no extra package is needed. Networking is off: every connection goes
to a local sink that records what tried to connect and answers nothing.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.apt import AptError, apt_install

CHROMIUM_PACKAGES = ("chromium",)
WIDTH = 1200


class BrowserUnavailable(RuntimeError):
    """Chromium is not installed and cannot be installed here."""


def chromium_binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def ensure_chromium_installed() -> str:
    binary = chromium_binary()
    if binary:
        return binary
    try:
        apt_install(CHROMIUM_PACKAGES, recommends=False)
    except AptError as error:
        raise BrowserUnavailable(f"chromium is not installed: {error}") from error
    binary = chromium_binary()
    if not binary:
        raise BrowserUnavailable("apt-get succeeded but chromium is not on PATH")
    return binary


class NetworkSink:
    """A local proxy that accepts connections, records their first line and answers nothing."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen()
        self.port = self.server.getsockname()[1]
        self.attempts: list[str] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            with connection:
                connection.settimeout(2)
                try:
                    first = connection.recv(4096).split(b"\r\n")[0]
                except OSError:
                    first = b""
                # A connection that carries no request line is the browser's speculative
                # preconnect to its proxy, not a fetch: every fetch names its host first.
                if first:
                    self.attempts.append(first.decode(errors="replace"))

    def close(self) -> None:
        self.server.close()


@dataclass
class Visit:
    screenshot: bytes
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # URLs other than the page and data:
    network_attempts: list[str] = field(default_factory=list)  # what reached the sink
    # What the page laid out: every line box of its text and every image, in CSS pixels of
    # the page ({"what": text or "<img alt>", "x0", "y0", "x1", "y1"}; an image's box also
    # has "decoded": its file loaded and has pixels), and its widths.
    boxes: list[dict] = field(default_factory=list)
    content_width: float = 0.0  # the document's scroll width (wider than WIDTH: side scroll)


class DevTools:
    """The DevTools protocol over Chromium's pipe: JSON messages separated by NUL bytes."""

    def __init__(self, write_fd: int, read_fd: int) -> None:
        self.write_fd, self.read_fd = write_fd, read_fd
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict] = []

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self.buffer:
            ready, _, _ = select.select([self.read_fd], [], [], max(0.0, deadline - time.time()))
            if not ready:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 60) -> dict:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 60) -> None:
        deadline = time.time() + timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._read_message(deadline))


def _launch(binary: str, profile: Path, sink: NetworkSink) -> tuple[subprocess.Popen, DevTools]:
    to_browser_read, to_browser_write = os.pipe()
    from_browser_read, from_browser_write = os.pipe()

    def map_pipes() -> None:  # in the child: Chromium reads fd 3 and writes fd 4
        os.dup2(to_browser_read, 3)
        os.dup2(from_browser_write, 4)

    command = [binary, "--headless", "--remote-debugging-pipe", "--no-sandbox",
               "--disable-gpu", "--no-first-run", "--no-default-browser-check",
               "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--disable-extensions", "--mute-audio",
               f"--user-data-dir={profile}", f"--proxy-server=127.0.0.1:{sink.port}",
               "--proxy-bypass-list=<-loopback>", f"--window-size={WIDTH},900",
               "about:blank"]
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, close_fds=False,
                               preexec_fn=map_pipes)
    os.close(to_browser_read)
    os.close(from_browser_write)
    return process, DevTools(to_browser_write, from_browser_read)


def _errors(events: list[dict]) -> list[str]:
    errors = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            errors.append(" ".join(str(a.get("value", a.get("description", "")))
                                   for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            errors.append(params.get("exceptionDetails", {}).get("text", "exception"))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            errors.append(params["entry"].get("text", ""))
        elif method == "Network.loadingFailed":
            errors.append(f"load failed: {params.get('errorText', '')}")
    return errors


# Evaluated in the page through DevTools (the page itself holds no script): one box per line
# of every text node (a Range's client rects) and one per image, in page coordinates.
LAYOUT_SCRIPT = """(() => {
  const boxes = [];
  let node_index = 0;
  const add = (what, r, extra = {}) => { if (r.width > 0 && r.height > 0) boxes.push({what,
      node: node_index,
      x0: r.left + scrollX, y0: r.top + scrollY, x1: r.right + scrollX,
      y1: r.bottom + scrollY, ...extra}); };
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.textContent.trim();
    if (!text) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const r of range.getClientRects()) add(text.slice(0, 80), r);
    node_index++;
  }
  for (const img of document.images) {
    add('<img ' + img.alt + '>', img.getBoundingClientRect(),
        {decoded: img.complete && img.naturalWidth > 0});
    node_index++;
  }
  return JSON.stringify({boxes, width: document.documentElement.scrollWidth});
})()"""


def box_overlaps(boxes: list[dict], tolerance: float = 0.5) -> list[tuple[str, str]]:
    """Pairs of laid-out boxes (texts, images) that cover each other by more than
    ``tolerance`` CSS pixels both ways; boxes of one text node (its lines) are not compared."""
    found = []
    ordered = sorted(range(len(boxes)), key=lambda i: boxes[i]["y0"])
    for position, i in enumerate(ordered):
        a = boxes[i]
        for j in ordered[position + 1:]:
            b = boxes[j]
            if b["y0"] >= a["y1"] - tolerance:
                break
            if a["node"] == b["node"]:
                continue
            if min(a["x1"], b["x1"]) - max(a["x0"], b["x0"]) > tolerance and \
                    min(a["y1"], b["y1"]) - max(a["y0"], b["y0"]) > tolerance:
                found.append((a["what"], b["what"]))
    return found


def visit(binary: str, page: Path, settle_s: float = 1.0) -> Visit:
    """Open ``page`` (a local file) with networking disabled; return what happened."""
    sink = NetworkSink()
    url = page.resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="scalebench-chromium-") as profile:
        process, tools = _launch(binary, Path(profile), sink)
        try:
            target = tools.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = tools.call("Target.attachToTarget", {"targetId": target,
                                                           "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                tools.call(f"{domain}.enable", session=session)
            tools.call("Emulation.setDeviceMetricsOverride", {
                "width": WIDTH, "height": 900, "deviceScaleFactor": 1, "mobile": False},
                session=session)
            # Without a scrollbar the page keeps its width when the full-page screenshot
            # grows the viewport, so the laid-out boxes are where the screenshot paints them.
            tools.call("Emulation.setScrollbarsHidden", {"hidden": True}, session=session)
            tools.call("Page.navigate", {"url": url}, session=session)
            tools.wait_for("Page.loadEventFired")
            time.sleep(settle_s)  # late console messages and requests
            layout = json.loads(tools.call("Runtime.evaluate", {
                "expression": LAYOUT_SCRIPT, "returnByValue": True},
                session=session)["result"]["value"])
            size = tools.call("Page.getLayoutMetrics", session=session)["cssContentSize"]
            shot = tools.call("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": WIDTH, "height": min(size["height"], 16000),
                         "scale": 1}}, session=session)
            tools.call("Browser.close")
        finally:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            os.close(tools.write_fd)
            os.close(tools.read_fd)
            sink.close()
    import base64

    requests = [e["params"]["request"]["url"] for e in tools.events
                if e.get("method") == "Network.requestWillBeSent"]
    outside = [u for u in requests if u != url and not u.startswith("data:")]
    return Visit(base64.b64decode(shot["data"]), _errors(tools.events), outside,
                 list(sink.attempts), layout["boxes"], float(layout["width"]))
