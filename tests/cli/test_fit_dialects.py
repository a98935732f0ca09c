"""``otel-ctx fit`` reads whole request bodies of every dialect; ``--provider`` forces one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_support import assert_one_line_error, cli

ORDER = json.dumps({"items": [{"sku": f"SKU-{i}", "title": "oak shelf, natural"} for i in range(300)]})


def _responses_body() -> dict[str, Any]:
    return {
        "model": "gpt-4o",
        "instructions": "You are a support agent.",
        "max_output_tokens": 500,
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Where is order 88-1042?"}]},
            {"type": "function_call", "call_id": "c1", "name": "get_order", "arguments": '{"id": "88-1042"}'},
            {"type": "function_call_output", "call_id": "c1", "output": ORDER},
        ],
        "tools": [{"type": "function", "name": "get_order", "description": "Look up an order."}],
    }


def test_a_responses_body_is_fitted_and_written_back_in_its_dialect(tmp_path: Path) -> None:
    path = tmp_path / "responses.json"
    path.write_text(json.dumps(_responses_body()))
    out = tmp_path / "fitted.json"
    proc = cli("fit", str(path), "--tool-result-cap", "200", "--json", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["provider"] == "openai-responses"
    assert data["policy"]["reserved_output"] == 500  # the body's max_output_tokens
    assert data["capped_tool_results"] == 1
    assert data["breakdown"]["system_prompt"] > 0
    assert data["breakdown"]["transcript_by_role"]["tool"] > 0
    fitted = json.loads(out.read_text())
    assert fitted["instructions"] == "You are a support agent."
    assert fitted["input"][2]["output"].endswith("]") and len(fitted["input"][2]["output"]) < len(ORDER)
    table = cli("fit", str(path))
    assert table.returncode == 0 and "OpenAI Responses" in table.stdout


def test_provider_forces_the_dialect_and_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}))
    data = json.loads(cli("fit", str(path), "--provider", "openai", "--json").stdout)
    assert data["provider"] == "openai"
    assert_one_line_error(cli("fit", str(path), "--provider", "acme"), "--provider", "acme")
    assert_one_line_error(cli("fit", str(path), "--provider", "openai-responses"), "Responses")


def test_measure_reports_what_the_provider_would_reject(tmp_path: Path) -> None:
    path = tmp_path / "open-call.json"
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
        ],
    }
    path.write_text(json.dumps(body))
    data = json.loads(cli("fit", str(path), "--measure", "--json").stdout)
    assert data["problems"] and "never answered" in data["problems"][0]
    assert_one_line_error(cli("fit", str(path)), "messages[1]", "never answered")


def test_absurdly_nested_json_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "nested.json"
    path.write_text('{"messages":' + "[" * 100_000 + "]" * 100_000 + "}")
    assert_one_line_error(cli("fit", str(path)), str(path), "nested too deeply")


def test_a_bedrock_converse_body_is_fitted_with_its_model_and_written_back(tmp_path: Path) -> None:
    path = tmp_path / "converse.json"
    body = {
        "system": [{"text": "You are a support agent."}],
        "messages": [
            {"role": "user", "content": [{"text": "Where is order 88-1042?"}]},
            {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": "t1", "name": "get_order", "input": {}}}],
            },
            {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": ORDER}]}}]},
        ],
        "inferenceConfig": {"maxTokens": 400},
    }
    path.write_text(json.dumps(body))
    out = tmp_path / "fitted.json"
    model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    proc = cli(
        "fit",
        str(path),
        "--provider",
        "bedrock",
        "--model",
        model,
        "--tool-result-cap",
        "200",
        "--json",
        "-o",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["provider"] == "bedrock"
    assert data["policy"]["reserved_output"] == 400  # Converse's inferenceConfig.maxTokens
    assert data["capped_tool_results"] == 1
    fitted = json.loads(out.read_text())
    assert fitted["system"] == body["system"]
    assert len(fitted["messages"][2]["content"][0]["toolResult"]["content"][0]["text"]) < len(ORDER)
