"""OpenAI Responses API requests (filled in below)."""
