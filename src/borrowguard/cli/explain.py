"""`borrowguard explain ID`: one knowledge-base entry, as the terminal (or --json) shows it."""

from __future__ import annotations

import difflib
import textwrap
import unicodedata

import click

from borrowguard._text import printable
from borrowguard.cli._common import writing_output
from borrowguard.errors import UserInputError
from borrowguard.knowledge import KnowledgeBase, load
from borrowguard.knowledge.export.describe import NEITHER, Entry, describe
from borrowguard.knowledge.export.safety import json_text
from borrowguard.knowledge.export.safety import shown as quoted

MAX_SUGGEST = 200
"""An id longer than this gets no suggestions: it is no typo of a known one."""


@click.command("explain")
@click.argument("problem_id", metavar="ID", required=False)
@click.option("--list", "list_ids", is_flag=True, help="List every id with its severity and title.")
@click.option("--json", "as_json", is_flag=True, help="Print the entry (or, with --list, all entries) as JSON.")
@click.option("--rules", type=click.Path(dir_okay=False), metavar="FILE",
              help="An extra rules file: its problems add to (or replace) the bundled ones.")
def explain(problem_id: str | None, list_ids: bool, as_json: bool, rules: str | None) -> None:
    """Explain a finding or problem id: what it is, how it shows in logs, which versions, the remedies in
    order, references.

    ID is any id that `borrowguard doctor`, `scan` or `verify` report (in their JSON too), and the runbook
    of every rule `borrowguard rules export` writes.

    \b
    Examples:
      borrowguard explain tokenizers-borrow-race
      borrowguard explain tokenizer-already-borrowed --json
      borrowguard explain --list

    \b
    Exit status: 0 shown, 2 an unknown id (the closest ids are suggested) or a usage error.
    """
    kb = load(rules) if rules else load()
    if list_ids:
        if problem_id is not None:
            raise UserInputError("give an ID or --list, not both")
        _list(kb, as_json)
        return
    if problem_id is None:
        raise UserInputError("give an id to explain, e.g. borrowguard explain tokenizers-borrow-race (--list shows all)")
    problem = kb.get(clean_id(problem_id))
    if problem is None:
        raise UserInputError(_unknown(kb, problem_id))
    entry = describe(kb, problem)
    with writing_output():
        if as_json:
            click.echo(json_text(entry.to_dict()), nl=False)  # C1 controls and U+2028 escaped: a terminal reads it
        else:
            click.echo(printable(render(entry)))


def clean_id(problem_id: str) -> str:
    """The id as typed, without what a copy from a coloured terminal or a web page brings along: escape
    codes, control and format characters (zero-width, bidi), surrounding white space."""
    return "".join(ch for ch in printable(problem_id) if unicodedata.category(ch) != "Cf").strip()


def _unknown(kb: KnowledgeBase, problem_id: str) -> str:
    wanted = clean_id(problem_id)
    ids = [p.id for p in kb]
    close: list[str] = []
    if len(wanted) <= MAX_SUGGEST:
        key = wanted.lower()
        close = difflib.get_close_matches(key, ids, n=3, cutoff=0.6)
        close += [i for i in ids if key and key in i and i not in close][: 3 - len(close)]
    shown = quoted(wanted)  # repr, cut when long: a huge id is not echoed whole
    close = [i for i in close if repr(i) != shown]  # never "unknown id 'x'; did you mean x?"
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"unknown id {shown}{hint} (borrowguard explain --list shows every id)"


def _list(kb: KnowledgeBase, as_json: bool) -> None:
    entries = [describe(kb, p) for p in kb]
    with writing_output():
        if as_json:
            click.echo(json_text([e.to_dict() for e in entries]), nl=False)
            return
        width = max(len(e.id) for e in entries)
        for e in entries:
            click.echo(printable(f"{e.id:<{width}}  {e.severity:<7}  {'+'.join(e.found_by) or '-':<11}  {e.title}"))


def render(e: Entry) -> str:
    out = [
        f"{e.id} — {e.title}",
        f"severity: {e.severity}    kind: {e.kind}    found by: {', '.join(f'borrowguard {f}' for f in e.found_by) or NEITHER}",
        "",
        "What it is",
        textwrap.indent(e.explanation, "  "),
    ]
    if e.logs:
        out += ["", "How it shows in logs"]
        for i, text in enumerate(e.logs, 1):
            rule = "  [also a line rule in `borrowguard rules export`]" if i in e.line_rules else ""
            out.append(_bullet(f"{text}{rule}"))
        if e.never:
            out.append(_bullet(e.never))
    out += [_bullet(text) for text in e.attribution]
    if e.answers:
        out += ["", "How it shows in an HTTP answer", _bullet("an error message containing " + " or ".join(repr(a) for a in e.answers))]
    if e.exposed_by:
        out += ["", f"Only with requests that carry: {', '.join(e.exposed_by)}"]
    if e.versions:
        out += ["", "Which versions and settings", *(_bullet(v) for v in e.versions)]
    if e.leads_to or e.leads_to_when_traced:
        chain = [*e.leads_to, *(f"{x} (only when its own traceback runs through this one's frames)" for x in e.leads_to_when_traced)]
        out += ["", f"Leads to: {', '.join(chain)}"]
    if e.advice:
        out += [f"When it is the root of what was found: {e.advice}"]
    if e.remedies:
        out += ["", "Remedies, in order", *(f"  {i}. {r}" for i, r in enumerate(e.remedies, 1))]
    if e.references:
        out += ["", "References", *(f"  - {r.text}" + (f"  {r.url}" if r.url and r.url != r.text else "") for r in e.references)]
    if e.related:
        out += ["", f"Related: {', '.join(e.related)}"]
    if e.referenced_by:
        out += [f"Referred to by: {', '.join(e.referenced_by)}"]
    return "\n".join(out)


def _bullet(text: str) -> str:
    return textwrap.fill(text, width=110, initial_indent="  - ", subsequent_indent="    ", break_on_hyphens=False,
                         break_long_words=False)
