"""Every doctor rule against synthetic snapshots, on both sides of each version boundary."""

from __future__ import annotations

from typing import Any

import pytest

from borrowguard.doctor import Snapshot, diagnose, guard_status
from borrowguard.knowledge import load

KB = load()

# A plain environment that fires nothing: every case below changes only what its rule looks at.
BASE: dict[str, Any] = {
    "python_version": "3.12.3",
    "python_implementation": "CPython",
    "system": "Linux",
    "machine": "x86_64",
    "packages": {"vllm": None, "transformers": None, "tokenizers": None, "borrowguard": None},
    "plugin_registered": False,
}


def snap(packages: dict[str, str | None] | None = None, **fields: Any) -> Snapshot:
    merged = {**BASE, **fields}
    merged["packages"] = {**BASE["packages"], **(packages or {})}
    return Snapshot(**merged)


def findings(snapshot: Snapshot) -> dict[str, str]:
    return {f.id: f.severity for f in diagnose(snapshot, KB).findings}


GUARDED = {"vllm": "0.33.0", "borrowguard": "0.1.0"}

# (rule id, snapshot, expected severity or None when the rule must stay silent)
CASES: list[tuple[str, Snapshot, str | None]] = [
    ("tokenizers-borrow-race", snap({"tokenizers": "0.22.2", "transformers": "4.57.6"}), "error"),
    ("tokenizers-borrow-race", snap({"tokenizers": "0.21.4", "transformers": "4.51.3"}), "error"),
    ("tokenizers-borrow-race", snap({"tokenizers": "0.23.1", "transformers": "5.16.0"}), None),
    (
        "tokenizers-borrow-race",
        snap({"tokenizers": "0.22.2"}),
        None,
    ),  # no transformers, no fast tokenizer race
    (
        "tokenizers-borrow-race",
        snap({"tokenizers": "0.22.2", "transformers": "4.57.6", **GUARDED}, plugin_registered=True),
        "info",
    ),
    ("tokenizers-silent-race", snap({"tokenizers": "0.23.1", "transformers": "5.16.0"}), "warning"),
    ("tokenizers-silent-race", snap({"tokenizers": "0.23.3", "transformers": "5.24.0"}), "warning"),
    ("tokenizers-silent-race", snap({"tokenizers": "0.22.2", "transformers": "4.57.6"}), None),
    (
        "tokenizers-silent-race",
        snap({"tokenizers": "0.23.3", "transformers": "5.24.0", **GUARDED}, plugin_registered=True),
        "info",
    ),
    ("transformers-blocks-tokenizers-fix", snap({"transformers": "5.15.2"}), "warning"),
    ("transformers-blocks-tokenizers-fix", snap({"transformers": "4.57.6"}), "warning"),
    ("transformers-blocks-tokenizers-fix", snap({"transformers": "5.16.0"}), None),
    ("transformers-blocks-tokenizers-fix", snap({"transformers": "5.24.0"}), None),
    # the processor shares the renderer's tokenizer only in 0.17.x (0.18 gives it a deep copy)
    ("vllm-retry-loop", snap({"vllm": "0.16.3"}), None),
    ("vllm-retry-loop", snap({"vllm": "0.17.0"}), "warning"),
    ("vllm-retry-loop", snap({"vllm": "0.17.1"}), "warning"),
    ("vllm-retry-loop", snap({"vllm": "0.18.0"}), None),
    ("vllm-retry-loop", snap({"vllm": "0.19.1rc1.dev214+g8f0e2b1c3"}), None),
    ("vllm-retry-loop", snap({"vllm": "0.17.1", "borrowguard": "0.1.0"}, plugin_registered=True), "info"),
    # bad_words on the event loop: 0.17 to 0.20, whatever the renderer workers
    ("vllm-bad-words-race", snap({"vllm": "0.16.3"}), None),
    ("vllm-bad-words-race", snap({"vllm": "0.17.1"}), "warning"),
    ("vllm-bad-words-race", snap({"vllm": "0.20.2"}, server={"renderer_num_workers": 1}), "warning"),
    ("vllm-bad-words-race", snap({"vllm": "0.21.0"}), None),
    ("vllm-bad-words-race", snap({"vllm": "0.19.1", "borrowguard": "0.1.0"}, plugin_registered=True), "info"),
    # two microbatch queues: 0.19 and 0.20 with 2+ renderer workers; unknown workers -> info, saying so
    ("vllm-renderer-workers-race", snap({"vllm": "0.19.1"}, server={"renderer_num_workers": 2}), "warning"),
    ("vllm-renderer-workers-race", snap({"vllm": "0.20.2"}, server={"renderer_num_workers": 4}), "warning"),
    ("vllm-renderer-workers-race", snap({"vllm": "0.19.1"}), "info"),
    ("vllm-renderer-workers-race", snap({"vllm": "0.19.1"}, server={"renderer_num_workers": 1}), None),
    ("vllm-renderer-workers-race", snap({"vllm": "0.18.0"}, server={"renderer_num_workers": 2}), None),
    ("vllm-renderer-workers-race", snap({"vllm": "0.21.0"}, server={"renderer_num_workers": 2}), None),
    ("vllm-tokenizer-pool", snap({"vllm": "0.21.0"}), "info"),
    ("vllm-tokenizer-pool", snap({"vllm": "0.20.2"}), None),
    ("vllm-mm-cache-desync", snap({"vllm": "0.24.0"}), "warning"),
    ("vllm-mm-cache-desync", snap({"vllm": "0.32.9"}), "warning"),
    ("vllm-mm-cache-desync", snap({"vllm": "0.33.0"}), None),
    ("vllm-mm-cache-desync", snap({"vllm": "0.34.1"}), None),
    ("nccl-aarch64-proxy-leak", snap(machine="aarch64", nccl_version="2.28.0", nccl_source="t"), "error"),
    ("nccl-aarch64-proxy-leak", snap(machine="aarch64", nccl_version="2.29.2", nccl_source="t"), "error"),
    ("nccl-aarch64-proxy-leak", snap(machine="aarch64", nccl_version="2.27.7", nccl_source="t"), None),
    ("nccl-aarch64-proxy-leak", snap(machine="aarch64", nccl_version="2.29.7", nccl_source="t"), None),
    ("nccl-aarch64-proxy-leak", snap(machine="x86_64", nccl_version="2.28.9", nccl_source="t"), None),
    ("nccl-aarch64-proxy-leak", snap(machine="aarch64", nccl_version=None), None),
    ("python-too-old", snap(python_version="3.9.18"), "error"),
    ("python-too-old", snap(python_version="3.10.0"), None),
    ("guard-active", snap(GUARDED, plugin_registered=True), "info"),
    ("guard-active", snap(GUARDED, plugin_registered=True, env={"VLLM_PLUGINS": "a,borrowguard"}), "info"),
    ("guard-active", snap(GUARDED, plugin_registered=True, env={"VLLM_PLUGINS": "lora_resolver"}), None),
    ("guard-active", snap(GUARDED, plugin_registered=True, env={"VLLM_PLUGINS": ""}), None),
    ("guard-active", snap(GUARDED, plugin_registered=True, env={"BORROWGUARD_DISABLE": "1"}), None),
    ("guard-active", snap({"borrowguard": "0.1.0"}, plugin_registered=True), None),  # no vLLM to load it
    ("guard-active", snap({"vllm": "0.22.0"}, plugin_registered=False), None),
    ("guard-active", snap({"vllm": "0.22.0"}, plugin_registered=None), None),
]

