"""The tasks over server-everything (``everything``), the time server (``time``) and the fetch server (``fetch``).

server-everything's answers are fixed by its source (``WEATHER``: its
``get-structured-content`` table); the time server's are worked out here with
``zoneinfo`` for today's date, as it does; the fetch server reads the fixture's
site over loopback HTTP (``fixture.build_site``), and the expected answers read
the same pages from disk.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Final
from zoneinfo import ZoneInfo

from bench.code_tasks.fixture import FRUITS, PAGES, Fixture
from bench.code_tasks.task import Calls, Task

WEATHER: Final = {"New York": (33, 82), "Chicago": (36, 82), "Los Angeles": (73, 48)}
"""server-everything 2026.8.31's ``get-structured-content``: city -> (temperature, humidity)."""
MEETING: Final = ("Europe/Paris", "14:00")
ZONES: Final = ("America/New_York", "Asia/Tokyo", "Asia/Kolkata", "Australia/Sydney")
ADDENDS: Final = (19, 23, 58, 11)
_SUM: Final = re.compile(r"is (-?\d+)\.")


# -- everything: a chain of sums, the warmest city, one echo --------------------------------------------------


async def _sums(calls: Calls, fx: Fixture) -> Any:
    total = ADDENDS[0]
    for addend in ADDENDS[1:]:
        reply = await calls("everything__get-sum", {"a": total, "b": addend})
        match = _SUM.search(reply.text)
        assert match is not None, reply.text
        total = int(match.group(1))
    return total


SUM_CHAIN = Task(
    name="sum_chain",
    ask=f"Add {', '.join(map(str, ADDENDS))} with the sum tool, one addition at a time.",
    tools=("everything__get-sum",),
    plain=_sums,
    expected=lambda fx: sum(ADDENDS),
    code_query="add two numbers",
    program=f"""\
from tools import everything
total = {ADDENDS[0]}
for addend in {list(ADDENDS[1:])}:
    answer = await everything.get_sum(a=total, b=addend)
    total = int(answer.split(" is ")[1].rstrip("."))
total
""",
)


async def _warmest(calls: Calls, fx: Fixture) -> Any:
    cities = list(WEATHER)
    replies = await calls.parallel([("everything__get-structured-content", {"location": city}) for city in cities])
    weather = dict(zip(cities, (reply.json() for reply in replies), strict=True))
    city = max(cities, key=lambda name: weather[name]["temperature"])
    return {"city": city, "temperature": weather[city]["temperature"], "humidity": weather[city]["humidity"]}


def _warmest_expected(fx: Fixture) -> Any:
    city = max(WEATHER, key=lambda name: WEATHER[name][0])
    return {"city": city, "temperature": WEATHER[city][0], "humidity": WEATHER[city][1]}


WARMEST = Task(
    name="warmest_city",
    ask="Which of New York, Chicago and Los Angeles is warmest now, and how humid is it there?",
    tools=("everything__get-structured-content",),
    plain=_warmest,
    expected=_warmest_expected,
    code_query="weather structured content for a city",
    program="""\
import asyncio
from tools import everything
weather = await asyncio.gather(
    everything.get_structured_content(location="New York"),
    everything.get_structured_content(location="Chicago"),
    everything.get_structured_content(location="Los Angeles"),
)
cities = ["New York", "Chicago", "Los Angeles"]
best = max(range(3), key=lambda i: weather[i]["temperature"])
{"city": cities[best], "temperature": weather[best]["temperature"], "humidity": weather[best]["humidity"]}
""",
)


async def _echo(calls: Calls, fx: Fixture) -> Any:
    return (await calls("everything__echo", {"message": "hello from the bench"})).text


ECHO = Task(
    name="echo_once",
    ask="Echo 'hello from the bench'.",
    tools=("everything__echo",),
    plain=_echo,
    expected=lambda fx: "Echo: hello from the bench",
    code_query="echo a message",
    program="""\
from tools import everything
await everything.echo(message="hello from the bench")
""",
)


# -- time: one meeting in four zones; one offset --------------------------------------------------------------


def _at(zone: str, clock: str, target: str) -> datetime:
    hour, minute = map(int, clock.split(":"))
    today = datetime.now(ZoneInfo(zone))
    return today.replace(hour=hour, minute=minute, second=0, microsecond=0).astimezone(ZoneInfo(target))


async def _meeting(calls: Calls, fx: Fixture) -> Any:
    source, clock = MEETING
    replies = await calls.parallel(
        [("time__convert_time", {"source_timezone": source, "time": clock, "target_timezone": zone}) for zone in ZONES]
    )
    return {zone: reply.json()["target"]["datetime"][11:16] for zone, reply in zip(ZONES, replies, strict=True)}


