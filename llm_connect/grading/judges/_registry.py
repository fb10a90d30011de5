"""Judge registry: build judges by name, from the CLI or from a stored spec.

A judge spec is ``{"name": NAME, "args": {...}}``; every built-in judge puts
its own spec in ``GradingResult.details["judge_spec"]`` so a stored grade
names exactly the judge (and options) that produced it, and
:func:`build_judge` rebuilds that judge from it.

On the command line a spec is written ``NAME[:ARG][,KEY=VALUE...]``:
``exact``, ``exact:normalize=true``, ``tools:argument_credit=0.25``, ``format:json``,
``llm:openai:gpt-4o-mini,seed=7``, ``length:min_words=5,max_words=200``.
``ARG`` fills the judge's primary option; values are parsed as JSON when they
parse (numbers, booleans, lists) and kept as strings otherwise.

Built-in judges are listed in a table of import paths, imported only when
used, so ``llm-connect --help`` stays fast. Third parties add judges through
the entry-point group ``llm_connect.judges``; an entry point names a factory
``factory(context: JudgeContext, **args) -> Judge``.

Every judge declares whether it asks an LLM for its grade (a boolean
``asks_llm`` attribute; routing trusts such grades only after a passing
calibration). A plugin judge that does not declare it is treated as asking
one — :func:`build_judge` warns, naming the plugin, and sets the attribute to
``True`` where it can — and :func:`judge_asks_llm` reads the flag of any judge.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_connect.errors import ConfigurationError

if TYPE_CHECKING:
    from llm_connect.adapters import (
        CachedEmbedder,
        EmbeddingAdapter,
        EmbeddingCounts,
        EmbeddingStore,
        LLMAdapter,
    )
    from llm_connect.grading._protocols import Judge

__all__ = [
    "BUILTIN_JUDGES",
    "ENTRY_POINT_GROUP",
    "JudgeContext",
    "JudgeFactory",
    "build_judge",
    "format_judge_spec",
    "is_llm_grader_id",
    "judge_asks_llm",
    "judge_names",
    "parse_judge_spec",
    "register_judge",
]

ENTRY_POINT_GROUP = "llm_connect.judges"


@dataclass
class JudgeContext:
    """What a judge factory may need beyond its own options.

    Everything is built lazily: a run that uses only the exact judge never
    loads an embedding model or creates an API client.
    """

    make_llm_adapter: Callable[[str], LLMAdapter] | None = None
    """Builds an LLM adapter from a ``provider:model`` spec (for LLM judges)."""
    default_judge_model: str | None = None
    """The ``--judge-model`` spec used when an LLM judge names no model."""
    make_embedding_adapter: Callable[[], EmbeddingAdapter] | None = None
    """Returns the embedding adapter shared by embedding-based judges."""
    base_dir: Path = field(default_factory=Path.cwd)
    """Where relative file options (schemas, persona files) are resolved."""
    embedding_store: EmbeddingStore | None = None
    """The ledger whose embedding cache the context's embedders read and fill (``None``: no
    cache). May be given after the judges are built: :meth:`use_embedding_store`."""
    embedding_device: str = "auto"
    """Where the shared local embedding model runs: ``auto`` (a GPU PyTorch sees, else the CPU),
    ``cpu``, ``cuda``, ``cuda:N`` or ``mps`` (a run setting, never part of a judge's spec)."""
    embedders: list[CachedEmbedder] = field(default_factory=list, repr=False)
    """Every embedder this context handed out, each wrapped in a
    :class:`~llm_connect.adapters.CachedEmbedder` (counts, cache)."""
    _shared_embedder: CachedEmbedder | None = field(default=None, init=False, repr=False)

    def llm_adapter(self, spec: str | None) -> LLMAdapter:
        """The adapter for ``spec`` (or the default judge model)."""
        spec = spec or self.default_judge_model
        if not spec:
            raise ConfigurationError(
                "this judge needs a judge model: give one as NAME:provider:model or --judge-model"
            )
        if self.make_llm_adapter is None:
            from llm_connect.adapters import adapter_from_spec

            return adapter_from_spec(spec)
        return self.make_llm_adapter(spec)

    def embedding_adapter(self) -> EmbeddingAdapter:
        """The shared embedding adapter, wrapped with the embedding cache; every call returns
        the same one. By default the packaged all-MiniLM-L6-v2 on :attr:`embedding_device`: on a
        GPU PyTorch there, on the CPU the faster backend (ONNX Runtime or PyTorch;
        :func:`~llm_connect.adapters.default_embedding_adapter`)."""
        if self._shared_embedder is not None:
            return self._shared_embedder
        if self.make_embedding_adapter is None:
            from llm_connect.adapters import default_embedding_adapter

            made: EmbeddingAdapter = default_embedding_adapter(device=self.embedding_device)
        else:
            made = self.make_embedding_adapter()
        self._shared_embedder = self.cached_embedder(made)
        return self._shared_embedder

    def cached_embedder(self, embedder: EmbeddingAdapter) -> CachedEmbedder:
        """``embedder`` wrapped with this context's embedding cache (and counted)."""
        from llm_connect.adapters import CachedEmbedder

        wrapped = CachedEmbedder(embedder, self.embedding_store)
        self.embedders.append(wrapped)
        return wrapped

    def use_embedding_store(self, store: EmbeddingStore | None) -> None:
        """Cache every embedder's vectors in ``store`` from now on (``None``: stop caching)."""
        self.embedding_store = store
        for embedder in self.embedders:
            embedder.store = store

    def embedding_counts(self) -> EmbeddingCounts | None:
        """Distinct texts embedded and read from the cache by this context's embedders
        (``None`` when none was used)."""
        from llm_connect.adapters import EmbeddingCounts

        if not self.embedders:
            return None
        total = EmbeddingCounts()
        for embedder in self.embedders:
            total.embedded += embedder.counts.embedded
            total.cached += embedder.counts.cached
        return total

    def resolve_path(self, value: str | Path) -> Path:
        """``value`` as a path, relative to :attr:`base_dir` when not absolute."""
        path = Path(value)
        return path if path.is_absolute() else self.base_dir / path


JudgeFactory = Callable[..., "Judge"]


def is_llm_grader_id(grader_id: str) -> bool:
    """Whether a grader id *looks like* a judge that asks an LLM (a guess from its name).

    Built-in LLM-based judges put ``llm:`` or ``pairwise:`` at the start of their
    grader id, or ``llm:`` after a ``+`` (``llm:openai:gpt-4o-mini:rubric-v1``,
    ``pairwise:openai:gpt-4o-mini:pairwise-v1``, ``safety:default+llm:...``).
    This is only a fallback for grades stored before judges declared
    ``asks_llm`` (the flag in ``GradingResult.asks_llm`` and in the stored
    ``judge_spec``): a plugin judge may ask an LLM under any name. Prefer
    :func:`judge_asks_llm` for a judge object and the stored flag for a grade.
    """
    return grader_id.startswith(("llm:", "pairwise:")) or "+llm:" in grader_id


def judge_asks_llm(judge: object) -> bool:
    """Whether ``judge`` asks an LLM for its grades: its ``asks_llm`` attribute.

    A judge without a boolean ``asks_llm`` is treated as asking an LLM (so
    routing gates its grades until it is calibrated).
    """
    value = getattr(judge, "asks_llm", None)
    return value if isinstance(value, bool) else True


@dataclass(frozen=True)
class _Entry:
    target: str | JudgeFactory
    primary: str | None
    summary: str


# name -> ("module:factory", primary option, one-line summary). Later modules
# append their judges here; nothing is imported until a judge is built.
_BUILTINS: dict[str, _Entry] = {
    "exact": _Entry(
        "llm_connect.grading.judges._exact:make_exact_judge",
        "normalize",
        "1.0 when the candidate text (and tool calls, if any) equals the baseline's",
    ),
    "tools": _Entry(
        "llm_connect.grading.judges._tools:make_tools_judge",
        None,
        "the candidate's tool calls against the baseline's: names, arguments as parsed JSON",
    ),
    "embedding": _Entry(
        "llm_connect.grading.judges._embedding:make_embedding_judge",
        None,
        "cosine similarity of sentence embeddings (all-MiniLM-L6-v2)",
    ),
    "llm": _Entry(
        "llm_connect.grading.judges._llm:make_llm_judge",
        "model",
        "a temperature-0 LLM grades the candidate against the baseline",
    ),
    "pairwise": _Entry(
        "llm_connect.grading.judges._pairwise:make_pairwise_judge",
        "model",
        "a temperature-0 LLM picks the better of the two answers, shown blind in both orders",
    ),
    "vrty": _Entry(
        "llm_connect.grading.judges._vrty:make_vrty_judge",
        None,
        "deterministic VRTY 1.0.1 composite, candidate relative to baseline",
    ),
    "format": _Entry(
        "llm_connect.grading.judges._rules:make_format_judge",
        "fmt",
        "response parses as json, xml, yaml, markdown or csv",
    ),
    "schema": _Entry(
        "llm_connect.grading.judges._rules:make_schema_judge",
        "schema",
        "response is JSON valid against a JSON Schema (draft 2020-12)",
    ),
    "correctness": _Entry(
        "llm_connect.grading.judges._rules:make_correctness_judge",
        "answer",
        "matches the expected answer, or the fraction of expected keywords found",
    ),
    "length": _Entry(
        "llm_connect.grading.judges._rules:make_length_judge",
        None,
        "response length (characters, words) within min/max",
    ),
    "relevance": _Entry(
        "llm_connect.grading.judges._rules:make_relevance_judge",
        None,
        "fraction of prompt words present in the response",
    ),
    "completeness": _Entry(
        "llm_connect.grading.judges._rules:make_completeness_judge",
        None,
        "fraction of required sections present in the response",
    ),
    "persona": _Entry(
        "llm_connect.grading.judges._persona:make_persona_judge",
        "persona",
        "brand-voice authenticity against a persona file",
    ),
    "safety": _Entry(
        "llm_connect.grading.judges._safety:make_safety_judge",
        "patterns",
        "pattern-based safety with severities, optionally with an LLM safety judge",
    ),
}

BUILTIN_JUDGES: tuple[str, ...] = tuple(_BUILTINS)
"""The built-in judges' names, in the registry's order (no judge is imported, no installed plugin
looked for): what ``grade --judge`` lists in its help."""

_registered: dict[str, _Entry] = {}


def register_judge(
    name: str, *, primary: str | None = None, summary: str = ""
) -> Callable[[JudgeFactory], JudgeFactory]:
    """Register ``factory(context, **args) -> Judge`` under ``name`` (decorator)."""
    if not name or ":" in name or "," in name:
        raise ConfigurationError(f"invalid judge name {name!r}")

    def decorate(factory: JudgeFactory) -> JudgeFactory:
        _registered[name] = _Entry(factory, primary, summary)
        return factory

    return decorate


def _plugin_entries() -> dict[str, _Entry]:
    from importlib.metadata import entry_points  # costly import, only when judges are listed/built

    found: dict[str, _Entry] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found[ep.name] = _Entry(ep.value, None, f"plugin from {ep.value}")
    return found


def _all_entries() -> dict[str, _Entry]:
    return {**_plugin_entries(), **_BUILTINS, **_registered}


def _entry(name: str) -> _Entry:
    """The entry for ``name``; installed plugins are scanned only when no built-in matches."""
    entry = _registered.get(name) or _BUILTINS.get(name)
    if entry is not None:
        return entry
    entries = _all_entries()
    if name not in entries:
        raise ConfigurationError(f"unknown judge {name!r} (known: {', '.join(sorted(entries))})")
    return entries[name]


def judge_names() -> dict[str, str]:
    """Every judge name that can be built, with its one-line summary."""
    return {name: entry.summary for name, entry in sorted(_all_entries().items())}


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _split_args(rest: str) -> list[str]:
    """Split on commas outside JSON brackets and strings (``keywords=["a","b"],x=1``)."""
    pieces: list[str] = []
    depth, quoted, escaped, start = 0, False, False, 0
    for index, char in enumerate(rest):
        if quoted:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            pieces.append(rest[start:index])
            start = index + 1
    pieces.append(rest[start:])
    return pieces


def parse_judge_spec(text: str) -> dict[str, Any]:
    """Parse ``NAME[:ARG][,KEY=VALUE...]`` into ``{"name": ..., "args": {...}}``."""
    text = text.strip()
    if not text:
        raise ConfigurationError("empty judge spec")
    name, sep, rest = text.partition(":")
    name = name.strip()
    args: dict[str, Any] = {}
    positional: list[str] = []
    if sep:
        for piece in _split_args(rest):
            piece = piece.strip()
            if not piece:
                continue
            key, eq, value = piece.partition("=")
            if eq and key.strip().isidentifier():
                args[key.strip()] = _parse_value(value.strip())
            else:
                positional.append(piece)
    if len(positional) > 1:
        raise ConfigurationError(f"judge spec {text!r}: more than one positional argument")
    entry = _entry(name)
    if positional:
        primary = entry.primary
        if primary is None:
            raise ConfigurationError(f"judge {name!r} takes no positional argument ({text!r})")
        if primary in args:
            raise ConfigurationError(f"judge spec {text!r} gives {primary!r} twice")
        args[primary] = positional[0] if primary != "normalize" else _parse_value(positional[0])
    return {"name": name, "args": args}


def _format_value(value: Any) -> str:
    # Strings stay bare unless they would parse back as something else.
    if isinstance(value, str) and "," not in value and _parse_value(value) == value:
        return value
    return json.dumps(value, separators=(",", ":"))


def format_judge_spec(spec: Mapping[str, Any]) -> str:
    """The command-line form of a stored spec (inverse of :func:`parse_judge_spec`)."""
    args = spec.get("args") or {}
    if not args:
        return str(spec["name"])
    parts = [f"{k}={_format_value(v)}" for k, v in sorted(args.items())]
    return f"{spec['name']}:{','.join(parts)}"


def _load(target: str | JudgeFactory) -> JudgeFactory:
    if not isinstance(target, str):
        return target
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    factory: JudgeFactory = getattr(module, attr)
    return factory


def build_judge(spec: str | Mapping[str, Any], context: JudgeContext | None = None) -> Judge:
    """Build a judge from a command-line spec string or a stored spec mapping.

    A stored spec's extra keys (``asks_llm``) are ignored: the judge declares
    that itself. A built judge without a boolean ``asks_llm`` (a plugin written
    before the flag existed) gets a ``UserWarning`` naming the plugin and is
    marked as asking an LLM.

    Raises :class:`~llm_connect.errors.ConfigurationError` (a ``ValueError``)
    for an unknown name or invalid options, before any case is judged: an option
    the factory's signature does not name gets the closest valid one suggested
    and the judge's options listed; a value its annotation rules out (``bool``,
    ``int``, ``float``, ``str``, lists, mappings) names the type expected.
    """
    from llm_connect.grading.judges._options import check_judge_options, wrong_type

    parsed = parse_judge_spec(spec) if isinstance(spec, str) else dict(spec)
    name = str(parsed.get("name"))
    entry = _entry(name)
    factory = _load(entry.target)
    args = dict(parsed.get("args") or {})
    # a built-in's **unknown only collects names to refuse; a plugin's **kwargs may take anything
    check_judge_options(name, factory, args, strict=_BUILTINS.get(name) is entry)
    wrong = wrong_type(name, factory, args)
    try:
        judge = factory(context or JudgeContext(), **args)
    except Exception as exc:
        if wrong is not None and not (isinstance(exc, ConfigurationError) and wrong.option in str(exc)):
            raise ConfigurationError(wrong.message) from None
        if isinstance(exc, TypeError):
            raise ConfigurationError(f"judge {name!r}: {exc}") from None
        raise  # the factory's own check on the option says more ("an integer >= 0")
    if wrong is not None and not wrong.number_for_string:  # taken, yet ruled out: normalize="yes"
        raise ConfigurationError(wrong.message)
    if not isinstance(getattr(judge, "asks_llm", None), bool):
        _undeclared(name, entry, judge)
    return judge


def _undeclared(name: str, entry: _Entry, judge: Judge) -> None:
    """Warn about a (plugin) judge without ``asks_llm`` and mark it as asking an LLM."""
    target = entry.target
    where = (
        target
        if isinstance(target, str)
        else f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', '?')}"
    )
    warnings.warn(
        f"judge plugin {name!r} ({where}) does not declare whether it asks an LLM; "
        "it is treated as asking one, so routing ignores its grades until it is calibrated. "
        "Its author should set a boolean attribute asks_llm (True or False) on the judge.",
        UserWarning,
        stacklevel=3,
    )
    with contextlib.suppress(AttributeError, TypeError):  # slots, frozen: judge_asks_llm still says True
        judge.asks_llm = True
