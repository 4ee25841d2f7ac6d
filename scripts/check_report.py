#!/usr/bin/env python3
"""Open a report.html in headless Chromium and check that a reader sees it whole: every collapsible section opened,
every image decoded, every video playing (its time advancing), every link of the contents leading to a heading, no
script error; save a screenshot of the page, and of chosen figures.

    python scripts/check_report.py runs/main/report/report.html --screenshot report.png
    python scripts/check_report.py report.html --figures shots/ --match "filmstrip of ref0" --match "population video"

With --figures, each <figure> whose image or video is named (alt or title) with one of the --match texts is saved as
its own PNG, DIR/NAME.png (NAME: that name, lowercase, dashes); a figure with a video three times, at the video's
first frame (DIR/NAME.first.png), half-way (NAME.middle.png) and at its last frame (NAME.last.png).

Needs Chromium (Debian: apt-get install chromium; or set CHROMIUM=/path/to/chrome) and nothing else: it speaks the
DevTools protocol over a pipe (--remote-debugging-pipe), with the standard library only. Prints one line per check
and a summary as JSON (--json); exits 0 when everything renders and plays, 1 when something does not, 2 when Chromium
is missing or fails to start.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")

# Runs in the page: opens every <details> (as a reader who unfolds every section), waits until every <img> is decoded
# and every <video> has played for a while, and reports both, and the in-page links whose target is missing.
CHECK_PAGE = r"""
(async () => {
  const details = [...document.querySelectorAll("details")];
  details.forEach(d => { d.open = true; });
  const links = [...document.querySelectorAll('a[href^="#"]')];
  const images = [...document.images];
  await Promise.all(images.map(img => img.complete ? null : new Promise(r => { img.onload = img.onerror = r; })));
  const videos = [...document.querySelectorAll("video")];
  const played = await Promise.all(videos.map(v => new Promise(resolve => {
    const start = v.currentTime;
    const done = ok => resolve({ok, time: v.currentTime, start, width: v.videoWidth, height: v.videoHeight,
                                duration: v.duration, error: v.error ? v.error.code : null, ready: v.readyState});
    v.muted = true;
    v.addEventListener("error", () => done(false));
    const poll = setInterval(() => {
      if (v.currentTime > start + 0.2 && v.videoWidth > 0) { clearInterval(poll); done(true); }
    }, 50);
    setTimeout(() => { clearInterval(poll); done(v.currentTime > start && v.videoWidth > 0); }, TIMEOUT_MS);
    v.play().catch(() => {});
  })));
  return {
    title: document.title,
    headings: document.querySelectorAll("h1, h2, h3, h4").length,
    details: details.length,
    links: links.length,
    broken_links: links.filter(a => !document.getElementById(decodeURIComponent(a.hash.slice(1))))
                       .map(a => a.getAttribute("href")),
    images: images.map(i => ({ok: i.complete && i.naturalWidth > 0, width: i.naturalWidth, alt: i.alt})),
    videos: played.map((p, k) => ({...p, title: videos[k].title})),
    height: document.documentElement.scrollHeight,
  };
})()
"""


# Runs in the page with NAMES (the --match texts) and AT ("first", "middle" or "last"): the figures to save, each with
# its page rectangle; their videos paused at their first frame, half-way or at their last frame.
FIND_FIGURES = r"""
(async () => {
  const names = NAMES, found = [];
  for (const figure of document.querySelectorAll("figure")) {
    const media = figure.querySelector("img, video");
    const name = media ? (media.getAttribute("alt") || media.getAttribute("title") || "") : "";
    if (!names.some(n => name.includes(n))) continue;
    const video = figure.querySelector("video");
    if (video) {
      video.pause();
      video.controls = false;  // the controls would cover the bottom of the picture
      const time = {first: 0, middle: video.duration / 2, last: Math.max(0, video.duration - 0.01)}[AT];
      await new Promise(resolve => {
        video.addEventListener("seeked", resolve, {once: true});
        video.currentTime = time;
        setTimeout(resolve, 3000);
      });
      await new Promise(resolve => requestAnimationFrame(() => requestAnimationFrame(resolve)));
    }
    const r = figure.getBoundingClientRect();
    found.push({name, video: !!video, x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height});
  }
  return found;
})()
"""


def file_name(name: str) -> str:
    """A figure's name as a file name: lowercase letters, digits, dots and dashes."""
    return "-".join("".join(c if c.isalnum() or c == "." else " " for c in name.lower()).split())