VLLM_019 = (
    "transformers>=4.56.0,<5",
    "tokenizers>=0.21.1",
    "numpy",
    'xformers==0.0.32; platform_machine == "x86_64"',
)
CASES += [
    (
        "vllm-requirement-mismatch",
        snap(
            {"vllm": "0.19.1", "transformers": "5.0.0", "tokenizers": "0.23.1"}, requires={"vllm": VLLM_019}
        ),
        "warning",
    ),
    (
        "vllm-requirement-mismatch",
        snap(
            {"vllm": "0.19.1", "transformers": "4.57.6", "tokenizers": "0.22.2"}, requires={"vllm": VLLM_019}
        ),
        None,
    ),
    # a package vLLM requires, known to be absent
    (
        "vllm-requirement-mismatch",
        snap({"vllm": "0.19.1", "transformers": "4.57.6", "tokenizers": None}, requires={"vllm": VLLM_019}),
        "warning",
    ),
    # the marker restricts xformers to x86_64: on aarch64 its absence is fine
    (
        "vllm-requirement-mismatch",
        snap(
            {"vllm": "0.19.1", "transformers": "4.57.6", "tokenizers": "0.22.2", "xformers": None},
            machine="aarch64",
            requires={"vllm": VLLM_019},
        ),
        None,
    ),
    (
        "vllm-requirement-mismatch",
        snap(
            {"vllm": "0.19.1", "transformers": "4.57.6", "tokenizers": "0.22.2", "xformers": "0.0.31"},
            requires={"vllm": VLLM_019},
        ),
        "warning",
    ),
    # no metadata (collect-env): the knowledge base's fallback for vLLM 0.19 applies
    ("vllm-requirement-mismatch", snap({"vllm": "0.19.1", "transformers": "5.2.0"}), "warning"),
    ("vllm-requirement-mismatch", snap({"vllm": "0.19.1", "transformers": "4.57.1"}), None),
    ("vllm-requirement-mismatch", snap({"vllm": "0.22.0", "transformers": "5.2.0"}), None),
    ("vllm-requirement-mismatch", snap({"transformers": "5.2.0"}), None),
]


