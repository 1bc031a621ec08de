"""Opens vram plot's page and SVG in headless Chromium (driven through
chromedriver, the W3C WebDriver protocol, with nothing but Python's
standard library) and checks what the browser shows, against what
`vram record info --json` says of the same recording:

- the page's script ran, nothing was fetched, one section per GPU;
- each chart has a painted band for every family / process of the GPU;
- the peak's mark sits at the peak's bytes and time on the chart's own
  axes (read from the drawn tick marks), and says the peak (a device's
  "peak_time_range" [from, to] instead of "peak_time_s": within it);
- the budget line is drawn at the budget's height on that axis;
- NVML's line, on the family chart of a GPU whose recording has NVML's
  readings ("nvml_peak"), is drawn at its peak's height, is in the legend,
  and the pointer over its peak shows it; none where there are none;
- the refusal marks count the GPU's refusals;
- the pointer over the peak's column shows its time range and the peak's
  bytes, and elsewhere the time and bytes of that column;
- the SVG renders the same marks.

Screenshots go to OUT_DIR as NAME.png and NAME-svg.png (NAME: timeline
unless given). Usage: browser.py PAGE SVG INFO_JSON OUT_DIR [NAME]"""
import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

page, svg, info_path, out_dir = sys.argv[1:5]
shot = sys.argv[5] if len(sys.argv) > 5 else "timeline"
info = json.load(open(info_path))
failures = []


def check(name, ok, detail=""):
    if ok:
        print(f"ok: {name}")
    else:
        print(f"FAIL: {name} {detail}")
        failures.append(name)


def size_text(b):
    """vram's way of writing sizes (format_size)."""
    if b < 1024:
        return f"{b} B"
    v, u = b / 1024, 0
    while v >= 1024 and u < 5:
        v, u = v / 1024, u + 1
    return "%.2f %s" % (v, ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"][u])


class Browser:
    def __init__(self, profile):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        # Chromium makes scratch folders (org.chromium.Chromium.scoped_dir.*)
        # in TMPDIR and removes them only when it shuts down cleanly: on a
        # slow machine (CI) some outlived the test. TMPDIR inside the profile
        # puts them where the test removes everything.
        self.profile = profile
        env = dict(os.environ, HOME=profile, XDG_CONFIG_HOME=profile, XDG_CACHE_HOME=profile,
                   TMPDIR=profile)
        self.driver = subprocess.Popen(
            ["chromedriver", f"--port={port}", f"--log-path={profile}/chromedriver.log"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
            start_new_session=True)
        self.base = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                self.call("GET", "/status")
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.05)
        args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-crash-reporter",
                f"--user-data-dir={profile}/chromium", "--window-size=1500,1700",
                "--hide-scrollbars"]
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": shutil.which("chromium"), "args": args}}}}
        self.session = self.call("POST", "/session", caps)["sessionId"]

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return json.load(r)["value"]
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"{method} {path}: {e.read().decode()[:400]}") from None

    def s(self, method, path, body=None):
        return self.call(method, f"/session/{self.session}{path}", body)

    def open(self, path):
        self.s("POST", "/url", {"url": "file://" + os.path.abspath(path)})

    def js(self, script, *args):
        return self.s("POST", "/execute/sync", {"script": script, "args": list(args)})

    def move(self, x, y):
        self.s("POST", "/actions", {"actions": [{"type": "pointer", "id": "mouse",
                                                 "parameters": {"pointerType": "mouse"},
                                                 "actions": [{"type": "pointerMove",
                                                              "duration": 0, "origin": "viewport",
                                                              "x": int(x), "y": int(y)}]}]})

    def screenshot(self, path):
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.s("GET", "/screenshot")))

    def browser_pids(self):
        """Chromium's processes: every one names the profile in its arguments
        (--user-data-dir, or the renderers' inherited settings)."""
        pids = []
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) == os.getpid():
                continue
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if self.profile.encode() in f.read():
                        pids.append(int(d))
            except OSError:
                pass
        return pids

    def close(self):
        try:
            self.s("DELETE", "")
        finally:
            os.killpg(self.driver.pid, signal.SIGTERM)
            self.driver.wait()
            # Chromium may still be shutting down (or be in a process group
            # of its own): the test is over only when none of it is left,
            # so that nothing writes into the profile after it is removed.
            deadline = time.monotonic() + 10
            while self.browser_pids() and time.monotonic() < deadline:
                time.sleep(0.05)
            for pid in self.browser_pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


