"""``llm-connect stability``: send one request N times and get the Ruvrics verdict.

Exit codes are the CLI's one table (``_exit.ExitCode``, printed by ``--help``): 0 SAFE,
1 DO_NOT_SHIP (the verdict against, as ``grade``'s FAILED gate), 6 RISKY, 2 a usage or input
error (a bad option, model spec, config, input or tools file, an unusable ledger), 3 too few
successful runs or a failed embedding (no verdict), 4 an unexpected error, 130 interrupted,
141 standard output closed. Ruvrics' own 0/1/2 are not kept: 2 is a usage error for every
command, and a crash or a usage error never shares a code with a verdict.

Module level imports only typer: everything heavy loads inside the command.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from llm_connect.cli._common import (
    ApiKeyOption,
    BaseUrlOption,
    DbOption,
    FastHelpCommand,
    MaxTokensOption,
    SeedOption,
    TemperatureOption,
    TimeoutOption,
    echo_err,
    handle_errors,
    report_exception,
)
from llm_connect.cli._exit import STABILITY_VERDICT_CODES, ExitCode

__all__ = ["app", "stability"]


app = typer.Typer(
    name="stability",
    rich_markup_mode=None,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def once_each(errors: list[tuple[str, str]], limit: int = 5) -> list[str]:
    """Each distinct error of ``(run, error)`` pairs once, after the runs that got it, at most
    ``limit`` distinct errors: a server refusing every run the same way is one message, not one
    per run."""
    seen: dict[str, list[str]] = {}
    for run, text in errors:
        seen.setdefault(text, []).append(run)
    lines = []
    for text, runs in list(seen.items())[:limit]:
        if len(runs) == 1:
            lines.append(f"run {runs[0]}: {text}")
        else:
            shown = ", ".join(runs) if len(runs) <= 3 else ", ".join(runs[:3]) + ", ..."
            lines.append(f"{len(runs)} runs ({shown}): {text}")
    if len(seen) > limit:
        lines.append(f"... and {len(seen) - limit} more different errors")
    return lines


def _run_errors(lines: tuple[str, ...]) -> list[tuple[str, str]]:
    """``InsufficientRunsError.errors`` (``run N: error`` lines) as ``(run, error)`` pairs."""
    pairs = []
    for line in lines:
        run, sep, text = line.partition(": ")
        pairs.append((run.removeprefix("run "), text) if sep and run.startswith("run ") else ("?", line))
    return pairs


def _stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _pct(x: float) -> str:
    return f"{100 * x:5.1f}%"


def _print_human(report: Any) -> None:
    """The verdict, score, metrics, agreement, claims, fingerprints and recommendations."""
    out = typer.echo
    out(
        f"Stability of {report.adapter_id}: {report.runs_requested} runs, "
        f"{report.runs_succeeded} succeeded, {report.runs_failed} failed"
    )
    out(f"Verdict: {report.verdict}  (score {report.score:.3f} = {100 * report.score:.1f}%)")
    out("")
    labels = {"semantic": "semantic consistency", "tool": "tool consistency"}
    labels |= {"structural": "structural consistency", "length": "length consistency"}
    for m in report.metrics:
        extra = ""
        if m.name == "length":
            d = m.details
            extra = f"  CV {d.get('cv', 0.0):.2f}, {d.get('min_words')}-{d.get('max_words')} words"
        elif m.name == "tool":
            extra = f"  tools called in {100 * m.details.get('tool_usage_rate', 0.0):.0f}% of runs"
        elif m.name == "structural":
            counts = ", ".join(f"{k} {v}" for k, v in m.details.get("counts", {}).items())
            extra = f"  {counts}"
        out(f"  {labels[m.name]:<24} {_pct(m.score)}  {m.variance:<6}  weight {100 * m.weight:.0f}%{extra}")
    a = report.agreement
    out(
        f"  exact agreement: raw text {100 * a.raw_text:.0f}% ({a.distinct_texts} distinct), "
        f"parsed answer {100 * a.parsed_answer:.0f}% ({a.distinct_answers} distinct)"
    )
    c = report.claims
    totals = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in c.totals.items())
    out(
        f"  claims: {totals}; in {c.runs_with_claims} of {report.runs_succeeded} runs (variance {c.variance})"
    )
    out("")
    if not report.fingerprints:
        out("Fingerprints: none")
    else:
        out("Fingerprints:")
        for fp in report.fingerprints:
            out(f"  {fp.name} ({fp.severity}): {fp.description}")
            out(f"    evidence: {fp.evidence}")
        out("")
        out("Recommendations:")
        for fp in report.fingerprints:
            for rec in fp.recommendations:
                out(f"  [{fp.name} / {rec.category}] {rec.title}: {rec.action}")
                if rec.example:
                    for line in rec.example.splitlines():
                        out(f"      {line}")
    failed = [r for r in report.runs if not r.ok]
    if failed:
        out("")
        out(f"Failed runs ({len(failed)}):")
        for line in once_each([(str(r.index), str(r.error)) for r in failed]):
            out(f"  {line}")


def _build_adapter(spec: str, base_url: str | None, api_key: str | None, max_retries: int) -> Any:
    from llm_connect.adapters import adapter_from_spec
    from llm_connect.errors import ConfigurationError
    from llm_connect.grading import ResilientAdapter, RetryPolicy

    if spec.strip().startswith("recorded:"):
        raise ConfigurationError(
            f"--model {spec}: stability needs a live model (provider:model, e.g. openai:gpt-4o)"
        )
    adapter = adapter_from_spec(spec, base_url=base_url, api_key=api_key)
    return ResilientAdapter(adapter, policy=RetryPolicy(max_retries=max_retries))


def _load_config(path: Path | None) -> Any:
    from llm_connect.errors import ConfigurationError
    from llm_connect.stability import StabilityConfig

    if path is None:
        return StabilityConfig()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigurationError(f"--config {path}: cannot read a JSON object: {exc}") from exc
    return StabilityConfig.from_dict(data)


def _run(
    *,
    input_path: Path,
    prompt_path: Path | None,
    tools_path: Path | None,
    model: str,
    runs: int,
    output: Path | None,
    json_out: bool,
    concurrency: int,
    config_path: Path | None,
    embedding_model: str,
    run_config_args: dict[str, Any],
    embedding_backend: str | None = None,
    embedding_device: str = "auto",
    base_url: str | None,
    api_key: str | None,
    max_retries: int,
    store: tuple[str, str | None] | None = None,
) -> ExitCode:
    from llm_connect.adapters import local_embedding_adapter
    from llm_connect.errors import ConfigurationError
    from llm_connect.stability import analyze, load_query
    from llm_connect.types import RunConfig

    query = load_query(input_path, prompt_path=prompt_path, tools_path=tools_path)
    config = _load_config(config_path)
    if output is not None and not output.parent.exists():
        raise ConfigurationError(f"--output {output}: the directory {str(output.parent)!r} does not exist")
    seed = run_config_args.pop("seed")
    run_config = RunConfig(**run_config_args, model_params={} if seed is None else {"seed": seed})
    adapter = _build_adapter(model, base_url, api_key, max_retries)
    ledger = None
    task = ""
    if store is not None:  # opened (and migrated) before any call: a bad --db costs nothing
        from llm_connect.cli._common import open_ledger

        task, db = store
        if not task.strip():
            raise ConfigurationError("--task must not be empty")
        ledger = open_ledger(db)

    try:  # checked before any call: an unknown backend or an unavailable GPU costs nothing
        embedder: Any = local_embedding_adapter(embedding_model, embedding_backend, device=embedding_device)
    except ConfigurationError as exc:
        option = "--embedding-device" if "device" in str(exc) else "--embedding-backend"
        raise ConfigurationError(f"{option}: {exc}") from None
    if ledger is not None:  # vectors already in the ledger are not computed again
        from llm_connect.adapters import CachedEmbedder

        embedder = CachedEmbedder(embedder, ledger)
    kwargs: dict[str, Any] = {
        "runs": runs,
        "run_config": run_config,
        "concurrency": concurrency,
        "embedder": embedder,
    }
    if _stderr_is_tty() and not json_out:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(
            TextColumn("runs"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        task_id = bar.add_task("runs", total=runs)
        with bar:
            report = analyze(
                adapter,
                query,
                config=config,
                progress=lambda done, total: bar.update(task_id, completed=done, total=total),
                **kwargs,
            )
    else:
        report = analyze(adapter, query, config=config, **kwargs)

    stored: int | None = None
    where = ""
    if ledger is not None:
        where = ledger.url
        from llm_connect.stability import record_report

        inner = getattr(adapter, "adapter", adapter)
        stored = record_report(
            ledger,
            report,
            task=task,
            model=getattr(inner, "model", None),
            endpoint=getattr(inner, "endpoint", None),
        )
    data = report.to_dict()
    if stored is not None:
        data["stored"] = {"id": stored, "task": task, "ledger": where}
    if output is not None:
        try:
            output.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        except OSError as exc:
            raise ConfigurationError(f"--output {output}: cannot write the report: {exc}") from exc
    if json_out:
        typer.echo(json.dumps(data, ensure_ascii=False))
    else:
        _print_human(report)
        if output is not None:
            typer.echo(f"\nReport written to {output}")
        if stored is not None:
            typer.echo(f"Stored as stability analysis {stored} for task {task!r}")
    return STABILITY_VERDICT_CODES[report.verdict]


@app.command("stability", cls=FastHelpCommand)
@handle_errors
def stability(
    input_path: Annotated[
        Path,
        typer.Option(
            "--input",
            help="The request: {system_prompt, user_input} or {messages: [...]} (optionally with tools).",
            metavar="FILE.json",
            show_default=False,
        ),
    ],
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="The model: provider:model (openai:gpt-4o-mini).",
            metavar="SPEC",
            show_default=False,
        ),
    ],
    prompt_path: Annotated[
        Path | None,
        typer.Option("--prompt", help="A system prompt file.", metavar="FILE.txt", show_default=False),
    ] = None,
    tools_path: Annotated[
        Path | None,
        typer.Option(
            "--tools", help="A JSON list of OpenAI function tools.", metavar="FILE.json", show_default=False
        ),
    ] = None,
    runs: Annotated[
        int, typer.Option("--runs", min=2, max=200, help="Identical calls to make (2..200).", metavar="N")
    ] = 20,
    output: Annotated[
        Path | None,
        typer.Option("--output", help="Write the JSON report here.", metavar="FILE.json", show_default=False),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the JSON report on stdout.")] = False,
    task: Annotated[
        str,
        typer.Option(
            "--task",
            help="The task the analysis is stored under (routing's --min-stability reads it).",
            metavar="T",
        ),
    ] = "default",
    db: str | None = DbOption,
    no_store: Annotated[
        bool, typer.Option("--no-store", help="Do not store the analysis in the ledger.")
    ] = False,
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, max=200, help="Runs in flight at once.", metavar="N")
    ] = 20,
    config_path: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="A JSON object overriding StabilityConfig weights and thresholds.",
            metavar="FILE.json",
            show_default=False,
        ),
    ] = None,
    embedding_model: Annotated[
        str,
        typer.Option(
            "--embedding-model",
            help="The sentence-transformers model of the semantic metric (a name or a local path); "
            "run by ONNX Runtime where it can, else PyTorch.",
            metavar="NAME",
            rich_help_panel="Embeddings",
        ),
    ] = "all-MiniLM-L6-v2",
    embedding_backend: Annotated[
        str | None,
        typer.Option(
            "--embedding-backend",
            help="Run the embedding model on 'onnx' (ONNX Runtime, the CPU, no fallback) or "
            "'torch' (PyTorch); default: PyTorch on a GPU, on the CPU the faster of the two "
            "(measured once per machine), ONNX Runtime where it cannot tell.",
            metavar="onnx|torch",
            rich_help_panel="Embeddings",
            show_default=False,
        ),
    ] = None,
    embedding_device: Annotated[
        str,
        typer.Option(
            "--embedding-device",
            help="Where the embedding model runs: auto (a CUDA or MPS GPU PyTorch sees, else the "
            "CPU), cpu, cuda, cuda:N or mps. On a GPU it runs on PyTorch; a GPU PyTorch does not "
            "see is a configuration error before any call.",
            metavar="auto|cpu|cuda[:N]|mps",
            rich_help_panel="Embeddings",
        ),
    ] = "auto",
    temperature: float | None = TemperatureOption,
    max_tokens: int | None = MaxTokensOption,
    seed: int | None = SeedOption,
    timeout: float | None = TimeoutOption,
    max_retries: Annotated[
        int,
        typer.Option(
            "--max-retries",
            min=0,
            help="Retries of a failed call (429, timeouts, connection errors, 5xx) "
            "before the run counts as failed.",
            metavar="N",
        ),
    ] = 2,
    base_url: str | None = BaseUrlOption,
    api_key: str | None = ApiKeyOption,
) -> None:
    """Send one request N times and measure how consistently the model answers.

    Scores semantic (40%), tool (25%), structural (20%) and length (15%) consistency;
    prints the verdict, fingerprints and recommendations.
    """
    from llm_connect.errors import InsufficientRunsError

    try:
        code = _run(
            input_path=input_path,
            prompt_path=prompt_path,
            tools_path=tools_path,
            model=model,
            runs=runs,
            output=output,
            json_out=json_out,
            concurrency=concurrency,
            config_path=config_path,
            embedding_model=embedding_model,
            embedding_backend=embedding_backend,
            embedding_device=embedding_device,
            run_config_args={
                "temperature": temperature,
                "max_tokens": max_tokens,
                "timeout_s": timeout,
                "seed": seed,
            },
            base_url=base_url,
            api_key=api_key,
            max_retries=max_retries,
            store=None if no_store else (task, db),
        )
    except InsufficientRunsError as exc:  # the error, then each distinct error of the failed runs once
        code = report_exception(exc)
        for line in once_each(_run_errors(exc.errors)):
            echo_err(f"  {line}")
        raise typer.Exit(code) from None
    raise typer.Exit(code)
