"""Loki: LogQL queries (`--format loki`) and a Loki ruler rule group in Prometheus rule format
(`--format prometheus`), one alert per finding id.

    count_over_time({app="vllm"} |~ `Already borrowed|...` !~ `Received request ...` [5m]) > 0

`|~` / `!~` are Go RE2 regexes (see `dialects`), in backtick strings, which LogQL takes as they are.
A problem with several line signatures gets one `count_over_time(...) > 0` per signature, joined by `or`.
"""

from __future__ import annotations

import re

from borrowguard.errors import ConfigError
from borrowguard.knowledge.export import _yaml
from borrowguard.knowledge.export.dialects import to_re2
from borrowguard.knowledge.export.lines import ExportPlan, LineRule, header, plan
from borrowguard.knowledge.export.safety import shown
from borrowguard.knowledge.loader import KnowledgeBase

_VALUE = r'(?:"(?:[^"\\\n]|\\.)*"|`[^`]*`)'
_MATCHER = rf"\s*[A-Za-z_][A-Za-z0-9_]*\s*(?:=~|!~|!=|=)\s*{_VALUE}\s*"
_SELECTOR = re.compile(rf"\{{{_MATCHER}(?:,{_MATCHER})*\}}")
WINDOW = re.compile(r"[1-9][0-9]{0,5}[smhd]")

SEVERITY_LABEL = {"error": "critical", "warning": "warning", "info": "info"}
"""Alertmanager's usual severity names (routes commonly match critical|warning)."""


def check_selector(selector: str) -> str:
    selector = selector.strip()
    if not _SELECTOR.fullmatch(selector):
        raise ConfigError(
            "selector", "{} ", detail=f"{shown(selector)} is not a LogQL stream selector; write it as Loki does, "
            "with the braces, e.g. '{app=\"vllm\"}' or '{namespace=\"llm\", container=~\"vllm.*\"}'"
        )
    return selector


def check_window(window: str) -> str:
    if not WINDOW.fullmatch(window):
        raise ConfigError("window", "{} ", detail=f"{window!r}: give a whole number and a unit s, m, h or d, e.g. 5m")
    return window


def loki_plan(kb: KnowledgeBase) -> ExportPlan:
    return plan(kb, to_re2)


def _raw(regex: str) -> str:
    if "`" in regex:  # to_re2 writes a backtick as \x{60}; a literal one would end the string
        raise ValueError(f"backtick in {regex!r}")
    return f"`{regex}`"


def query(rule: LineRule, selector: str, window: str) -> str:
    """One LogQL expression for the problem: > 0 when any of its line signatures matched in `window`."""
    parts = []
    for sig in rule.signatures:
        pipeline = f"{selector} |~ {_raw('|'.join(sig.message))}"
        if sig.exclude:
            pipeline += f" !~ {_raw('|'.join(sig.exclude))}"
        parts.append(f"count_over_time({pipeline} [{window}]) > 0")
    return " or ".join(parts)


def alert_name(problem_id: str) -> str:
    # Prometheus requires a metric-name-like alert name: BorrowguardTokenizerAlreadyBorrowed
    words = re.split(r"[^A-Za-z0-9]+", problem_id)
    return "Borrowguard" + "".join(w[:1].upper() + w[1:] for w in words if w)


def _template_safe(text: str) -> str:
    # annotations are Go templates: text of ours must never open an action
    return text.replace("{{", '{{ "{{" }}')


def export_queries(kb: KnowledgeBase, selector: str, window: str, command: str) -> str:
    """`--format loki`: one commented LogQL query per finding id, for Grafana Explore or an alert rule."""
    p = loki_plan(kb)
    out = [f"# {line}".rstrip() for line in header(p, command, "LogQL (Loki)")]
    for rule in p.rules:
        problem = rule.problem
        out += [
            "",
            f"# {problem.id} ({problem.severity}): {problem.title}",
            query(rule, selector, window),
        ]
    return "\n".join(out) + "\n"


def rule_group(kb: KnowledgeBase, selector: str, window: str, command: str) -> str:
    """`--format prometheus`: a Loki ruler rule file (Prometheus rule format, LogQL expressions)."""
    p = loki_plan(kb)
    rules = []
    for rule in p.rules:
        problem = rule.problem
        first = problem.explanation.replace("\n", " ").split(". ")[0].rstrip(".") + "."
        rules.append({
            "alert": alert_name(problem.id),
            "expr": query(rule, selector, window),
            "labels": {"severity": SEVERITY_LABEL[problem.severity], "finding_id": problem.id},
            "annotations": {
                "summary": _template_safe(problem.title),
                "description": _template_safe(first) + f" Matching log lines in the last {window}: {{{{ $value }}}}.",
                "runbook": f"borrowguard explain {problem.id}",
                **({"attribution": _template_safe(note)} if (note := _attribution(rule)) else {}),
            },
        })
    comments = [
        *header(p, command, "Loki ruler"),
        "Load it into Loki's ruler (its rule storage or /loki/api/v1/rules); the expressions are LogQL, not PromQL.",
    ]
    return _yaml.dump({"groups": [{"name": "borrowguard", "rules": rules}]}, comments)


def _attribution(rule: LineRule) -> str | None:
    """What of scan's attribution by context the rule carries (see lines.attribution_note)."""
    notes = [sig.attribution for sig in rule.signatures if sig.attribution]
    return " ".join(notes) or None
