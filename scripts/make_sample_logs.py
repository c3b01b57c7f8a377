#!/usr/bin/env python3
"""Generate deterministic sample JSONL agent logs for expengine.

Writes three native-format logs (one JSON object per line) plus a small
OpenAI chat trajectory example:

    sample_logs/support_bot.jsonl        agent "support-bot"
    sample_logs/coding_assistant.jsonl   agent "coding-assistant"
    sample_logs/companion.jsonl          agent "companion"
    sample_logs/openai_chat_example.json

Usage:
    python scripts/make_sample_logs.py [--out sample_logs]

Stdlib only; every agent uses its own fixed-seed ``random.Random`` so the
output is byte-for-byte reproducible.
"""

from __future__ import annotations

import argparse
import json
import random
import string
from datetime import datetime, timedelta, timezone
from pathlib import Path

START = datetime(2026, 3, 1, 8, 0, 0, tzinfo=timezone.utc)
SPAN_DAYS = 60
SEED = 20260301


# --------------------------------------------------------------------------
# generic log writer
# --------------------------------------------------------------------------


class Log:
    """Accumulates records for one agent with monotonically increasing ts."""

    def __init__(self, agent: str, prefix: str, seed: int) -> None:
        self.agent = agent
        self.prefix = prefix
        self.rng = random.Random(seed)
        self.records: list[dict] = []
        self.t = START
        self._n = 0
        self._sn = 0
        self._gn = 0
        self.person: str | None = None  # the user the records being written are about (None: shared)
        self.session: str | None = None
        self.goal_id: str | None = None

    # -- time ---------------------------------------------------------------
    def tick(self, lo: float = 3, hi: float = 40) -> None:
        self.t += timedelta(seconds=self.rng.uniform(lo, hi))

    def wait(self, seconds: float) -> None:
        self.t += timedelta(seconds=seconds)

    def ts(self) -> str:
        return self.t.strftime("%Y-%m-%dT%H:%M:%SZ")

    # -- sessions -------------------------------------------------------------
    def start_session(self, i: int, total: int, hours: tuple[int, int] = (8, 21)) -> str:
        day = START.replace(hour=0) + timedelta(days=SPAN_DAYS * i / total)
        day = day.replace(hour=0, minute=0, second=0)
        cand = day + timedelta(
            hours=self.rng.randint(*hours),
            minutes=self.rng.randint(0, 59),
            seconds=self.rng.randint(0, 59),
        )
        if cand <= self.t:
            cand = self.t + timedelta(minutes=self.rng.randint(5, 90))
        self.t = cand
        self._sn += 1
        self.session = f"{self.prefix}-s{self._sn:04d}"
        self.goal_id = None
        return self.session

    def day_index(self) -> int:
        return (self.t - START).days

    # -- records ----------------------------------------------------------------
    def add(self, kind: str, **fields) -> str:
        self._n += 1
        rid = f"{self.prefix}-{self._n:06d}"
        rec: dict = {"id": rid, "ts": self.ts(), "kind": kind, "agent": self.agent}
        if self.session and "session" not in fields:
            rec["session"] = self.session
        if self.goal_id and "goal_id" not in fields:
            rec["goal_id"] = self.goal_id
        if self.person and "user" not in fields:
            rec["user"] = self.person
        for k, v in fields.items():
            if v is not None:
                rec[k] = v
        self.records.append(rec)
        return rid

    def msg(self, role: str, content: str, lo: float = 4, hi: float = 45, **kw) -> str:
        self.tick(lo, hi)
        return self.add("message", role=role, content=content, **kw)

    def user(self, content: str, **kw) -> str:
        return self.msg("user", content, 8, 90, **kw)

    def bot(self, content: str, **kw) -> str:
        return self.msg("assistant", content, 2, 12, **kw)

    def call(self, name: str, args: dict, **kw) -> str:
        self.tick(1, 5)
        return self.add("tool_call", role="assistant", tool={"name": name, "args": args}, **kw)

    def result(self, name: str, result=None, error: str | None = None, lo: float = 0.3, hi: float = 6, **kw) -> str:
        self.tick(lo, hi)
        tool: dict = {"name": name}
        if error is not None:
            tool["error"] = error
        else:
            tool["result"] = result
        meta = kw.pop("meta", None) or {"latency_ms": self.rng.randint(80, 2400)}
        return self.add("tool_result", role="tool", tool=tool, meta=meta, **kw)

    def goal_open(self, description: str, long_term: bool = False, **kw) -> str:
        self._gn += 1
        gid = f"{self.prefix}-g{self._gn:04d}"
        self.tick(1, 4)
        goal = {"id": gid, "status": "open", "description": description}
        if long_term:
            goal["long_term"] = True
        self.add("goal", goal_id=gid, goal=goal, **kw)
        if not long_term:
            self.goal_id = gid
        return gid

    def goal_close(self, gid: str, status: str, description: str, summary: str, **kw) -> str:
        self.tick(1, 6)
        self.add("goal", goal_id=gid, goal={"id": gid, "status": status, "description": description})
        self.tick(0, 2)
        outcome = {"succeeded": "success", "failed": "failure", "cancelled": "failure"}.get(status, "partial")
        if "outcome" in kw:
            outcome = kw.pop("outcome")
        rid = self.add("outcome", goal_id=gid, outcome=outcome, content=summary, **kw)
        if self.goal_id == gid:
            self.goal_id = None
        return rid

    def feedback(self, signal: str, target: str, text: str, **kw) -> str:
        self.tick(5, 60)
        return self.add("feedback", role="user", feedback={"signal": signal, "target": target, "text": text}, **kw)

    def note(self, content: str, **kw) -> str:
        self.tick(1, 10)
        return self.add("note", role="system", content=content, **kw)

    def observe(self, content: str, **kw) -> str:
        self.tick(1, 10)
        return self.add("observation", content=content, **kw)


def rand_code(rng: random.Random, n: int, alphabet: str = string.ascii_uppercase + string.digits) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


# --------------------------------------------------------------------------
# support-bot
# --------------------------------------------------------------------------

CITIES = [
    "Paris",
    "Lisbon",
    "Tokyo",
    "New York",
    "San Francisco",
    "Chicago",
    "London",
    "Berlin",
    "Madrid",
    "Rome",
    "Seattle",
    "Denver",
    "Boston",
    "Austin",
    "Miami",
    "Toronto",
    "Mexico City",
    "Amsterdam",
    "Barcelona",
    "Dublin",
]
CITY_TYPOS = {
    "San Francisco": "San Fransisco",
    "Barcelona": "Barcelonna",
    "Amsterdam": "Amsterdamm",
    "Lisbon": "Lisbonn",
    "Seattle": "Seatle",
}
CONDITIONS = [
    "sunny",
    "partly cloudy",
    "overcast",
    "light rain",
    "heavy rain",
    "thunderstorms",
    "fog in the morning, clearing later",
    "snow showers",
    "clear skies",
    "windy",
]
AIRPORTS = ["JFK", "SFO", "LAX", "ORD", "SEA", "BOS", "DEN", "ATL", "MIA", "AUS", "LHR", "CDG", "LIS", "NRT", "YYZ"]
AIRLINES = ["UA", "AA", "DL", "B6", "AS", "WN", "BA", "AF", "TP"]
USERS = {
    "u-101": "Priya Raman",
    "u-102": "Marcus Lee",
    "u-103": "Elena Petrova",
    "u-104": "Dana Whitfield",
    "u-105": "Tom Becker",
    "u-106": "Aisha Khan",
    "u-107": "Luis Ortega",
    "u-108": "Hannah Cole",
    "u-109": "Kenji Sato",
    "u-110": "Olivia Brooks",
    "u-111": "Samir Haddad",
    "u-112": "Grace Kim",
}
CARDS = [
    "visa ending 4242",
    "mastercard ending 5100",
    "amex ending 1005",
    "visa ending 1881",
    "debit card ending 3056",
    "mastercard ending 7720",
]
DECLINES = [
    "payment declined: insufficient funds",
    "payment declined: card expired",
    "payment declined: issuer requires 3-D Secure verification",
    "payment declined: do not honor (code 05)",
]

WEATHER_Q = [
    "What's the weather going to be like in {city} {day}?",
    "what's the weather in {city} {day}",
    "Hi, can you tell me the forecast for {city} {day}?",
    "Is it going to rain in {city} {day}?",
    "weather {city} {day}?",
    "I'm flying to {city} {day}, what's the weather like there?",
    "Do I need an umbrella in {city} {day}?",
    "How cold will it be in {city} {day}?",
    "Could you check the weather for {city} {day} please",
    "what's the forecast for {city} {day}? thinking about packing",
]
DAYS = ["today", "tomorrow", "this weekend", "on Friday", "on Monday", "next week", "on Saturday"]
THANKS = ["thanks!", "thank you", "great, thanks", "perfect", "ok thanks", "cool", "awesome, appreciate it", "thx"]

ORDER_Q = [
    "Where is my order {oid}?",
    "hi, order {oid} hasn't arrived yet, can you check?",
    "Can you check the status of order {oid}",
    "I ordered travel adapters last week, order number {oid}. Any update?",
    "my package {oid} still says processing??",
    "order {oid} status please",
]
ORDER_STATUS = [
    "processing",
    "shipped",
    "out for delivery",
    "delivered",
    "delayed at carrier facility",
    "returned to sender",
]
CARRIERS = ["UPS", "FedEx", "USPS", "DHL"]
ITEMS = [
    "universal travel adapter",
    "packing cubes (set of 4)",
    "neck pillow",
    "carry-on spinner 22in",
    "noise-cancelling earbuds",
    "TSA lock (2-pack)",
    "portable charger 10000mAh",
    "compression socks",
]

