"""The integration guide's dialect examples are the example files, and print what it shows."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_readme import ROOT, run_example

GUIDE = (ROOT / "docs" / "integrations.md").read_text()

EXAMPLES = [
    ("### OpenAI Chat Completions", "openai_chat_request.py"),
    ("### OpenAI Responses", "openai_responses_request.py"),
    ("### Which task a call belongs to", "task_context.py"),
    ("### Open-weight models, Ollama and Cohere", "open_weight_request.py"),
]


@pytest.mark.parametrize(("heading", "example"), EXAMPLES)
def test_the_dialect_example_is_the_file_and_prints_what_is_shown(heading: str, example: str) -> None:
    section = GUIDE.split(f"\n{heading}\n", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
    code = (Path(ROOT) / "examples" / example).read_text().split('"""', 2)[2].lstrip("\n")
    shown_code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert shown_code == code
    marker = f"prints (`python examples/{example}`):\n\n```text\n"
    shown_output = section.split(marker, 1)[1].split("```", 1)[0]
    assert run_example(example) == shown_output