def find_browser() -> str | None:
    """The Chromium executable: $CHROMIUM, else the first of BROWSERS on PATH."""
    if os.environ.get("CHROMIUM"):
        return os.environ["CHROMIUM"]
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


class DevTools:
    """A headless Chromium driven over --remote-debugging-pipe: JSON messages separated by NUL bytes on fds 3/4."""

    def __init__(self, browser: str, profile: str):
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def child_fds():  # the browser reads commands on fd 3 and writes replies on fd 4 (runs before exec)
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(a, 3)
            os.dup2(b, 4)
            for fd in (a, b, to_chrome_r, from_chrome_w, self._to_chrome, self._from_chrome):
                if fd > 4:
                    os.close(fd)

        args = [
            browser,
            "--headless=new",
            "--remote-debugging-pipe",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--mute-audio",
            "--hide-scrollbars",
            "--autoplay-policy=no-user-gesture-required",
            f"--user-data-dir={profile}",
            "about:blank",
        ]
        # close_fds=False: closing would happen after child_fds and take fds 3 and 4 with it
        self.process = subprocess.Popen(
            args, preexec_fn=child_fds, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=False
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._id = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 60) -> dict:
        self._id += 1
        message = {"id": self._id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for k, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(k)
            self.events.append(self._read(deadline))

    def _read(self, deadline: float) -> dict:
        import select

        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_chrome], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium exited")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.send("Browser.close", timeout=10)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        os.close(self._to_chrome)
        os.close(self._from_chrome)


def check(
    html: Path,
    screenshot: Path | None,
    width: int = 1200,
    timeout_ms: int = 8000,
    figures: Path | None = None,
    match: list[str] | None = None,
) -> dict:
    """Load `html`, run CHECK_PAGE, take a full-page screenshot and save the figures named by `match` into `figures`;
    the page's findings plus `ok`, `problems` and `figures` (the files saved)."""
    browser = find_browser()
    if browser is None:
        raise FileNotFoundError("no Chromium found (apt-get install chromium, or set CHROMIUM)")
    with tempfile.TemporaryDirectory(prefix="npsco-chromium-") as profile:
        tools = DevTools(browser, profile)
        try:
            target = tools.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = tools.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            tools.send("Page.enable", session=session)
            tools.send("Runtime.enable", session=session)
            tools.send(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
                session=session,
            )
            tools.send("Page.navigate", {"url": html.resolve().as_uri()}, session=session)
            tools.wait_event("Page.loadEventFired", timeout=120)
            result = tools.send(
                "Runtime.evaluate",
                {
                    "expression": CHECK_PAGE.replace("TIMEOUT_MS", str(timeout_ms)),
                    "awaitPromise": True,
                    "returnByValue": True,
                },
                session=session,
                timeout=timeout_ms / 1000 + 60,
            )
            if "exceptionDetails" in result:
                raise RuntimeError(f"the check script failed: {result['exceptionDetails'].get('text')}")
            page = result["result"]["value"]
            errors = [
                e["params"]["exceptionDetails"].get("text")
                for e in tools.events
                if e.get("method") == "Runtime.exceptionThrown"
            ]
            if screenshot is not None:
                shot = tools.send(
                    "Page.captureScreenshot",
                    {"format": "png", "captureBeyondViewport": True},
                    session=session,
                    timeout=120,
                )
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                screenshot.write_bytes(base64.b64decode(shot["data"]))
            saved = save_figures(tools, session, figures, match or []) if figures is not None else []
            version = tools.send("Browser.getVersion").get("product")
        finally:
            tools.close()
    problems = [f"image {i['alt']!r} did not decode" for i in page["images"] if not i["ok"]]
    problems += [
        f"video {v['title']!r} did not play (time {v['time']:.2f} s, size {v['width']}x{v['height']}, "
        f"error {v['error']})"
        for v in page["videos"]
        if not v["ok"]
    ]
    problems += [f"link {href} leads to no heading" for href in page["broken_links"]]
    problems += [f"script error: {e}" for e in errors]
    if figures is not None and not saved:
        problems.append(f"no figure named {' or '.join(map(repr, match or []))} to save")
    return {
        **page,
        "browser": version,
        "script_errors": errors,
        "problems": problems,
        "ok": not problems,
        "figures": [str(p) for p in saved],
    }