FLIGHT_Q = [
    "I need a flight from {o} to {d} on {date}.",
    "Can you book me a flight {o} to {d} on {date}? {pref}",
    "Book a flight {o}->{d} {date} please. {pref}",
    "looking for a one-way {o} to {d}, {date}. {pref}",
    "I have to be in {dcity} on {date}, flying out of {o}. {pref}",
]
FLIGHT_PREFS = [
    "Aisle seat if possible.",
    "Morning departure preferred.",
    "Cheapest option is fine.",
    "Economy is fine.",
    "Window seat please.",
    "Nonstop only.",
    "",
]
AIRPORT_CITY = {
    "JFK": "New York",
    "SFO": "San Francisco",
    "LAX": "Los Angeles",
    "ORD": "Chicago",
    "SEA": "Seattle",
    "BOS": "Boston",
    "DEN": "Denver",
    "ATL": "Atlanta",
    "MIA": "Miami",
    "AUS": "Austin",
    "LHR": "London",
    "CDG": "Paris",
    "LIS": "Lisbon",
    "NRT": "Tokyo",
    "YYZ": "Toronto",
}


def support_bot(seed: int) -> list[dict]:
    L = Log("support-bot", "sb", seed)
    r = L.rng
    n_sessions = 95
    state = {"rate_limit_notes": 0, "weather_calls": 0}
    pref_goal = None
    ratelimit_goal = None

    def future_date() -> str:
        d = L.t + timedelta(days=r.randint(3, 40))
        return d.strftime("%Y-%m-%d")

    # ---- scenarios ---------------------------------------------------------
    def weather(uid: str) -> None:
        city = r.choice(CITIES)
        day = r.choice(DAYS)
        desc = f"Get the weather forecast for {city} ({day}) for user {uid}"
        gid = L.goal_open(desc, category="weather")
        typo = city in CITY_TYPOS and r.random() < 0.25
        asked = CITY_TYPOS[city] if typo else city
        L.user(r.choice(WEATHER_Q).format(city=asked, day=day), category="weather")
        date = (L.t + timedelta(days={"today": 0, "tomorrow": 1}.get(day, r.randint(2, 6)))).strftime("%Y-%m-%d")
        units = "metric" if r.random() < 0.7 else "imperial"
        if typo:
            L.call("get_weather", {"city": asked, "date": date, "units": units})
            L.result("get_weather", error=f"404 city not found: '{asked}'")
            L.bot(f"I couldn't find '{asked}'. Did you mean {city}? Checking that instead.")
            asked = city
        L.call("get_weather", {"city": city, "date": date, "units": units})
        state["weather_calls"] += 1
        # rate limiting: more frequent in the first half of the period
        p429 = 0.42 if L.day_index() < 35 else 0.15
        failed = False
        retried = False
        if r.random() < p429:
            retried = True
            L.result(
                "get_weather",
                error=r.choice(
                    [
                        "429 Too Many Requests",
                        "429 Too Many Requests: rate limit exceeded (60 req/min), retry after 60 seconds",
                        "HTTP 429 Too Many Requests - Retry-After: 60",
                    ]
                ),
                tags=["rate-limit"],
            )
            if r.random() < 0.12 and L.day_index() < 20:
                # early on the bot retries immediately and gets 429 again
                L.call("get_weather", {"city": city, "date": date, "units": units})
                L.result("get_weather", error="429 Too Many Requests", tags=["rate-limit"])
                L.observe(
                    "Immediate retry of get_weather after a 429 failed again; the API needs a 60 second back-off.",
                    tags=["rate-limit"],
                    importance=0.6,
                )
            if state["rate_limit_notes"] < 6 or r.random() < 0.3:
                state["rate_limit_notes"] += 1
                L.observe(
                    r.choice(
                        [
                            "get_weather rate limited (429); waiting 60 s before retrying.",
                            "Weather API returned 429 Too Many Requests. Backing off 60 seconds.",
                            "Rate limit hit on get_weather, sleeping 60s then retrying once.",
                        ]
                    ),
                    tags=["rate-limit", "retry"],
                )
            if r.random() < 0.06:
                # user gives up waiting
                L.bot("The weather service is busy right now, give me about a minute.")
                L.user(r.choice(["never mind, I'll check myself", "forget it", "too slow, nvm"]))
                failed = True
            else:
                L.wait(60 + r.uniform(0, 4))
                L.call("get_weather", {"city": city, "date": date, "units": units}, tags=["retry"])
        elif r.random() < 0.04:
            L.result("get_weather", error="503 Service Unavailable: upstream provider timeout")
            L.wait(r.uniform(5, 15))
            L.call("get_weather", {"city": city, "date": date, "units": units}, tags=["retry"])
        if failed:
            L.goal_close(
                gid,
                "failed",
                desc,
                f"Could not give {uid} the {city} forecast: get_weather was rate "
                "limited (429) and the user left before the 60 s back-off finished.",
            )
            return
        cond = r.choice(CONDITIONS)
        hi_c = r.randint(-2, 31)
        lo_c = hi_c - r.randint(4, 11)
        rain = r.choice([0, 5, 10, 20, 40, 60, 80, 90])
        res = {"city": city, "date": date, "summary": cond, "high_c": hi_c, "low_c": lo_c, "precip_chance": rain / 100}
        L.result("get_weather", res)
        umbrella = " Bring an umbrella." if rain >= 50 else ""
        if units == "imperial":
            temp = f"high {round(hi_c * 9 / 5 + 32)}°F, low {round(lo_c * 9 / 5 + 32)}°F"
        else:
            temp = f"high {hi_c}°C, low {lo_c}°C"
        ans = L.bot(f"{city} {day}: {cond}, {temp}, {rain}% chance of rain.{umbrella}")
        roll = r.random()
        if roll < 0.45:
            L.user(r.choice(THANKS))
        if roll < 0.12:
            L.feedback("positive", ans, r.choice(["helpful, thanks", "quick answer, nice", "exactly what I needed"]))
        elif roll > 0.95:
            L.feedback(
                "negative",
                ans,
                r.choice(["I asked for Fahrenheit", "that took forever", "that's not what my phone says"]),
            )
        L.goal_close(
            gid,
            "succeeded",
            desc,
            f"Gave {uid} the {city} forecast for {date} ({cond})."
            + (" Needed a retry after a 429 and a 60 s wait." if retried else ""),
        )

    def flight(uid: str) -> None:
        o, d = r.sample(AIRPORTS, 2)
        date = future_date()
        desc = f"Book a flight {o}->{d} on {date} for user {uid}"
        gid = L.goal_open(desc, category="booking")
        pref = r.choice(FLIGHT_PREFS)
        if uid == "u-104":
            pref = "Aisle seat, as usual."
        L.user(
            r.choice(FLIGHT_Q).format(o=o, d=d, dcity=AIRPORT_CITY[d], date=date, pref=pref).strip(), category="booking"
        )
        cabin = "economy" if r.random() < 0.85 else "business"
        L.call("search_flights", {"origin": o, "destination": d, "date": date, "cabin": cabin, "passengers": 1})
        if r.random() < 0.05:
            L.result("search_flights", {"flights": []})
            L.bot(f"I couldn't find any {cabin} seats {o}->{d} on {date}. Want me to try the day before or after?")
            L.user(r.choice(["no, that date is fixed", "ugh. no thanks", "I'll drive then"]))
            L.goal_close(gid, "failed", desc, f"No availability {o}->{d} on {date}; user declined alternative dates.")
            return
        flights = []
        for _ in range(r.randint(2, 4)):
            al = r.choice(AIRLINES)
            flights.append(
                {
                    "flight": f"{al} {r.randint(100, 2999)}",
                    "depart": f"{r.randint(6, 21):02d}:{r.choice(['00', '05', '15', '30', '45', '55'])}",
                    "stops": r.choice([0, 0, 0, 1]),
                    "price_usd": r.randint(89, 1450 if cabin == "business" else 640),
                }
            )
        flights.sort(key=lambda f: f["depart"])
        L.result("search_flights", {"flights": flights})
        opts = "; ".join(
            f"{f['flight']} at {f['depart']} ({'nonstop' if not f['stops'] else '1 stop'}, ${f['price_usd']})"
            for f in flights
        )
        L.bot(f"I found {len(flights)} options: {opts}. Which one should I book?")
        pick = r.choice(flights)
        L.user(
            r.choice(
                [
                    "the {dep} one",
                    "book {fl}",
                    "{fl} please",
                    "go with the {dep}",
                    "cheapest is fine" if pick is min(flights, key=lambda f: f["price_usd"]) else "{fl}",
                ]
            ).format(dep=pick["depart"], fl=pick["flight"])
        )
        card = r.choice(CARDS)
        seat = "aisle" if (uid == "u-104" or "Aisle" in pref) else ("window" if "Window" in pref else "any")
        args = {"flight": pick["flight"], "date": date, "passenger_id": uid, "payment": card, "seat_pref": seat}
        L.call("book_flight", args)
        roll = r.random()
        declined = roll < 0.48
        if roll < 0.06:
            L.result("book_flight", error="fare no longer available: price changed")
            L.bot("Sorry, that fare just disappeared and the new price is higher. Should I rebook at the new price?")
            L.user(r.choice(["no, cancel it", "forget it then"]))
            L.goal_close(gid, "cancelled", desc, f"Fare for {pick['flight']} changed during booking; user cancelled.")
            return
        if roll < 0.48:
            L.result("book_flight", error=r.choice(DECLINES), tags=["payment"])
            L.bot(f"The payment on your {card} was declined. Do you have another card I can use?")
            card2 = r.choice([c for c in CARDS if c != card])
            if r.random() < 0.14:
                L.user(f"try the {card2}")
                L.call("book_flight", dict(args, payment=card2), tags=["retry"])
                L.result("book_flight", error=r.choice(DECLINES), tags=["payment"])
                L.bot("That one was declined as well. I haven't charged anything. You may want to contact your bank.")
                fid = L.user(r.choice(["seriously? this is ridiculous", "ok I'll call my bank", "forget it"]))
                if r.random() < 0.5:
                    L.feedback("negative", fid, "booking failed twice, very frustrating")
                L.goal_close(
                    gid,
                    "failed",
                    desc,
                    f"Booking {pick['flight']} failed: payment declined on two cards ({card}, {card2}).",
                )
                return
            L.user(r.choice(["ok try my {c}", "use the {c} instead", "{c}", "hmm weird. try {c}"]).format(c=card2))
            L.call("book_flight", dict(args, payment=card2), tags=["retry"])
            card = card2
        conf = rand_code(r, 6)
        L.result(
            "book_flight",
            {
                "status": "ticketed",
                "confirmation": conf,
                "flight": pick["flight"],
                "seat": f"{r.randint(8, 38)}{'C' if seat == 'aisle' else r.choice('ABCDEF')}",
                "charged_usd": pick["price_usd"],
            },
        )
        ans = L.bot(
            f"You're booked on {pick['flight']} {o}->{d} on {date}, departing {pick['depart']}. "
            f"Confirmation code {conf}, charged to your {card}."
        )
        if r.random() < 0.35:
            L.user(r.choice(THANKS))
        if r.random() < 0.15:
            L.feedback(
                "positive", ans, r.choice(["smooth booking", "great, easy", "thanks for handling the card issue"])
            )
        L.goal_close(
            gid,
            "succeeded",
            desc,
            f"Booked {pick['flight']} {o}->{d} {date} for {uid}, confirmation {conf}"
            + (" after the first card was declined and a second card worked." if declined else "."),
        )

    def order(uid: str) -> None:
        oid = f"W{r.randint(1000000, 9999999)}"
        desc = f"Check the status of order {oid} for user {uid}"
        gid = L.goal_open(desc, category="order")
        typo = r.random() < 0.2
        said = oid[:-2] + oid[-1] + oid[-2] if typo else oid
        L.user(r.choice(ORDER_Q).format(oid=said), category="order")
        L.call("lookup_order", {"order_id": said})
        if typo:
            L.result("lookup_order", error=f"order not found: {said}")
            L.bot(
                f"I can't find an order {said}. Could you double-check the number? It starts with W and has 7 digits."
            )
            L.user(r.choice(["oops, it's {oid}", "sorry {oid}", "{oid}, typo"]).format(oid=oid))
            L.call("lookup_order", {"order_id": oid}, tags=["retry"])
        if r.random() < 0.03:
            L.result("lookup_order", error="500 Internal Server Error: orders DB timeout")
            L.bot("Our order system is having trouble right now. Please try again in a few minutes.")
            L.goal_close(gid, "failed", desc, f"lookup_order for {oid} failed with a 500 error.")
            return
        status = r.choice(ORDER_STATUS)
        item = r.choice(ITEMS)
        res = {
            "order_id": oid,
            "status": status,
            "items": [item],
            "carrier": r.choice(CARRIERS),
            "tracking": "1Z" + rand_code(r, 16),
            "eta": (L.t + timedelta(days=r.randint(0, 6))).strftime("%Y-%m-%d"),
        }
        L.result("lookup_order", res)
        if status == "returned to sender":
            L.bot(f"Order {oid} ({item}) was returned to sender by {res['carrier']}. I can issue a refund.")
            L.call("request_refund", {"order_id": oid, "reason": "returned to sender"})
            L.result(
                "request_refund", {"refund_id": f"R{r.randint(10000, 99999)}", "status": "approved", "days_to_card": 5}
            )
            L.bot("Refund approved, it should reach your card within 5 business days.")
            L.goal_close(gid, "succeeded", desc, f"Order {oid} was returned to sender; refund approved.")
            return
        ans = L.bot(
            f"Order {oid} ({item}) is {status}"
            + (
                f" with {res['carrier']}, tracking {res['tracking']}, expected {res['eta']}."
                if status not in ("processing", "delivered")
                else "."
            )
        )
        outcome_status = "succeeded"
        if status == "delivered":
            if r.random() < 0.4:
                L.user("it says delivered but I don't have it!")
                L.bot(
                    "I'm sorry. I've opened a missing-package claim with the carrier; you'll get an email within 48 hours."
                )
                L.goal_close(
                    gid,
                    "succeeded",
                    desc,
                    f"Order {oid} marked delivered but not received; carrier claim opened.",
                    outcome="partial",
                )
                return
        if r.random() < 0.4:
            L.user(r.choice(THANKS))
        if r.random() < 0.08:
            L.feedback("positive", ans, "fast answer")
        L.goal_close(gid, outcome_status, desc, f"Told {uid} order {oid} is {status}.")

    def small_talk(uid: str) -> None:
        q = r.choice(
            [
                (
                    "Do I need a visa to visit Japan as a US citizen?",
                    "For tourist stays up to 90 days, US citizens don't need a visa for Japan. Your passport must be valid for the whole stay.",
                ),
                (
                    "what's your baggage allowance for carry-on?",
                    "Most airlines allow one carry-on up to 22 x 14 x 9 in plus a personal item; check your airline's page to be sure.",
                ),
                (
                    "can I cancel a booking within 24 hours?",
                    "Yes, US-departing flights booked 7+ days out can be cancelled free within 24 hours.",
                ),
                (
                    "how early should I get to the airport for an international flight?",
                    "Plan on arriving 3 hours before an international departure.",
                ),
            ]
        )
        L.user(q[0])
        L.bot(q[1])
        if r.random() < 0.5:
            L.user(r.choice(THANKS))

    # ---- special one-off sessions ------------------------------------------
    def secrets_session_api_key() -> None:
        L.person = "u-111"
        desc = "Help user u-111 fix 401 errors from the partner weather API integration"
        gid = L.goal_open(desc, category="integration")
        key = "sk-proj-" + rand_code(r, 40, string.ascii_letters + string.digits)
        L.user(
            "Hey, I'm integrating your weather endpoint into our travel app and every call "
            f"returns 401 Unauthorized. I'm sending the header Authorization: Bearer {key} "
            "— what am I doing wrong?",
            importance=0.4,
        )
        L.bot(
            "Thanks. Please don't paste keys in chat — I'd recommend rotating that one. "
            "A 401 usually means the key is for the sandbox project; production calls need a "
            "live key and the X-Partner-Id header."
        )
        L.user("ah, I was missing X-Partner-Id. works now, thanks. I'll rotate the key.")
        L.goal_close(
            gid,
            "succeeded",
            desc,
            "Partner 401s were caused by a missing X-Partner-Id header; user will rotate the exposed API key.",
        )

    def secrets_session_contact() -> None:
        L.person = "u-104"
        desc = "Send the flight itinerary to user u-104 by email"
        gid = L.goal_open(desc, category="booking")
        L.user(
            "Can you email the itinerary for my Lisbon trip to dana.whitfield@example.com? "
            "And if anything changes with the flight just text me at +1 (415) 555-0142.",
            importance=0.5,
        )
        L.call("send_itinerary", {"user_id": "u-104", "email": "dana.whitfield@example.com", "trip": "LIS-2026-04"})
        L.result("send_itinerary", {"status": "sent", "message_id": "msg_" + rand_code(r, 10).lower()})
        L.call(
            "update_contact_prefs",
            {"user_id": "u-104", "sms": "+14155550142", "notify_on": ["delay", "gate_change", "cancellation"]},
        )
        L.result("update_contact_prefs", {"status": "ok"})
        ans = L.bot(
            "Done — the itinerary is on its way to your inbox and you'll get SMS alerts for "
            "delays, gate changes and cancellations."
        )
        L.feedback("positive", ans, "perfect, thank you")
        L.goal_close(gid, "succeeded", desc, "Itinerary emailed to u-104; SMS alerts enabled for flight changes.")

    def secrets_session_callback() -> None:
        L.person = "u-107"
        desc = "Arrange a callback for user u-107 about a double charge"
        gid = L.goal_open(desc, category="billing")
        L.user(
            "I was charged twice for my Madrid flight. Please have someone call me, my number is "
            "212-555-0187, or email luis.ortega88@example.org"
        )
        L.call(
            "create_ticket",
            {
                "user_id": "u-107",
                "topic": "double charge",
                "callback_phone": "212-555-0187",
                "email": "luis.ortega88@example.org",
                "priority": "high",
            },
        )
        L.result("create_ticket", {"ticket": f"T-{r.randint(40000, 49999)}", "status": "queued", "sla_hours": 24})
        L.bot("I've opened a high-priority billing ticket; an agent will call you within 24 hours.")
        L.goal_close(gid, "succeeded", desc, "Billing ticket opened for u-107's double charge.")

    def preference_update(uid_pref: tuple[str, str, str]) -> None:
        uid, text, fact = uid_pref
        L.person = uid
        L.user(text, category="preference", importance=0.7)
        L.bot("Got it, I'll remember that for future bookings.")
        L.note(fact, goal_id=pref_goal, category="preference", importance=0.8, tags=["preference", uid])
        L.person = None

    prefs = [
        (
            "u-104",
            "btw I always want an aisle seat, I have long legs",
            "User u-104 (Dana Whitfield) always wants an aisle seat.",
        ),
        (
            "u-102",
            "Please never book me on Spirit, I'd rather pay more",
            "User u-102 refuses Spirit Airlines; willing to pay more to avoid it.",
        ),
        (
            "u-109",
            "I'm vegetarian, can you add that to my meal preference?",
            "User u-109 has a vegetarian meal preference.",
        ),
        ("u-104", "I have TSA PreCheck now, known traveler number is on my profile", "User u-104 has TSA PreCheck."),
        (
            "u-106",
            "I prefer morning flights, I hate red-eyes",
            "User u-106 prefers morning departures and never red-eyes.",
        ),
        (
            "u-104",
            "actually I'm ok with window seats on flights under 2 hours",
            "User u-104: aisle seat in general, but window is fine for flights under 2 hours.",
        ),
    ]
    pref_at = {6: 0, 20: 1, 35: 2, 48: 3, 60: 4, 80: 5}
    special = {4: secrets_session_api_key, 28: secrets_session_contact, 66: secrets_session_callback}

    uids = list(USERS)
    for i in range(n_sessions):
        L.start_session(i, n_sessions)
        uid = "u-104" if r.random() < 0.18 else r.choice(uids)
        L.person = None  # the session's opening notes are the bot's own: shared
        if i == 0:
            L.note(
                "Support-bot started. Tools: get_weather, search_flights, book_flight, "
                "lookup_order, request_refund, send_itinerary, create_ticket.",
                importance=0.2,
            )
            pref_goal = L.goal_open(
                "Keep the user's travel preferences up to date", long_term=True, category="preference"
            )
            ratelimit_goal = L.goal_open(
                "Reduce failed weather lookups caused by get_weather rate limiting", long_term=True, category="weather"
            )
        if i in special:
            special[i]()
            continue
        if i in pref_at:
            preference_update(prefs[pref_at[i]])
        if i == 15:
            L.note(
                "Ops: get_weather upstream limit is 60 requests/minute per key. On HTTP 429, "
                "wait 60 seconds before retrying; immediate retries fail.",
                goal_id=ratelimit_goal,
                importance=0.9,
                tags=["rate-limit", "policy"],
            )
        if i == 59:
            L.note(
                "Ops: get_weather now has a second API key; 429s should be much rarer.",
                goal_id=ratelimit_goal,
                importance=0.6,
                tags=["rate-limit"],
            )
        if i == 88:
            L.tick(2, 5)
            L.add(
                "goal",
                goal_id=ratelimit_goal,
                goal={
                    "id": ratelimit_goal,
                    "status": "succeeded",
                    "long_term": True,
                    "description": "Reduce failed weather lookups caused by get_weather rate limiting",
                },
            )
            L.tick(0, 2)
            L.add(
                "outcome",
                goal_id=ratelimit_goal,
                outcome="success",
                content="429 rate-limit failures on get_weather dropped after adding a second key "
                "and the 60 s back-off rule.",
            )
        if i in (22, 50, 75):
            L.observe(
                r.choice(
                    [
                        "Weather API latency elevated today (p95 4.1 s).",
                        "book_flight payment processor reported degraded performance for amex cards.",
                        "Spike in order lookups after the spring sale shipping delays.",
                    ]
                ),
                importance=0.3,
            )
        L.person = uid
        if r.random() < 0.35:
            L.user(r.choice(["hi", "hello", "hey there", "Hi!", "good morning"]), category="smalltalk")
        n_tasks = r.choice([1, 1, 1, 2, 2, 3])
        for _ in range(n_tasks):
            x = r.random()
            if x < 0.45:
                weather(uid)
            elif x < 0.72:
                flight(uid)
            elif x < 0.93:
                order(uid)
            else:
                small_talk(uid)
            L.tick(20, 300)
        if r.random() < 0.25:
            L.user(r.choice(["bye", "that's all, thanks", "thanks, bye!", "ok"]), category="smalltalk")
    return L.records


