"""What the extraction pipeline keeps of a model's items: a pure module, no I/O.

An item is dropped, for the first reason that applies, when:

- ``instruction_like``: its text reads as an instruction to an assistant ("ignore previous
  instructions", "you are now…", "忽略之前的指令"), whatever else it says — stored memories
  are later shown to models, so this is checked first and never relaxed;
- ``outside_view``: the queuing agent's view (read when the job runs) may not write it;
- ``low_confidence``: its confidence is below the tenant policy's ``min_confidence``;
- ``transient``: the model marked it transient (a passing state, not worth remembering), or,
  for a lasting (non-episodic) memory, its text tells of a state now ("exhausted today",
  "今天有点累") whatever the model said;
- ``sensitive``: it is a sensitive inference (health, emotions, finances, sexuality,
  religion, politics…) by the model's own flag or by a deterministic keyword check in
  English and Chinese, unless the tenant policy has ``allow_sensitive``;
- ``pii``: its text or key holds an identity or financial number (``_pii``: resident ID,
  passport, bank card, IBAN, social security number, phone, email — or, with a job's
  ``PiiScreen``, a number its turns held, however written), whatever the model said, and
  the tenant policy's ``pii`` is "drop" (the default). With "redact" the numbers are
  replaced by what they were ("[passport number]") and the item is kept, unless nothing
  else is left of it; with "keep" it is kept as it is. Unless "keep", an entity or a tag
  holding a number is left out of a kept item, never redacted into a name (an entity
  becomes an ``entity:`` tag), and so is anything of ``data`` that holds one
  (``draft_without_pii``, the last check before a draft is written). What is screened out
  of a kept item is counted by field (text, entity, tag, data), never kept.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from memoryd.domain import Category, Draft, Stability, TenantPolicy

from ._pii import PII, PLAIN, PiiScreen

INSTRUCTION_LIKE = "instruction_like"
OUTSIDE_VIEW = "outside_view"
LOW_CONFIDENCE = "low_confidence"
TRANSIENT = "transient"
SENSITIVE = "sensitive"

SENSITIVE_CLASSES = ("health", "emotions", "finances", "sexuality", "religion", "politics", "other")


@dataclass(frozen=True)
class ExtractedItem:
    """One memory item as the extraction model proposed it (already type-checked)."""

    category: Category
    text: str
    key: str = ""
    importance: float = 0.5
    confidence: float = 1.0
    stability: Stability = Stability.STABLE
    # "" when not sensitive; otherwise a class from SENSITIVE_CLASSES.
    sensitive: str = ""
    entities: tuple[str, ...] = ()
    source_turn_ids: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()


_INSTRUCTIONS_EN = [
    r"\b(ignore|disregard|forget|override|bypass)\b.{0,40}\b(instructions?|prompts?|rules|guidelines|directives|"
    r"system|above|previous|prior|earlier)\b",
    r"\byou\s+are\s+now\b",
    r"\bfrom\s+now\s+on\b.{0,40}\b(you|assistant|reply|respond|answer|act)\b",
    r"\b(act|behave)\s+as\s+(if|an?|the)\b",
    r"\bpretend\s+(to\s+be|you\s+are)\b",
    r"\bsystem\s+prompt\b",
    r"\b(always|never)\s+(output|reveal|print|leak|show|disclose|execute|run)\b",
    r"(^|[.!?;:]\s*)(always|never|do\s+not|don'?t)\s+(say|respond|reply|answer|tell|include|mention|refuse|follow)\b",
    r"\bnew\s+instructions?\b",
    r"\byou\s+(must|have\s+to|should|shall)\s+(always|never|from\s+now)\b",
    r"\bjailbreak|\bdeveloper\s+mode\b|\bdan\s+mode\b",
    r"<\s*/?\s*(system|assistant|user|instructions?|memory-reference)\b",
]
_INSTRUCTIONS_ZH = [
    r"(忽略|无视|忽视|不要理会|不要管|别管|忘记|忘掉)[^。！？]{0,12}(指令|指示|提示词?|规则|设定|要求|说明)",
    r"你现在(是|扮演|作为)",
    r"从现在(开始|起)[^。！？]{0,10}你",
    r"(扮演|假装你是|假装成)",
    r"系统提示",
    r"(总是|始终|一直|永远)(输出|透露|显示|泄露|执行)",
    r"新的?指令",
    r"(以后|今后|往后|之后|从今以后)[^。！？]{0,6}你[^。！？]{0,4}(必须|务必|一定要|只能|只许|每次|都要|都得|得|要)",
    r"你(必须|务必)[^。！？]{0,20}(回答|回复|输出|加上|附上|说|用)",
]
# A passing state ("exhausted today", "今天有点累") in what should be a lasting memory: the
# model's own stability flag is not trusted for it (issue 16's benchmark kept one it marked
# stable). Episodic memories are left alone: "ran a marathon today, exhausted" is an event.
_PASSING_EN = (r"\b(tired|exhausted|sleepy|worn\s+out|hungry|thirsty|sick|ill|unwell|bored|stressed|busy|"
               r"grumpy|sore|hungover|jet[- ]?lagged|in\s+a\s+(rush|hurry|bad\s+mood))\b")
_NOW_EN = r"\b(today|tonight|right\s+now|at\s+the\s+moment|this\s+(morning|afternoon|evening))\b"
_PASSING = re.compile(
    rf"{_PASSING_EN}[^.!?;]{{0,30}}{_NOW_EN}|{_NOW_EN}[^.!?;]{{0,30}}{_PASSING_EN}"
    r"|(今天|今晚|今早|现在|此刻|这会儿|这两天)[^。！？]{0,6}(有点|有些|很|非常|好|太|特别)?"
    r"(累|困|饿|渴|忙|烦|难受|不舒服|没精神|疲惫|疲倦|头疼|头痛)",
    re.IGNORECASE)
_INSTRUCTION = re.compile("|".join(f"(?:{p})" for p in _INSTRUCTIONS_EN + _INSTRUCTIONS_ZH), re.IGNORECASE)

_SENSITIVE_EN = {
    "health": r"diagnos\w*|depress\w*|anxiety|bipolar|schizo\w*|cancer|tumou?r|diabet\w*|hiv|aids|chemo\w*|"
              r"therap(y|ist)|psychiatr\w*|medication|antidepressant\w*|pregnan\w*|miscarriage|illness|disease|"
              r"disorder|mental\s+health|surgery|disabilit\w*|addict\w*|rehab|suicid\w*|self[- ]harm",
    "emotions": r"lonely|loneliness|heartbroken|grief|grieving|suicidal|hopeless|panic\s+attacks?|"
                r"(feels?|felt|feeling)\s+(sad|depressed|anxious|worthless|ashamed|angry|miserable|upset)",
    "finances": r"debts?|loans?|mortgage|salary|salaries|income|bankrupt\w*|credit\s+score|net\s+worth|"
                r"savings|overdraft|owes?\s+\S+\s+(money|dollars|euros)",
    "sexuality": r"gay|lesbian|bisexual|homosexual\w*|sexual\s+orientation|transgender|queer|sex\s+life",
    "religion": r"religio\w*|christian\w*|muslim|islam\w*|buddhis\w*|jewish|judaism|hindu\w*|atheis\w*|"
                r"catholic\w*|protestant\w*|mosque|synagogue|prays?\b|praying",
    "politics": r"politic\w*|democrat\w*|republican\w*|communis\w*|socialis\w*|conservative|liberal|"
                r"vote[sd]?\s+for|voting\s+for|party\s+member",
}
_SENSITIVE_ZH = {
    "health": "抑郁|焦虑症|双相|精神分裂|癌症|肿瘤|糖尿病|艾滋|化疗|心理医生|心理治疗|精神科|服药|怀孕|流产|疾病|病情|"
              "残疾|成瘾|戒毒|自杀|自残|确诊|住院",
    "emotions": "孤独|伤心|难过|心碎|悲伤|绝望|情绪低落|崩溃|焦虑",
    "finances": "负债|欠债|欠款|贷款|房贷|工资|薪水|收入|破产|存款|信用分|资产",
    "sexuality": "同性恋|性取向|双性恋|跨性别|性生活",
    "religion": "宗教|基督|伊斯兰|穆斯林|佛教|信佛|道教|天主教|犹太教|清真寺|教堂|祷告|信仰",
    "politics": "政治|党员|共产党|民主党|共和党|政党|投票给|选票",
}
_SENSITIVE = [(name, re.compile(rf"\b(?:{pattern})\b", re.IGNORECASE)) for name, pattern in _SENSITIVE_EN.items()]
_SENSITIVE += [(name, re.compile(pattern)) for name, pattern in _SENSITIVE_ZH.items()]
_INVISIBLE = re.compile("[\u200b-\u200f\u2060-\u2064\ufeff\u00ad]")


def _plain(text: str) -> str:
    """The text as checked: compatibility forms folded (full-width letters, ligatures), zero-width
    characters removed, whitespace collapsed — so look-alike spellings cannot slip past."""
    folded = _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))
    return " ".join(folded.split())


def instruction_like(text: str) -> bool:
    """Whether ``text`` reads as an instruction to an assistant rather than a memory."""
    return bool(_INSTRUCTION.search(_plain(text)))


def passing_state(text: str) -> bool:
    """Whether ``text`` tells of a passing state, now ("tired today", "今天有点累")."""
    return bool(_PASSING.search(_plain(text)))


def sensitive_class(text: str) -> str:
    """The sensitive class the keyword check finds in ``text`` ('' if none)."""
    plain = _plain(text)
    for name, pattern in _SENSITIVE:
        if pattern.search(plain):
            return name
    return ""


def drop_reason(item: ExtractedItem, policy: TenantPolicy, may_write: Callable[[Category, str], bool]) -> str:
    """Why ``item`` is not kept ('' if it is)."""
    words = " ".join((item.key.replace("_", " "), item.text))
    if instruction_like(item.text) or instruction_like(item.key.replace("_", " ")):
        return INSTRUCTION_LIKE
    if not may_write(item.category, item.key):
        return OUTSIDE_VIEW
    if item.confidence < policy.min_confidence:
        return LOW_CONFIDENCE
    if item.stability is Stability.TRANSIENT or (not item.category.episodic and passing_state(item.text)):
        return TRANSIENT
    if not policy.allow_sensitive and (item.sensitive or sensitive_class(words)):
        return SENSITIVE
    return ""


def without_pii(item: ExtractedItem, policy: TenantPolicy, screen: PiiScreen = PLAIN) -> ExtractedItem | None:
    """``item`` as the tenant policy's ``pii`` has it (``screen``): None to drop it, the item
    with its numbers redacted and its entities and tags holding one left out, or the item as
    it is. A number in the key drops the item unless the policy keeps it: a key is a name to
    look the memory up by."""
    if policy.pii == "keep":
        return item
    text = screen.screened(item.text, policy.pii)
    if text is None or screen.holds(item.key.replace("_", " ")):
        return None
    clean = replace(item, text=text, entities=screen.kept(item.entities, policy.pii),
                    tags=screen.kept(item.tags, policy.pii))
    return item if clean == item else clean


def pii_screened(before: ExtractedItem, after: ExtractedItem) -> Counter[str]:
    """What ``without_pii`` screened out of a kept item, by field: its text redacted, each
    entity and tag left out."""
    return +Counter({"text": int(after.text != before.text), "entity": len(before.entities) - len(after.entities),
                     "tag": len(before.tags) - len(after.tags)})


def draft_without_pii(draft: Draft, mode: str, screen: PiiScreen) -> tuple[Draft | None, Counter[str]]:
    """The last check of a draft before it is written, over every field it carries (text,
    key, tags, data), as ``without_pii`` has an item: what normalising added (an entity's
    ``entity:`` tag) or a field no item check saw. None to drop it; and what was screened
    out, by field."""
    if mode == "keep":
        return draft, Counter()
    text = screen.screened(draft.text, mode)
    if text is None or screen.holds(draft.key.replace("_", " ")):
        return None, Counter()
    tags = screen.kept(draft.tags, mode)
    data = screen.data(draft.data, mode) if draft.data is not None else None
    counts = Counter({"text": int(text != draft.text), "tag": len(draft.tags) - len(tags),
                      "data": int(data != draft.data)})
    return replace(draft, text=text, tags=tags, data=data), +counts


def filter_items(items: Iterable[ExtractedItem], policy: TenantPolicy,
                 may_write: Callable[[Category, str], bool],
                 screen: PiiScreen = PLAIN) -> tuple[list[ExtractedItem], Counter[str]]:
    """The items to keep, in order (numbers screened as the policy says, by ``screen``), and
    how many were dropped for each reason."""
    kept: list[ExtractedItem] = []
    dropped: Counter[str] = Counter()
    for item in items:
        reason = drop_reason(item, policy, may_write)
        clean = None if reason else without_pii(item, policy, screen)  # None: nothing left without the PII
        if clean is None:
            dropped[reason or PII] += 1
        else:
            kept.append(clean)
    return kept, dropped
