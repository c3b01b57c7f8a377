#!/usr/bin/env python3
"""Generate the Chinese and the mixed Chinese/English sample logs (deterministic, stdlib only):

    sample_logs/zh_travel_assistant.jsonl   agent "travel-cn": a personal travel assistant, all Chinese
    sample_logs/zh_en_dev_helper.jsonl      agent "dev-helper": a team's coding assistant, Chinese with
                                            English tool output, commands and terms

Timestamps carry the +08:00 zone, as logs written in China do. Usage:
    python scripts/make_zh_sample_logs.py [--out sample_logs]
"""

from __future__ import annotations

import argparse
from datetime import timedelta
from pathlib import Path

from make_sample_logs import SEED, Log, write_jsonl

CST = timedelta(hours=8)


class CstLog(Log):
    """The shared log writer, stamping China Standard Time (+08:00) instead of UTC."""

    def ts(self) -> str:
        return (self.t + CST).strftime("%Y-%m-%dT%H:%M:%S+08:00")


def cn_id_number(base17: str) -> str:
    """An 18-character resident identity number with a valid check character (GB 11643), made up here."""
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    return base17 + "10X98765432"[sum(int(d) * w for d, w in zip(base17, weights)) % 11]


# --------------------------------------------------------------------------
# travel-cn: a personal travel assistant for one user, in Chinese
# --------------------------------------------------------------------------

ROUTES = [
    ("杭州东", "北京南"),
    ("上海虹桥", "南京南"),
    ("杭州东", "上海虹桥"),
    ("北京南", "天津"),
    ("杭州东", "黄山北"),
]
CITIES_CN = ["北京", "南京", "黄山", "厦门", "成都", "青岛"]
WEATHER_CN = ["晴", "多云", "小雨", "阴", "中雨", "晴转多云"]
HELLO = ["你好", "您好", "在吗", "早上好", "hi"]
THANKS_CN = ["谢谢", "好的，谢谢", "好的", "谢谢啦", "嗯嗯，辛苦了", "OK 谢谢"]
BYE = ["再见", "拜拜", "先这样，谢谢", "好的，没事了"]