# --------------------------------------------------------------------------
# coding-assistant
# --------------------------------------------------------------------------

REPOS = {
    "billing-service": {"pkg": "billing", "files": ["invoice.py", "tax.py", "export.py", "discounts.py"]},
    "inventory-api": {"pkg": "inventory", "files": ["models.py", "routes.py", "stock.py", "sync.py"]},
    "data-pipeline": {"pkg": "pipeline", "files": ["ingest.py", "transform.py", "schedule.py", "io.py"]},
}
MISSING_MODULES = [
    ("yaml", "pyyaml", "PyYAML-6.0.1"),
    ("dateutil", "python-dateutil", "python-dateutil-2.9.0.post0"),
    ("jwt", "PyJWT", "PyJWT-2.8.0"),
    ("sklearn", "scikit-learn", "scikit-learn-1.4.2"),
    ("dotenv", "python-dotenv", "python-dotenv-1.0.1"),
    ("requests", "requests", "requests-2.31.0"),
    ("freezegun", "freezegun", "freezegun-1.4.0"),
]
FAIL_TESTS = [
    (
        "test_total_with_discount",
        "assert 90.0 == 89.99",
        "rounding: use Decimal and quantize to 2 places instead of float math",
    ),
    (
        "test_tax_for_eu_customer",
        "KeyError: 'vat_rate'",
        "missing default VAT rate for EU customers without a country code",
    ),
    (
        "test_export_csv_header",
        "AssertionError: assert ['id', 'amount'] == ['id', 'amount', 'currency']",
        "CSV export forgot the currency column",
    ),
    ("test_stock_never_negative", "assert -1 >= 0", "decrement without checking available stock"),
    (
        "test_parse_dates",
        "ValueError: time data '2026-03-05T10:00:00Z' does not match format '%Y-%m-%d %H:%M:%S'",
        "parse ISO-8601 with datetime.fromisoformat instead of a fixed strptime format",
    ),
    (
        "test_sync_retries",
        "TimeoutError: mocked upstream did not respond",
        "the test expected 3 retries but the client only retried once",
    ),
    (
        "test_schedule_dst",
        "AssertionError: assert 23 == 24",
        "schedule computed hours in local time across a DST change; use UTC",
    ),
]
BRANCHES = [
    "feature/vat-defaults",
    "fix/rounding",
    "feature/csv-currency",
    "fix/stock-guard",
    "feature/iso-dates",
    "chore/deps",
    "feature/retry-client",
    "fix/dst-schedule",
]
CONFLICT_FILES = ["src/{pkg}/config.py", "src/{pkg}/__init__.py", "pyproject.toml", "src/{pkg}/{f}"]


