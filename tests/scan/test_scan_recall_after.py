"""The excerpts collected after the rules were written (tests/fixtures/logs/real-world-2/): a held-out set.

The rules of commit d619709 were written first; these 30 excerpts from public threads (embedding, reranking
and NER services, NCCL watchdogs, other PyO3 and Rust borrow errors) were collected afterwards, from sources
that are not among the first set's, and measured once as they were: precision 0.90, recall 0.90. Then,
said so: the one miss (torch's heartbeat-monitor wording, om-ai-lab/VLM-R1#257) became a rule, which gives
0.91 / 1.00 on this same set (no longer held out for that wording). The one false alarm left was
alps2_batch_encode_plus_frame_without_exception.log: a paste cut at the fast tokenizer's batch encode call, in
a thread about a TypeError, which the cut-frame rule read as a borrow error (medium). It was a real class: the
race never raises in encode_batch (a shared borrow; the setters raise), so a paste that stops at that call
is no longer counted (`cut_not_at`), which gives 1.00 / 1.00 here.

    python bench/scan_recall.py --set after-rules --verbose

Unlike the first set, a file here is not required to come out right (it is a measurement, not a
specification); the set must stay well-formed, both read paths must agree, and the figures must not fall
below what was measured when it was collected.
"""

from __future__ import annotations

import pytest
from test_scan_recall import CASES, Case, bulk, cases, check_collected_set, found, line_by_line, score

AFTER = cases("real-world-2")
MEASURED_PRECISION = 0.90  # as collected; after the two rule changes above: 1.00 / 1.00
MEASURED_RECALL = 0.90
NOW_PRECISION = NOW_RECALL = 1.0



def test_the_held_out_set_is_big_enough_cited_and_new() -> None:
    check_collected_set(AFTER, earlier=CASES)


@pytest.mark.parametrize("case", AFTER, ids=lambda c: f"{c.path.parent.name}/{c.path.name}")
def test_both_read_paths_agree(case: Case) -> None:
    assert found(bulk(case)) == found(line_by_line(case))


@pytest.mark.slow  # scores every case twice: ~10 s
def test_precision_and_recall_do_not_fall_below_what_was_measured() -> None:
    precision, recall, *_ = score(AFTER)
    assert precision >= MEASURED_PRECISION and recall >= MEASURED_RECALL, (precision, recall)
    assert precision >= NOW_PRECISION and recall >= NOW_RECALL, (precision, recall)
