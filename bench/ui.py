"""The memory browser (`serve --ui`) in headless Chromium: page load times and the docs' screenshots.

    python bench/ui.py [--store DIR] [--loads 5] [--shots docs] [--out bench/results/ui.json] [--docs MD]

Without --store, `sample_logs/` is ingested into a fresh store and compacted once (templates). The
server starts with `--http --ui`; Debian's chromium, driven through its chromedriver (selenium), logs
in through the form, then loads each page `--loads` times. A load's time is the browser's own
Navigation Timing entry (`performance.getEntriesByType('navigation')`: from the request to the end
of the load event). The target: each page's median under 300 ms; the script exits 1 when one is over.
`--shots` writes one screenshot per page (ui-search.png, ui-units.png, ui-item.png, ui-growth.png).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, RESULTS, load_embedder, machine, publish, run_cycles, served, table

TARGET_MS = 300.0
SEARCH = "get_weather returned 429 Too Many Requests"
WINDOW = (1180, 760)


def chromium() -> Any:
    """A headless Chromium through chromedriver, both from the system (apt: chromium chromium-driver;
    CHROMIUM and CHROMEDRIVER override the paths). Missing ones raise, never skip: a browser test that
    quietly does not run proves nothing."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    driver_path = os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver") or "/usr/bin/chromedriver"
    for path, package in ((binary, "chromium"), (driver_path, "chromium-driver")):
        if not Path(path).exists():
            raise RuntimeError(f"{path} not found: apt-get install -y {package} (the browser tests need it)")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"):
        options.add_argument(flag)
    options.add_argument(f"--window-size={WINDOW[0]},{WINDOW[1]}")
    return webdriver.Chrome(service=Service(driver_path), options=options)  # an explicit driver: no download


def login(driver: Any, base: str, token: str) -> None:
    """Log in the way a person does: the form, then the redirect to the search page, waited for (a click
    returns before the browser has followed the redirect)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{base}/ui/login")
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#login button").click()
    WebDriverWait(driver, 30).until(lambda d: d.current_url.endswith("/ui/search"))


def navigation_ms(driver: Any) -> float:
    """The last load's duration by the browser's Navigation Timing API (request start to load end)."""
    entry = driver.execute_script("return performance.getEntriesByType('navigation')[0].toJSON()")
    return round(float(entry["duration"]), 1)


def pages(http: Any) -> dict[str, str]:
    """Each page's path on the store: the search, the units, the best unit's trace, one of its source
    records (an item with a history: it went into the unit), the growth chart."""
    units = http.call("units", {"status": "active"})["units"]
    if not units:
        raise SystemExit("the store has no active unit: compact it first")
    trace = http.call("trace", {"id": units[0]["id"]})
    item = trace["records"][0]["id"] if trace["records"] else units[0]["id"]
    return {
        "search": f"/ui/search?q={quote(SEARCH)}&k=10",
        "units": "/ui/units",
        "trace": f"/ui/trace/{quote(units[0]['id'])}",
        "item": f"/ui/item/{quote(item)}",
        "growth": "/ui/growth",
    }


def build_sample_store(folder: Path) -> Path:
    """The README's growth-chart store: sample_logs/ ingested, compacted, then three nightly cycles."""
    from expengine import Engine

    store = folder / "store"
    with Engine(store=store, embedder=load_embedder(), overrides={"llm.mode": "template"}) as engine:
        engine.ingest([str(REPO / "sample_logs")])
        grow(engine)
    return store


def grow(engine: Any, nightly: int = 3) -> None:
    """A compaction now, then `nightly` more on clocks a night apart (as docs/growth.png was made)."""
    engine.compact()
    run_cycles(engine, nightly, start=dt.datetime.now(dt.timezone.utc).replace(tzinfo=None))


def screenshot(driver: Any, path: Path) -> None:
    """The viewport as a 256-colour PNG (a third of the size; text and lines stay sharp)."""
    from PIL import Image  # matplotlib's dependency, in the test extra

    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=256)
    small.save(path, optimize=True)


def measure(base: str, token: str, paths: dict[str, str], *, loads: int, shots: Path | None) -> dict[str, Any]:
    driver = chromium()
    try:
        login(driver, base, token)
        timings: dict[str, list[float]] = {}
        for name, path in paths.items():
            for _ in range(loads):
                driver.get(base + path)
                timings.setdefault(name, []).append(navigation_ms(driver))
            if shots and name != "trace":
                screenshot(driver, shots / f"ui-{name}.png")
        return {
            name: {"median_ms": statistics.median(ms), "max_ms": max(ms), "loads": ms} for name, ms in timings.items()
        }
    finally:
        driver.quit()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", type=Path, help="an existing store (default: sample_logs/ ingested and compacted)")
    parser.add_argument("--loads", type=int, default=5, help="loads per page (default: %(default)s)")
    parser.add_argument("--shots", type=Path, help="write one screenshot per page into this folder (e.g. docs)")
    parser.add_argument("--out", type=Path, default=RESULTS / "ui.json")
    parser.add_argument("--docs", type=Path, help="also write the table into this Markdown file's ui section")
    args = parser.parse_args(argv)
    command = " ".join(["python bench/ui.py", *(sys.argv[1:] if argv is None else argv)])
    with tempfile.TemporaryDirectory(prefix="expengine-ui-") as tmp:
        store = args.store or build_sample_store(Path(tmp))
        with served(store, {"llm.mode": "template"}, serve_args=["--ui"]) as (_, http):
            paths = pages(http)
            pages_ms = measure(http.url, http.token, paths, loads=args.loads, shots=args.shots)
    over = [name for name, t in pages_ms.items() if t["median_ms"] > TARGET_MS]
    rows = [[name, paths[name].split("?")[0], t["median_ms"], t["max_ms"]] for name, t in pages_ms.items()]
    text = (
        f"Memory browser page loads (`serve --ui`, headless Chromium, Navigation Timing `duration`, {args.loads} "
        f"loads per page, {machine()}; target: median under {TARGET_MS:.0f} ms). `{command}`"
        + ("" if args.store else " (the store: sample_logs/ ingested, compacted, then three nightly cycles)")
        + ":\n\n"
        + table(["page", "path", "median ms", "max ms"], rows)
        + ("\n\nover the target: " + ", ".join(over) if over else "")
    )
    report = {
        "command": command,
        "target_ms": TARGET_MS,
        "pages": pages_ms,
        "paths": paths,
        "over_target": over,
        "machine": machine(),
    }
    publish(report, args, section="ui", text=text, echo=True)
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