def coding_assistant(seed: int) -> list[dict]:
    L = Log("coding-assistant", "ca", seed)
    r = L.rng
    n_sessions = 62
    st = {"pytest_x": False, "indent": None, "no_force": False, "conventional": False}
    conv_goal = None

    def test_cmd() -> str:
        return "pytest -x -q" if st["pytest_x"] else "pytest -q"

    def indent_note() -> str:
        if st["indent"] == "tabs":
            return " (indented with tabs, per your preference)"
        if st["indent"] == "spaces":
            return " (4-space indentation)"
        return ""

    def commit_msg(kind: str, what: str) -> str:
        return f"{kind}: {what}" if st["conventional"] else what[0].upper() + what[1:]

    def tests_pass(repo: str) -> dict:
        n = {"billing-service": 142, "inventory-api": 87, "data-pipeline": 213}[repo] + r.randint(0, 6)
        return {"exit_code": 0, "summary": f"{n} passed in {r.uniform(3, 40):.2f}s"}

    def import_error(repo: str) -> None:
        info = REPOS[repo]
        mod, pkg, installed = r.choice(MISSING_MODULES)
        f = r.choice(info["files"])
        desc = f"Get the test suite passing in {repo}"
        gid = L.goal_open(desc, category="tests")
        L.user(
            r.choice(
                [
                    f"tests are failing in {repo} after I pulled main, can you take a look?",
                    f"CI is red on {repo}, please fix",
                    f"can you run the tests in {repo}? something's broken",
                    f"{repo} tests broken again :(",
                ]
            )
        )
        L.call("run_tests", {"repo": repo, "cmd": test_cmd()})
        L.result(
            "run_tests",
            error=(
                f"ImportError while importing test module 'tests/test_{f}': "
                f"ModuleNotFoundError: No module named '{mod}'"
            ),
            tags=["ImportError"],
        )
        L.bot(f"The tests can't import `{mod}`. It's provided by the `{pkg}` package; installing it.")
        if mod != pkg.lower() and r.random() < 0.3:
            L.call("pip_install", {"package": mod})
            L.result(
                "pip_install",
                error=f"ERROR: Could not find a version that satisfies the requirement {mod} "
                f"(from versions: none)\nERROR: No matching distribution found for {mod}",
            )
            L.observe(
                f"pip package name differs from the import name: `import {mod}` comes from `{pkg}`.",
                importance=0.6,
                tags=["pip", "ImportError"],
            )
        L.call("pip_install", {"package": pkg})
        if r.random() < 0.05:
            L.result(
                "pip_install",
                error="ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device",
            )
            L.bot("pip ran out of disk space on the runner. You'll need to free space or clear the pip cache.")
            L.goal_close(gid, "failed", desc, f"Could not install {pkg} in {repo}: disk full on the runner.")
            return
        L.result("pip_install", f"Successfully installed {installed}")
        if r.random() < 0.5:
            L.call("read_file", {"repo": repo, "path": "requirements.txt"})
            L.result(
                "read_file",
                "\n".join(
                    r.sample(
                        [
                            "fastapi==0.110.0",
                            "pydantic==2.6.4",
                            "sqlalchemy==2.0.29",
                            "httpx==0.27.0",
                            "pandas==2.2.1",
                            "uvicorn==0.29.0",
                        ],
                        4,
                    )
                ),
            )
            L.bot(f"`{pkg}` wasn't in requirements.txt, adding it so CI gets it too.")
            L.call(
                "write_file",
                {
                    "repo": repo,
                    "path": "requirements.txt",
                    "append": f"{pkg}=={installed.rsplit('-', 1)[-1] if '-' in installed else '1.0'}",
                },
            )
            L.result("write_file", {"ok": True})
        L.call("run_tests", {"repo": repo, "cmd": test_cmd()})
        L.result("run_tests", tests_pass(repo))
        ans = L.bot(f"All green now. The failure was a missing dependency (`{pkg}`).")
        if r.random() < 0.2:
            L.feedback("positive", ans, r.choice(["nice", "thanks, that was quick", "👍"]))
        L.goal_close(
            gid, "succeeded", desc, f"Fixed ImportError for '{mod}' in {repo} by installing {pkg}; tests pass."
        )

    def failing_test(repo: str) -> None:
        info = REPOS[repo]
        test, err, cause = r.choice(FAIL_TESTS)
        f = r.choice(info["files"])
        desc = f"Fix failing test {test} in {repo}"
        gid = L.goal_open(desc, category="tests")
        L.user(
            r.choice(
                [
                    f"{test} is failing, can you fix it?",
                    f"please look at the failing {test} in {repo}",
                    f"fix {test}",
                    f"{test} keeps failing on my branch",
                ]
            )
        )
        L.call("run_tests", {"repo": repo, "cmd": test_cmd() + f" -k {test}"})
        L.result(
            "run_tests",
            error=f"FAILED tests/test_{f.replace('.py', '')}.py::{test} - {err}\n1 failed, {r.randint(20, 140)} passed",
            tags=["test-failure"],
        )
        L.call("read_file", {"repo": repo, "path": f"src/{info['pkg']}/{f}"})
        L.result(
            "read_file",
            f"# src/{info['pkg']}/{f}\n"
            + r.choice(
                [
                    "def total(items, discount=0.0):\n    return sum(i.price for i in items) * (1 - discount)\n",
                    "def vat_rate(customer):\n    return RATES[customer.country]['vat_rate']\n",
                    "def decrement(sku, qty):\n    STOCK[sku] -= qty\n",
                    "def parse(ts):\n    return datetime.strptime(ts, '%Y-%m-%d %H:%M:%S')\n",
                ]
            ),
        )
        L.bot(f"Root cause: {cause}. Patching it{indent_note()}.")
        L.call("apply_patch", {"repo": repo, "path": f"src/{info['pkg']}/{f}", "indent": st["indent"] or "spaces"})
        L.result("apply_patch", {"ok": True, "hunks": r.randint(1, 3)})
        if r.random() < 0.15:
            # flaky / deeper problem -> goal fails
            L.call("run_tests", {"repo": repo, "cmd": test_cmd() + f" -k {test}"})
            L.result(
                "run_tests",
                error=f"FAILED {test} - passes locally 3/5 runs; looks order-dependent (shared module-level state)",
            )
            L.bot(
                "The test is flaky: it depends on state leaked from another test. "
                "I'd need to refactor the fixtures, which is bigger than this fix."
            )
            L.user(
                r.choice(["ok leave it, mark it xfail for now and open an issue", "not now, I'll look at it tomorrow"])
            )
            L.goal_close(gid, "failed", desc, f"{test} in {repo} is flaky (order-dependent shared state); not fixed.")
            return
        L.call("run_tests", {"repo": repo, "cmd": test_cmd()})
        L.result("run_tests", tests_pass(repo))
        ans = L.bot(f"Fixed: {cause}. Full suite passes.")
        if r.random() < 0.15:
            L.feedback("positive", ans, r.choice(["good catch", "thanks!", "great explanation"]))
        L.goal_close(gid, "succeeded", desc, f"Fixed {test} in {repo}: {cause}.")

    def merge_conflict(repo: str) -> None:
        info = REPOS[repo]
        branch = r.choice(BRANCHES)
        cf = r.choice(CONFLICT_FILES).format(pkg=info["pkg"], f=r.choice(info["files"]))
        desc = f"Merge main into {branch} in {repo} and commit"
        gid = L.goal_open(desc, category="git")
        L.user(
            r.choice(
                [
                    f"merge main into {branch} and commit",
                    f"can you update {branch} with main?",
                    f"{branch} is behind main, please merge and commit",
                ]
            )
        )
        L.call("git_merge", {"repo": repo, "branch": branch, "from": "main"})
        L.result(
            "git_merge",
            error=(
                f"Auto-merging {cf}\nCONFLICT (content): Merge conflict in {cf}\n"
                "Automatic merge failed; fix conflicts and then commit the result."
            ),
            tags=["merge-conflict"],
        )
        if r.random() < 0.25:
            # the assistant tries to commit before resolving
            L.call("git_commit", {"repo": repo, "message": commit_msg("chore", f"merge main into {branch}")})
            L.result(
                "git_commit",
                error="error: Committing is not possible because you have unmerged files.\n"
                "hint: Fix them up in the work tree, and then use 'git add/rm <file>'",
            )
        L.call("read_file", {"repo": repo, "path": cf})
        L.result(
            "read_file",
            f"<<<<<<< HEAD\nTIMEOUT = {r.choice([10, 30, 60])}\n=======\n"
            f"TIMEOUT = {r.choice([15, 45, 90])}\nRETRIES = 3\n>>>>>>> main\n",
        )
        if r.random() < 0.12:
            L.bot(f"Both sides changed TIMEOUT in {cf}. Which value do you want to keep?")
            L.user("not sure, ask Priya. abort the merge for now")
            L.call("git_merge", {"repo": repo, "abort": True})
            L.result("git_merge", "Merge aborted.")
            L.goal_close(
                gid,
                "cancelled",
                desc,
                f"Merge of main into {branch} aborted: conflicting TIMEOUT values in {cf} need a decision.",
            )
            return
        L.bot(f"Conflict in {cf}: keeping main's TIMEOUT and RETRIES plus our branch changes.")
        L.call("apply_patch", {"repo": repo, "path": cf, "resolve_conflict": True})
        L.result("apply_patch", {"ok": True})
        L.call("run_tests", {"repo": repo, "cmd": test_cmd()})
        L.result("run_tests", tests_pass(repo))
        L.call(
            "git_commit", {"repo": repo, "message": commit_msg("chore", f"merge main into {branch}"), "branch": branch}
        )
        sha = rand_code(r, 7, "0123456789abcdef")
        L.result("git_commit", f"[{branch} {sha}] " + commit_msg("chore", f"merge main into {branch}"))
        L.goal_close(gid, "succeeded", desc, f"Resolved merge conflict in {cf} and committed {sha} on {branch}.")

    def commit_push(repo: str, force_incident: bool = False) -> None:
        branch = "main" if force_incident else r.choice(BRANCHES)
        what = r.choice(
            [
                "add currency column to CSV export",
                "handle missing VAT rate",
                "guard against negative stock",
                "use UTC for schedules",
                "bump dependencies",
                "retry upstream sync 3 times",
            ]
        )
        desc = f"Commit and push the current changes in {repo}"
        gid = L.goal_open(desc, category="git")
        L.user(r.choice(["commit and push this", "ok ship it", "please commit + push", "looks good, commit it"]))
        L.call("git_commit", {"repo": repo, "message": commit_msg("feat", what), "branch": branch})
        sha = rand_code(r, 7, "0123456789abcdef")
        L.result("git_commit", f"[{branch} {sha}] {commit_msg('feat', what)}")
        if force_incident:
            L.call("git_push", {"repo": repo, "branch": "main", "force": True})
            cid = L.records[-1]["id"]
            L.result("git_push", error="! [remote rejected] main -> main (protected branch hook declined)")
            L.user(
                "WHOA. never force-push to main. ever. push to a branch and open a PR.",
                importance=0.95,
                category="correction",
            )
            L.feedback("negative", cid, "never force-push to main", importance=0.95)
            L.note(
                "Rule from user: never force-push to main. Push to a feature branch and open a PR.",
                goal_id=conv_goal,
                importance=0.95,
                tags=["git", "rule"],
            )
            st["no_force"] = True
            branch = "fix/" + what.split()[0] + "-" + what.split()[-1]
            L.call("git_push", {"repo": repo, "branch": branch, "set_upstream": True})
            L.result("git_push", f"To github.com:acme/{repo}.git\n * [new branch] {branch} -> {branch}")
            L.call("open_pr", {"repo": repo, "head": branch, "base": "main", "title": what})
            L.result("open_pr", {"url": f"https://github.com/acme/{repo}/pull/{r.randint(300, 900)}"})
            L.bot("Sorry about that. Pushed to a branch and opened a PR instead. I won't force-push to main.")
            L.goal_close(
                gid,
                "succeeded",
                desc,
                f"Changes pushed to {branch} with a PR after the user forbade force-pushing to main.",
                outcome="partial",
            )
            return
        if r.random() < 0.12:
            L.call("git_push", {"repo": repo, "branch": branch})
            L.result(
                "git_push",
                error="! [rejected] "
                + branch
                + " -> "
                + branch
                + " (non-fast-forward)\nhint: Updates were rejected because the tip of "
                "your current branch is behind its remote counterpart.",
            )
            if st["no_force"]:
                L.bot("Push rejected (non-fast-forward). Rebasing on the remote branch instead of forcing.")
            L.call("git_pull", {"repo": repo, "branch": branch, "rebase": True})
            L.result("git_pull", "Successfully rebased and updated refs/heads/" + branch)
        L.call("git_push", {"repo": repo, "branch": branch})
        L.result(
            "git_push",
            f"To github.com:acme/{repo}.git\n   {rand_code(r, 7, '0123456789abcdef')}..{sha}  {branch} -> {branch}",
        )
        L.bot(f"Committed {sha} and pushed to {branch}.")
        L.goal_close(gid, "succeeded", desc, f"Committed '{what}' as {sha} and pushed {branch} in {repo}.")

    def pytest_correction(repo: str) -> None:
        desc = f"Run the full test suite in {repo}"
        gid = L.goal_open(desc, category="tests")
        L.user(f"run the tests in {repo}")
        L.call("run_tests", {"repo": repo, "cmd": "pytest"})
        cid = L.records[-1]["id"]
        L.result(
            "run_tests",
            error="FAILED tests/test_io.py::test_roundtrip - AssertionError\n"
            "FAILED tests/test_io.py::test_append - AssertionError\n"
            "... 37 more failures (cascade from the first)\n39 failed, 174 passed in 212.40s",
        )
        L.user(
            "no, always use pytest -x. I don't want to wait 3 minutes for 39 cascading failures.",
            importance=0.9,
            category="correction",
        )
        L.feedback("negative", cid, "always use pytest -x", importance=0.9)
        L.note(
            "User rule: always run tests with `pytest -x` (stop at first failure).",
            goal_id=conv_goal,
            importance=0.9,
            tags=["tests", "rule"],
        )
        st["pytest_x"] = True
        L.call("run_tests", {"repo": repo, "cmd": "pytest -x -q"})
        L.result(
            "run_tests",
            error="FAILED tests/test_io.py::test_roundtrip - AssertionError: "
            "b'\\r\\n' != b'\\n'\n1 failed, 12 passed in 1.90s",
        )
        L.bot(
            "With -x: the first failure is test_roundtrip, a line-ending mismatch. Opening files with "
            "newline='' fixes it."
        )
        L.call("apply_patch", {"repo": repo, "path": "src/pipeline/io.py"})
        L.result("apply_patch", {"ok": True})
        L.call("run_tests", {"repo": repo, "cmd": "pytest -x -q"})
        L.result("run_tests", tests_pass(repo))
        L.goal_close(
            gid, "succeeded", desc, "Suite passes after fixing line endings in io.py; user wants `pytest -x` always."
        )

    def pref_tabs(repo: str) -> None:
        L.user(
            "oh and for the record: I prefer tabs for indentation in my own projects.",
            importance=0.8,
            category="preference",
        )
        L.bot("Noted — tabs for indentation.")
        L.note(
            "User preference: tabs for indentation.", goal_id=conv_goal, importance=0.8, tags=["preference", "style"]
        )
        st["indent"] = "tabs"

    def pref_spaces(repo: str) -> None:
        L.user(
            "actually I switched to spaces — 4 spaces, the team adopted black and ruff format. please stop using tabs.",
            importance=0.9,
            category="preference",
        )
        L.bot("Got it: 4 spaces from now on; I'll stop using tabs.")
        L.note(
            "User preference changed: 4-space indentation (black/ruff format); no longer tabs.",
            goal_id=conv_goal,
            importance=0.9,
            tags=["preference", "style"],
        )
        st["indent"] = "spaces"

    def pref_conventional(repo: str) -> None:
        L.user("use conventional commits please (feat:, fix:, chore:)", importance=0.7, category="preference")
        L.bot("Will do.")
        L.note(
            "User preference: conventional commit messages (feat:, fix:, chore:).",
            goal_id=conv_goal,
            importance=0.7,
            tags=["preference", "git"],
        )
        st["conventional"] = True

    def question(repo: str) -> None:
        qa = r.choice(
            [
                ("what python version does CI use?", "CI runs Python 3.11 (see .github/workflows/ci.yml)."),
                (
                    "is it safe to run migrations on staging now?",
                    "Not on Fridays — the staging DB is read-only on Fridays for the data snapshot.",
                ),
                ("how do I run just one test?", "Use `-k name`, e.g. `pytest -x -k test_parse_dates`."),
                (
                    "why is the data-pipeline suite so slow?",
                    "Most of the time is the integration tests hitting the local Postgres; mark them `slow` and skip by default.",
                ),
            ]
        )
        L.user(qa[0])
        L.bot(qa[1])
        if r.random() < 0.4:
            L.user(r.choice(["ok", "thanks", "got it", "makes sense"]))

    repos = list(REPOS)
    scripted = {
        3: ("pref", pref_tabs),
        6: ("pref", pytest_correction),
        11: ("pref", pref_conventional),
        16: ("force", None),
        40: ("pref", pref_spaces),
    }
    for i in range(n_sessions):
        L.start_session(i, n_sessions, hours=(9, 23))
        repo = r.choice(repos)
        if i == 0:
            L.note(
                "coding-assistant session log. Tools: run_tests, pip_install, git_commit, git_merge, "
                "git_push, git_pull, read_file, write_file, apply_patch, open_pr.",
                importance=0.2,
            )
            conv_goal = L.goal_open(
                "Keep the user's coding conventions and preferences up to date", long_term=True, category="preference"
            )
        if i == 29:
            L.observe(
                "CI for billing-service moved to Python 3.12; dateutil warnings now show up as errors.", importance=0.5
            )
        if i == 46:
            L.note(
                "Repo data-pipeline: integration tests need Postgres running (`docker compose up db`).",
                importance=0.6,
                tags=["tests"],
            )
        if i in scripted:
            kind, fn = scripted[i]
            if kind == "force":
                commit_push(repo, force_incident=True)
                continue
            fn("data-pipeline" if fn is pytest_correction else repo)
        if r.random() < 0.3:
            L.user(r.choice(["hey", "morning", "hi again", "ok next thing"]), category="smalltalk")
        for _ in range(r.choice([1, 1, 2, 2, 3])):
            x = r.random()
            if x < 0.3:
                import_error(repo)
            elif x < 0.55:
                failing_test(repo)
            elif x < 0.7:
                merge_conflict(repo)
            elif x < 0.9:
                commit_push(repo)
            else:
                question(repo)
            L.tick(60, 900)
        # late in the log, the user reminds the assistant of older rules (redundant)
        if i in (25, 50) and st["pytest_x"]:
            L.user("reminder: pytest -x, always", category="correction", importance=0.6)
            L.bot("Yes — always `pytest -x`.")
    return L.records