def save_figures(tools: DevTools, session: str, folder: Path, match: list[str]) -> list[Path]:
    """Save each figure named by one of `match` as DIR/NAME.png; one with a video at its first frame, half-way and at
    its last frame (NAME.first.png, NAME.middle.png, NAME.last.png)."""
    saved: list[Path] = []
    folder.mkdir(parents=True, exist_ok=True)
    for at in ("first", "middle", "last"):
        script = FIND_FIGURES.replace("NAMES", json.dumps(match)).replace("AT", json.dumps(at))
        found = tools.send(
            "Runtime.evaluate",
            {"expression": script, "awaitPromise": True, "returnByValue": True},
            session=session,
            timeout=120,
        )["result"]["value"]
        for f in found:
            if at != "first" and not f["video"]:
                continue  # a still figure is saved once
            clip = {k: f[k] for k in ("x", "y", "width", "height")} | {"scale": 1}
            shot = tools.send(
                "Page.captureScreenshot",
                {"format": "png", "clip": clip, "captureBeyondViewport": True},
                session=session,
                timeout=120,
            )
            path = folder / (file_name(f["name"]) + (f".{at}" if f["video"] else "") + ".png")
            path.write_bytes(base64.b64decode(shot["data"]))
            saved.append(path)
    return saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html", type=Path, help="the report.html to check")
    parser.add_argument("--screenshot", type=Path, default=None, help="save a full-page PNG screenshot here")
    parser.add_argument("--width", type=int, default=1200, help="viewport width in pixels (default 1200)")
    parser.add_argument("--timeout", type=float, default=8.0, help="seconds each video has to start playing")
    parser.add_argument("--figures", type=Path, default=None, help="save the figures named by --match here, as PNGs")
    parser.add_argument(
        "--match", action="append", default=[], help="a text of the figures' names (alt or title) to save; repeatable"
    )
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    args = parser.parse_args(argv)
    if not args.html.is_file():
        print(f"check_report: {args.html}: no such file", file=sys.stderr)
        return 2
    try:
        found = check(args.html, args.screenshot, args.width, int(args.timeout * 1000), args.figures, args.match)
    except (FileNotFoundError, RuntimeError, TimeoutError, OSError) as e:
        print(f"check_report: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(found, indent=2))
    playing = sum(v["ok"] for v in found["videos"])
    decoded = sum(i["ok"] for i in found["images"])
    print(
        f"{found['browser']}: {args.html}: {found['headings']} headings, {found['details']} sections opened, "
        f"{found['links'] - len(found['broken_links'])}/{found['links']} links lead to a heading, "
        f"{decoded}/{len(found['images'])} images decoded, {playing}/{len(found['videos'])} videos playing, "
        f"{len(found['script_errors'])} script errors"
        + (f"; screenshot {args.screenshot}" if args.screenshot else "")
        + (f"; {len(found['figures'])} figures saved in {args.figures}" if args.figures else "")
    )
    for problem in found["problems"]:
        print(f"  problem: {problem}")
    return 0 if found["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
