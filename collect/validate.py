"""Check a newly collected set of excerpts (collect/GUIDE.md): headers, ids, file names, and sources that no other
set cites.

    python3 collect/validate.py tests/fixtures/logs/real-world-41             # report what is wrong; exit 1 if anything
    python3 collect/validate.py --sources tests/fixtures/logs/real-world-41   # the sources the other sets cite

Standard library only, and it never imports borrowguard: a collector runs it without reading the rules.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

LOGS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "logs"
CONFIDENCES = {"high", "medium", "low"}
HEADERS = ("source", "note", "expect", "reject")
MAX_BODY_LINES = 120


def headers(path: Path) -> list[str]:
    return [line[2:] for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.startswith("# ")]


def elsewhere(target: Path) -> tuple[set[str], set[str]]:
    """The sources the other sets cite, and the problem ids their labels use (the ids live in the knowledge base;
    a collector's labels use those the sets already use, as the guide lists them)."""
    target = target.resolve()
    sources: set[str] = set()
    ids: set[str] = set()
    for path in LOGS.rglob("*.log"):
        if target in path.resolve().parents:
            continue
        for item in headers(path):
            words = item.split()
            if item.startswith("source: ") and len(words) > 1:
                sources.add(words[1])
            elif item.startswith(("expect: ", "reject: ")) and len(words) > 1:
                ids.add(words[1])
    return sources, ids


def problems(path: Path, kind: str, known: set[str], ids: set[str], seen: dict[str, str]) -> list[str]:
    name = f"{kind}/{path.name}"
    if not re.fullmatch(r"[a-z0-9]+[0-9]+_[a-z0-9_]+\.log", path.name):
        return [f"{name}: the name must be <repo><number>_<short_snake_description>.log, lower case"]
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        return [f"{name}: not UTF-8"]
    out: list[str] = []
    head = [line[2:] for line in lines if line.startswith("# ")]
    if any(line.startswith("# ") for line in lines[len(head):]):
        out.append(f"{name}: a body line begins with '# ' (it would be read as a header)")
    body = [line for line in lines if not line.startswith("# ")]
    if not any(line.strip() for line in body):
        out.append(f"{name}: empty body")
    if len(body) > MAX_BODY_LINES:
        out.append(f"{name}: a body of {len(body)} lines (80 wanted, {MAX_BODY_LINES} at most)")
    for item in head:
        if item.split(":")[0] not in HEADERS:
            out.append(f"{name}: unknown header {item[:40]!r}")
    source = [item for item in head if item.startswith("source: ")]
    if len(source) != 1 or len(source[0].split()) < 2:
        return [*out, f"{name}: needs exactly one '# source: owner/repo#N ...'"]
    cite = source[0].split()[1]
    if not re.fullmatch(r"[\w.-]+/[\w.-]+#\d+", cite):
        out.append(f"{name}: source {cite!r} is not owner/repo#N")
    if cite in known:
        out.append(f"{name}: source {cite} is already cited by another set")
    if cite in seen:
        out.append(f"{name}: source {cite} is cited by {seen[cite]} too")
    seen[cite] = name
    if not any(item.startswith("note: ") for item in head):
        out.append(f"{name}: needs a '# note:'")
    expect = [item.split()[1:] for item in head if item.startswith("expect:")]
    reject = [item.split()[1:] for item in head if item.startswith("reject:")]
    out += [f"{name}: bad expect {' '.join(e)!r}" for e in expect if len(e) != 2 or e[0] not in ids or e[1] not in CONFIDENCES]
    out += [f"{name}: bad reject {' '.join(r)!r}" for r in reject if len(r) != 1 or r[0] not in ids]
    if {e[0] for e in expect if e} & {r[0] for r in reject if r}:
        out.append(f"{name}: an id both expected and rejected")
    if kind == "positive" and not expect:
        out.append(f"{name}: a positive needs an '# expect:'")
    if kind == "near-miss" and (expect or not reject):
        out.append(f"{name}: a near-miss has '# reject:' lines and no '# expect:'")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("set", type=Path, help="the new set's folder (with positive/ and near-miss/)")
    ap.add_argument("--sources", action="store_true", help="print the sources every other set cites, and stop")
    args = ap.parse_args()
    known, ids = elsewhere(args.set)
    if args.sources:
        print("\n".join(sorted(known)))
        return 0
    if not (args.set / "positive").is_dir() or not (args.set / "near-miss").is_dir():
        print(f"error: {args.set} needs positive/ and near-miss/", file=sys.stderr)
        return 2
    seen: dict[str, str] = {}
    errors = [e for kind in ("positive", "near-miss") for p in sorted((args.set / kind).glob("*")) for e in problems(p, kind, known, ids, seen)]
    print("\n".join(errors) if errors else f"ok: {len(seen)} files")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
