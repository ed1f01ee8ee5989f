"""The sets collected after the rules (tests/fixtures/logs/real-world-2/ onwards), each a measurement.

Every set in support.realworld.COLLECTED was collected after the rules of its time, from public threads that no
earlier set cites, labelled from its text and committed before scan first read it; docs/scan-recall.md tells how
each was collected, what scan found as collected and what was learned from it. Unlike the first set
(test_scan_recall.py), a file here is not required to come out right: each set must stay well-formed, both read
paths must agree on every file, nothing a file rejects may be found, and its precision and recall may not fall
below what is measured now.

    python bench/scan_recall.py --set held-out-5 --verbose
"""

from __future__ import annotations

import pytest
from test_scan_recall import CASES, Case, bulk, cases, check_collected_set, found, line_by_line, score

from support.realworld import COLLECTED, CollectedSet

EXCERPTS = {s.name: cases(s.directory) for s in COLLECTED}
FILES = [(s, case) for s in COLLECTED for case in EXCERPTS[s.name]]
# A near-miss that scan still finds something in that it rejects is expected to fail, strictly: the test says
# so once the false alarm is learned.
STILL_FALSE = pytest.mark.xfail(strict=True, reason="a false alarm not learned yet (docs/scan-recall.md)")
REJECTS = [
    pytest.param(s, case, marks=STILL_FALSE) if case.path.name.startswith(s.still_false) else (s, case)
    for s, case in FILES
]


def _name(value: object) -> str:
    if isinstance(value, CollectedSet):
        return value.name
    assert isinstance(value, Case)
    return f"{value.path.parent.name}/{value.path.name}"


@pytest.mark.parametrize("collected", COLLECTED, ids=_name)
def test_the_set_is_big_enough_cited_and_new(collected: CollectedSet) -> None:
    before = COLLECTED[: COLLECTED.index(collected)]
    check_collected_set(EXCERPTS[collected.name], earlier=[*CASES, *(c for s in before for c in EXCERPTS[s.name])])


@pytest.mark.parametrize(("collected", "case"), FILES, ids=_name)
def test_both_read_paths_agree(collected: CollectedSet, case: Case) -> None:
    assert found(bulk(case)) == found(line_by_line(case))


@pytest.mark.parametrize(("collected", "case"), REJECTS, ids=_name)
def test_nothing_it_must_not_produce(collected: CollectedSet, case: Case) -> None:
    assert not case.reject & set(found(bulk(case))), case.source


@pytest.mark.parametrize("collected", COLLECTED, ids=_name)
def test_precision_and_recall_do_not_fall_below_what_was_measured(collected: CollectedSet) -> None:
    precision, recall, *_ = score(EXCERPTS[collected.name])
    assert round(precision, 2) >= collected.now[0] and round(recall, 2) >= collected.now[1], (precision, recall)