# --------------------------------------------------------------------------
# companion
# --------------------------------------------------------------------------

GREETINGS = ["hi", "hey", "hi!", "hello", "good morning", "morning!", "hey there", "yo"]
GREET_REPLIES = [
    "Hi! How's your day going?",
    "Hey! What's up?",
    "Good morning! How did you sleep?",
    "Hello! Nice to hear from you.",
    "Hey! How are you doing today?",
]
FILLER = ["ok", "thanks!", "lol", "cool", "haha", "nice", "sure", "ok cool", "thx", "👍", "hmm", "yeah", "got it", "k"]
FILLER_REPLIES = ["😊", "Anytime!", "Glad to help.", "Of course!", "Sounds good.", "Haha.", "You're welcome!"]
BYES = ["good night", "gn", "bye!", "talk later", "ttyl", "night!"]
BYE_REPLIES = ["Good night! Sleep well.", "Talk soon!", "Bye! Take care.", "Have a good one!"]

CILANTRO = [
    "I hate cilantro",
    "ugh, I really hate cilantro",
    "please no cilantro, I hate it",
    "just so you know I hate cilantro, it tastes like soap to me",
    "no cilantro! I can't stand it",
    "remember I hate cilantro lol",
    "cilantro is the worst. tastes like soap",
]
TIRED = [
    "so tired after my night shift",
    "long shift at the hospital today, exhausted",
    "just got home from a 12 hour shift",
    "night shifts are killing me",
    "ugh, 3 night shifts in a row",
    "so tired, the ICU was packed tonight",
]
TIRED_REPLIES = [
    "That sounds exhausting. Try to get some real sleep — blackout curtains help after nights.",
    "Twelve hours in the ICU is a lot. Be kind to yourself today.",
    "Rest up! Want me to queue some calm music?",
    "You deserve a slow morning. Anything I can take off your plate?",
]
BISCUIT = [
    "Biscuit stole my sock again 😂",
    "took Biscuit to the dog park today",
    "Biscuit is snoring next to me",
    "Biscuit did zoomies for 10 minutes straight",
    "my corgi Biscuit says hi",
]
BOULDER = [
    "went bouldering tonight, finally sent a V4!",
    "climbing gym after work",
    "my forearms are dead from bouldering",
    "bouldering session was great today",
    "stuck on the same V5 for two weeks",
]
SOURDOUGH = [
    "my sourdough starter (her name is Doughlene) is so bubbly today",
    "baked a loaf this morning, best crumb yet",
    "fed the starter, baking tomorrow",
    "my sourdough came out flat again :(",
]


