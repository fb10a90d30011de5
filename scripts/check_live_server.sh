#!/usr/bin/env bash
# Grade a few cases of examples/suite.jsonl with the `llm` judge against a real local
# OpenAI-compatible server (made for llama-cpp-python's) and fail on any failed case.
#
#   python -m llama_cpp.server --model gemma-3-270m-it-Q8_0.gguf --port 8080    # in another terminal
#   scripts/check_live_server.sh
#
# The baseline is the suite's recorded gpt-4o answers; the candidate and the judge are the
# server's model, so both the plain chat path and the judge's structured output (the
# response_format ladder: json_schema, json_object + schema, json_object, text) are exercised.
#
# Environment (all optional):
#   LLM_CONNECT_LIVE_BASE_URL         the server (default http://127.0.0.1:8080/v1)
#   LLM_CONNECT_LIVE_MODEL            the model name to ask for (default: the first of GET /models)
#   LLM_CONNECT_LIVE_API_KEY          its API key, if it wants one (default: none)
#   LLM_CONNECT_LIVE_CASES            how many cases (default 5)
#   LLM_CONNECT_LIVE_RESPONSE_FORMAT  pin the judge's format: json_schema, json_object_schema,
#                                     json_object or text (default auto: the ladder)
#   LLM_CONNECT_LIVE_MAX_TOKENS       the candidate's token cap (default 256)
#   LLM_CONNECT_LIVE_JUDGE            llm (the default) or pairwise: which model-asking judge grades
#   PYTHON                            the interpreter with llm-connect installed (default python3)
#
# Exit status: 0 every case graded; 1 a case failed (each is printed, whole) or the output is not
# what a grade run prints; 2 the server cannot be reached or the setup is wrong.
set -euo pipefail
cd "$(dirname "$0")/.."

base_url="${LLM_CONNECT_LIVE_BASE_URL:-http://127.0.0.1:8080/v1}"
api_key="${LLM_CONNECT_LIVE_API_KEY:-none}"
cases="${LLM_CONNECT_LIVE_CASES:-5}"
pinned="${LLM_CONNECT_LIVE_RESPONSE_FORMAT:-auto}"
max_tokens="${LLM_CONNECT_LIVE_MAX_TOKENS:-256}"
python="${PYTHON:-python3}"
kind="${LLM_CONNECT_LIVE_JUDGE:-llm}"

say() { echo "check_live_server: $*" >&2; }

case "$kind" in
    llm | pairwise) ;;
    *) say "LLM_CONNECT_LIVE_JUDGE must be llm or pairwise, not '$kind'"; exit 2 ;;
esac
case "$cases" in
    '' | *[!0-9]* | 0) say "LLM_CONNECT_LIVE_CASES must be a positive integer, not '$cases'"; exit 2 ;;
esac

# The server must answer GET /models; its first model is the default.
if ! models="$("$python" - "$base_url" "$api_key" <<'EOF'
import json, sys, urllib.request
url, key = sys.argv[1].rstrip("/") + "/models", sys.argv[2]
request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
try:
    with urllib.request.urlopen(request, timeout=10) as answer:
        data = json.load(answer)
except Exception as exc:
    sys.exit(f"GET {url} failed: {exc}")
print(" ".join(str(m.get("id")) for m in data.get("data") or [] if isinstance(m, dict)))
EOF
)"; then
    say "no OpenAI-compatible server at $base_url (start one, or set LLM_CONNECT_LIVE_BASE_URL)"
    exit 2
fi
model="${LLM_CONNECT_LIVE_MODEL:-${models%% *}}"
if [ -z "$model" ]; then
    say "the server at $base_url lists no model; set LLM_CONNECT_LIVE_MODEL"
    exit 2
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
head -n "$cases" examples/suite.jsonl >"$work/suite.jsonl"

judge="$kind:openai:$model"
if [ "$pinned" != auto ]; then
    judge="$judge,response_format=$pinned"
fi
say "grading $cases case(s): candidate openai:$model, judge $judge, server $base_url"

set +e
"$python" -m llm_connect grade "$work/suite.jsonl" \
    --baseline recorded:gpt-4o \
    --candidate "openai:$model" \
    --judge "$judge" \
    --base-url "$base_url" \
    --api-key "$api_key" \
    --temperature 0 \
    --max-tokens "$max_tokens" \
    --concurrency 2 \
    --db "sqlite:///$work/ledger.db" \
    --json >"$work/out.json" 2>"$work/err.txt"
status=$?
set -e

"$python" - "$work/out.json" "$work/err.txt" "$status" "$cases" "$kind" <<'EOF'
import json, sys
out_path, err_path, status, cases, kind = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
try:
    with open(out_path, encoding="utf-8") as f:
        data = json.load(f)
except ValueError:
    with open(err_path, encoding="utf-8") as f:
        sys.stderr.write(f.read())
    sys.exit(f"check_live_server: llm-connect grade printed no JSON (exit {status})")
failures = data.get("failures")
if not isinstance(failures, list):
    sys.exit("check_live_server: the JSON has no 'failures' list")
for f in failures:
    print(f"FAILED {f.get('case_id')} [{f.get('stage')} {f.get('adapter_id')}] "
          f"{f.get('error_type')}: {f.get('message')}", file=sys.stderr)
formats = data.get("response_formats")
if formats:
    print(f"check_live_server: response formats used: {json.dumps(formats)}", file=sys.stderr)
done = data.get("cases_done")
if failures:
    sys.exit(f"check_live_server: {len(failures)} failed case(s) of {cases} (grade exit {status})")
if done != cases or status != 0:
    sys.exit(f"check_live_server: {done} of {cases} case(s) done, grade exit {status}")
print(f"check_live_server: ok, {done} case(s) graded with the {kind} judge "
      f"({data.get('judge_calls')} judge calls), none failed")
EOF
