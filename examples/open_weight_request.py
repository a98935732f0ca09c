"""An open-weight model on an OpenAI-compatible host, Ollama's own API and Cohere's chat, counted."""

from otel_ctx import BudgetPolicy, ContextFitter

policy = BudgetPolicy(context_length=131_072, reserved_output=1_024)
hello = [{"role": "user", "content": "Hello!"}]

# A Llama model on Groq, Together or vLLM: the Chat Completions body, the host's template counted.
llama = "meta-llama/Llama-3.3-70B-Instruct"
fitter = ContextFitter(policy, model=llama)
result = fitter.measure_request({"model": llama, "messages": hello}, provider="openai")
print("llama on a host:", result.breakdown.estimated, "| exact:", result.exact)

# Ollama's own API, and Cohere's chat (v1 here; v2 takes `messages`).
ollama = ContextFitter(policy, model="llama3.1")
print("ollama:", ollama.count_request({"model": "llama3.1", "messages": hello}, provider="ollama"))
cohere = ContextFitter(policy, model="command-r")
v1 = {"model": "command-r", "message": "Hello!", "preamble": "Be brief."}
print("cohere:", cohere.count_request(v1, provider="cohere"))