# What a chart shows, read from the DOM after layout: its ticks (to map
# pixels back to bytes and seconds), bands, marks, all in the chart's own
# SVG coordinates.
CHART = """
const svg = arguments[0];
const num = (el, a) => parseFloat(el.getAttribute(a));
const yt = [...svg.querySelectorAll('.ytick')].map(t => [num(t, 'data-bytes'), num(t.querySelector('line'), 'y1')]);
const xt = [...svg.querySelectorAll('.xtick')].map(t => [num(t, 'data-seconds'), num(t.querySelector('line'), 'x1')]);
const bands = [...svg.querySelectorAll('path.series')].map(p => {
  const b = p.getBBox(); return {name: p.dataset.series, height: b.height, width: b.width}; });
const peak = svg.querySelector('.peak');
const budget = svg.querySelector('path.budget');
const bb = budget ? budget.getBBox() : null;
const nvml = svg.querySelector('path.nvml');
const nb = nvml ? nvml.getBBox() : null;
const r = svg.getBoundingClientRect();
return {yt, xt, bands,
  nvml: nb && {top: nb.y, width: nb.width, d: nvml.getAttribute('d'), bytes: +nvml.dataset.bytes,
               legend: (svg.querySelector('.legend-nvml') || {}).textContent},
  nvmlLegend: !!svg.querySelector('.legend-nvml'),
  peak: peak && {bytes: +peak.dataset.bytes, text: peak.textContent,
                 cx: num(peak.querySelector('circle'), 'cx'), cy: num(peak.querySelector('circle'), 'cy')},
  budget: bb && {top: bb.y, height: bb.height, label: (svg.querySelector('.budget-label') || {}).textContent},
  refusals: [...svg.querySelectorAll('.refusal')].reduce((n, m) => n + +m.dataset.count, 0),
  box: {left: r.left, top: r.top, width: r.width, height: r.height},
  view: svg.viewBox.baseVal.width, left: +svg.dataset.left, top: +svg.dataset.top,
  plotHeight: +svg.dataset.height, columns: +svg.dataset.columns};
"""


def axis_value(ticks, pixel):
    """Bytes (or seconds) at a pixel, from the two outermost ticks."""
    (v0, p0), (v1, p1) = ticks[0], ticks[-1]
    return v0 + (pixel - p0) * (v1 - v0) / (p1 - p0)


def axis_pixel(ticks, value):
    (v0, p0), (v1, p1) = ticks[0], ticks[-1]
    return p0 + (value - v0) * (p1 - p0) / (v1 - v0)


def nvml_top_run(d):
    """The path's longest run of columns at its highest point (its smallest
    y): (first column's x, columns)."""
    x = y = None
    runs = []
    for cmd, a, b in re.findall(r"([MhV])([\d.]+)(?: ([\d.]+))?", d):
        if cmd == "M":
            x, y = float(a), float(b)
        elif cmd == "V":
            y = float(a)
        else:
            runs.append((y, x, int(a)))
            x += int(a)
    top = min(r[0] for r in runs)
    _, x, n = max((r for r in runs if r[0] == top), key=lambda r: r[2])
    return x, n


