"""Normalisation after extraction: relative dates, units and entity tags, as tables of cases."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from memoryd.domain import Normalised, dated, different_dates, normalise

SHANGHAI = ZoneInfo("Asia/Shanghai")
LOS_ANGELES = ZoneInfo("America/Los_Angeles")

MON = datetime(2026, 11, 30, 10, 0, tzinfo=SHANGHAI)  # a Monday at the end of a month
FRI = datetime(2026, 12, 4, 18, 0, tzinfo=SHANGHAI)  # a Friday
SAT = datetime(2026, 12, 5, 9, 0, tzinfo=SHANGHAI)  # a Saturday
NYE = datetime(2026, 12, 31, 23, 30, tzinfo=SHANGHAI)  # Thursday, last day of ISO week 2026-W53
JAN31 = datetime(2026, 1, 31, 8, 0, tzinfo=LOS_ANGELES)  # a Saturday, end of a 31-day month
LEAP = datetime(2028, 2, 29, 12, 0, tzinfo=SHANGHAI)


def case(text: str, at: datetime, expected: str, id: str) -> object:  # noqa: A002 - pytest's word
    return pytest.param(text, at, expected, id=id)


DATES = [
    # English days
    case("I fly to Lyon tomorrow", MON, "I fly to Lyon tomorrow (2026-12-01)", "en-tomorrow"),
    case("Today I quit sugar", MON, "Today (2026-11-30) I quit sugar", "en-today-capitalised"),
    case("dinner tonight", MON, "dinner tonight (2026-11-30)", "en-tonight"),
    case("met Bob yesterday", MON, "met Bob yesterday (2026-11-29)", "en-yesterday"),
    case("slept badly last night", MON, "slept badly last night (2026-11-29)", "en-last-night"),
    case("back the day after tomorrow", MON, "back the day after tomorrow (2026-12-02)",
         "en-day-after-tomorrow-wins-over-tomorrow"),
    case("left the day before yesterday", MON, "left the day before yesterday (2026-11-28)",
         "en-day-before-yesterday"),
    case("TOMORROW it rains", MON, "TOMORROW (2026-12-01) it rains", "en-upper-case"),
    case("tomorrow's standup moved", MON, "tomorrow's (2026-12-01) standup moved", "en-possessive"),
    case("see you tomorrow", NYE, "see you tomorrow (2027-01-01)", "en-tomorrow-across-year-end"),
    case("born tomorrow", datetime(2028, 2, 28, tzinfo=SHANGHAI), "born tomorrow (2028-02-29)",
         "en-tomorrow-leap-day"),
    # English weeks, months, years
    case("busy next week", MON, "busy next week (2026-12-07..2026-12-13)", "en-next-week"),
    case("busy this week", MON, "busy this week (2026-11-30..2026-12-06)", "en-this-week"),
    case("busy last week", MON, "busy last week (2026-11-23..2026-11-29)", "en-last-week"),
    case("next week", NYE, "next week (2027-01-04..2027-01-10)", "en-next-week-across-year-end"),
    case("moving next month", MON, "moving next month (2026-12)", "en-next-month"),
    case("moving next month", NYE, "moving next month (2027-01)", "en-next-month-across-year-end"),
    case("paid last month", JAN31, "paid last month (2025-12)", "en-last-month-across-year-start"),
    case("this month is tight", MON, "this month (2026-11) is tight", "en-this-month"),
    case("retire next year", NYE, "retire next year (2027)", "en-next-year"),
    case("last year's trip", MON, "last year's (2025) trip", "en-last-year-possessive"),
    case("this year", MON, "this year (2026)", "en-this-year"),
    # English weekdays (MON is a Monday, FRI a Friday, SAT a Saturday)
    case("demo next Friday", MON, "demo next Friday (2026-12-04)", "en-next-friday-on-monday"),
    case("demo next Friday", FRI, "demo next Friday (2026-12-11)", "en-next-friday-on-friday"),
    case("demo next Friday", SAT, "demo next Friday (2026-12-11)", "en-next-friday-on-saturday"),
    case("call on Friday", MON, "call on Friday (2026-12-04)", "en-on-friday"),
    case("due by Monday", MON, "due by Monday (2026-12-07)", "en-by-monday-on-monday"),
    case("this Friday", FRI, "this Friday (2026-12-04)", "en-this-friday-is-today-on-friday"),
    case("this Friday", SAT, "this Friday (2026-12-11)", "en-this-friday-on-saturday"),
    case("last Friday", MON, "last Friday (2026-11-27)", "en-last-friday-on-monday"),
    case("last Friday", FRI, "last Friday (2026-11-27)", "en-last-friday-on-friday"),
    case("last Friday", SAT, "last Friday (2026-12-04)", "en-last-friday-on-saturday"),
    case("Friday next week", MON, "Friday next week (2026-12-11)", "en-friday-next-week"),
    case("on Monday next week", NYE, "on Monday next week (2027-01-04)", "en-monday-next-week-year-end"),
    case("next Monday", NYE, "next Monday (2027-01-04)", "en-next-monday-across-year-end"),
    # English offsets
    case("in 3 days", MON, "in 3 days (2026-12-03)", "en-in-3-days"),
    case("in two weeks", MON, "in two weeks (2026-12-14)", "en-in-two-weeks"),
    case("in twelve days", NYE, "in twelve days (2027-01-12)", "en-in-twelve-days"),
    case("in a week", MON, "in a week (2026-12-07)", "en-in-a-week"),
    case("in one month", JAN31, "in one month (2026-02)", "en-in-one-month-from-jan-31"),
    case("in 3 months", MON, "in 3 months (2027-02)", "en-in-3-months-across-year-end"),
    case("in 2 years", LEAP, "in 2 years (2030)", "en-in-2-years-from-leap-day"),
    case("3 days ago", MON, "3 days ago (2026-11-27)", "en-3-days-ago"),
    case("two weeks ago", JAN31, "two weeks ago (2026-01-17)", "en-two-weeks-ago"),
    case("a month ago", JAN31, "a month ago (2025-12)", "en-a-month-ago"),
    case("5 days from now", NYE, "5 days from now (2027-01-05)", "en-days-from-now"),
    # Chinese days
    case("明天去里昂", MON, "明天(2026-12-01)去里昂", "zh-mingtian"),
    case("今天很累", MON, "今天(2026-11-30)很累", "zh-jintian"),
    case("今晚吃火锅", MON, "今晚(2026-11-30)吃火锅", "zh-jinwan"),
    case("后天考试", MON, "后天(2026-12-02)考试", "zh-houtian"),
    case("大后天出发", MON, "大后天(2026-12-03)出发", "zh-dahoutian-wins-over-houtian"),
    case("昨天见了老王", MON, "昨天(2026-11-29)见了老王", "zh-zuotian"),
    case("前天下雨", MON, "前天(2026-11-28)下雨", "zh-qiantian"),
    case("明天放假", NYE, "明天(2027-01-01)放假", "zh-mingtian-across-year-end"),
    # Chinese weeks
    case("下周去北京", MON, "下周(2026-12-07..2026-12-13)去北京", "zh-xiazhou"),
    case("下星期开会", MON, "下星期(2026-12-07..2026-12-13)开会", "zh-xiaxingqi"),
    case("下礼拜搬家", MON, "下礼拜(2026-12-07..2026-12-13)搬家", "zh-xialibai"),
    case("上周很忙", MON, "上周(2026-11-23..2026-11-29)很忙", "zh-shangzhou"),
    case("本周交报告", MON, "本周(2026-11-30..2026-12-06)交报告", "zh-benzhou"),
    case("这周有空", MON, "这周(2026-11-30..2026-12-06)有空", "zh-zhezhou"),
    case("下周五开会", MON, "下周五(2026-12-11)开会", "zh-xiazhouwu-is-next-weeks"),
    case("下星期五开会", FRI, "下星期五(2026-12-11)开会", "zh-xiaxingqiwu-on-friday"),
    case("这周五聚餐", SAT, "这周五(2026-12-04)聚餐", "zh-zhezhouwu-already-past"),
    case("上周一请假", MON, "上周一(2026-11-23)请假", "zh-shangzhouyi"),
    case("下星期天回家", MON, "下星期天(2026-12-13)回家", "zh-xiaxingqitian"),
    case("下周日", NYE, "下周日(2027-01-10)", "zh-xiazhouri-across-year-end"),
    case("这周末爬山", MON, "这周末(2026-12-05..2026-12-06)爬山", "zh-zhezhoumo-weekend"),
    # Chinese months and years
    case("下个月要去上海出差", MON, "下个月(2026-12)要去上海出差", "zh-xiageyue"),
    case("下个月", NYE, "下个月(2027-01)", "zh-xiageyue-across-year-end"),
    case("上个月涨薪", JAN31, "上个月(2025-12)涨薪", "zh-shanggeyue-across-year-start"),
    case("这个月", MON, "这个月(2026-11)", "zh-zhegeyue"),
    case("本月", MON, "本月(2026-11)", "zh-benyue"),
    case("明年结婚", NYE, "明年(2027)结婚", "zh-mingnian"),
    case("去年毕业", MON, "去年(2025)毕业", "zh-qunian"),
    case("今年", MON, "今年(2026)", "zh-jinnian"),
    # Chinese offsets
    case("三天后复查", MON, "三天后(2026-12-03)复查", "zh-santianhou"),
    case("3天后", MON, "3天后(2026-12-03)", "zh-3-tianhou-arabic"),
    case("两天前", MON, "两天前(2026-11-28)", "zh-liangtianqian"),
    case("十天以后", NYE, "十天以后(2027-01-10)", "zh-shitianyihou"),
    case("二十天后", MON, "二十天后(2026-12-20)", "zh-ershitianhou"),
    case("两周后", MON, "两周后(2026-12-14)", "zh-liangzhouhou"),
    case("一个星期前", MON, "一个星期前(2026-11-23)", "zh-yigexingqiqian"),
    case("三个月后", NYE, "三个月后(2027-03)", "zh-sangeyuehou"),
    case("一个月后", JAN31, "一个月后(2026-02)", "zh-yigeyuehou-from-jan-31"),
    case("两年前", MON, "两年前(2024)", "zh-liangnianqian"),
    # several in one text, each in place
    case("明天开会，下周五出差", MON, "明天(2026-12-01)开会，下周五(2026-12-11)出差",
         "zh-two-phrases"),
    case("明天见,next Friday后", MON, "明天(2026-12-01)见,next Friday (2026-12-04)后",
         "mixed-scripts-no-spaces"),
    case("next week, decide 3 things", MON, "next week (2026-12-07..2026-12-13), decide 3 things",
         "en-word-starting-like-a-month-is-not-a-date"),
    case("tomorrow or next month", MON, "tomorrow (2026-12-01) or next month (2026-12)", "en-two-phrases"),
]


@pytest.mark.parametrize(("text", "at", "expected"), DATES)
def test_relative_dates_become_absolute_with_the_phrase_kept(text: str, at: datetime, expected: str) -> None:
    result = normalise(text, at=at)
    assert result.text == expected
    assert all(original in replacement for original, replacement in result.changes)
    values = [part.split(")")[0] for part in expected.split("(")[1:]]
    assert result.tags == tuple(sorted({f"date:{v}" for v in values}))


def test_the_turns_time_zone_decides_which_day_tomorrow_is() -> None:
    instant = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)  # Dec 1 in Shanghai, still Nov 30 in LA
    shanghai = normalise("tomorrow", at=instant.astimezone(SHANGHAI))
    los_angeles = normalise("tomorrow", at=instant.astimezone(LOS_ANGELES))
    in_utc = normalise("tomorrow", at=instant)
    assert shanghai.text == "tomorrow (2026-12-02)"
    assert los_angeles.text == "tomorrow (2026-12-01)"
    assert in_utc.text == "tomorrow (2026-12-02)"


def test_a_naive_time_is_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        normalise("tomorrow", at=datetime(2026, 11, 30, 10, 0))


UNITS = [
    pytest.param("1 G", "1 GiB (1 G)", id="size-1-G-spaced"),
    pytest.param("1G", "1 GiB (1G)", id="size-1G"),
    pytest.param("1GB", "1 GiB (1GB)", id="size-1GB"),
    pytest.param("1024MB", "1 GiB (1024MB)", id="size-1024MB"),
    pytest.param("1GiB", "1 GiB (1GiB)", id="size-1GiB-unspaced"),
    pytest.param("512 mb", "512 MiB (512 mb)", id="size-lower-case"),
    pytest.param("2.5 TB", "2.5 TiB (2.5 TB)", id="size-decimal"),
    pytest.param("0.5GB", "512 MiB (0.5GB)", id="size-below-one-goes-down"),
    pytest.param("1536 MB", "1.5 GiB (1536 MB)", id="size-1536MB"),
    pytest.param("1500 MB", "1.46 GiB (1500 MB)", id="size-rounded-to-2-decimals"),
    pytest.param("2048 KiB", "2 MiB (2048 KiB)", id="size-KiB"),
    pytest.param("1,024 MB", "1 GiB (1,024 MB)", id="size-thousands-separator"),
    pytest.param("4 gigabytes", "4 GiB (4 gigabytes)", id="size-spelled-out"),
    pytest.param("1T硬盘", "1 TiB (1T)硬盘", id="size-bare-T-before-cjk"),
    pytest.param("内存16G", "内存16 GiB (16G)", id="size-after-cjk"),
    pytest.param("128MB,256MB", "128 MiB (128MB),256 MiB (256MB)", id="size-list"),
    pytest.param("90 min", "1.5 h (90 min)", id="duration-90-min"),
    pytest.param("120 seconds", "2 min (120 seconds)", id="duration-seconds"),
    pytest.param("0.5 h", "30 min (0.5 h)", id="duration-below-one-goes-down"),
    pytest.param("0.5 min", "30 s (0.5 min)", id="duration-down-to-seconds"),
    pytest.param("开了90分钟的会", "开了1.5 h (90分钟)的会", id="duration-zh-fenzhong"),
    pytest.param("3600秒", "1 h (3600秒)", id="duration-zh-miao"),
    pytest.param("a 1024MB disk for 90 min", "a 1 GiB (1024MB) disk for 1.5 h (90 min)",
                 id="size-and-duration"),
]


@pytest.mark.parametrize(("text", "expected"), UNITS)
def test_units_take_one_canonical_form_with_the_original_kept(text: str, expected: str) -> None:
    result = normalise(text, at=MON)
    assert result.text == expected
    assert result.tags == ()
    assert len(result.changes) >= 1


def test_the_issues_sizes_all_read_the_same() -> None:
    canonical = {normalise(size, at=MON).text.split(" (")[0] for size in ("1 G", "1024MB", "1GiB", "1 GiB")}
    assert canonical == {"1 GiB"}


UNCHANGED = [
    pytest.param("I like green tea", id="plain-en"),
    pytest.param("我喜欢喝绿茶", id="plain-zh"),
    pytest.param("", id="empty"),
    pytest.param("tomorrowland was loud", id="word-containing-tomorrow"),
    pytest.param("Friday is gym day", id="bare-weekday-is-a-habit"),
    pytest.param("Monday's are slow", id="bare-weekday-possessive"),
    pytest.param("next Friday, Dec 4", id="next-to-an-english-date"),
    pytest.param("in 3 days, on 3 December", id="next-to-an-english-date-day-first"),
    pytest.param("明天12月1号见", id="next-to-a-chinese-date"),
    pytest.param("2026-12-01 (tomorrow)", id="after-an-iso-date"),
    pytest.param("这周围的餐厅很好", id="zh-zhouwei-is-not-a-week"),
    pytest.param("吃了这月饼", id="zh-yuebing-is-not-a-month"),
    pytest.param("第三天后他走了", id="zh-disantianhou-is-ordinal"),
    pytest.param("三三天后", id="zh-malformed-numeral"),
    pytest.param("in some days", id="en-no-number"),
    pytest.param("1 GiB", id="size-already-canonical"),
    pytest.param("1.5 h", id="duration-already-canonical"),
    pytest.param("30 minutes", id="duration-unit-unchanged"),
    pytest.param("30 s", id="duration-canonical-seconds"),
    pytest.param("5G network", id="5G-is-a-mobile-network"),
    pytest.param("500g flour", id="grams"),
    pytest.param("10K users and 5M rows", id="thousand-and-million"),
    pytest.param("100 MB/s", id="rate"),
    pytest.param("a 10 Gbps link", id="line-speed"),
    pytest.param("the 1990s", id="decade-is-not-seconds"),
    pytest.param("$5G", id="money"),
]


@pytest.mark.parametrize("text", UNCHANGED)
def test_text_without_relative_dates_or_units_is_unchanged(text: str) -> None:
    assert normalise(text, at=MON) == Normalised(text=text, tags=(), changes=())


@pytest.mark.parametrize(
    "text",
    [pytest.param(p.values[0], id=p.id) for p in DATES + UNITS + UNCHANGED]
    + [pytest.param("明天开会，带上1024MB的U盘，下周五前交90分钟的录音", id="mixed-zh"),
       pytest.param("next week I need 2048 MB, last Friday 45 min", id="mixed-en")],
)
def test_normalising_twice_changes_nothing_more(text: str) -> None:
    for at in (MON, NYE, JAN31):
        once = normalise(text, at=at)
        twice = normalise(once.text, at=at)
        assert twice.text == once.text
        assert twice.changes == ()
        assert twice.tags == once.tags


@pytest.mark.parametrize(("text", "tags"), [
    ("see you tomorrow (2026-12-01)", ("date:2026-12-01",)),
    ("下周(2026-12-07..2026-12-13)开会", ("date:2026-12-07..2026-12-13",)),
    ("moving in 3 months (2027-02), maybe next year (2027)", ("date:2027", "date:2027-02")),
    ("order (1042) shipped", ()),  # a number in parentheses is not a date
])
def test_a_date_already_written_out_is_left_as_it_is_and_tagged(text: str, tags: tuple[str, ...]) -> None:
    assert normalise(text, at=MON) == Normalised(text=text, tags=tags, changes=())


def test_dated_writes_out_relative_dates_and_nothing_else() -> None:
    at = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)  # a Monday
    assert dated("next Friday I need 1024MB, see you tomorrow", at=at) == \
        "next Friday (2026-12-04) I need 1024MB, see you tomorrow (2026-12-01)"
    assert dated("下周三开会，明天交报告", at=at) == "下周三(2026-12-09)开会，明天(2026-12-01)交报告"
    assert dated("no dates here, 90 min", at=at) == "no dates here, 90 min"
    once = dated("next Friday", at=at)
    assert dated(once, at=at) == once
    with pytest.raises(ValueError):
        dated("tomorrow", at=datetime(2026, 11, 30, 9, 0))


def test_changes_are_listed_in_order_of_appearance() -> None:
    result = normalise("明天带上1024MB的U盘，90 min后next Friday见", at=MON)
    assert result.changes == (
        ("明天", "明天(2026-12-01)"),
        ("1024MB", "1 GiB (1024MB)"),
        ("90 min", "1.5 h (90 min)"),
        ("next Friday", "next Friday (2026-12-04)"),
    )


ENTITIES = [
    pytest.param("Lyon", "entity:lyon", id="lowercased"),
    pytest.param("Acme Corp", "entity:acme-corp", id="space-to-dash"),
    pytest.param("  Acme   Corp  ", "entity:acme-corp", id="whitespace-runs"),
    pytest.param("Zoë", "entity:zoe", id="accent-dropped"),
    pytest.param("ＡＢＣ", "entity:abc", id="full-width"),
    pytest.param("上海", "entity:上海", id="cjk-kept"),
    pytest.param("東京タワー", "entity:東京タワー", id="kana-kept"),
    pytest.param("서울", "entity:서울", id="hangul-kept"),
    pytest.param("alice@example.com", "entity:alice@example.com", id="email-punctuation-kept"),
    pytest.param("AT&T (US)", "entity:att-us", id="other-punctuation-dropped"),
    pytest.param("v2.1_beta:rc", "entity:v2.1_beta:rc", id="allowed-punctuation"),
]


@pytest.mark.parametrize(("name", "tag"), ENTITIES)
def test_entity_hints_become_tags(name: str, tag: str) -> None:
    assert normalise("I like green tea", at=MON, entities=[name]).tags == (tag,)


def test_entity_hints_with_nothing_left_give_no_tag() -> None:
    assert normalise("x", at=MON, entities=["!!!", "   ", ""]).tags == ()


@pytest.mark.parametrize("name", ["a" * 100, "上" * 30, "ab " * 40], ids=["ascii", "cjk", "dashes"])
def test_long_entity_tags_are_cut_to_64_bytes_at_a_character(name: str) -> None:
    (tag,) = normalise("x", at=MON, entities=[name]).tags
    assert 60 <= len(tag.encode()) <= 64
    assert tag.startswith("entity:") and not tag.endswith("-")
    tag.encode().decode()  # whole characters only


def test_tags_are_sorted_unique_and_at_most_32_dates_first() -> None:
    entities = [f"Person {i:02d}" for i in range(40)] + ["Lyon", "lyon"]
    result = normalise("tomorrow and next month", at=MON, entities=entities)
    assert len(result.tags) == 32
    assert result.tags == tuple(sorted(set(result.tags)))
    assert {"date:2026-12-01", "date:2026-12"} <= set(result.tags)
    assert "entity:person-29" in result.tags and "entity:person-30" not in result.tags
    assert all(1 <= len(tag.encode()) <= 64 for tag in result.tags)


def test_the_same_date_twice_gives_one_tag() -> None:
    result = normalise("tomorrow, I mean 明天", at=MON)
    assert result.tags == ("date:2026-12-01",)
    assert len(result.changes) == 2


@pytest.mark.parametrize(("a", "b", "differ"), [
    ("用户后天(2026-11-20)要去上海参加婚礼", "用户下周末(2026-11-28..2026-11-29)去看婚礼场地", True),
    ("Alice flies to Tokyo tomorrow (2026-12-01)", "Alice flew to Tokyo on (2026-12-01)", False),
    ("Alice flies to Tokyo tomorrow (2026-12-01)", "Alice flies to Tokyo", False),  # one undated: may be the same
    ("Alice hiked in the Alps", "Alice went hiking in the Alps", False),
    ("trip (2026-12-01) and return (2026-12-05)", "return (2026-12-05)", False),
], ids=["two-occasions", "same-day", "one-undated", "none-dated", "one-shared"])
def test_texts_dated_with_no_date_in_common_are_different_occasions(a: str, b: str, differ: bool) -> None:
    assert different_dates(a, b) is differ and different_dates(b, a) is differ
