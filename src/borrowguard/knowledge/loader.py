"""Load and validate the knowledge base: the bundled rules.toml plus an optional user file."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from borrowguard.errors import UserInputError
from borrowguard.knowledge.detect import validate_detect, vllm_range
from borrowguard.knowledge.model import KINDS, SEVERITIES, Kind, Severity, listed

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

BUNDLED_RULES = Path(__file__).resolve().parent / "rules.toml"
MAX_RULES_BYTES = 1_000_000
"""A user rules file larger than this is refused: real ones are a few kilobytes."""

_REQUIRED = ("id", "title", "severity", "explanation")
_KNOWN = (
    *_REQUIRED, "kind", "remedies", "references", "related", "leads_to", "leads_to_when_traced", "advice",
    "answers", "exposed_by", "detect", "signature", "mentioned_in_changes", "exclude",
)
REQUEST_FEATURES = ("bad_words",)
"""What `exposed_by` may name: request features verify can send or leave out."""
MAX_ANSWER = 200


class KnowledgeError(UserInputError):
    """The rules file is unreadable or a rule is malformed; the message names the rule and the field."""


@dataclass(frozen=True)
class Problem:
    """One known problem. `detect` is for doctor, `signatures` (raw tables) are for scan; `leads_to`,
    `leads_to_when_traced` and `advice` are the causal chain (scan, verify); `answers` are the texts by
    which it shows in an HTTP answer's error message (verify's fault classification)."""

    id: str
    title: str
    severity: Severity
    explanation: str
    remedies: tuple[str, ...] = ()
    references: tuple[str, ...] = ()
    detect: Mapping[str, Any] | None = None
    signatures: tuple[Mapping[str, Any], ...] = ()
    related: tuple[str, ...] = ()
    kind: Kind = Kind.OTHER
    leads_to: tuple[str, ...] = ()
    """Problems this one can cause (log findings), observed on real servers."""
    leads_to_when_traced: tuple[str, ...] = ()
    """Problems this one causes only when the effect's own traceback runs through this one's frames (a
    tokenizer error is an engine death's cause only when EngineCore's fatal traceback is a tokenizer's)."""
    advice: str | None = None
    """One line for the causal chain when this problem is a root of what was found."""
    answers: tuple[str, ...] = ()
    """Literal texts: an HTTP answer whose error message contains one shows this problem."""
    exposed_by: tuple[str, ...] = ()
    """Request features without which it cannot happen (REQUEST_FEATURES)."""
    exclude: tuple[str, ...] = ()
    """Regexes of lines that are no occurrence whatever signature reads them (already in every signature's own
    `exclude`, first)."""
    mentioned_in_changes: bool = False
    """A change's description (see `ChangeProse`) only names it, as what the change handles: its prose lines
    there are no occurrence. False: a change's prose reports it (a bug fix says the error happens)."""

    @property
    def vllm_versions(self) -> str | None:
        """The vLLM versions that expose it (its detect table's `packages.vllm`), None when it names none."""
        return vllm_range(self.detect) if self.detect else None


# the component a pull request's title names before its verb ("[Serve] Fix incorrect replica death detection when
# ActorDiedError originates ...", Ray's; "[Core] ", "[Frontend] "): a word, never a number or a log level's bracket,
# which a line with a level never reaches as prose
_COMPONENT_TAG = re.compile(r"\[[A-Za-z][A-Za-z0-9 /._-]{0,23}\] ?")


@dataclass(frozen=True)
class ChangeProse:
    """How a change's own description reads (a pull request's template headings and phrases): within `reach`
    lines after one of its `cues`, a line of prose (no log header, no traceback, outside a code fence) names
    the problems that are `mentioned_in_changes` as behaviour, and reports none of them."""

    cues: tuple[str, ...] = ()
    reach: int = 0
    titles: tuple[str, ...] = ()
    """How a change's title begins ("Fix ", "[Bugfix]"): a line of prose that begins so names, as its
    description does, what the change handles, wherever it stands (a title comes before any cue)."""
    openers: tuple[str, ...] = ()
    """The titles that also open the description when they head the text (its first line), as a cue does:
    a fix's own words ("Fix ...", "[Bugfix] ...")."""

    def cue_in(self, text: str) -> bool:
        """`text` holds one of the cues that open a change's description."""
        return any(cue in text for cue in self.cues)

    def is_title(self, text: str) -> bool:
        """`text` begins as a change's title does, after its components' tags or not ("[Serve] Fix ...")."""
        return _begins(text, self.titles)

    def opens(self, text: str) -> bool:
        """`text`, the first line, is a title that opens a change's description."""
        return _begins(text, self.openers)


def _begins(text: str, heads: tuple[str, ...]) -> bool:
    """`text` begins with one of `heads`, after components' tags or not."""
    if not heads:
        return False
    head = text.lstrip()
    for _ in range(3):   # vLLM's titles stack their tags ("[Core][Frontend] Fix ...")
        if head.startswith(heads):
            return True
        tag = _COMPONENT_TAG.match(head)
        if tag is None:
            return False
        head = head[tag.end() :]
    return head.startswith(heads)


@dataclass(frozen=True, eq=False)
class KnowledgeBase:
    """Every known problem by id, in file order (bundled first, then the user's new ids).

    Compared and hashed by identity: it never changes once loaded, so what is compiled from it (scan's
    signatures and anchors) is cached per knowledge base."""

    problems: Mapping[str, Problem]
    sources: tuple[Path, ...] = field(default=())
    change: ChangeProse = field(default=ChangeProse())

    def get(self, problem_id: str) -> Problem | None:
        return self.problems.get(problem_id)

    def __getitem__(self, problem_id: str) -> Problem:
        return self.problems[problem_id]

    def __contains__(self, problem_id: object) -> bool:
        return problem_id in self.problems

    def __iter__(self) -> Iterator[Problem]:
        return iter(self.problems.values())

    def __len__(self) -> int:
        return len(self.problems)

    def of_kind(self, kind: Kind, *, in_logs: bool = False) -> tuple[Problem, ...]:
        """The problems of one kind, in file order; `in_logs`: only those scan can find (with signatures)."""
        return tuple(p for p in self if p.kind is kind and (p.signatures or not in_logs))

    def log_ids(self, kind: Kind) -> frozenset[str]:
        """The ids of the log findings of one kind (what verify counts as tokenizer errors, deaths...)."""
        return frozenset(p.id for p in self.of_kind(kind, in_logs=True))

    def the(self, kind: Kind) -> Problem:
        """The one log problem of a kind that has exactly one (the engine death); KnowledgeError otherwise."""
        found = self.of_kind(kind, in_logs=True)
        if len(found) != 1:
            raise KnowledgeError(f"the knowledge base needs exactly one log problem of kind {kind.value!r}")
        return found[0]

    def causes_of(self, problem_id: str, *, traced: bool = False) -> tuple[str, ...]:
        """The problems that can lead to `problem_id`; `traced`: also those that lead to it only when its
        traceback runs through their frames."""
        return tuple(
            p.id for p in self
            if problem_id in p.leads_to or (traced and problem_id in p.leads_to_when_traced)
        )

    def answer_pattern(self, kind: Kind) -> re.Pattern[str] | None:
        """One regex for every `answers` text of the problems of a kind (None when there is none)."""
        texts = dict.fromkeys(a for p in self.of_kind(kind) for a in p.answers)
        return re.compile("|".join(re.escape(a) for a in texts)) if texts else None


def load(extra: Path | str | None = None) -> KnowledgeBase:
    """The bundled knowledge base, with the problems of `extra` (a user's rules file) added or replacing
    bundled ones of the same id."""
    bundled = _bundled()
    if extra is None:
        return bundled
    path = Path(extra)
    problems = dict(bundled.problems)
    added, change = _parse(_read(path), str(path))
    _check_signatures(added)
    problems.update(added)
    _check_links(problems)
    cues = tuple(dict.fromkeys((*bundled.change.cues, *change.cues)))
    titles = tuple(dict.fromkeys((*bundled.change.titles, *change.titles)))
    openers = tuple(dict.fromkeys((*bundled.change.openers, *change.openers)))
    merged = ChangeProse(cues, max(bundled.change.reach, change.reach), titles, openers)
    return KnowledgeBase(MappingProxyType(problems), (*bundled.sources, path), merged)


@lru_cache(maxsize=1)
def _bundled() -> KnowledgeBase:
    problems, change = _parse(BUNDLED_RULES.read_text(encoding="utf-8"), "bundled rules.toml")
    _check_links(problems)
    return KnowledgeBase(MappingProxyType(problems), (BUNDLED_RULES,), change)


def _read(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_RULES_BYTES + 1)
    except FileNotFoundError:
        raise KnowledgeError(f"rules file not found: {path}") from None
    except OSError as exc:
        raise KnowledgeError(f"cannot read rules file {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_RULES_BYTES:
        raise KnowledgeError(
            f"rules file {path} is larger than {MAX_RULES_BYTES // 1_000_000} MB; refusing to read it"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise KnowledgeError(f"rules file {path} is not UTF-8 text") from None


def _parse(text: str, source: str) -> tuple[dict[str, Problem], ChangeProse]:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise KnowledgeError(f"{source}: not valid TOML: {exc}") from None
    except RecursionError:
        raise KnowledgeError(f"{source}: nested too deeply") from None
    unknown = set(doc) - {"problem", "change"}
    if unknown:
        raise KnowledgeError(
            f"{source}: unknown top-level key(s) {', '.join(sorted(unknown))}; expected [[problem]] (and [change])"
        )
    entries = doc.get("problem", [])
    if not isinstance(entries, list):
        raise KnowledgeError(f"{source}: 'problem' must be an array of tables ([[problem]])")
    problems: dict[str, Problem] = {}
    for index, entry in enumerate(entries):
        problem = _problem(entry, f"{source}: rule #{index + 1}")
        if problem.id in problems:
            raise KnowledgeError(f"{source}: rule {problem.id!r} is defined twice")
        problems[problem.id] = problem
    return problems, _change(doc.get("change", {}), source)


MAX_CHANGE_REACH = 1000


def _change(entry: Any, source: str) -> ChangeProse:
    if not isinstance(entry, dict):
        raise KnowledgeError(f"{source}: 'change' must be a table ([change])")
    unknown = set(entry) - {"cues", "reach", "titles", "openers"}
    if unknown:
        raise KnowledgeError(
            f"{source}: [change]: unknown field(s) {', '.join(sorted(unknown))}; known: cues, reach, titles, openers"
        )
    cues = entry.get("cues", [])
    # cues are literals the fast path searches for: a short one would make a candidate of every line
    if not isinstance(cues, list) or not all(isinstance(c, str) and len(c.strip()) >= 4 for c in cues):
        raise KnowledgeError(f"{source}: [change]: field 'cues' must be a list of texts of at least 4 characters")
    reach = entry.get("reach", 0)
    if isinstance(reach, bool) or not isinstance(reach, int) or not 0 <= reach <= MAX_CHANGE_REACH:
        raise KnowledgeError(f"{source}: [change]: field 'reach' must be a number of lines from 0 to {MAX_CHANGE_REACH}")
    titles, openers = (_heads(entry, name, source) for name in ("titles", "openers"))
    return ChangeProse(tuple(cues), reach, titles, openers)


def _heads(entry: dict[str, Any], name: str, source: str) -> tuple[str, ...]:
    heads = entry.get(name, [])
    if not isinstance(heads, list) or not all(isinstance(t, str) and len(t.strip()) >= 3 for t in heads):
        raise KnowledgeError(f"{source}: [change]: field {name!r} must be a list of texts of at least 3 characters")
    return tuple(heads)


def _problem(entry: Any, where: str) -> Problem:
    if not isinstance(entry, dict):
        raise KnowledgeError(f"{where}: must be a table")
    rule_id = entry.get("id")
    if not isinstance(rule_id, str) or not rule_id.strip():
        raise KnowledgeError(f"{where}: field 'id' must be a non-empty string")

    def fail(name: str, message: str) -> KnowledgeError:
        return KnowledgeError(f"rule {rule_id!r}: field {name!r} {message}")

    for name in entry:
        if name not in _KNOWN:
            raise fail(name, f"is not a known field (known: {', '.join(_KNOWN)})")
    for name in _REQUIRED:
        value = entry.get(name)
        if not isinstance(value, str) or not value.strip():
            raise fail(name, "is required and must be a non-empty string")
    if entry["severity"] not in SEVERITIES:
        raise fail("severity", f"must be one of {', '.join(SEVERITIES)}")
    detect = entry.get("detect")
    if detect is not None:
        validate_detect(detect, fail)
    kind = entry.get("kind", Kind.OTHER.value)
    if kind not in KINDS:
        raise fail("kind", f"must be one of {', '.join(KINDS)}")
    advice = entry.get("advice")
    if advice is not None and (not isinstance(advice, str) or not advice.strip() or "\n" in advice.strip()):
        raise fail("advice", "must be one line of text")
    answers = _strings(entry, "answers", fail)
    if any(len(a) > MAX_ANSWER for a in answers):
        raise fail("answers", f"must be texts of at most {MAX_ANSWER} characters")
    exposed_by = _strings(entry, "exposed_by", fail)
    if any(f not in REQUEST_FEATURES for f in exposed_by):
        raise fail("exposed_by", f"must name request features among {', '.join(REQUEST_FEATURES)}")
    mentioned = entry.get("mentioned_in_changes", False)
    if not isinstance(mentioned, bool):
        raise fail("mentioned_in_changes", "must be true or false")
    signatures = entry.get("signature", [])
    if not isinstance(signatures, list) or not all(isinstance(s, dict) for s in signatures):
        raise fail("signature", "must be an array of tables ([[problem.signature]])")
    never = _strings(entry, "exclude", fail)
    if never and not signatures:
        raise fail("exclude", "only applies together with [[problem.signature]] tables")
    return Problem(
        id=rule_id,
        title=entry["title"].strip(),
        severity=Severity(entry["severity"]),
        explanation=entry["explanation"].strip(),
        remedies=_strings(entry, "remedies", fail),
        references=_strings(entry, "references", fail),
        detect=_freeze(detect) if detect is not None else None,
        signatures=tuple(_freeze(_excluding(s, never)) for s in signatures),
        related=_strings(entry, "related", fail),
        kind=Kind(kind),
        leads_to=_strings(entry, "leads_to", fail),
        leads_to_when_traced=_strings(entry, "leads_to_when_traced", fail),
        advice=advice.strip() if advice is not None else None,
        answers=answers,
        exposed_by=exposed_by,
        exclude=never,
        mentioned_in_changes=mentioned,
    )


def _excluding(signature: dict[str, Any], never: tuple[str, ...]) -> dict[str, Any]:
    """A signature table with its problem's `exclude` ahead of its own: every table of the problem, and
    everything read from the tables (scan, the line exports, the docs), leaves those lines alone."""
    if not never:
        return signature
    own = listed(signature.get("exclude"))
    if not isinstance(own, tuple):
        return signature  # malformed: the signature's own check names it
    return {**signature, "exclude": [*never, *(x for x in own if x not in never)]}


def _strings(entry: dict[str, Any], name: str, fail: Any) -> tuple[str, ...]:
    value = entry.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise fail(name, "must be a list of non-empty strings")
    return tuple(value)


def _check_signatures(problems: Mapping[str, Problem]) -> None:
    # At load, for every tool (scan, rules export, explain): a regex that could hang scan or that RE2
    # refuses is refused here, once. The rest of a signature table is scan's to read (signatures imports
    # this module, hence the late import).
    from borrowguard.knowledge.signatures import check_patterns

    for problem in problems.values():
        for index, raw in enumerate(problem.signatures):
            check_patterns(raw, f"rule {problem.id!r}: signature #{index + 1}")


def _check_links(problems: Mapping[str, Problem]) -> None:
    for problem in problems.values():
        for name in ("related", "leads_to", "leads_to_when_traced"):
            for other in getattr(problem, name):
                if other not in problems:
                    raise KnowledgeError(f"rule {problem.id!r}: field {name!r} names unknown rule {other!r}")


def _freeze(value: Any) -> Any:
    # The bundled base is cached and shared: nested tables become read-only, arrays become tuples.
    if isinstance(value, dict):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value