def travel_cn(seed: int) -> list[dict]:
    L = CstLog("travel-cn", "zt", seed)
    r = L.rng
    sessions = 36
    home = {"city": "杭州", "station": "杭州东"}
    state = {"verified": False, "id_number": cn_id_number("33010619880312" + "457")}

    def day_text(days: int) -> tuple[str, str]:
        d = L.t + CST + timedelta(days=days)
        return d.strftime("%Y-%m-%d"), f"{d.month}月{d.day}日"

    def train(prefs: dict) -> None:
        origin, dest = r.choice(ROUTES)
        if home["city"] == "上海" and origin.startswith("杭州"):
            origin = "上海虹桥"
            dest = dest if dest != "上海虹桥" else "杭州东"
        date, spoken = day_text(r.randint(2, 20))
        desc = f"订{spoken}{origin}到{dest}的高铁票"
        gid = L.goal_open(desc, category="train")
        seat = "一等座" if r.random() < 0.25 else "二等座"
        L.user(
            r.choice(
                [
                    f"帮我订一张{spoken}从{origin}到{dest}的高铁票，{seat}",
                    f"{spoken}要去{dest[:2]}，从{origin}走，帮我看看高铁",
                    f"我{spoken}去{dest[:2]}出差，{seat}就行",
                ]
            ),
            category="train",
        )
        if r.random() < 0.15:
            other, other_spoken = day_text(r.randint(2, 20))
            L.bot(f"好的，帮您查{other_spoken}{origin}到{dest}的车次。")
            L.user(
                r.choice([f"不对，是{spoken}，不是{other_spoken}", f"错了，我说的是{spoken}"]), category="correction"
            )
            L.bot(f"抱歉，改查{spoken}。")
        args = {"from_station": origin, "to_station": dest, "date": date, "seat_type": seat}
        L.call("search_trains", args)
        options = []
        for _ in range(3):
            hour = r.choice([6, 7, 8, 9, 10, 13, 15, 18])
            options.append(
                {
                    "train_no": f"G{r.randint(10, 7600)}",
                    "depart": f"{hour:02d}:{r.choice(['00', '15', '32', '45'])}",
                    "duration": f"{r.randint(1, 4)}小时{r.randint(0, 59)}分",
                    "price": r.choice([73.0, 154.5, 553.5, 626.0, 239.0]),
                    "remaining": r.choice(["有", "有", "12", "3", "无"]),
                }
            )
        options.sort(key=lambda o: o["depart"])
        L.result("search_trains", {"trains": options})
        early = [o for o in options if o["depart"] < "07:00"]
        listing = "；".join(f"{o['train_no']} {o['depart']}发车，{o['duration']}，¥{o['price']}" for o in options)
        L.bot(f"找到{len(options)}趟：{listing}。订哪一趟？")
        pick = options[-1] if prefs.get("no_early") and early else r.choice(options)
        if early and pick in early and not prefs.get("no_early") and r.random() < 0.6:
            L.user("太早了，我不喜欢早上7点前的车，以后别给我订这么早的", category="preference", importance=0.8)
            prefs["no_early"] = True
            L.bot("明白了，以后不订7点前出发的车次。")
            pick = next(o for o in options if o["depart"] >= "07:00")
        L.user(
            r.choice(
                [f"就{pick['train_no']}吧", f"订{pick['train_no']}", "第二个吧" if pick is options[1] else "好，就这趟"]
            )
        )
        book = {
            "train_no": pick["train_no"],
            "date": date,
            "seat_type": seat,
            "passenger_id": state["id_number"],
            "seat_pref": "靠窗" if prefs.get("window") else "无",
        }
        if not state["verified"]:
            L.call("book_train", book)
            L.result("book_train", error="乘车人未完成实名核验，请先核验身份信息")
            L.bot("订票前需要先做一次实名核验，我来帮您提交。")
            L.call("verify_passenger", {"name": "李明", "id_number": state["id_number"]})
            L.result("verify_passenger", {"status": "已核验"})
            state["verified"] = True
        L.call("book_train", book)
        if pick["remaining"] == "无" or r.random() < 0.2:
            L.result("book_train", error=f"余票不足：{pick['train_no']} {seat}已售罄")
            if r.random() < 0.3:
                L.call("book_train", book, tags=["retry"])
                L.result("book_train", error=f"余票不足：{pick['train_no']} {seat}已售罄")
                L.observe("同一车次余票不足时立即重试没有用，应改查其他车次或候补。", importance=0.6)
            alternative = next((o for o in options if o is not pick and o["remaining"] != "无"), None)
            if alternative is None or r.random() < 0.15:
                L.bot("这几趟都没票了，要不要帮您加入候补？")
                L.user(r.choice(["算了，我自己再看看", "不用了"]))
                L.goal_close(gid, "failed", desc, f"{spoken}{origin}到{dest}的{seat}全部售罄，用户放弃候补。")
                return
            L.bot(
                f"{pick['train_no']}已经没有{seat}了，{alternative['train_no']} {alternative['depart']}还有票，改订这趟？"
            )
            L.user(r.choice(["可以", "行，就它吧", "好的"]))
            pick = alternative
            book = {**book, "train_no": pick["train_no"]}
            L.call("search_trains", {**args, "train_no": pick["train_no"]}, tags=["retry"])
            L.result("search_trains", {"trains": [pick]})
            L.call("book_train", book, tags=["retry"])
        order = f"E{r.randint(100000000, 999999999)}"
        coach, seat_no = f"{r.randint(1, 16):02d}车", f"{r.randint(1, 18):02d}{r.choice('ACDF')}"
        L.result("book_train", {"status": "已出票", "order_id": order, "coach": coach, "seat": seat_no})
        answer = L.bot(f"已出票：{pick['train_no']}，{spoken} {pick['depart']}发车，{coach}{seat_no}，订单号{order}。")
        roll = r.random()
        if roll < 0.5:
            L.user(r.choice(THANKS_CN), category="smalltalk")
        if roll < 0.15:
            L.feedback("positive", answer, r.choice(["很快，赞", "靠谱", "这次很顺利"]))
        L.goal_close(gid, "succeeded", desc, f"{spoken}{pick['train_no']}{origin}到{dest}{seat}已出票，订单{order}。")

    def weather() -> None:
        city = r.choice(CITIES_CN)
        date, spoken = day_text(r.randint(0, 5))
        desc = f"查询{city}{spoken}的天气"
        gid = L.goal_open(desc, category="weather")
        L.user(r.choice([f"{city}{spoken}天气怎么样？", f"查一下{spoken}{city}的天气", f"{spoken}去{city}要带伞吗"]))
        L.call("get_weather", {"city": city, "date": date})
        if r.random() < 0.4:
            L.result("get_weather", error="429 请求过于频繁，请60秒后重试")
            if r.random() < 0.25:
                L.call("get_weather", {"city": city, "date": date}, tags=["retry"])
                L.result("get_weather", error="429 请求过于频繁，请60秒后重试")
            L.observe(r.choice(["天气接口限流（429），等待60秒后重试。", "get_weather 返回429，退避60秒再查。"]))
            L.wait(60 + r.uniform(0, 5))
            L.call("get_weather", {"city": city, "date": date}, tags=["retry"])
        cond, high = r.choice(WEATHER_CN), r.randint(6, 27)
        rain = r.choice([0, 10, 30, 60, 80])
        L.result(
            "get_weather",
            {"city": city, "date": date, "summary": cond, "high_c": high, "low_c": high - 7, "rain": rain},
        )
        umbrella = "，记得带伞" if rain >= 50 else ""
        L.bot(f"{city}{spoken}{cond}，{high - 7}到{high}℃，降水概率{rain}%{umbrella}。")
        if r.random() < 0.4:
            L.user(r.choice(THANKS_CN), category="smalltalk")
        L.goal_close(gid, "succeeded", desc, f"告知了{city}{spoken}的天气（{cond}）。")

    def hotel(prefs: dict) -> None:
        city = r.choice(CITIES_CN)
        date, spoken = day_text(r.randint(3, 25))
        nights = r.choice([1, 2, 3])
        desc = f"预订{city}{spoken}入住{nights}晚的酒店"
        gid = L.goal_open(desc, category="hotel")
        L.user(f"帮我在{city}订个酒店，{spoken}入住，住{nights}晚，预算{r.choice([400, 500, 600])}以内")
        L.call("search_hotels", {"city": city, "checkin": date, "nights": nights, "max_price": 600})
        hotels = [
            {"hotel_id": f"H{r.randint(1000, 9999)}", "name": name, "price": r.randint(280, 590), "type": kind}
            for name, kind in r.sample(
                [
                    ("全季酒店", "连锁"),
                    ("如家精选", "连锁"),
                    ("西湖边民宿", "民宿"),
                    ("亚朵酒店", "中高端"),
                    ("汉庭酒店", "连锁"),
                ],
                3,
            )
        ]
        L.result("search_hotels", {"hotels": hotels})
        if prefs.get("no_chain"):
            choice = next((h for h in hotels if h["type"] != "连锁"), hotels[0])
            L.bot(f"按您的习惯排除了连锁快捷酒店，推荐{choice['name']}，¥{choice['price']}/晚。")
        else:
            choice = hotels[0]
            L.bot("、".join(f"{h['name']} ¥{h['price']}" for h in hotels) + "，您看哪家？")
            if choice["type"] == "连锁" and r.random() < 0.7:
                L.user("我不喜欢住连锁快捷酒店，换个有特色点的", category="preference", importance=0.8)
                prefs["no_chain"] = True
                choice = next((h for h in hotels if h["type"] != "连锁"), hotels[-1])
                L.bot(f"记住了。那推荐{choice['name']}。")
            L.user(r.choice(["就这家", "好的，订吧"]))
        args = {"hotel_id": choice["hotel_id"], "checkin": date, "nights": nights, "guest": "李明"}
        if prefs.get("allergy"):
            args["note"] = "客人对海鲜过敏，早餐请避免海鲜"
        L.call("book_hotel", args)
        if r.random() < 0.35:
            L.result("book_hotel", error="支付超时，请重新发起支付")
            L.observe("book_hotel 支付超时后重新发起一次即可，房间不会重复预订。")
            L.call("book_hotel", args, tags=["retry"])
        conf = f"HT{r.randint(10000000, 99999999)}"
        L.result("book_hotel", {"status": "已确认", "confirmation": conf})
        L.bot(f"订好了：{choice['name']}，{spoken}入住{nights}晚，确认号{conf}。")
        L.goal_close(gid, "succeeded", desc, f"{city}{choice['name']}已预订，确认号{conf}。")

    def lookup_order() -> None:
        real = f"E{r.randint(100000000, 999999999)}"
        typo = real[:-2] + real[-1] + real[-2]
        desc = f"查询订单{real}的状态"
        gid = L.goal_open(desc, category="order")
        L.user(f"帮我查一下订单{typo}，还能退吗？")
        L.call("query_order", {"order_id": typo})
        L.result("query_order", error=f"订单不存在：{typo}")
        L.bot(f"没有查到订单{typo}，麻烦再核对一下订单号？")
        L.user(r.choice([f"不好意思，打错了，是{real}", f"哦，是{real}"]), category="correction")
        L.call("query_order", {"order_id": real}, tags=["retry"])
        L.result("query_order", {"order_id": real, "status": "已出票", "refundable": True, "fee_rate": 0.05})
        L.bot(f"订单{real}已出票，可以退，手续费5%。要现在退吗？")
        if r.random() < 0.5:
            L.user("退吧")
            L.call("refund_ticket", {"order_id": real})
            L.result("refund_ticket", {"status": "退款中", "days": 7})
            L.bot("已提交退票，票款7个工作日内原路退回。")
        else:
            L.user("先不退了，谢谢", category="smalltalk")
        L.goal_close(gid, "succeeded", desc, f"查到订单{real}（用户先给了错误的订单号）。")

    pref_goal = None
    prefs: dict = {}
    for i in range(sessions):
        L.start_session(i, sessions, hours=(0, 13))
        if i == 0:
            L.note(
                "出行助手会话开始。工具：search_trains, book_train, verify_passenger, get_weather, "
                "search_hotels, book_hotel, query_order, refund_ticket。",
                importance=0.2,
            )
            pref_goal = L.goal_open("记住用户的出行偏好和个人信息", long_term=True, category="preference")
            L.user("你好")
            L.bot("您好！我是您的出行助手，有什么可以帮您？")
            L.user("我叫李明，住在杭州，经常去北京出差。", category="fact", importance=0.8)
            L.bot("好的李明，记住了。")
        if i == 2:
            L.user("坐高铁我喜欢靠窗的座位，记住哦", category="preference", goal_id=pref_goal, importance=0.8)
            prefs["window"] = True
            L.bot("好的，以后都帮您选靠窗。")
        if i == 5:
            L.user("永远不要给我订无座票，宁可换车次", category="preference", goal_id=pref_goal, importance=0.9)
            L.bot("明白，不会订无座票。")
        if i == 9:
            L.user("对了，我对海鲜过敏，订酒店早餐的时候注意一下", category="fact", goal_id=pref_goal)
            prefs["allergy"] = True
            L.bot("记住了，订酒店时会备注海鲜过敏。")
        if i == 13:
            L.user(f"我的手机号是139{r.randint(10000000, 99999999)}，有变动短信通知我", category="fact")
            L.bot("好的，有变动会短信通知您。")
        if i == 16:
            L.user(f"我的身份证号是{state['id_number']}，以后订票直接用", category="fact")
            L.bot("出于安全考虑我不会保存完整的证件号，每次订票由系统调取已核验的信息。")
        if i == 20:
            L.user("我上个月搬到上海了，现在住在上海。", category="fact", goal_id=pref_goal, importance=0.8)
            home.update(city="上海", station="上海虹桥")
            L.bot("收到，以后默认从上海虹桥出发。")
        if r.random() < 0.4:
            L.user(r.choice(HELLO), category="smalltalk")
            L.bot(r.choice(["您好！", "在的，请说。", "您好，请讲。"]))
        for _ in range(r.choice([1, 1, 2])):
            x = r.random()
            if x < 0.45:
                train(prefs)
            elif x < 0.7:
                weather()
            elif x < 0.87:
                hotel(prefs)
            else:
                lookup_order()
            L.tick(30, 600)
        if r.random() < 0.3:
            L.user(r.choice(BYE), category="smalltalk")
            L.bot("不客气，祝您旅途愉快！")
    return L.records


