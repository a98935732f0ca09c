"""The Gemini ``generate_content`` dialect: what it counts, where, and what it refuses.

Bodies are the keyword arguments of ``client.models.generate_content`` (dicts, and the
SDK's own pydantic objects as an agent loop appends them) and the REST JSON shape.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from cli_support import cli
from google.genai import types

from otel_ctx import BudgetPolicy, ContextFitter
from otel_ctx._dialects import adapter_for, detect
from otel_ctx.adapters import _gemini_media as gemini_media
from otel_ctx.adapters import _gemini_rules as gemini_rules
from otel_ctx.engine._errors import InvalidMessageError, InvalidToolSchemaError, TranscriptRuleError

ORDER = json.dumps({"items": [{"sku": f"SKU-{i}", "title": "oak shelf, natural"} for i in range(300)]})
DECLARATION = {
    "name": "get_order",
    "description": "Look up an order by its id.",
    "parameters": {"type": "OBJECT", "properties": {"id": {"type": "STRING"}}, "required": ["id"]},
}


def _body(**config: Any) -> dict[str, Any]:
    return {
        "model": "gemini-2.5-flash",
        "contents": [
            {"role": "user", "parts": [{"text": "Where is order 88-1042?"}]},
            {"role": "model", "parts": [{"function_call": {"name": "get_order", "args": {"id": "88-1042"}}}]},
            {
                "role": "user",
                "parts": [{"function_response": {"name": "get_order", "response": {"output": ORDER}}}],
            },
            {"role": "model", "parts": [{"text": "It ships tomorrow."}]},
            {"role": "user", "parts": [{"text": "Thanks, and the invoice?"}]},
        ],
        "config": {
            "system_instruction": "You are a support agent.",
            "tools": [{"function_declarations": [DECLARATION]}],
            **config,
        },
    }


def _fitter(**policy: Any) -> ContextFitter:
    return ContextFitter(
        BudgetPolicy(**{"context_length": 100_000, "reserved_output": 0, **policy}), model="gemini-2.5-flash"
    )


def test_a_generate_content_body_is_detected_and_counted_line_by_line() -> None:
    body = _body()
    assert detect(body).provider == "google"
    # Text is counted by the provider's rule with Gemini's tokenizer; tools and calls are estimates.
    assert adapter_for("google").exact is True
    result = _fitter().measure_request(body)
    assert not result.exact and "tool_schema" in result.estimated_lines
    b = result.breakdown
    fitter = _fitter()
    # The system instruction is one more content: one token of framing on Gemini 2.5.
    framing = gemini_rules.TOKENS_PER_CONTENT
    assert b.system_prompt == fitter.counter.text("You are a support agent.") + framing
    assert b.tool_schema > fitter.counter.text(str(DECLARATION["name"])) + fitter.counter.text(
        str(DECLARATION["description"])
    )
    assert b.transcript_by_role["tool"] > fitter.counter.text(ORDER) - 10
    assert b.transcript_by_role["user"] > 0 and b.transcript_by_role["assistant"] > 0
    b.check()


def test_sdk_objects_count_the_same_as_dicts() -> None:
    body = _body()
    typed = {
        "model": body["model"],
        "contents": [types.Content.model_validate(c) for c in body["contents"]],
        "config": types.GenerateContentConfig(
            system_instruction="You are a support agent.",
            tools=[types.Tool(function_declarations=[types.FunctionDeclaration.model_validate(DECLARATION)])],
        ),
    }
    assert _fitter().count_request(typed) == _fitter().count_request(body)


def test_the_rest_shape_counts_the_same_as_the_sdk_call() -> None:
    body = _body()
    rest = {
        "contents": [
            {
                "role": c["role"],
                "parts": [
                    {
                        "functionCall"
                        if "function_call" in p
                        else "functionResponse"
                        if "function_response" in p
                        else "text": next(iter(p.values()))
                    }
                    for p in c["parts"]
                ],
            }
            for c in body["contents"]
        ],
        "systemInstruction": {"parts": [{"text": "You are a support agent."}]},
        "tools": [{"functionDeclarations": [DECLARATION]}],
    }
    assert _fitter().count_request(rest, provider="google") == _fitter().count_request(body)


def _png(width: int, height: int) -> bytes:
    header = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
    return header + width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes(5)


def test_media_is_charged_at_the_documented_figures() -> None:
    pdf = b"%PDF-1.4\n1 0 obj << /Type /Pages >>\n2 0 obj << /Type /Page >>\n3 0 obj << /Type /Page >>\n"
    plain = {"contents": [{"role": "user", "parts": [{"text": "Look"}]}]}
    media = {
        "contents": [
            types.Content(
                role="user",
                parts=[
                    types.Part(text="Look"),
                    types.Part(inline_data=types.Blob(data=_png(300, 200), mime_type="image/png")),
                    types.Part(inline_data=types.Blob(data=pdf, mime_type="application/pdf")),
                ],
            )
        ]
    }
    # A small image (both sides within 384 pixels) is one tile; a PDF page is billed as one.
    expected = gemini_media.IMAGE_TILE + 2 * gemini_media.PDF_PAGE
    assert _fitter().count_request(media) - _fitter().count_request(plain) == expected


def test_the_fit_caps_a_function_response_and_drops_whole_exchanges_without_mutating() -> None:
    body = _body()
    for _ in range(6):  # older exchanges to drop
        body["contents"][3:3] = [
            {"role": "model", "parts": [{"text": "Anything else? " * 40}]},
            {"role": "user", "parts": [{"text": "Yes, one more thing. " * 40}]},
        ]
    snapshot = copy.deepcopy(body)
    result = _fitter(context_length=1_200, tool_result_cap=100).fit_request(body)
    assert body == snapshot
    assert result.outcome == "compacted"
    assert result.capped_tool_results == 1
    assert result.dropped_turns > 0
    sent = result.request["contents"]
    assert sent[0] is body["contents"][0]  # the ticket, the caller's own object
    capped = sent[2]["parts"][0]["function_response"]["response"]["output"]
    assert len(capped) < len(ORDER)
    assert sent[-1] is body["contents"][-1]


def test_added_instructions_go_after_the_callers_own_in_the_sdk_config() -> None:
    from otel_ctx import Source

    body = _body()
    body["config"] = types.GenerateContentConfig(system_instruction="You are a support agent.")
    result = _fitter().fit_request(body, skills=[Source("tone", "Be brief.")])
    instruction = result.request["config"].system_instruction
    assert [p["text"] for p in instruction["parts"]] == ["You are a support agent.", "Be brief."]
    assert body["config"].system_instruction == "You are a support agent."


@pytest.mark.parametrize(
    ("contents", "where", "error"),
    [
        ([{"role": "system", "parts": [{"text": "x"}]}], "contents[0].role", InvalidMessageError),
        ([{"role": "user", "parts": "x"}], "contents[0].parts", InvalidMessageError),
        (
            [{"role": "user", "parts": [{"function_call": {"args": {}}}]}],
            "contents[0].parts[0].function_call",
            InvalidMessageError,
        ),
        (
            [{"role": "user", "parts": [{"inline_data": {"data": "AA=="}}]}],
            "contents[0].parts[0].inline_data.mime_type",
            InvalidMessageError,
        ),
        ([42], "contents[0]", InvalidMessageError),
    ],
)
def test_a_malformed_content_is_a_typed_error_naming_where(
    contents: list[Any], where: str, error: type[Exception]
) -> None:
    with pytest.raises(error) as info:
        _fitter().count_request({"contents": contents})
    assert where in str(info.value)


def test_a_bad_tool_declaration_is_a_typed_error() -> None:
    body = {"contents": "hi", "config": {"tools": [{"function_declarations": [{"description": "no name"}]}]}}
    with pytest.raises(InvalidToolSchemaError, match=r"config\.tools\[0\]\.function_declarations\[0\]"):
        _fitter().count_request(body)


def test_a_response_answering_no_call_is_refused_by_fit_and_recorded_by_measure() -> None:
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {"role": "model", "parts": [{"text": "hello"}]},
            {"role": "user", "parts": [{"function_response": {"name": "ghost", "response": {}}}]},
        ]
    }
    with pytest.raises(TranscriptRuleError, match=r"contents\[2\]"):
        _fitter().fit_request(body)
    assert any("ghost" in p for p in _fitter().measure_request(body).problems)


def test_a_bare_string_body_comes_back_as_it_came() -> None:
    body = {"model": "gemini-2.5-flash", "contents": "Where is my parcel?"}
    result = _fitter().fit_request(body)
    assert result.request == body


def test_calibration_learns_from_the_reported_prompt_tokens() -> None:
    fitter = _fitter()
    first = fitter.measure_request(_body())
    fitter.observe_usage(first, first.breakdown.estimated * 2)
    assert fitter.measure_request(_body()).breakdown.estimated > first.breakdown.estimated


def test_the_cli_measures_a_gemini_body_with_provider_google(tmp_path: Path) -> None:
    path = tmp_path / "gemini.json"
    rest = _body()
    rest["systemInstruction"] = {"parts": [{"text": rest.pop("config")["system_instruction"]}]}
    rest["generationConfig"] = {"maxOutputTokens": 321}
    path.write_text(json.dumps(rest))
    proc = cli("fit", str(path), "--provider", "google", "--measure", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["provider"] == "google"
    assert data["breakdown"]["system_prompt"] > 0
    assert data["policy"]["reserved_output"] == 321  # the body's generationConfig.maxOutputTokens


def test_exchanges_calling_the_same_function_are_dropped_one_by_one() -> None:
    contents: list[Any] = [{"role": "user", "parts": [{"text": "Where is my parcel?"}]}]
    for day in range(8):  # Gemini calls carry no id: the same name in every exchange
        contents += [
            {"role": "model", "parts": [{"function_call": {"name": "get_scans", "args": {"day": day}}}]},
            {
                "role": "user",
                "parts": [
                    {"function_response": {"name": "get_scans", "response": {"output": "scan " * 300}}}
                ],
            },
        ]
    result = _fitter(context_length=2_000).fit_request({"contents": contents})
    assert result.outcome == "compacted"
    assert 0 < result.dropped_turns < 8
    sent = result.request["contents"]
    assert sent[0] is contents[0] and sent[-1] is contents[-1] and sent[-2] is contents[-2]
