"""The docs: the reference is the registry's, every link resolves, every Python example runs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from otel_ctx import names, reference

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").glob("*.md")])
REFERENCE = (ROOT / reference.PAGE).read_text()


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_reference_matches_the_registry() -> None:
    assert reference.render_page(REFERENCE, ROOT) == REFERENCE, (
        f"run: python -m otel_ctx.reference {reference.PAGE}"
    )


def test_sre_guide_lists_every_panel_and_alert_of_the_committed_dashboards() -> None:
    guide = (ROOT / reference.SRE_PAGE).read_text()
    assert reference.render_page(guide, ROOT) == guide, "run: python -m otel_ctx.reference"
    for board in (ROOT / "dashboards").glob("*.json"):
        for panel in json.loads(board.read_text())["panels"]:
            assert " ".join(panel["title"].split()) in guide, f"{board.name}: {panel['title']}"
    for group in yaml.safe_load((ROOT / "dashboards" / "alerts.yml").read_text())["groups"]:
        for rule in group["rules"]:
            if "alert" in rule:
                assert f"### `{rule['alert']}`" in guide


def test_every_name_is_in_the_reference() -> None:
    for metric in names.METRICS:
        assert f"`{metric.name}`" in REFERENCE
        assert metric.prometheus in REFERENCE
    for attr in names.FIT_SPAN_ATTRIBUTES:
        assert f"`{attr}`" in REFERENCE
    for span in (names.SPAN_RUN, names.SPAN_FIT, names.SPAN_OBSERVE):
        assert f"`{span}`" in REFERENCE


def test_every_event_is_explained() -> None:
    rows = dict(re.findall(r"^\| `([^`]+)` \| (.*) \|$", REFERENCE, re.M))
    events = [v for k, v in vars(names).items() if k.startswith("EVENT_")]
    assert events
    for event in events:
        assert rows.get(event, "").strip(), f"{event}: add what it means to otel_ctx/reference.py"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: broken link {target}"
        if anchor and linked.suffix == ".md":
            headings = re.findall(r"^#+ (.*)$", linked.read_text(), re.M)
            assert anchor in {slug(h) for h in headings}, f"{page.name}: no heading for {target}"


EXAMPLES = [(page, i, code) for page in PAGES for i, code in enumerate(python_blocks(page.read_text()))]


@pytest.mark.parametrize(("page", "index", "code"), EXAMPLES, ids=[f"{p.name}-{i}" for p, i, _ in EXAMPLES])
def test_every_python_example_runs(page: Path, index: int, code: str, tmp_path: Path) -> None:
    """Each block runs on its own, as a reader who pastes it would run it."""
    script = tmp_path / f"{page.stem}_{index}.py"
    script.write_text(code)
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, f"{page.name} block {index} failed:\n{proc.stderr[-2000:]}"


def test_readme_first_screen_has_the_pitch_the_install_and_zero_code() -> None:
    readme = (ROOT / "README.md").read_text()
    first_screen = readme.split("\n## A fit and its breakdown", 1)[0]
    assert "Make an LLM agent's context budget observable" in first_screen
    assert "pip install otel-ctx" in first_screen
    assert "opentelemetry-instrument python" in first_screen
    assert "otel_ctx.instrument()" in first_screen
    pyproject = (ROOT / "pyproject.toml").read_text()
    for extra in re.findall(r"otel-ctx\[(\w+)\]", first_screen):
        assert re.search(rf"^{extra} = \[", pyproject, re.M), (
            f"README names an extra pyproject lacks: {extra}"
        )


SHOWN = [
    (page, match)
    for page in PAGES
    for match in re.finditer(
        r"```python\n(?P<code>.*?)```\n\n"
        r"prints \(`python examples/(?P<file>[\w.]+)`[^\n]*(?:\n[^\n`]+)*:\n\n```text\n(?P<out>.*?)```",
        page.read_text(),
        re.S,
    )
]


@pytest.mark.parametrize(("page", "match"), SHOWN, ids=[f"{p.name}-{m['file']}" for p, m in SHOWN])
def test_a_shown_example_is_its_file_and_prints_what_is_shown(page: Path, match: re.Match[str]) -> None:
    example = ROOT / "examples" / match["file"]
    assert match["code"] == example.read_text().split('"""', 2)[2].lstrip("\n"), (
        f"{page.name}: {example.name}"
    )
    out = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout == match["out"]


def test_the_shown_examples_are_found() -> None:
    shown = {m["file"] for _, m in SHOWN}
    assert {"fit_a_ticket.py", "openai_chat_request.py", "ticket_ceiling.py"} <= shown