# --------------------------------------------------------------------------
# dev-helper: a coding assistant for a team in Shanghai, Chinese mixed with English
# --------------------------------------------------------------------------

SERVICES = ["billing-service", "order-service", "user-center"]
MODULES = [
    ("yaml", "pyyaml", "PyYAML-6.0.1"),
    ("dateutil", "python-dateutil", "python-dateutil-2.9.0"),
    ("jwt", "PyJWT", "PyJWT-2.8.0"),
    ("redis", "redis", "redis-5.0.4"),
]
ASK_TESTS = [
    "帮我跑一下 {repo} 的 tests",
    "跑下 {repo} 的单测",
    "{repo} 的 pytest 过了没？帮我跑一下",
    "CI 上 {repo} 挂了，本地跑下 tests 看看",
]


def dev_helper(seed: int) -> list[dict]:
    L = CstLog("dev-helper", "zm", seed)
    r = L.rng
    sessions = 32
    prefs: dict = {}

    def tests(repo: str) -> None:
        desc = f"让 {repo} 的测试通过"
        gid = L.goal_open(desc, category="tests")
        L.user(r.choice(ASK_TESTS).format(repo=repo))
        cmd = "pytest -q" if r.random() < 0.8 else "pytest -x tests/"
        L.call("run_tests", {"repo": repo, "cmd": cmd})
        if r.random() < 0.55:
            module, package, installed = r.choice(MODULES)
            L.result("run_tests", error=f"ModuleNotFoundError: No module named '{module}'")
            L.bot(f"缺少依赖 {module}，我先装一下 {package}。")
            if module != package and r.random() < 0.3:
                L.call("pip_install", {"package": module})
                L.result("pip_install", error=f"ERROR: No matching distribution found for {module}")
                L.observe(f"pip 包名和 import 名不一样：import {module} 要装 {package}。", importance=0.6)
            L.call("pip_install", {"package": package})
            L.result("pip_install", f"Successfully installed {installed}")
            L.call("run_tests", {"repo": repo, "cmd": cmd}, tags=["retry"])
        passed = r.randint(40, 180)
        L.result("run_tests", f"{passed} passed in {r.uniform(2, 30):.1f}s")
        answer = L.bot(f"{repo} 全部通过，{passed} passed ✅")
        if r.random() < 0.45:
            L.user(r.choice(["好的", "thx", "谢谢", "收到", "👍"]), category="smalltalk")
        if r.random() < 0.1:
            L.feedback("positive", answer, r.choice(["nice，很快", "可以的"]))
        L.goal_close(gid, "succeeded", desc, f"{repo} tests passed ({passed})。")

    def push(repo: str) -> None:
        branch = r.choice(["feature/refund-api", "fix/timezone", "chore/deps", "feature/coupon"])
        desc = f"提交并 push {repo} 的 {branch}"
        gid = L.goal_open(desc, category="git")
        L.user(r.choice(["commit 一下然后 push", "帮我提交并推上去", "push 到远端吧"]))
        message = r.choice(
            ["fix: handle CST timezone in refund dates", "feat: add coupon validation", "chore: bump deps"]
        )
        if not prefs.get("english_commits") and r.random() < 0.5:
            L.bot("commit message 写成“修复退款时区问题”可以吗？")
            L.user("commit message 统一用英文，按 Conventional Commits 写，记住", category="preference", importance=0.9)
            prefs["english_commits"] = True
            L.bot("好的，以后都用英文的 Conventional Commits。")
        L.call("git_commit", {"repo": repo, "branch": branch, "message": message})
        L.result("git_commit", f"[{branch} {r.randint(0x1000000, 0xFFFFFFF):07x}] {message}")
        target = branch
        if r.random() < 0.12:
            target = "main"
            L.bot("要直接 push 到 main 吗？")
            L.user("不对，永远不要直接 push 到 main，先开 PR", category="correction", importance=0.9)
            L.bot("明白，push 到分支再开 PR。")
            target = branch
        L.call("git_push", {"repo": repo, "branch": target})
        if r.random() < 0.45:
            L.result(
                "git_push",
                error=f"! [rejected] {target} -> {target} (non-fast-forward)\nhint: Updates were rejected because "
                "the tip of your current branch is behind its remote counterpart.",
            )
            if not prefs.get("rebase") and r.random() < 0.6:
                L.bot("远端有新提交，我先 git pull 合并一下？")
                L.user("我不喜欢 merge commit，pull 一律用 --rebase", category="preference", importance=0.9)
                prefs["rebase"] = True
            L.call("git_pull", {"repo": repo, "branch": target, "rebase": True})
            L.result("git_pull", "Successfully rebased and updated refs/heads/" + target)
            L.call("git_push", {"repo": repo, "branch": target}, tags=["retry"])
        L.result("git_push", f"To git.example.cn:team/{repo}.git\n   {target} -> {target}")
        L.bot(f"已 push 到 {target}。")
        L.goal_close(gid, "succeeded", desc, f"{repo} {target} pushed。")

    def deploy(repo: str) -> None:
        env = "staging"
        desc = f"发布 {repo} 到 {env}"
        L.user(r.choice([f"把 {repo} 发到 {env}", f"{repo} deploy 一下 {env}", f"帮我发布 {repo}"]))
        if r.random() < 0.2:
            L.bot("发到 staging 吗？")
            L.user("不是 staging，是 prod-cn", category="correction")
            env = "prod-cn"
            desc = f"发布 {repo} 到 {env}"
            if L.t.weekday() == 4 and L.t.hour + 8 >= 14:
                L.bot("现在是周五下午，按之前的约定不发 prod，改到周一？")
                L.user("对，周一再发")
                return
        gid = L.goal_open(desc, category="deploy")
        L.call("deploy", {"service": repo, "env": env, "version": f"v1.{r.randint(2, 9)}.{r.randint(0, 20)}"})
        if r.random() < 0.35:
            L.result("deploy", error="health check timeout after 120s: GET /healthz returned 503")
            L.call("read_logs", {"service": repo, "env": env, "tail": 50})
            L.result(
                "read_logs",
                "ERROR redis.exceptions.ConnectionError: Error 111 connecting to localhost:6379. "
                "Connection refused (REDIS_URL not set)",
            )
            L.bot(f"{env} 上没配 REDIS_URL，服务连不上 redis，我补上再发。")
            L.call("set_env", {"service": repo, "env": env, "key": "REDIS_URL", "value": f"redis://redis.{env}:6379/0"})
            L.result("set_env", "ok")
            L.call("deploy", {"service": repo, "env": env, "version": "same"}, tags=["retry"])
        L.result("deploy", {"status": "healthy", "replicas": 3, "url": f"https://{repo}.{env}.example.cn"})
        L.bot(f"{repo} 已发布到 {env}，3 个副本 healthy。")
        L.goal_close(gid, "succeeded", desc, f"{repo} 发布到 {env} 成功。")

    for i in range(sessions):
        L.start_session(i, sessions, hours=(1, 11))
        repo = r.choice(SERVICES)
        if i == 0:
            L.note(
                "dev-helper session. Tools: run_tests, pip_install, git_commit, git_push, git_pull, deploy, "
                "read_logs, set_env.",
                importance=0.2,
            )
            L.user("hi，我叫张伟，在上海办公室，负责 billing-service", category="fact", importance=0.8)
            L.bot("你好张伟！有需要随时叫我。")
        if i == 6:
            L.user("记住：周五下午不要发布 prod-cn", category="preference", importance=0.9)
            L.bot("好的，周五 14 点以后不发 prod-cn。")
        if i == 11:
            L.user(
                f"我的 GitHub token 是 ghp_{''.join(r.choice('abcdefghijkmnpqrstuvwxyzABCDEFGH0123456789') for _ in range(36))}，"
                "你帮我配一下 CI"
            )
            L.bot("请不要在聊天里发 token，建议马上 revoke，然后在 CI 的 secrets 里配置。")
        if i == 18:
            L.user(f"有急事打我电话 138{r.randint(10000000, 99999999)}", category="fact")
            L.bot("好的。")
        if r.random() < 0.3:
            L.user(r.choice(["早", "在吗", "hello", "你好"]), category="smalltalk")
            L.bot(r.choice(["在的", "早！", "你好，请说"]))
        for _ in range(r.choice([1, 1, 2])):
            x = r.random()
            if x < 0.45:
                tests(repo)
            elif x < 0.8:
                push(repo)
            else:
                deploy(repo)
            L.tick(60, 900)
        if r.random() < 0.25:
            L.user(r.choice(["ok 没事了", "thx，先这样", "好的，下班了"]), category="smalltalk")
    return L.records


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "sample_logs"))
    out = Path(ap.parse_args(argv).out)
    out.mkdir(parents=True, exist_ok=True)
    for name, records in {
        "zh_travel_assistant.jsonl": travel_cn(SEED + 11),
        "zh_en_dev_helper.jsonl": dev_helper(SEED + 12),
    }.items():
        write_jsonl(out / name, records)
        print(f"{out / name}: {len(records)} records")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
