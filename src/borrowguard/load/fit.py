"""Fitting the workload to the server's context window, so that no request of ours is refused for length.

Each scenario has a scale in (0, 1]: every size it draws (words, tool results, image area) is multiplied
by it. The scale starts from an estimate of the scenario's largest prompt against the budget
`(max_model_len - max_tokens) × margin`, and shrinks whenever the server says a prompt was too long or
reports more prompt tokens than the estimate allowed. Every change bumps `generation`, which is part of
the identical-request keys: requests built at another scale are not "identical".
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

MARGIN = 0.8
MIN_SCALE = 0.02


@dataclass
class ScenarioSize:
    """A scenario's largest prompt in tokens at scale 1: a fixed part (template, tool schemas) and the
    part that scales."""

    fixed: float
    scaled: float

    def at(self, scale: float) -> float:
        return self.fixed + self.scaled * scale


@dataclass
class ContextFit:
    """How big each scenario's prompts may be: live state, shared on purpose (not a value between rooms).

    The verify session feeds it (`learn_context` when the server's context length is learned,
    `observed` when an answer reports more prompt tokens than the budget); the request builders read
    `scale()` for every request and key repeats by `generation`, which counts the changes (made under
    the lock).
    """

    max_model_len: int | None = None
    max_tokens: int = 16
    margin: float = MARGIN
    sizes: dict[str, ScenarioSize] = field(default_factory=dict)
    scales: dict[str, float] = field(default_factory=dict)
    generation: int = 0
    unfit: dict[str, str] = field(default_factory=dict)  # scenario -> why nothing of it can fit
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def budget(self) -> float | None:
        if self.max_model_len is None:
            return None
        return max(1.0, (self.max_model_len - self.max_tokens) * self.margin)

    def scale(self, scenario: str) -> float:
        return self.scales.get(scenario, 1.0)

    def plan(self) -> None:
        """(Re)compute every scale from the sizes and the budget."""
        budget = self.budget
        with self._lock:
            for name, size in self.sizes.items():
                if budget is None or size.at(1.0) <= budget:
                    scale = 1.0
                elif size.fixed >= budget or size.scaled <= 0:
                    scale = MIN_SCALE
                    self.unfit[name] = (
                        f"its fixed part alone (~{size.fixed:.0f} tokens) exceeds the budget of {budget:.0f}"
                    )
                else:
                    scale = max(MIN_SCALE, (budget - size.fixed) / size.scaled)
                if abs(scale - self.scales.get(name, 1.0)) > 1e-9:
                    self.scales[name] = scale
                    self.generation += 1

    def learn_context(self, max_model_len: int) -> None:
        if self.max_model_len != max_model_len:
            self.max_model_len = max_model_len
            self.plan()

    def observed(self, scenario: str, scale: float, prompt_tokens: int) -> bool:
        """A prompt built at `scale` had `prompt_tokens`: shrink if that is over the budget (or near it)."""
        budget = self.budget
        if budget is None or prompt_tokens <= budget:
            return False
        with self._lock:
            current = self.scales.get(scenario, 1.0)
            wanted = max(MIN_SCALE, scale * budget / prompt_tokens * 0.9)
            if wanted >= current:
                return False  # already shrunk past this, by another answer
            self.scales[scenario] = wanted
            self.generation += 1
            return True

    def summary(self) -> FitSummary:
        """What the fit came to: the context, the budget, each scenario's scale and largest prompt."""
        return FitSummary(
            max_model_len=self.max_model_len,
            max_tokens=self.max_tokens,
            budget=round(self.budget) if self.budget is not None else None,
            scales={k: round(v, 4) for k, v in sorted(self.scales.items())},
            largest_prompt={k: round(v.at(self.scale(k))) for k, v in sorted(self.sizes.items())},
            unfit=dict(self.unfit),
        )


@dataclass(frozen=True)
class FitSummary:
    """The workload's fit at the end of a run (the run document's `workload.fit`)."""

    max_model_len: int | None
    max_tokens: int
    budget: int | None  # tokens a prompt may have
    scales: Mapping[str, float]  # scenario -> the scale its prompts were built at
    largest_prompt: Mapping[str, int]  # scenario -> its largest prompt at that scale, estimated, in tokens
    unfit: Mapping[str, str]  # scenario -> why nothing of it can fit
