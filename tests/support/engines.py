"""The engines `borrowguard rules export` writes for, run here on the exported text itself.

Each evaluator takes an export (as a user would get it) and raw log lines, and says which finding ids each
line fires, in that engine's own regex dialect:

* Loki: the `|~` / `!~` regexes of each LogQL expression, compiled by RE2 (google-re2; Go's regexp is RE2
  syntax and semantics);
* Vector: the VRL program, compiled and run by VRL itself (pyvrl: Vector's VRL crate; its `match` is Rust's
  regex);
* Elasticsearch/OpenSearch: the bool/regexp query, its regexps compiled and run by Lucene's RegExp
  (Debian's liblucene8-java, through tests/support/LuceneRegexp.java), the bool logic evaluated here.

Plus the validators of the file formats: promtool (Prometheus rule format), Grafana's LogQL grammar
(@grafana/lezer-logql, run by node). Each `missing_*` function returns why a tool cannot run here, or None.
"""

from __future__ import annotations

import base64
import glob
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
LUCENE_JARS = "/usr/share/java/lucene-core*.jar"
# which lines each id fires on: {id: set of line indexes}
Fired = dict[str, set[int]]

# ---- Loki: LogQL expressions -> RE2 -----------------------------------------------------------------

_PART = re.compile(r"count_over_time\((\{.*?\}) \|~ `([^`]*)`(?: !~ `([^`]*)`)? \[(\w+)\]\) > 0")


def logql_parts(expr: str) -> list[tuple[str, str, str | None, str]]:
    """(selector, match regex, exclude regex or None, window) of each `count_over_time(...) > 0` joined by `or`."""
    matches = list(_PART.finditer(expr))
    assert " or ".join(m[0] for m in matches) == expr, f"not an expression this export writes: {expr!r}"
    return [(m[1], m[2], m[3], m[4]) for m in matches]


def loki_fired(exprs: dict[str, str], lines: Sequence[str]) -> Fired:
    import re2

    fired: Fired = {}
    for problem_id, expr in exprs.items():
        compiled = [(re2.compile(m), re2.compile(x) if x else None) for _, m, x, _ in logql_parts(expr)]
        fired[problem_id] = {
            i for i, line in enumerate(lines)
            if any(m.search(line) and not (x and x.search(line)) for m, x in compiled)
        }
    return fired


# ---- Vector: the VRL program -------------------------------------------------------------------------


def vector_fired(config: dict[str, Any], lines: Sequence[str], field: str = "message") -> Fired:
    import pyvrl

    (transform,) = config["transforms"].values()
    program = pyvrl.Transform(transform["source"] + "\n.")  # a remap's output is the event
    fired: Fired = {}
    for i, line in enumerate(lines):
        event: dict[str, Any] = {}
        cursor = event
        *parents, leaf = field.split(".")
        for name in parents:
            cursor = cursor.setdefault(name, {})
        cursor[leaf] = line
        for problem_id in program.remap(event).get("borrowguard_ids", []):
            fired.setdefault(problem_id, set()).add(i)
    return fired


# ---- Elasticsearch / OpenSearch: bool + regexp, regexps by Lucene -------------------------------------


def missing_lucene() -> str | None:
    if shutil.which("java") is None:
        return "no Lucene check of the Elasticsearch/OpenSearch regexps: java is not installed (apt-get install openjdk-17-jdk-headless liblucene8-java)"
    if not glob.glob(LUCENE_JARS):
        return "no Lucene check of the Elasticsearch/OpenSearch regexps: Lucene is not installed (apt-get install liblucene8-java)"
    return None