@pytest.mark.parametrize(("rule", "snapshot", "expected"), CASES)
def test_rule(rule: str, snapshot: Snapshot, expected: str | None) -> None:
    assert findings(snapshot).get(rule) == expected


def test_every_detect_rule_is_tested_firing_and_silent() -> None:
    with_detect = {p.id for p in KB if p.detect is not None}
    fired = {rule for rule, _, expected in CASES if expected}
    silent = {rule for rule, _, expected in CASES if expected is None}
    assert with_detect == fired == silent


def test_plain_environment_fires_nothing_and_exits_0() -> None:
    diagnosis = diagnose(snap(), KB)
    assert diagnosis.findings == ()
    assert diagnosis.exit_code() == 0
    assert diagnosis.exit_code(strict=True) == 0


def test_exit_codes_and_order() -> None:
    warning = diagnose(snap({"tokenizers": "0.23.3", "transformers": "5.24.0"}), KB)
    assert warning.exit_code() == 1
    assert warning.exit_code(strict=True) == 2
    info = diagnose(snap(GUARDED, plugin_registered=True), KB)
    assert {f.severity for f in info.findings} == {"info"}
    assert {f.id for f in info.findings} == {"guard-active", "vllm-tokenizer-pool"}
    assert info.exit_code(strict=True) == 0
    mixed = diagnose(
        snap({"tokenizers": "0.22.2", "transformers": "4.57.6", "vllm": "0.18.0"}, python_version="3.9.1"), KB
    )
    severities = [f.severity for f in mixed.findings]
    assert severities == sorted(severities, key=["error", "warning", "info"].index)
    assert severities[0] == "error" and "warning" in severities
    assert mixed.exit_code() == 2


def test_evidence_names_the_facts() -> None:
    snapshot = snap(
        {"vllm": "0.19.1", "transformers": "5.0.0", "tokenizers": "0.23.1"}, requires={"vllm": VLLM_019}
    )
    by_id = {f.id: f for f in diagnose(snapshot, KB).findings}
    mismatch = by_id["vllm-requirement-mismatch"].evidence
    assert any("transformers 5.0.0 is installed" in e and "<5" in e and "vLLM 0.19.1" in e for e in mismatch)
    assert not any("tokenizers" in e for e in mismatch)  # 0.23.1 satisfies >=0.21.1
    silent = by_id["tokenizers-silent-race"].evidence
    assert "tokenizers 0.23.1 (>=0.23.1)" in silent
    assert any(e.startswith("guard not active") for e in silent)

    nccl = diagnose(
        snap(machine="aarch64", nccl_version="2.28.9", nccl_source="nvidia-nccl-cu13 package"), KB
    )
    assert nccl.findings[0].evidence == (
        "machine aarch64",
        "NCCL 2.28.9 (>=2.28.0,<=2.29.2), from nvidia-nccl-cu13 package",
    )


def test_guarded_findings_say_why_they_were_lowered() -> None:
    snapshot = snap({"tokenizers": "0.22.2", "transformers": "4.57.6", **GUARDED}, plugin_registered=True)
    race = next(f for f in diagnose(snapshot, KB).findings if f.id == "tokenizers-borrow-race")
    assert race.severity == "info"
    assert any(e.startswith("severity lowered to info") for e in race.evidence)


