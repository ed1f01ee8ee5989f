"""Can this server race at all, as configured? A PASS means more when the answer is yes.

The facts are the knowledge base's: the vLLM version ranges of its tokenizer-race rules (`packages.vllm`),
the server settings they need (`server`, e.g. renderer workers) and the request features without which
they cannot happen (`exposed_by`, e.g. bad_words); an info rule covering the version with no race rule
beside it (the tokenizer pool of 0.21 and later) means nothing races there. In vLLM's terms (see the
README's "Which vLLM versions can race"): 0.17.x races at the default configuration; 0.18 to 0.20 race
through bad_words and, with `--renderer-num-workers` >= 2 (0.19, 0.20), between microbatch queues; 0.21
and later serve every tokenizer path from a pool of deep copies.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from borrowguard.knowledge import Kind, KnowledgeBase, Problem, load
from borrowguard.knowledge.detect import server_condition
from borrowguard.verify.wording import flag


def race_exposure(server: str | None, version: str | None, *, bad_words_sent: bool,
                  renderer_workers: int | None, kb: KnowledgeBase | None = None) -> str | None:
    """A note for the verdict when the target cannot race as configured (None: it can, or unknown)."""
    if server != "vllm" or not version:
        return None
    try:
        v = Version(version.split("+")[0])
    except InvalidVersion:
        return None
    kb = kb if kb is not None else load()
    races = [p for p in kb.of_kind(Kind.TOKENIZER_RACE) if _covers(p, v)]
    if not races:
        pool = next((p for p in kb.of_kind(Kind.INFO) if _covers(p, v)), None)
        if pool is None:
            return None
        return (
            f"vLLM {version}: {pool.title} ({pool.id}): this server cannot race as configured, so a PASS here is "
            "expected with or without the guard (the guard saves only the pool's memory, and only if it is "
            "allowed to replace it)"
        )
    if renderer_workers is None:
        return None  # the log did not say how the server runs: no claim
    sent = {"bad_words": bad_words_sent}
    facts = {"renderer_num_workers": renderer_workers}
    if any(_reachable(p, sent, facts) for p in races):
        return None
    needs = sorted({f for p in races for f in p.exposed_by})
    return (
        f"vLLM {version} with {renderer_workers} renderer worker(s) races only through "
        f"{', '.join(needs) or 'settings it does not have'} ({', '.join(p.id for p in races)}), and this run "
        f"sent none ({flag('no_vllm_extensions')}): it could not race as configured"
    )


def _covers(problem: Problem, version: Version) -> bool:
    spec = problem.vllm_versions
    return spec is not None and SpecifierSet(spec).contains(version, prereleases=True)


def _reachable(problem: Problem, sent: dict[str, bool], facts: dict[str, int]) -> bool:
    """Whether a race rule can strike this run: the request features it needs were sent and no known
    server fact contradicts its settings."""
    if problem.exposed_by and not any(sent.get(f, True) for f in problem.exposed_by):
        return False
    return server_condition(problem.detect or {}, facts) is not None