MEETING_TIMES = Task(
    name="meeting_times",
    ask=f"A meeting is at {MEETING[1]} in {MEETING[0]} today: what time is it in {', '.join(ZONES)}?",
    tools=("time__convert_time",),
    plain=_meeting,
    expected=lambda fx: {zone: _at(*MEETING, zone).strftime("%H:%M") for zone in ZONES},
    code_query="convert a time between time zones",
    program=f"""\
import asyncio
import json
from tools import time_
zones = {list(ZONES)}
answers = await asyncio.gather(
    *[time_.convert_time(source_timezone="{MEETING[0]}", time="{MEETING[1]}", target_timezone=zone) for zone in zones]
)
{{zone: json.loads(answer)["target"]["datetime"][11:16] for zone, answer in zip(zones, answers)}}
""",
)


def _difference(source: str, target: str) -> str:
    there, here = _at(source, "09:00", target).utcoffset(), _at(source, "09:00", source).utcoffset()
    assert there is not None and here is not None
    hours = (there - here).total_seconds() / 3600
    return f"{hours:+.1f}h" if hours.is_integer() else f"{hours:+.2f}".rstrip("0").rstrip(".") + "h"


async def _offset(calls: Calls, fx: Fixture) -> Any:
    arguments = {"source_timezone": "Europe/London", "time": "09:00", "target_timezone": "Asia/Kathmandu"}
    return (await calls("time__convert_time", arguments)).json()["time_difference"]


KATHMANDU = Task(
    name="kathmandu_offset",
    ask="How far ahead of London is Kathmandu today?",
    tools=("time__convert_time",),
    plain=_offset,
    expected=lambda fx: _difference("Europe/London", "Asia/Kathmandu"),
    code_query="convert a time between time zones",
    program="""\
import json
from tools import time_
answer = await time_.convert_time(source_timezone="Europe/London", time="09:00", target_timezone="Asia/Kathmandu")
json.loads(answer)["time_difference"]
""",
)


# -- fetch: the site's pages that mention each fruit; one page's heading --------------------------------------------

_LINK: Final = re.compile(r"\]\(([a-z]+)\.html\)")


def _fruits(texts: dict[str, str]) -> dict[str, list[str]]:
    return {fruit: sorted(page for page, text in texts.items() if fruit in text) for fruit in FRUITS}


async def _fruit_pages(calls: Calls, fx: Fixture) -> Any:
    index = await calls("fetch__fetch", {"url": f"{fx.site_url}index.html"})
    pages = _LINK.findall(index.text)
    replies = await calls.parallel([("fetch__fetch", {"url": f"{fx.site_url}{page}.html"}) for page in pages])
    return _fruits({page: reply.text for page, reply in zip(pages, replies, strict=True)})


FRUIT_PAGES = Task(
    name="fruit_pages",
    ask=f"Which pages linked from the site's index mention {', '.join(FRUITS)}?",
    tools=("fetch__fetch",),
    plain=_fruit_pages,
    expected=lambda fx: _fruits({page: (fx.site / f"{page}.html").read_text() for page in PAGES}),
    code_query="fetch a web page",
    program=f"""\
import asyncio
import re
from tools import fetch
index = await fetch.fetch(url="$site" + "index.html")
pages = re.findall(r"\\]\\(([a-z]+)\\.html\\)", index)
texts = await asyncio.gather(*[fetch.fetch(url="$site" + page + ".html") for page in pages])
{{fruit: sorted(page for page, text in zip(pages, texts) if fruit in text) for fruit in {list(FRUITS)}}}
""",
)


async def _heading(calls: Calls, fx: Fixture) -> Any:
    page = await calls("fetch__fetch", {"url": f"{fx.site_url}team.html"})
    return next(line.lstrip("#").strip() for line in page.lines() if line.startswith("#"))


TEAM_HEADING = Task(
    name="team_page_heading",
    ask="What is the heading of the site's team page?",
    tools=("fetch__fetch",),
    plain=_heading,
    expected=lambda fx: re.findall(r"<h1>(.*?)</h1>", (fx.site / "team.html").read_text())[0],
    code_query="fetch a web page",
    program="""\
from tools import fetch
page = await fetch.fetch(url="$site" + "team.html")
[line.lstrip("#").strip() for line in page.splitlines() if line.startswith("#")][0]
""",
)

TASKS = (SUM_CHAIN, WARMEST, ECHO, MEETING_TIMES, KATHMANDU, FRUIT_PAGES, TEAM_HEADING)

SEARCHES = {
    "everything__get-sum": "add two numbers",
    "everything__get-structured-content": "weather for a city",
    "everything__echo": "echo a message back",
    "time__convert_time": "convert a time between time zones",
    "fetch__fetch": "fetch a web page",
}
"""What a model asks ``search_tools`` for, per tool it needs (the search view's runs)."""
