"""What is never stored: PII, instruction-like and injected text, judged by patterns and by meaning,
and which turns an extracted item really comes from. Pure modules, no I/O.
"""

from ._extraction_filters import (
    ExtractedItem,
    INSTRUCTION_LIKE,
    NO_KEY,
    SENSITIVE_CLASSES,
    TRANSIENT,
    draft_without_pii,
    drop_reason,
    filter_items,
    instruction_like,
    pii_screened,
)
from ._injected import InjectedTurns, sentences
from ._injection_exemplars import (
    FIRST_SET,
    ROUND_1_INJECTIONS,
    ROUND_1_NEAR_MISSES,
    ROUND_2_INJECTIONS,
    ROUND_2_NEAR_MISSES,
)
from ._injection_meaning import MeaningJudge, meaning_judge
from ._pii import PII, PLAIN, PiiScreen, screened
from ._provenance import UNSUPPORTED, fold, source_turns

__all__ = ["ExtractedItem", "FIRST_SET", "INSTRUCTION_LIKE", "InjectedTurns", "MeaningJudge", "NO_KEY",
           "PII", "PLAIN", "PiiScreen", "ROUND_1_INJECTIONS", "ROUND_1_NEAR_MISSES", "ROUND_2_INJECTIONS",
           "ROUND_2_NEAR_MISSES", "SENSITIVE_CLASSES", "TRANSIENT", "UNSUPPORTED", "draft_without_pii",
           "drop_reason", "filter_items", "fold", "instruction_like", "meaning_judge", "pii_screened",
           "screened", "sentences", "source_turns"]
