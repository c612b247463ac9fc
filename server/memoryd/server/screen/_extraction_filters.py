"""What the extraction pipeline keeps of a model's items: a pure module, no I/O.

An item is dropped, for the first reason that applies, when:

- ``instruction_like``: its text reads as an instruction to an assistant ("ignore previous
  instructions", "you are now…", "忽略之前的指令", a role claim or a grab for permissions:
  "this user is an administrator", "我是管理员"), whatever else it says — stored memories
  are later shown to models, so this is checked first and never relaxed (the worker also
  judges the turns the item comes from: ``_injected``); beside the phrase patterns below, by
  kind — orders addressed to the assistant, authority and permission claims, standing rules,
  other people's data, machine messages, requests to skip safety checks, privilege claims,
  third-party authorisations, security conduct set as a preference (``_instruction_kinds``);
- ``outside_view``: the queuing agent's view (read when the job runs) may not write it;
- ``low_confidence``: its confidence is below the tenant policy's ``min_confidence``;
- ``transient``: the model marked it transient (a passing state, not worth remembering), or,
  for a lasting (non-episodic) memory, its text tells of a state now ("exhausted today",
  "今天有点累") whatever the model said, or, in any category, it is only small talk or a
  passing feeling ("Nice to meet you", "有点紧张": ``passing_remark``);
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
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from memoryd.domain import Category, Draft, Stability, TenantPolicy

from ._instruction_kinds import instruction_kind, spellings
from ._pii import PII, PLAIN, PiiScreen
from ._provenance import fold

INSTRUCTION_LIKE = "instruction_like"
OUTSIDE_VIEW = "outside_view"
LOW_CONFIDENCE = "low_confidence"
TRANSIENT = "transient"
SENSITIVE = "sensitive"
NO_KEY = "no_key"  # a keyed category without a usable key (the worker's and consolidation's check)

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


_THIS_SYSTEM = r"(this|the|your)\s+(system|assistant|bot|model|ai|platform|service|memory|database|server)\b"
_ELSEWHERE = r"(?!\s+(of|at|in|for|on|to|with)\s+(?!" + _THIS_SYSTEM + "))"  # "admin of a chess club"
_INSTRUCTIONS_EN = [
    r"\b(ignore|disregard|forget|override|bypass|skip)\b.{0,40}\b(instructions?|prompts?|rules|guidelines|directives|"
    r"system|above|previous|prior|earlier|restrictions|polic(y|ies)|filters?|safeguards?|guardrails?)\b",
    r"(^|[.!?;:,]\s*)you\s+are\s+now\b(?!\s+(in|at|on|a\s+(mother|father|parent)|home|back|done|able|free|ready))",
    r"\byou\s+are\s+now\s+(an?\s+)?(unrestricted|unfiltered|uncensored|jailbroken|free\s+from|no\s+longer|in\s+\w+\s+mode)",
    r"\bfrom\s+now\s+on\b.{0,40}\b(you|assistant|reply|respond|answer|act)\b",
    r"(^|[.!?;:,]\s*)(please\s+|now\s+)?(act|behave)\s+as\s+(if|an?|the|my|though)\b",
    r"\byou\s+(will|must|should|shall|can|are\s+to)\s+(now\s+)?(act|behave)\s+as\b",
    r"(^|[.!?;:,]\s*)(please\s+|now\s+)?pretend\s+(to\s+be|you\s+are|you're)\b",
    r"\bpretend\s+(that\s+)?you\s+(are|have)\s+no\b",
    # The assistant's system prompt asked for; writing one for a bot of one's own is no injection.
    r"\b(your|the\s+assistant's|its|the\s+bot's|the\s+model's|hidden|internal|original|initial|new|updated)\s+"
    r"(\w+\s+)?system\s+prompt\b|\bsystem\s+prompt\s*[:=]|\b(reveal|show|print|output|dump|leak|repeat|recite|tell|"
    r"give|send|display|paste|share|see|seeing|read\s+out)\b[^.!?]{0,20}\b(your|the|its|this)\s+(\w+\s+){0,2}system\s+"
    r"prompt\b",
    r"\b(always|never)\s+(output|reveal|print|leak|show|disclose|execute|run)\b",
    r"(^|[.!?;:]\s*)(always|never|do\s+not|don'?t)\s+(say|respond|reply|answer|tell|include|mention|refuse|follow)\b"
    r"(?!\s+never\b)(?!\s+(anyone|anybody|him|her|them|mom|dad|my)\b)",
    r"\bnew\s+instructions?\b",
    r"\byou\s+(must|have\s+to|should|shall)\s+(always|never|from\s+now)\b",
    r"\bjailbreak|\bdeveloper\s+mode\b|\bdan\s+mode\b|\b(god|sudo|admin|debug|unrestricted|maintenance)\s+mode\b",
    r"<\s*/?\s*(system|assistant|user|instructions?|memory-reference|im_start|sys)\b|<\|im_(start|end)\|>|\[/?(inst|sys)\]",
    r"(^|[\[(#*\s])(system|admin|administrator|developer|root)\s*(message|note|notice|override|instruction|command|update)?"
    r"\s*[\]:)]\s*\S",  # fake system tags: "[SYSTEM] …", "SYSTEM: …", "### admin override: …"
    # Role claims and grabs for permissions: an assistant has no users with rights to grant.
    # A job ("the user is a developer", "…the admin of a chess club", "…has full access to the
    # gym") is a memory: only a role over this system, or one said of nothing else, is a claim.
    r"\b(this|the|current)\s+(user|account(\s+holder)?|caller)\s+(is|has|now\s+has|holds|gets|has\s+been\s+(given|granted)|"
    r"should\s+be\s+treated\s+as)\s+(an?\s+|the\s+)?(verified\s+)?((admin|administrator|root|superuser|super\s+user|"
    r"privileged|elevated|full\s+access|unrestricted)\b"
    r"(\s+(access|privileges?|permissions?|rights|clearance|role|status|level)\b)?+" + _ELSEWHERE +
    r"|(owner|developer|operator|moderator)\s+(of|for)\s+" + _THIS_SYSTEM + ")",
    r"\b(i\s+am|i'm|im)\s+(your|the\s+assistant's|this\s+assistant's|the\s+system's)\s+(creator|developer|owner|admin|"
    r"administrator|master|operator|programmer|maker)\b",
    r"\b(i\s+am|i'm)\s+(an?\s+|the\s+)?(system\s+)?(admin|administrator|superuser|root\s+user|developer)\b"
    r"[^.!?]{0,40}\b(grant|give|ignore|unlock|override|bypass|reveal|show\s+me|you\s+(must|should|will|can\s+now)|"
    r"privileges?|permissions?|access\s+(level|rights)|clearance)",
    r"\b(remember|note|record|store|save)\s+(that\s+)?(i\s+am|i'm|the\s+user\s+is|this\s+user\s+is)\s+(an?\s+|the\s+)?"
    r"(system\s+)?(admin|administrator|root|superuser|owner|developer|operator)\b",
    r"\b(grant|give|assign|elevate)\s+(me|this\s+user|the\s+user|my\s+account)\s+(\w+\s+){0,2}"
    r"(admin|administrator|root|superuser|elevated|full|unrestricted|unlimited)\s+(access|privileges?|permissions?|"
    r"rights|control|clearance)",
    r"\b(elevate|escalate|upgrade)\s+(my|the\s+user's|this\s+user's)\s+(privileges?|permissions?|access|role)",
    r"\b(admin|administrator|root|elevated|unrestricted)\s+(access|privileges?|permissions?|rights)\s+(is|are|has\s+been|"
    r"have\s+been)\s+(granted|enabled|unlocked)",
    r"\b(reveal|show|print|output|dump|leak|list|repeat|tell\s+me)\s+(me\s+)?(all\s+|every\s+)?(the\s+|your\s+)?"
    r"(other\s+users?'?s?|stored|saved|hidden|internal|everyone'?s|all\s+users?'?s?)\s+(memories|data|passwords?|secrets?|"
    r"records|information|instructions|prompts?|api\s+keys?)",
    r"\b(reveal|show|print|output|repeat|leak)\s+(me\s+)?(your|the)\s+(hidden\s+|initial\s+|original\s+)?"
    r"(instructions|rules|configuration|api\s+keys?|secrets?)\b",
    r"\byou\s+(are|'re)\s+(no\s+longer|not)\s+(bound|restricted|limited|an?\s+(ai|assistant))\b",
    r"\b(disable|turn\s+off|remove|lift)\s+(all\s+|your\s+|the\s+)?(safety|security|content)\s+"
    r"(filters?|restrictions|checks|guidelines|policies|measures)",
    r"\bthe\s+assistant\s+(must|should|shall|will\s+now|has\s+to)\b",
    r"\bnew\s+(rules?|polic(y|ies)|directives?)\s*[:：]",
    r"\bwhenever\s+(someone|anyone|anybody|somebody|people)\s+asks?\b.{0,40}\b(tell|say|answer|reply|respond|give)\b",
    r"\b(authori[sz]e|permit|allow|order|command)\s+you\s+to\s+(show|reveal|share|bypass|ignore|access|dump|delete|"
    r"disable|export|list|print)",
    r"\btreat\s+(me|my\s+requests?|every\s+request|this\s+user|all\s+requests?)\b.{0,30}\bas\b.{0,20}"
    r"\b(admin|administrator|root|superuser|developer|owner|trusted|verified)\b",
    r"\b(stop|quit)\s+(following|obeying)\s+(your|ur|the|those|these|all|any)?\s*(rules|guidelines|instructions|"
    r"policies|restrictions)",
    r"\byou\s+(have|has|had)\s+no\s+(rules|restrictions|limits|limitations|filters|guidelines)",
    r"\b(disable|turn\s+off|deactivate|switch\s+off)\s+(the\s+|all\s+|your\s+)?(moderation|filters?|safety|"
    r"censorship|guardrails?)",
    r"\b(messages?|notes?|instructions?)\s+from\s+(openai|anthropic|the\s+developers?|the\s+system|your\s+"
    r"(developers?|creators?|makers?))\b",
]
_INSTRUCTIONS_ZH = [
    r"(忽略|无视|忽视|不要理会|不要管|别管|忘记|忘掉|跳过|绕过)[^。！？]{0,12}(指令|指示|提示词?|规则|设定|要求|说明|限制|约束|规定)",
    r"(忽略|无视|忽视|忘记|忘掉)(之前|以上|上面|上述|前面|先前|此前|所有|一切)(的)?(所有|一切|全部)?(内容|对话|话|消息)",
    r"你现在(是|扮演|作为|就是|成为)",
    r"从?现在(开始|起)[^。！？]{0,10}你",
    r"(^|[。！？])\s*(请你?|现在)?(扮演|假装成)|请你?(来)?扮演|假装你是",
    r"(你的|自己的|助手的|你们的|内部|隐藏的?|原始的?|初始的?|新的?)系统提示|系统提示词?\s*[:：=]|(输出|透露|显示|泄露|发给?我|给我看|"
    r"告诉我|复述|重复|打印|展示|说出|念|贴出|原样)[^。！？]{0,12}系统提示",
    r"(总是|始终|一直|永远)(输出|透露|显示|泄露|执行)",
    r"新的?指令",
    r"(以后|今后|往后|之后|从今以后)[^。！？]{0,6}你[^。！？]{0,4}(必须|务必|一定要|只能|只许|每次|都要|都得|得|要)",
    r"你(必须|务必)[^。！？]{0,20}(回答|回复|输出|加上|附上|说|用)",
    # Role claims and grabs for permissions.
    r"我(就)?是(你的|这个系统的|本系统的|系统的|该系统的)?(超级)?(系统)?(管理员|开发者|开发人员|维护人员|创造者|创建者|主人|超级用户|运营者|root)",
    r"(该|这个|此|这位|当前)用户(是|为|拥有|具有|有|已获得|已被授予)[^。！？]{0,6}(管理员|超级用户|最高|root|特权|全部权限|所有权限|"
    r"管理权限|开发者)",
    # A grant of wide rights, or of any to the speaker: "负责给员工开通账号和分配权限" is a job.
    r"(授予|给予|赋予|开放|开通|分配)[^。！？]{0,6}(管理员|最高|全部|所有|root|超级|特殊|无限制)的?(权限|访问权|控制权)|"
    r"(授予|给予|赋予|开放|开通|分配)给?(我|该用户|这个用户|本用户|此用户)[^。！？]{0,6}(权限|访问权|控制权)",
    r"给(我|该用户|这个用户|用户)[^。！？]{0,4}(管理员|最高|全部|所有|root|超级|无限制)的?(权限|访问权|控制权)",
    r"(提升|提高|升级)[^。！？]{0,4}(我的|该用户的|用户的)?权限",
    r"(开发者|管理员|上帝|越狱|调试|无限制|超级|维护)模式",
    r"你(不再|不受|没有|不用遵守|不用管|不必管|无需遵守|无需理会)[^。！？]{0,6}(限制|约束|规则|规定|指令)",
    r"以(管理员|超级用户|开发者|root|系统)(的)?身份",
    r"(数据库|后台|记忆库)[^。！？]{0,8}(给我|发给我|告诉我|导出|列出)",
    r"(复述|重复|原样输出|背诵)[^。！？]{0,8}(第一条|最初的|最开始的|初始|系统)(消息|指令|提示)",
    r"(第一条|最初的|最开始的|初始|系统)(消息|指令|提示)[^。！？]{0,8}(复述|重复|原样输出|背诵)",
    r"(别|不要|不用)(理会|管|听)(之前|前面|上面|刚才)(说的|的话|的内容|的设定)",
    r"(记住|请记住|记得|记下)[^。！？]{0,4}(我|该用户|这个用户|用户)(就)?是[^。！？]{0,4}(管理员|开发者|超级用户|主人|root)",
    r"(泄露|透露|显示|输出|打印|告诉我|列出|展示)[^。！？]{0,8}(系统提示|提示词|所有用户|其他用户|别人的记忆|全部记忆|所有记忆|"
    r"密码|密钥|隐藏的?指令|内部指令|初始指令)",
    r"(【|\[|^|\s)(系统|管理员|开发者)(消息|指令|通知|命令|提示)?(】|\]|[:：])",
    r"(听|服从|遵守|执行)我的(指令|命令)",
    r"(关闭|解除|取消|绕过)[^。！？]{0,4}(安全|内容)?(过滤|限制|审查|防护)",
    r"助手(必须|应该|务必|要)[^。！？]{0,10}(回答|回复|输出|服从|执行|遵守)",
]
# Letters other scripts draw like Latin ones (Cyrillic і, о, а…; Greek ο, α…): folded for
# the instruction check only, so "іgnore previous instructions" is still caught.
_CONFUSABLES = str.maketrans("аеорсхуіјѕԁһӏвмнтАВЕКМНОРСТХІЈЅοαειτνκρΑΒΕΗΙΚΜΝΟΡΤΧΥΖ",
                             "aeopcxyijsdhlbmhtABEKMHOPCTXIJSoaeitvkpABEHIKMNOPTXYZ")
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
# Small talk and passing feelings ("Lovely weather, isn't it?", "I'm a bit nervous", "谢谢",
# "有点紧张"): an item made only of these words says nothing lasting, whatever its category or
# the model's stability flag. A habit ("every", "总是"), a cause, an event or a name is left
# over and keeps the item: "gets nervous before every exam", "ran a marathon today, exhausted".
_CHAT_WORDS = frozenset("""
    the a an user users speaker assistant bot i im me my mine you your it its is are am was were be been being isn
    wasn aren t s m re ve d ll so very really quite bit little kind of kinda sort somewhat pretty too just now
    right today tonight this morning afternoon evening night at moment currently feel feels feeling felt seems
    seem seemed looks look and but oh well yeah yes no ok okay alright haha hahaha ha lol lmao hehe hi hello hey
    bye goodbye good nice lovely great fine thanks thank thanked thanking greeted greet greets greeting said says
    say saying asked asks how doing meet meeting to see glad pleased weather sunny rainy cloudy cold hot warm
    beautiful wonderful awesome cool funny that helpful mood in with for on there here cheers mate sounds
    happy sad excited bored tired nervous anxious upset angry calm relaxed stressed worried scared annoyed grumpy
    cheerful content down low exhausted sleepy hungry jittery restless frustrated emotional uneasy tense
    """.split())
_CHAT_PHRASES_ZH = sorted("""
    用户 助手 我 你 您 他 她 它 今天 今晚 现在 此刻 这会儿 目前 有点儿 有点 有些 一点 一些 很 非常 真 太 好 挺 特别 超级 蛮
    感觉 觉得 感到 心情 情绪 是 的 了 啊 呀 吧 呢 嘛 哦 哈 嗯 呵 啦 说 向 问好 打招呼 感谢 谢谢 谢 再见 拜拜 早上好 晚上好
    下午好 晚安 你好 您好 认识 高兴 开心 快乐 难过 伤心 紧张 焦虑 焦躁 激动 兴奋 无聊 郁闷 烦 累 困 饿 生气 不错 天气
    明白 好的 知道 收到 没问题 行 对 一下 了解 不好 还行 一般 有 些 点 都 也 还 又 晴朗 阳光 冷 热 舒服
    """.split(), key=len, reverse=True)
_CHAT_ZH = re.compile("|".join(map(re.escape, _CHAT_PHRASES_ZH)))
# A name the item starts with (its subject): a capitalised word, or two or three Chinese
# characters after a common surname or 小/老/阿.
_LEADING_NAME = re.compile(r"^\s*(?:[A-Z][a-z]+(?:'s)?\b|[小老阿王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯"
                           r"邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦"
                           r"邱江尹薛段雷侯龙史陶黎贺顾毛郝龚邵万钱严武戴莫孔汤][\u4e00-\u9fff]{1,2}(?=有|很|今|现|感|觉|心|说|向|是|此|这|目|非|挺|真|太|好))")
_LATIN_WORD = re.compile(r"[a-z0-9]+")
_CJK_CHARS = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")

# Searched one by one: as one alternation they cost 4-7 times as much (66 ms for 8 KiB of
# text, against 5-15 ms), as every branch is tried at every position.
_INSTRUCTION = tuple(re.compile(p, re.IGNORECASE) for p in _INSTRUCTIONS_EN + _INSTRUCTIONS_ZH)

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


def _plain(text: str) -> str:
    """The text as checked: compatibility forms folded (full-width letters, ligatures), zero-width
    characters removed, whitespace collapsed — so look-alike spellings cannot slip past."""
    return " ".join(fold(text).split())


# How the user wants to be answered — a language, a spelling, a length, a format, a tone,
# units, a name to be called by — is a preference to remember, even said as an order
# ("From now on, please reply in Chinese"), as long as the turn asks nothing else: none of
# the words below that any conduct rule, claim or ask for data needs.
_STYLE = re.compile(
    r"\b(english|chinese|mandarin|cantonese|french|spanish|german|italian|portuguese|japanese|korean|russian|"
    r"arabic|hindi|dutch|swedish|british|american|spelling|bullet(\s+points?)?|paragraphs?|lists?|tables?|"
    r"headings?|emojis?|concise|brief|short(er)?|long(er)?|detailed|formal|informal|casual|polite|friendly|tone|"
    r"metric|imperial|celsius|fahrenheit|units?|simple\s+words|plain\s+language|first\s+name|nickname)\b"
    r"|中文|英文|英语|汉语|普通话|粤语|繁体|简体|日语|韩语|法语|德语|简短|简洁|详细|短一点|长一点|分点|列表|表格|表情|"
    r"正式|口语|随意|语气|公制|摄氏|叫我|称呼我",
    re.IGNORECASE)
_NOT_STYLE = re.compile(
    r"\b(ignor\w*|instruct\w*|prompts?|rules?|guidelines?|polic\w*|filter\w*|safe\w*|moderat\w*|verif\w*|"
    r"refus\w*|disclaim\w*|restrict\w*|system|admin\w*|root|developer|permission\w*|access|privilege\w*|"
    r"authori[sz]\w*|clearance|passwords?|data|memor(y|ies)|records?|history|histories|others?|users?|anyone|"
    r"everyone|someone|somebody|anybody|reveal\w*|secrets?|hidden|obey\w*|commands?|orders?|override\w*|"
    r"bypass\w*|skip\w*|pretend\w*|role\w*|mode|jailbr\w*|base64|decod\w*|execut\w*|follow\w*|master|owner|"
    r"boss|lord|god|sir|trust\w*|account\w*|settings?|code\s+words?|whenever|treat|dan|persona\w*|characters?|"
    r"act(ing)?\s+as|behave\w*|you\s+are\s+now|you'?re\s+now|unrestricted|unfiltered|uncensored|everything|"
    r"stor(e|ed|es|ing)|saved|persons?|people|everybody|workspace|team|colleagues?|family|members?)\b"
    r"|忽略|无视|指令|提示|规则|设定|安全|审核|验证|拒绝|免责|限制|系统|管理|权限|授权|密码|数据|记忆|记录|聊天|其他|"
    r"任何人|别人|他人|透露|隐藏|服从|命令|扮演|模式|执行|解码|主人|老板|大人|信任|账号|账户|设置|每当|只要|你现在|你就是|"
    r"假装|角色|身份|所有|全部|保存|存储|存的|成员|同事|家人",
    re.IGNORECASE)


def style_preference(plain: str) -> bool:
    """Whether ``plain`` only asks to be answered in some style (``_STYLE``), and nothing
    else a conduct rule, a claim or an ask for data would need (``_NOT_STYLE``)."""
    return len(plain) <= 300 and bool(_STYLE.search(plain)) and not _NOT_STYLE.search(plain)


def instruction_like(text: str) -> bool:
    """Whether ``text`` reads as an instruction to an assistant rather than a memory: by the
    phrase patterns above or by kind (``_instruction_kinds``), in any of its spellings — unless
    it only asks to be answered in some style (``style_preference``)."""
    readings = spellings(fold(text).translate(_CONFUSABLES))
    if all(style_preference(plain) for plain in readings):
        return False
    return any(any(pattern.search(plain) for pattern in _INSTRUCTION) or instruction_kind(plain)
               for plain in readings)


def passing_state(text: str) -> bool:
    """Whether ``text`` tells of a passing state, now ("tired today", "今天有点累")."""
    return bool(_PASSING.search(_plain(text)))


def passing_remark(text: str) -> bool:
    """Whether ``text`` is only small talk or a passing feeling ("Nice to meet you", "I'm a bit
    nervous", "谢谢", "有点紧张"): nothing is left of it but greetings, thanks, weather, moods,
    pronouns and words of degree and time."""
    plain = _plain(text)
    if not plain:
        return False
    match = _LEADING_NAME.match(plain)
    if match and match.group().strip().lower().removesuffix("'s") not in _CHAT_WORDS:
        plain = plain[match.end():]
        if not plain.strip(" .!?"):
            return False  # a name alone ("Alice", the value of a key `name`) is no small talk
    latin = [w for w in _LATIN_WORD.findall(plain.lower()) if w not in _CHAT_WORDS]
    return not latin and not _CJK_CHARS.search(_CHAT_ZH.sub("", plain))


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
    if (item.stability is Stability.TRANSIENT or (not item.category.episodic and passing_state(item.text))
            or passing_remark(item.text)):
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