@pytest.mark.parametrize(
    ("fields", "active", "reason"),
    [
        ({"plugin_registered": None}, False, "unknown"),
        ({"plugin_registered": False}, False, "not registered"),
        ({"plugin_registered": True, "env": {"BORROWGUARD_DISABLE": "1"}}, False, "BORROWGUARD_DISABLE=1"),
        ({"plugin_registered": True, "env": {"BORROWGUARD_DISABLE": "0"}}, True, "VLLM_PLUGINS unset"),
        (
            {"plugin_registered": True, "env": {"BORROWGUARD_DISABLE": "True"}},
            False,
            "BORROWGUARD_DISABLE=True",
        ),
        ({"plugin_registered": True, "env": {"VLLM_PLUGINS": "x"}}, False, "does not list borrowguard"),
        ({"plugin_registered": True, "env": {"VLLM_PLUGINS": "x,borrowguard"}}, True, "lists it"),
        # vLLM splits on "," without stripping: a name with blanks around it is not listed.
        ({"plugin_registered": True, "env": {"VLLM_PLUGINS": " borrowguard , x"}}, False, "does not list borrowguard"),
    ],
)
def test_guard_status(fields: dict[str, Any], active: bool, reason: str) -> None:
    status = guard_status(snap(GUARDED, **fields))
    assert status.active is active
    assert reason in status.reason


@pytest.mark.parametrize(
    ("env", "remedy"),
    [
        ({"VLLM_PLUGINS": "a, b"}, "export VLLM_PLUGINS=a,b,borrowguard"),
        ({"VLLM_PLUGINS": ""}, "export VLLM_PLUGINS=borrowguard"),
        ({"BORROWGUARD_DISABLE": "1"}, "unset BORROWGUARD_DISABLE"),
    ],
)
def test_an_installed_but_inactive_plugin_gets_the_setting_that_activates_it(env: dict, remedy: str) -> None:
    snapshot = snap(
        {"tokenizers": "0.23.3", "transformers": "5.24.0", **GUARDED}, plugin_registered=True, env=env
    )
    race = next(f for f in diagnose(snapshot, KB).findings if f.id == "tokenizers-silent-race")
    assert race.severity == "warning"
    assert race.remedies[0] == remedy
    assert race.remedies[1:] == KB["tokenizers-silent-race"].remedies


def test_unparsable_versions_never_fire() -> None:
    assert findings(snap({"tokenizers": "not-a-version", "transformers": "4.57.6", "vllm": "main"})) == {
        "transformers-blocks-tokenizers-fix": "warning"
    }


def test_user_rule_fires_on_its_own_package(tmp_path: Any) -> None:
    rules = tmp_path / "site.toml"
    rules.write_text(
        '[[problem]]\nid = "site-old-xgrammar"\ntitle = "old xgrammar"\nseverity = "error"\n'
        'explanation = "e"\n'
        '[problem.detect]\npackages = { xgrammar = "<0.1.20" }\nsystem = ["Linux"]\n',
        encoding="utf-8",
    )
    kb = load(rules)
    old = diagnose(snap({"xgrammar": "0.1.19"}), kb)
    assert [(f.id, f.evidence) for f in old.findings] == [
        ("site-old-xgrammar", ("xgrammar 0.1.19 (<0.1.20)", "system Linux"))
    ]
    assert diagnose(snap({"xgrammar": "0.1.21"}), kb).findings == ()
    assert diagnose(snap({"xgrammar": "0.1.19"}, system="Darwin"), kb).findings == ()


def test_a_server_fact_that_is_not_known_is_reported_at_info_with_what_it_depends_on() -> None:
    (race,) = [f for f in diagnose(snap({"vllm": "0.19.1"}), KB).findings if f.id == "vllm-renderer-workers-race"]
    assert race.severity == "info"
    assert any("renderer_num_workers" in e and "--log" in e for e in race.evidence)
    known = diagnose(snap({"vllm": "0.19.1"}, server={"renderer_num_workers": 2}), KB)
    (race,) = [f for f in known.findings if f.id == "vllm-renderer-workers-race"]
    assert race.severity == "warning"
    assert "renderer_num_workers 2 (>=2)" in race.evidence