def companion(seed: int) -> list[dict]:
    L = Log("companion", "cp", seed)
    r = L.rng
    n_sessions = 95
    life_goal = None
    moved = {"done": False}
    MOVE_SESSION = 52  # ~ day 33
    DAY_SHIFT_SESSION = 73

    def city() -> str:
        return "San Francisco" if moved["done"] else "Portland"

    def chit(n: int) -> None:
        for _ in range(n):
            L.user(r.choice(FILLER), category="smalltalk", importance=0.05)
            if r.random() < 0.6:
                L.bot(r.choice(FILLER_REPLIES))

    def fact(text: str, reply: str, note: str | None = None, importance: float = 0.7, category: str = "fact") -> None:
        L.user(text, category=category, importance=importance)
        L.bot(reply)
        if note:
            L.note(note, goal_id=life_goal, category=category, importance=importance, tags=["user-fact"])

    def recipe_goal() -> None:
        dish = r.choice(
            [
                "tacos",
                "a Thai curry",
                "pho",
                "a grain bowl",
                "salsa verde chicken",
                "burrito bowls",
                "a quick stir fry",
                "pasta",
            ]
        )
        day = r.choice(["tonight", "Friday", "Sunday", "tomorrow"])
        desc = f"Suggest a recipe for {dish} ({day}) that fits the user's tastes"
        gid = L.goal_open(desc, category="food")
        L.user(
            r.choice(
                [
                    f"what should I make for dinner {day}? thinking {dish}",
                    f"any ideas for {dish} {day}?",
                    f"can you find me a recipe for {dish}",
                ]
            )
        )
        L.call("search_recipes", {"query": dish, "exclude": ["cilantro", "peanuts"], "max_minutes": 45})
        found = r.randint(0, 9)
        if found == 0:
            L.result("search_recipes", {"results": []})
            L.bot(f"Nothing came up for {dish} without cilantro and peanuts — want me to loosen the time limit?")
            L.user("nah I'll just order pizza")
            L.goal_close(gid, "failed", desc, f"No {dish} recipe without cilantro/peanuts under 45 min.")
            return
        title = f"{r.choice(['Easy', 'Weeknight', 'Smoky', 'Garlicky', 'Lemony'])} {dish.replace('a ', '').title()}"
        L.result(
            "search_recipes",
            {"results": [{"title": title, "minutes": r.randint(20, 45), "excluded": ["cilantro", "peanuts"]}]},
        )
        ans = L.bot(f"How about '{title}'? I left out cilantro (I know you hate it) and anything with peanuts.")
        if r.random() < 0.2:
            L.user(r.choice(CILANTRO) + " so thank you", category="preference", importance=0.4)
        if r.random() < 0.3:
            L.feedback(
                "positive", ans, r.choice(["yum", "perfect, you remembered the cilantro thing", "made it, was great"])
            )
        L.goal_close(gid, "succeeded", desc, f"Suggested '{title}' without cilantro or peanuts.")

    def gym_goal() -> None:
        desc = "Find a bouldering gym near the user's new apartment in San Francisco (Mission District)"
        gid = L.goal_open(desc, category="hobby")
        L.user("can you find a bouldering gym near my new place? I'm in the Mission now")
        L.call("search_places", {"query": "bouldering gym", "near": "Mission District, San Francisco", "radius_km": 5})
        L.result(
            "search_places",
            {
                "results": [
                    {"name": "Mission Cliffs", "distance_km": 0.8, "rating": 4.6},
                    {"name": "Dogpatch Boulders", "distance_km": 3.1, "rating": 4.7},
                    {"name": "Mission Bay Boulders", "distance_km": 3.4, "rating": 4.5},
                ]
            },
        )
        ans = L.bot("Mission Cliffs is 0.8 km from you (4.6★); Dogpatch Boulders is 3.1 km (4.7★).")
        L.user("omg Mission Cliffs is walking distance, perfect")
        L.feedback("positive", ans, "great find")
        L.goal_close(gid, "succeeded", desc, "Found Mission Cliffs, 0.8 km from the user's new apartment.")

    def reminder_goal(what: str, when_days: int) -> None:
        when = (L.t + timedelta(days=when_days)).strftime("%Y-%m-%d")
        desc = f"Set a reminder: {what} on {when}"
        gid = L.goal_open(desc, category="reminder")
        L.user(f"remind me about {what} on {when}")
        L.call("set_reminder", {"text": what, "date": when, "time": "09:00"})
        if r.random() < 0.1:
            L.result("set_reminder", error="calendar sync failed: token expired")
            L.bot("Calendar sync failed (expired token). Could you reconnect your calendar in settings?")
            L.user("ugh later")
            L.goal_close(gid, "failed", desc, f"Reminder '{what}' not set: calendar token expired.")
            return
        L.result("set_reminder", {"id": f"rem_{r.randint(1000, 9999)}", "status": "scheduled"})
        L.bot(f"Done, I'll remind you on {when} at 9am.")
        L.goal_close(gid, "succeeded", desc, f"Reminder set: {what} on {when}.")

    def gift_goal() -> None:
        desc = "Help the user pick a birthday gift for their sister Maya"
        gid = L.goal_open(desc, category="family")
        L.user(
            "Maya's birthday is coming up (May 9). she's into trail running and lives in Denver, any gift ideas?",
            importance=0.6,
        )
        L.call("search_products", {"query": "trail running gifts", "max_price_usd": 100, "ship_to": "Denver, CO"})
        L.result(
            "search_products",
            {
                "results": [
                    {"name": "Trail running vest 5L", "price_usd": 85},
                    {"name": "Headlamp 400 lumen", "price_usd": 45},
                    {"name": "Merino running socks (3)", "price_usd": 38},
                ]
            },
        )
        ans = L.bot("Ideas: a 5L trail running vest ($85), a 400-lumen headlamp ($45), or merino running socks ($38).")
        L.user("the headlamp! she runs before sunrise")
        L.feedback("positive", ans, "good ideas")
        L.goal_close(gid, "succeeded", desc, "User chose a headlamp for Maya's birthday (May 9).")

    def move_goal() -> None:
        desc = "Help the user update their address everywhere after moving to San Francisco"
        gid = L.goal_open(desc, category="life")
        L.user("can you help me make a list of places to update my address?")
        L.bot(
            "Sure: DMV (CA license within 10 days), USPS forwarding, bank, employer HR, vet for Biscuit, "
            "voter registration, insurance."
        )
        L.call(
            "create_checklist",
            {
                "title": "Address change SF",
                "items": [
                    "CA driver license",
                    "USPS forwarding",
                    "bank",
                    "HR",
                    "vet",
                    "voter registration",
                    "insurance",
                ],
            },
        )
        L.result("create_checklist", {"id": "chk_4471", "items": 7})
        L.user("thanks!")
        L.goal_close(
            gid, "succeeded", desc, "Created a 7-item address-change checklist for the SF move.", outcome="partial"
        )

    scripted_facts = {
        1: (
            "I live in Portland, by the way. Oregon, not Maine 😄",
            "Portland, Oregon — got it!",
            "User lives in Portland, Oregon.",
            0.8,
            "fact",
        ),
        2: (
            "I hate cilantro",
            "Noted, no cilantro in any recipe suggestions.",
            "User hates cilantro (tastes like soap to them).",
            0.8,
            "preference",
        ),
        3: (
            "I'm an ICU nurse, mostly night shifts",
            "That's demanding work. I'll keep your night schedule in mind.",
            "User is an ICU nurse working mostly night shifts.",
            0.7,
            "fact",
        ),
        5: (
            "this is my dog Biscuit, he's a 4 year old corgi",
            "Hi Biscuit! Corgis are the best.",
            "User has a 4-year-old corgi named Biscuit.",
            0.7,
            "fact",
        ),
        7: (
            "oh important: I'm allergic to peanuts. like epipen allergic",
            "Thank you for telling me — I'll never suggest anything with peanuts.",
            "User has a severe peanut allergy (carries an EpiPen).",
            1.0,
            "health",
        ),
        9: (
            "my sister Maya lives in Denver, we talk every Sunday",
            "That's lovely. Sunday calls with Maya, noted.",
            "User's sister Maya lives in Denver; they talk every Sunday.",
            0.6,
            "family",
        ),
        12: (
            "I got into bouldering this year, it's my favorite thing",
            "Bouldering! Nice. What grade are you climbing?",
            "User's favorite hobby is bouldering (started this year).",
            0.6,
            "hobby",
        ),
        14: (
            "I've been baking sourdough too, my starter is called Doughlene",
            "Doughlene is an excellent name.",
            "User bakes sourdough; starter named Doughlene.",
            0.5,
            "hobby",
        ),
        17: (
            "my partner Sam is vegetarian so dinners need to work for both of us",
            "Got it — vegetarian-friendly dinners for you and Sam.",
            "User's partner Sam is vegetarian; dinners should be vegetarian-friendly.",
            0.7,
            "family",
        ),
        25: ("my birthday is April 12 btw", "April 12 — I'll remember!", "User's birthday is April 12.", 0.6, "fact"),
        34: (
            "my mom Linda is visiting Portland next month",
            "How nice! Anything to plan for Linda's visit?",
            "User's mother is Linda.",
            0.5,
            "family",
        ),
        MOVE_SESSION: (
            "big news: I moved to San Francisco! new job at UCSF, still ICU nights",
            "Congratulations on the move to San Francisco and the new job at UCSF!",
            "User moved from Portland to San Francisco (Mission District); now an ICU nurse at UCSF. "
            "Supersedes: lives in Portland.",
            0.95,
            "fact",
        ),
        DAY_SHIFT_SESSION: (
            "I switched to day shifts finally!!",
            "That's huge — real sleep at last!",
            "User switched from night shifts to day shifts at UCSF.",
            0.8,
            "fact",
        ),
    }
    goals_at = {19: recipe_goal, 40: gift_goal, MOVE_SESSION + 1: move_goal, MOVE_SESSION + 4: gym_goal}

    for i in range(n_sessions):
        L.start_session(i, n_sessions, hours=(7, 23))
        if i == 0:
            life_goal = L.goal_open(
                "Remember the user's life facts and preferences", long_term=True, category="profile"
            )
            L.note("Companion persona: warm, brief, remembers details. User id u-501.", importance=0.2)
        if i == MOVE_SESSION:
            moved["done"] = True
        # greeting
        if r.random() < 0.8:
            L.user(r.choice(GREETINGS), category="smalltalk", importance=0.05)
            L.bot(r.choice(GREET_REPLIES))
        if i in scripted_facts:
            text, reply, note, imp, cat = scripted_facts[i]
            fact(text, reply, note, imp, cat)
        if i in goals_at:
            goals_at[i]()
        # varied daily content with lots of repetition
        for _ in range(r.randint(1, 3)):
            x = r.random()
            if x < 0.15:
                shift_night = i < DAY_SHIFT_SESSION
                if shift_night:
                    L.user(r.choice(TIRED), category="mood")
                    L.bot(r.choice(TIRED_REPLIES))
                else:
                    L.user(
                        r.choice(
                            [
                                "day shifts are so much better",
                                "home before dark, love it",
                                "slept 8 hours, feel human again",
                            ]
                        ),
                        category="mood",
                    )
                    L.bot("So glad the day shifts are working out!")
            elif x < 0.27:
                L.user(r.choice(BISCUIT), category="pet")
                L.bot(
                    r.choice(
                        [
                            "Give Biscuit a scratch from me!",
                            "Classic corgi behavior 😂",
                            "Biscuit is living his best life.",
                        ]
                    )
                )
            elif x < 0.37:
                L.user(r.choice(BOULDER), category="hobby")
                L.bot(
                    r.choice(
                        [
                            "Nice work!",
                            "Your forearms will thank you later (maybe).",
                            "Sounds like you're progressing fast.",
                        ]
                    )
                )
            elif x < 0.44:
                L.user(r.choice(SOURDOUGH), category="hobby")
                L.bot(
                    r.choice(
                        [
                            "Doughlene is thriving!",
                            "Flat loaves happen — try a longer cold proof.",
                            "That crumb sounds amazing.",
                        ]
                    )
                )
            elif x < 0.52 and i > 3:
                L.user(r.choice(CILANTRO), category="preference", importance=0.3)
                L.bot(
                    r.choice(
                        [
                            "I know, I know — no cilantro ever.",
                            "Noted (again) 😄 cilantro is banned.",
                            "Cilantro-free zone, promise.",
                        ]
                    )
                )
            elif x < 0.58 and i > 1:
                c = city()
                L.user(
                    r.choice(
                        [
                            f"weather is so nice in {c} today",
                            f"it's raining again in {c}",
                            f"love living in {c}",
                            f"found a great coffee place in {c}",
                        ]
                    ),
                    category="life",
                )
                L.bot(r.choice(["Enjoy it!", "Sounds lovely.", "Oh nice, what's it called?"]))
            elif x < 0.64:
                recipe_goal()
            elif x < 0.68:
                reminder_goal(
                    r.choice(
                        [
                            "Biscuit's vet appointment",
                            "call Maya",
                            "renew my nursing license",
                            "pay rent",
                            "feed Doughlene",
                            "dentist",
                        ]
                    ),
                    r.randint(1, 14),
                )
            elif x < 0.70 and i > 10:
                L.user("what's my sister's name again? lol brain fog", category="family")
                L.bot("Maya! She's in Denver.")
            elif x < 0.72 and moved["done"]:
                L.user(
                    r.choice(
                        [
                            "still unpacking boxes",
                            "the new apartment in the Mission is tiny but cute",
                            "Biscuit loves Dolores Park",
                        ]
                    ),
                    category="life",
                )
                L.bot("Sounds like SF is growing on you.")
            else:
                chit(r.randint(1, 3))
        if r.random() < 0.45:
            chit(1)
        if r.random() < 0.5:
            L.user(r.choice(BYES), category="smalltalk", importance=0.05)
            L.bot(r.choice(BYE_REPLIES))
        if i == 56:
            L.observe(
                "User has mentioned hating cilantro 10+ times; it's a stable preference.",
                goal_id=life_goal,
                importance=0.5,
            )
        if i == 84:
            L.observe(
                "User seems happier since moving to San Francisco; mentions of being tired dropped.", importance=0.3
            )
    return L.records


