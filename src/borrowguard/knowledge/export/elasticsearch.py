"""Elasticsearch / OpenSearch: the line signatures as `regexp` queries on a keyword field.

Why a keyword field and `regexp`: scan's signatures are case-sensitive substrings and regexes of the whole
line. A `match_phrase` on an analysed `message` text field is neither (the standard analyser lowercases
and drops punctuation: "already borrowed" would match), so it would be a weaker rule. A `regexp` query on
a keyword field sees the line as one term, case kept; Lucene matches the whole term, so each rule is
`.*(A|B).*`. The field must hold the whole line: a dynamic mapping's `message.keyword` skips values longer
than its `ignore_above` (256 by default), so long lines need a keyword (or wildcard) field of their own.

The output is one JSON document: `search` is a ready `_search` body (POST it to INDEX/_search) whose
clauses are named queries: each hit's `matched_queries` are its finding ids. `rules` has one query per id
for an alert rule (Kibana's Elasticsearch query rule, an OpenSearch per-query monitor).
"""

from __future__ import annotations

import re
from typing import Any

from borrowguard.errors import ConfigError
from borrowguard.knowledge.export.dialects import to_lucene
from borrowguard.knowledge.export.lines import ExportPlan, LineRule, header, plan
from borrowguard.knowledge.export.safety import json_text
from borrowguard.knowledge.loader import KnowledgeBase

DEFAULT_FIELD = "message.keyword"
TIME_FIELD = "@timestamp"
_FIELD = re.compile(r"[A-Za-z_@][\w@-]{0,127}(?:\.[A-Za-z_@][\w@-]{0,127}){0,7}")


def check_field(field: str) -> str:
    if not _FIELD.fullmatch(field):
        raise ConfigError("field", "{} ", detail=f"{field!r} is not a field name such as message.keyword or log.original")
    return field


def lucene_plan(kb: KnowledgeBase) -> ExportPlan:
    return plan(kb, to_lucene)


def anywhere(alternatives: tuple[str, ...]) -> str:
    """Lucene matches the whole term; scan searches: `.*(A|B).*`."""
    return ".*(" + "|".join(alternatives) + ").*"


def query(rule: LineRule, field: str) -> dict[str, Any]:
    """A named bool query: any line signature's message matches and none of its exclusions does."""
    clauses = []
    for sig in rule.signatures:
        clause: dict[str, Any] = {"filter": [{"regexp": {field: {"value": anywhere(sig.message)}}}]}
        if sig.exclude:
            # one regexp per exclusion: joined, the attribution's exclusions pass Lucene's 10,000-state limit
            clause["must_not"] = [{"regexp": {field: {"value": anywhere((x,))}}} for x in sig.exclude]
        clauses.append(clause)
    body = clauses[0] if len(clauses) == 1 else {"should": [{"bool": c} for c in clauses], "minimum_should_match": 1}
    return {"bool": {**body, "_name": rule.problem.id}}


def export(kb: KnowledgeBase, engine: str, field: str, window: str, command: str) -> str:
    """`--format elasticsearch|opensearch`: the JSON document described in the module doc."""
    p = lucene_plan(kb)
    rules = [
        {
            "id": rule.problem.id,
            "title": rule.problem.title,
            "severity": str(rule.problem.severity),
            "runbook": f"borrowguard explain {rule.problem.id}",
            "query": query(rule, field),
            **({"attribution": " ".join(notes)} if (notes := [s.attribution for s in rule.signatures if s.attribution]) else {}),
        }
        for rule in p.rules
    ]
    usage = (
        f"POST the `search` object to INDEX/_search: hits of the last {window} whose `{field}` matches a "
        "signature; each hit's matched_queries are its finding ids. `rules[].query` is one id's query, for "
        + ("a Kibana 'Elasticsearch query' rule." if engine == "elasticsearch" else "an OpenSearch per query monitor.")
    )
    doc = {
        "about": [*header(p, command, f"{engine} regexp"), usage,
                  f"`{field}` must be a keyword (or wildcard) field holding the whole line, unanalysed: "
                  "a dynamic mapping's message.keyword skips lines over 256 characters (ignore_above).",
                  "Lucene turns each regexp into an automaton of at most max_determinized_states (10000 by "
                  "default); the bundled rules are tested with Lucene, a rule of your own with broad bounded "
                  "repeats may need a larger max_determinized_states."],
        "engine": engine,
        "field": field,
        "rules": rules,
        "needs_borrowguard_scan": [
            {"id": s.problem_id, "signature": s.index + 1, "why": s.why} for s in p.scan_only
        ],
        "search": {
            "size": 100,
            "sort": [{TIME_FIELD: "desc"}],
            "query": {
                "bool": {
                    "filter": [{"range": {TIME_FIELD: {"gte": f"now-{window}"}}}],
                    "should": [r["query"] for r in rules],
                    "minimum_should_match": 1,
                }
            },
        },
    }
    return json_text(doc)