def check_nvml(b, c, kind, d, where, interactive):
    """NVML's line: on the family chart where the recording has readings."""
    want = kind == "family" and "nvml_peak" in d
    check(f"{where}: NVML's line {'drawn' if want else 'absent'}", (c["nvml"] is not None) == want
          and c["nvmlLegend"] == want, c["nvml"])
    if not want or not c["nvml"]:
        return
    nvml = d["nvml_peak"]
    y = axis_pixel(c["yt"], nvml)
    check(f"{where}: NVML's line peaks at NVML's peak",
          abs(c["nvml"]["top"] - y) <= 0.6 and c["nvml"]["bytes"] == nvml,
          f'{c["nvml"]["top"]} vs y {y} ({nvml})')
    check(f"{where}: NVML's line in the legend, with its peak",
          "NVML" in c["nvml"]["legend"] and size_text(nvml) in c["nvml"]["legend"],
          c["nvml"]["legend"])
    if not interactive:
        return
    x, n = nvml_top_run(c["nvml"]["d"])
    scale = c["box"]["width"] / c["view"]
    b.move(c["box"]["left"] + (x + n / 2) * scale,
           c["box"]["top"] + (c["top"] + c["plotHeight"] / 2) * scale)
    tip = b.js("return document.getElementById('tip').textContent")
    check(f"{where}: over NVML's peak the tip shows NVML's figure",
          f"NVML: {size_text(nvml)}" in tip, tip)


def check_chart(b, el, kind, dev, d, interactive):
    c = b.js(CHART, el)
    where = f"GPU {dev} by {kind}"
    painted = {x["name"] for x in c["bands"] if x["height"] > 0 and x["width"] > 0}
    if kind == "family":
        want = set(d["family_peaks"])
    else:
        want = {f'{p["pid"]} {p["command"]}' for p in info["processes"]}
    check(f"{where}: a painted band for each series", want <= painted,
          f"want {sorted(want)}, painted {sorted(painted)}")
    # The peak: its mark where the axes put the peak's bytes and time.
    peak = d["peak"]
    t_from, t_to = d.get("peak_time_range") or (d["peak_time_s"], d["peak_time_s"])
    check(f"{where}: the peak's mark says the peak",
          c["peak"] and c["peak"]["bytes"] == peak and size_text(peak) in c["peak"]["text"],
          c["peak"])
    px_bytes = (c["yt"][-1][0] - c["yt"][0][0]) / abs(c["yt"][-1][1] - c["yt"][0][1])
    at = axis_value(c["yt"], c["peak"]["cy"])
    check(f"{where}: the peak's mark is at the peak's height",
          abs(at - peak) <= 1.0 * px_bytes, f"{at} vs {peak} ({px_bytes:.0f} bytes a pixel)")
    px_seconds = (c["xt"][-1][0] - c["xt"][0][0]) / (c["xt"][-1][1] - c["xt"][0][1])
    when = axis_value(c["xt"], c["peak"]["cx"])
    check(f"{where}: the peak's mark is at the peak's time",
          t_from - px_seconds <= when <= t_to + px_seconds, f"{when} vs {t_from}..{t_to}")
    # The budget: a flat line at the budget's height.
    budget = d["budget"]
    y = axis_pixel(c["yt"], budget)
    check(f"{where}: the budget line is at the budget's height",
          c["budget"] and abs(c["budget"]["top"] - y) <= 0.6 and c["budget"]["height"] < 0.6,
          f'{c["budget"]} vs y {y}')
    check(f"{where}: the budget line is labelled",
          c["budget"] and size_text(budget) in (c["budget"]["label"] or ""), c["budget"])
    check(f"{where}: every refusal marked", c["refusals"] == d["refusals"],
          f'{c["refusals"]} vs {d["refusals"]}')
    check_nvml(b, c, kind, d, where, interactive)
    if not interactive:
        return
    # The pointer over the peak's column: its time range and the peak.
    scale = c["box"]["width"] / c["view"]
    b.move(c["box"]["left"] + c["peak"]["cx"] * scale, c["box"]["top"] + c["peak"]["cy"] * scale)
    tip = b.js("const t = document.getElementById('tip');"
               "return {hidden: t.hidden, text: t.textContent, column: +t.dataset.column,"
               " device: +t.dataset.device, chart: t.dataset.chart};")
    check(f"{where}: hovering shows a tip", not tip["hidden"] and tip["device"] == dev
          and tip["chart"] == kind, tip)
    m = re.match(r"([\d.]+) s \u2013 ([\d.]+) s\n", tip["text"])
    # Within a column: the pointer at the mark's centre may fall on the
    # column's edge and show its neighbour, which holds the same level where
    # the peak lasts (a short recording's plateau, seen under ASan), as the
    # mark's own check allows; and within the tip's rounding of its times.
    slack = px_seconds + (0.5 * 10 ** -len(m.group(1).split(".")[-1]) if m else 0)
    check(f"{where}: the tip's time range holds the peak's time",
          m and float(m.group(1)) - slack <= t_to and t_from <= float(m.group(2)) + slack,
          f'{tip["text"]} (peak {t_from}..{t_to} s)')
    check(f"{where}: the tip shows the peak's bytes",
          f"in use {size_text(peak)}" in tip["text"], tip["text"])
    check(f"{where}: the tip shows the budget", f"budget {size_text(budget)}" in tip["text"],
          tip["text"])
    # Elsewhere: a quarter of the way along, the time of that column.
    x = c["left"] + c["columns"] // 4 + 0.5
    b.move(c["box"]["left"] + x * scale, c["box"]["top"] + (c["top"] + c["plotHeight"] / 2) * scale)
    tip = b.js("const t = document.getElementById('tip'); return {text: t.textContent,"
               " column: +t.dataset.column};")
    m = re.match(r"([\d.]+) s \u2013 ([\d.]+) s\nin use ([\d.]+ [KMGT]?i?B)", tip["text"])
    seconds = axis_value(c["xt"], x)
    check(f"{where}: elsewhere the tip shows that column's time and bytes",
          tip["column"] == c["columns"] // 4 and m
          and float(m.group(1)) - px_seconds <= seconds <= float(m.group(2)) + px_seconds,
          f"{tip} at {seconds} s")


