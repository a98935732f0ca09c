"""Chat templates of the open-weight model families, as their hosts render a request.

An OpenAI-compatible host (Groq, Together, OpenRouter, Cerebras, Hugging Face, vLLM, Ollama)
does not bill the Chat Completions framing OpenAI documents: it renders the messages and tools
through the model's own chat template (Llama's headers and date block, ChatML, DeepSeek's
markers, Mistral's instruction tokens, gpt-oss's harmony header) and bills the tokens of that
text. Each family group's template is one small rules module here; :mod:`._chat` is the one
entry the Chat Completions adapter calls.
"""

from otel_ctx.families._chat import apply, note_untemplated

__all__ = ["apply", "note_untemplated"]
