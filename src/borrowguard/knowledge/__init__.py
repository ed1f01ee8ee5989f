"""The knowledge base: every known problem once, for doctor (version rules) and scan (log signatures).

from borrowguard.knowledge import load
kb = load()                       # bundled rules.toml (cached)
kb = load("my-rules.toml")        # plus a user's file: new ids add, same ids replace
kb.get("tokenizers-borrow-race").remedies
kb.log_ids(Kind.TOKENIZER_RACE)   # what other rooms ask for instead of naming ids
"""

from borrowguard.knowledge.detect import CHECKS
from borrowguard.knowledge.loader import (
    BUNDLED_RULES,
    ChangeProse,
    KnowledgeBase,
    KnowledgeError,
    Problem,
    load,
)
from borrowguard.knowledge.model import CONFIDENCES, KINDS, SEVERITIES, Confidence, Kind, Severity

__all__ = [
    "BUNDLED_RULES",
    "CHECKS",
    "CONFIDENCES",
    "KINDS",
    "SEVERITIES",
    "ChangeProse",
    "Confidence",
    "Kind",
    "KnowledgeBase",
    "KnowledgeError",
    "Problem",
    "Severity",
    "load",
]
