"""The knowledge base for other tools: log-engine rules and the troubleshooting page.

    from borrowguard.knowledge import load
    from borrowguard.knowledge.export import Options, export
    text = export(load(), "loki", Options(selector='{app="vllm"}'))

One module per target: `loki` (LogQL queries and the Loki ruler rule group), `elasticsearch`
(Elasticsearch/OpenSearch), `vector` (a VRL remap transform), `markdown` (docs/troubleshooting.md);
`lines` decides which signatures a line regex can carry, `dialects` rewrites the regexes per engine.

An option that does not fit raises ConfigError naming the Options field (`selector`, `window`, `field`,
`source`) or `format`, never a CLI flag: `borrowguard rules export` says its own flags.
"""

from __future__ import annotations

from dataclasses import dataclass

from borrowguard.errors import ConfigError, UserInputError
from borrowguard.knowledge.export import elasticsearch, loki, markdown, vector
from borrowguard.knowledge.export.safety import check_knowledge, check_line, check_output
from borrowguard.knowledge.loader import KnowledgeBase

FORMATS = ("loki", "prometheus", "elasticsearch", "opensearch", "vector", "markdown")


@dataclass(frozen=True)
class Options:
    selector: str | None = None
    """The LogQL stream selector (loki, prometheus), e.g. {app="vllm"}."""
    window: str = "5m"
    field: str | None = None
    """The field holding the line: elasticsearch/opensearch (keyword field), vector (event field)."""
    source: str | None = None
    """The Vector component the transform reads from."""
    command: str = "borrowguard rules export"
    """How the export was made, written into its header."""


def export(kb: KnowledgeBase, fmt: str, options: Options = Options()) -> str:
    """The export of `kb` in `fmt`; UserInputError for an option that does not fit the format, or for
    any text (an option, a rule's id or title...) with a character that would end a line of it."""
    if fmt not in FORMATS:
        raise UserInputError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    for setting, value in (("selector", options.selector), ("window", options.window),
                           ("field", options.field), ("source", options.source)):
        if value is not None:
            check_line(value, setting, setting=setting)
    check_line(options.command, "the command in the header")
    check_knowledge(kb)
    return check_output(_export(kb, fmt, options), fmt)


def _export(kb: KnowledgeBase, fmt: str, options: Options) -> str:
    _only(options.selector is not None, fmt, ("loki", "prometheus"), "selector")
    _only(options.field is not None, fmt, ("elasticsearch", "opensearch", "vector"), "field")
    _only(options.source is not None, fmt, ("vector",), "source")
    window = loki.check_window(options.window)
    if fmt in ("loki", "prometheus"):
        if options.selector is None:
            raise ConfigError(
                "selector", f"the {fmt} format needs {{}}, the LogQL stream selector of the server's logs, ",
                detail="e.g. '{app=\"vllm\"}'",
            )
        selector = loki.check_selector(options.selector)
        if fmt == "loki":
            return loki.export_queries(kb, selector, window, options.command)
        return loki.rule_group(kb, selector, window, options.command)
    if fmt in ("elasticsearch", "opensearch"):
        field = elasticsearch.check_field(options.field or elasticsearch.DEFAULT_FIELD)
        return elasticsearch.export(kb, fmt, field, window, options.command)
    if fmt == "vector":
        field = vector.check_field(options.field or vector.DEFAULT_FIELD)
        source = vector.check_input(options.source or vector.DEFAULT_INPUT)
        return vector.export(kb, field, source, options.command)
    return markdown.export(kb)


def _only(given: bool, fmt: str, formats: tuple[str, ...], setting: str) -> None:
    if given and fmt not in formats:
        raise ConfigError(setting, f"{{}} applies to the {' or '.join(formats)} format, not {fmt}")


__all__ = ["FORMATS", "Options", "export"]
