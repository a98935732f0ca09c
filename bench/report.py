"""The benchmark table: each figure with its target and PASS/MISS, printed and written to BENCHMARKS.md."""

from __future__ import annotations

import datetime as _dt
import os
import platform
from dataclasses import dataclass
from pathlib import Path

from bench.timing import Timing


@dataclass(frozen=True)
class Figure:
    """One reported number. ``passed`` is None for side-by-side figures without a target."""

    section: str
    name: str
    value: str
    target: str
    passed: bool | None
    detail: str = ""

    @property
    def verdict(self) -> str:
        if self.passed is None:
            return "—"
        return "PASS" if self.passed else "MISS"


def ratio(section: str, name: str, a: Timing, b: Timing, target: float, op: str, detail: str) -> Figure:
    """``a``'s median ÷ ``b``'s against ``target`` (``op`` "≤" or "≥"): timings travel between
    machines only as ratios of two measured side by side."""
    r = a.median / b.median
    ok = r <= target if op == "≤" else r >= target
    return Figure(section, name, f"{r:.2f}×", f"{op} {target}×", ok, detail)


def machine() -> dict[str, str]:
    """Where the figures were measured (ratios travel; absolute times do not)."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        import tiktoken

        tk = getattr(tiktoken, "__version__", "?")
    except ImportError:  # pragma: no cover
        tk = "missing"
    try:
        # On a shared machine the load says how far to trust a ratio whose cases are not interleaved.
        load = "{:.1f} {:.1f} {:.1f}".format(*os.getloadavg())
    except OSError:  # pragma: no cover - not on every platform
        load = "?"
    return {
        "load average at the end": load,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "os": f"{platform.system()} {platform.release()}",
        "cpu": cpu,
        "cores": str(os.cpu_count() or "?"),
        "tiktoken": str(tk),
    }


def text_table(figures: list[Figure]) -> str:
    headers = ("Figure", "Measured", "Target", "Result")
    rows = [(f.name, f.value, f.target, f.verdict) for f in figures]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)] if rows else []
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths))]
    lines.append("  ".join("-" * w for w in widths))
    section = None
    for f, row in zip(figures, rows):
        if f.section != section:
            section = f.section
            lines.append(f"[{section}]")
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)))
    return "\n".join(lines)


def markdown(figures: list[Figure], *, command: str, notes: list[str], seconds: float) -> str:
    m = machine()
    out = [
        "# Benchmarks",
        "",
        f"Measured with `{command}` on {_dt.date.today().isoformat()} in {seconds:.0f} s. Every figure is a "
        "ratio of two medians taken in the same run, with trials interleaved, so it travels between "
        "machines better than the absolute times shown next to it.",
        "",
        "Machine: " + "; ".join(f"{k} {v}" for k, v in m.items()) + ".",
        "",
    ]
    section = None
    for f in figures:
        if f.section != section:
            section = f.section
            out += [
                "",
                f"## {section}",
                "",
                "| Figure | Measured | Target | Result | Detail |",
                "|---|---|---|---|---|",
            ]
        out.append(f"| {f.name} | {f.value} | {f.target} | {f.verdict} | {f.detail} |")
    if notes:
        out += ["", "## Notes", ""]
        out += [f"- {n}" for n in notes]
    return "\n".join(out) + "\n"


def write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
