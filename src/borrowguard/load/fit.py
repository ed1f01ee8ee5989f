"""Fitting the workload to the server's context window, so that no request of ours is refused for length.

Each scenario has a scale in (0, 1]: every size it draws (words, tool results, image area) is multiplied
by it. The scale starts from an estimate of the scenario's largest prompt against the budget
`(max_model_len - max_tokens) × margin`, and shrinks whenever the server says a prompt was too long or
reports more prompt tokens than the estimate allowed. Every change bumps `generation`, which is part of
the identical-request keys: requests built at another scale are not "identical".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

MARGIN = 0.8
MIN_SCALE = 0.02


@dataclass(frozen=True)
class ScenarioSize:
    """A scenario's largest prompt in tokens at scale 1: a fixed part (template, tool schemas) and the
    part that scales."""

    fixed: float
    scaled: float

    def at(self, scale: float) -> float:
        return self.fixed + self.scaled * scale


@dataclass(frozen=True)
class ContextFit:
    """How big each scenario's prompts may be, as learned so far: a value, never changed in place.

    What the session learns (the server's context length, an answer reporting more prompt tokens than the
    budget, a raised max_tokens) makes a new fit (`with_context`, `observed`, `with_max_tokens`,
    `with_sizes`), which its owner, the request factory, takes in one step (`RequestFactory.refit`). A
    builder reads the factory's fit once per request, so a request's scale comes from one fit whatever
    happens meanwhile; repeats are keyed by `generation`, which counts the changes of scale.
    """

    max_model_len: int | None = None
    max_tokens: int = 16
    margin: float = MARGIN
    sizes: Mapping[str, ScenarioSize] = field(default_factory=dict)
    scales: Mapping[str, float] = field(default_factory=dict)
    generation: int = 0
    unfit: Mapping[str, str] = field(default_factory=dict)  # scenario -> why nothing of it can fit

    @property
    def budget(self) -> float | None:
        if self.max_model_len is None:
            return None
        return max(1.0, (self.max_model_len - self.max_tokens) * self.margin)

    def scale(self, scenario: str) -> float:
        return self.scales.get(scenario, 1.0)

    def planned(self) -> ContextFit:
        """This fit with every scale (re)computed from the sizes and the budget (self when none changes)."""
        budget = self.budget
        scales, unfit, generation = dict(self.scales), dict(self.unfit), self.generation
        for name, size in self.sizes.items():
            if budget is None or size.at(1.0) <= budget:
                scale = 1.0
            elif size.fixed >= budget or size.scaled <= 0:
                scale = MIN_SCALE
                unfit[name] = f"its fixed part alone (~{size.fixed:.0f} tokens) exceeds the budget of {budget:.0f}"
            else:
                scale = max(MIN_SCALE, (budget - size.fixed) / size.scaled)
            if abs(scale - scales.get(name, 1.0)) > 1e-9:
                scales[name] = scale
                generation += 1
        if generation == self.generation and unfit == self.unfit:
            return self
        return replace(self, scales=scales, unfit=unfit, generation=generation)

    def with_context(self, max_model_len: int | None) -> ContextFit:
        """The fit to a context of `max_model_len` tokens (None: not known)."""
        if self.max_model_len == max_model_len:
            return self
        return replace(self, max_model_len=max_model_len).planned()

    def with_max_tokens(self, max_tokens: int) -> ContextFit:
        """The fit when answers may take `max_tokens` of the context."""
        if self.max_tokens == max_tokens:
            return self
        return replace(self, max_tokens=max_tokens).planned()

    def with_sizes(self, sizes: Mapping[str, ScenarioSize]) -> ContextFit:
        """The fit with these scenarios' largest prompts (the others' kept)."""
        return replace(self, sizes={**self.sizes, **sizes}).planned()

    def observed(self, scenario: str, scale: float, prompt_tokens: int) -> ContextFit:
        """A prompt built at `scale` had `prompt_tokens`: the fit shrunk if that is over the budget (self when
        it is not, or when the scenario has been shrunk past this already, by another answer)."""
        budget = self.budget
        if budget is None or prompt_tokens <= budget:
            return self
        wanted = max(MIN_SCALE, scale * budget / prompt_tokens * 0.9)
        if wanted >= self.scales.get(scenario, 1.0):
            return self
        return replace(self, scales={**self.scales, scenario: wanted}, generation=self.generation + 1)

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