def lucene(patterns: Sequence[str], strings: Sequence[str]) -> dict[str, list[bool] | str]:
    """Each pattern's whole-string match on each string, or the error Lucene raised for the pattern."""
    jar = sorted(glob.glob(LUCENE_JARS))[-1]
    encoded = [base64.b64encode(s.encode("utf-8")).decode() for s in (*patterns, *strings)]
    proc = subprocess.run(
        ["java", "-cp", jar, str(HERE / "LuceneRegexp.java")],
        input=f"{len(patterns)}\n" + "".join(e + "\n" for e in encoded),
        capture_output=True, text=True, timeout=300, check=True,
    )
    rows = proc.stdout.splitlines()
    assert len(rows) == len(patterns), proc.stderr
    return {p: (row if row.startswith("ERR ") else [c == "1" for c in row]) for p, row in zip(patterns, rows)}


def regexps(query: Any, field: str) -> Iterable[str]:
    if isinstance(query, dict):
        for key, value in query.items():
            if key == "regexp":
                yield value[field]["value"]
            else:
                yield from regexps(value, field)
    elif isinstance(query, list):
        for value in query:
            yield from regexps(value, field)


def es_matches(query: dict[str, Any], field: str, i: int, results: dict[str, list[bool] | str]) -> bool:
    """The subset of the query DSL the export writes: bool (filter, must, should, must_not,
    minimum_should_match, _name) and regexp."""
    ((kind, body),) = query.items()
    if kind == "regexp":
        result = results[body[field]["value"]]
        assert not isinstance(result, str), result
        return result[i]
    assert kind == "bool", kind
    assert set(body) <= {"filter", "must", "should", "must_not", "minimum_should_match", "_name"}, body
    if not all(es_matches(q, field, i, results) for q in (*body.get("filter", ()), *body.get("must", ()))):
        return False
    if any(es_matches(q, field, i, results) for q in body.get("must_not", ())):
        return False
    should = body.get("should", ())
    need = body.get("minimum_should_match", 0 if body.get("filter") or body.get("must") else 1)
    return sum(es_matches(q, field, i, results) for q in should) >= (need if should else 0)


def es_fired(doc: dict[str, Any], lines: Sequence[str]) -> Fired:
    field = doc["field"]
    queries = {rule["id"]: rule["query"] for rule in doc["rules"]}
    results = lucene(sorted({p for q in queries.values() for p in regexps(q, field)}), lines)
    return {
        problem_id: {i for i in range(len(lines)) if es_matches(query, field, i, results)}
        for problem_id, query in queries.items()
    }


# ---- format validators ------------------------------------------------------------------------------


def missing_promtool() -> str | None:
    return None if shutil.which("promtool") else "no promtool check of the Prometheus-format rule group: promtool is not installed (apt-get install prometheus)"


def promtool_check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=120)


def _node_path() -> str | None:
    if shutil.which("node") is None or shutil.which("npm") is None:
        return None
    root = subprocess.run(["npm", "root", "-g"], capture_output=True, text=True, timeout=60).stdout.strip()
    return root if root and (Path(root) / "@grafana" / "lezer-logql").is_dir() else None


def missing_logql_parser() -> str | None:
    if _node_path() is None:
        return ("no LogQL syntax check: Grafana's LogQL grammar is not installed "
                "(npm install -g @grafana/lezer-logql@0.4.2 @lezer/lr@1.4.10)")
    return None


_LOGQL_SCRIPT = """
const {parser} = require('@grafana/lezer-logql');
const queries = JSON.parse(require('fs').readFileSync(0, 'utf8'));
console.log(JSON.stringify(queries.map(q => {
  const errors = [];
  parser.parse(q).iterate({enter: n => { if (n.type.isError) errors.push(n.from); }});
  return errors;
})));
"""


def logql_errors(queries: Sequence[str]) -> list[list[int]]:
    """Per query, the offsets where Grafana's LogQL grammar found a syntax error (empty: it parses)."""
    env = {**os.environ, "NODE_PATH": _node_path() or ""}
    proc = subprocess.run(
        ["node", "-e", _LOGQL_SCRIPT], input=json.dumps(list(queries)), capture_output=True, text=True,
        timeout=120, env=env, check=True,
    )
    return json.loads(proc.stdout)  # type: ignore[no-any-return]