# --------------------------------------------------------------------------
# OpenAI chat trajectory example
# --------------------------------------------------------------------------


def openai_example() -> list[dict]:
    sys_prompt = (
        "You are a customer service agent for an online retailer. Use the tools to look up orders "
        "and process returns. Always verify the user's identity before making changes."
    )

    def call(cid: str, name: str, args: dict) -> dict:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}],
        }

    def tool(cid: str, name: str, content: dict | str) -> dict:
        return {
            "role": "tool",
            "tool_call_id": cid,
            "name": name,
            "content": content if isinstance(content, str) else json.dumps(content),
        }

    runs = [
        {
            "task_id": 0,
            "trial": 0,
            "reward": 1.0,
            "traj": [
                {"role": "system", "content": sys_prompt},
                {"role": "user", "content": "Hi, where is my order W1234567? It was supposed to arrive Monday."},
                call("call_a1", "get_order", {"order_id": "W1234567"}),
                tool(
                    "call_a1",
                    "get_order",
                    {
                        "order_id": "W1234567",
                        "status": "shipped",
                        "carrier": "UPS",
                        "eta": "2026-03-12",
                        "items": ["travel adapter"],
                    },
                ),
                {
                    "role": "assistant",
                    "content": "Your order W1234567 shipped with UPS and is now expected on "
                    "March 12. Sorry for the delay!",
                },
                {"role": "user", "content": "ok thanks"},
                {"role": "assistant", "content": "You're welcome! Anything else I can help with?"},
            ],
            "info": {"task": {"instruction": "You are Dana. Ask where order W1234567 is; accept the new ETA."}},
        },
        {
            "task_id": 1,
            "trial": 0,
            "reward": 0.0,
            "traj": [
                {"role": "system", "content": sys_prompt},
                {"role": "user", "content": "I want to return the neck pillow from order W7654321."},
                call("call_b1", "get_order", {"order_id": "W7654321"}),
                tool(
                    "call_b1",
                    "get_order",
                    {
                        "order_id": "W7654321",
                        "status": "delivered",
                        "items": ["neck pillow", "packing cubes"],
                        "delivered": "2026-01-02",
                    },
                ),
                call("call_b2", "return_items", {"order_id": "W7654321", "items": ["neck pillow"]}),
                tool("call_b2", "return_items", "Error: return window (30 days) has expired"),
                {
                    "role": "assistant",
                    "content": "I'm sorry, the 30-day return window for that order has "
                    "passed, so I can't process the return.",
                },
            ],
            "info": {
                "task": {
                    "instruction": "You are Marcus. Return the neck pillow from order W7654321; "
                    "insist it was defective."
                }
            },
        },
        {
            "task_id": 2,
            "trial": 0,
            "reward": 1.0,
            "traj": [
                {"role": "system", "content": sys_prompt},
                {
                    "role": "user",
                    "content": "Please change the shipping address on W5550001 to 200 Valencia St, San Francisco.",
                },
                call("call_c1", "get_order", {"order_id": "W5550001"}),
                tool("call_c1", "get_order", {"order_id": "W5550001", "status": "processing"}),
                call(
                    "call_c2",
                    "update_address",
                    {"order_id": "W5550001", "address": "200 Valencia St, San Francisco, CA"},
                ),
                tool("call_c2", "update_address", {"ok": True}),
                {
                    "role": "assistant",
                    "content": "Done: order W5550001 will ship to 200 Valencia St, San Francisco, CA.",
                },
            ],
            "info": {"task": {"instruction": "You moved to San Francisco. Update the address on order W5550001."}},
        },
    ]
    return runs


# --------------------------------------------------------------------------


def write_jsonl(path: Path, records: list[dict]) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out",
        default=str(Path(__file__).resolve().parent.parent / "sample_logs"),
        help="output directory (default: <repo>/sample_logs)",
    )
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    files = {
        "support_bot.jsonl": support_bot(SEED + 1),
        "coding_assistant.jsonl": coding_assistant(SEED + 2),
        "companion.jsonl": companion(SEED + 3),
    }
    for name, recs in files.items():
        write_jsonl(out / name, recs)
        print(f"{out / name}: {len(recs)} records")
    ex = out / "openai_chat_example.json"
    ex.write_text(json.dumps(openai_example(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{ex}: 3 runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