def main():
    profile = tempfile.mkdtemp(prefix="vram-plot-browser.")
    b = Browser(profile)
    try:
        start = time.monotonic()
        b.open(page)
        for _ in range(200):
            if b.js("return document.body && document.body.dataset.ready === 'true'"):
                break
            time.sleep(0.05)
        loaded = time.monotonic() - start
        check("the page's script ran", b.js("return document.body.dataset.ready") == "true")
        print(f"page loaded and scripted in {loaded:.2f} s")
        check("nothing fetched from anywhere",
              b.js("return performance.getEntriesByType('resource').length") == 0)
        devices = [d for d in info["devices"]]
        sections = b.js("return [...document.querySelectorAll('section.device')]"
                        ".map(s => +s.dataset.device)")
        check("a section per GPU", sections == [d["device"] for d in devices], sections)
        for d in devices:
            dev = d["device"]
            for kind in ("family", "process"):
                el = b.js(f"return document.querySelector('section#gpu-{dev} svg.chart[data-chart={kind}]')")
                check_chart(b, el, kind, dev, d, True)
        b.move(5, 5)
        b.screenshot(os.path.join(out_dir, f"{shot}.png"))
        b.open(svg)
        check("the SVG opens as an SVG document",
              b.js("return document.documentElement.tagName") == "svg")
        charts = b.js("return [...document.querySelectorAll('svg.chart')]")
        check("the SVG has both charts of every GPU", len(charts) == 2 * len(devices))
        for i, el in enumerate(charts):
            d = devices[i // 2]
            check_chart(b, el, ("family", "process")[i % 2], d["device"], d, False)
        b.screenshot(os.path.join(out_dir, f"{shot}-svg.png"))
    finally:
        b.close()
        shutil.rmtree(profile, ignore_errors=True)
    print(f"{len(failures)} failed")
    sys.exit(1 if failures else 0)


main()
