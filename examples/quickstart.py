"""Grade one prompt live: a candidate model against a baseline, on any OpenAI-compatible server.

    export OPENAI_API_KEY=sk-...                        # not needed for a loopback server
    export OPENAI_BASE_URL=http://127.0.0.1:11434/v1    # optional: Ollama, vLLM, a LiteLLM proxy...
    BASELINE_MODEL=gpt-4o CANDIDATE_MODEL=gpt-4o-mini python examples/quickstart.py

Without OPENAI_BASE_URL the SDK's default (api.openai.com) is used. The judge is
the deterministic VRTY delta: 1.0 when the candidate scores at least as well as
the baseline on this prompt, candidate/baseline otherwise.
"""

import os

from llm_connect import PairedGrader, RunConfig
from llm_connect.adapters import OpenAIAdapter
from llm_connect.grading import build_judge

endpoint = {"base_url": os.environ.get("OPENAI_BASE_URL"), "api_key": os.environ.get("OPENAI_API_KEY")}
baseline = OpenAIAdapter(os.environ.get("BASELINE_MODEL", "gpt-4o"), **endpoint)
candidate = OpenAIAdapter(os.environ.get("CANDIDATE_MODEL", "gpt-4o-mini"), **endpoint)
grader = PairedGrader(build_judge("vrty"))
result = grader.grade(
    baseline,
    candidate,
    "A customer's script gets HTTP 429 from our API. Explain what it means and how to handle it.",
    RunConfig(temperature=0.0, max_tokens=300),
)
print(f"{result.grader_id}: quality {result.quality_score:.3f} - {result.notes}")
print(f"baseline  {baseline.adapter_id}: {result.baseline_response.text[:120]!r}")
print(f"candidate {candidate.adapter_id}: {result.candidate_response.text[:120]!r}")
