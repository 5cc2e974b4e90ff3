"""Two Slack apps in one daemon (`[slack]`, the app "default", and a `[[slack.apps]]` named
"acme"), each on its own fake Slack (Web API and Socket Mode), with the same user, DM channel
and message ts on both, routed to different agents: each message is answered by its own app
and agent, and each app keeps its own chats, dedupe keys, allow list and sessions; a SIGKILL
mid-backlog loses nothing on either, and in HTTP mode each app's events path takes its own
signing secret only.

One daemon with both apps serves the tests that only talk to it (each with users of its own,
judging what the agents got from its start on); the SIGKILL and the HTTP mode tests start
their own."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.e2e.slack_support import all_acked, http_port, reply_to
from tests.fakes.slack import DEFAULT_USER, FakeSlack
from tests.harness import (
    AgentJournal,
    Daemon,
    base_config,
    named_agent,
    sessions_by_chat,
    settle,
    write_config,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")
# The tests on the shared daemon run on one worker (xdist would start it again in each).
SHARED = pytest.mark.xdist_group("test_slack_several_apps_shared")

ACME_BOT_TOKEN, ACME_APP_TOKEN = "xoxb-2-acme-bot-token-x7", "xapp-2-A2-acme-app-token"
OUTSIDER = "U0OUTSIDER"  # allowed on the default app only
FILER = "U0FILER"  # the user of the test of shared files, on both apps


def app_keys(fake: FakeSlack, users: list[str]) -> dict[str, Any]:
    return {"bot_token": fake.bot_token, "app_token": fake.app_token, "base_url": fake.api_url,
            "file_hosts": ["127.0.0.1"], "allowed_users": users}


@asynccontextmanager
async def two_workspaces(ack_timeout: float = 3.0
                         ) -> AsyncIterator[tuple[FakeSlack, FakeSlack]]:
    async with FakeSlack(ack_timeout=ack_timeout) as home, FakeSlack(
            team_id="T2", team_name="Acme", app_id="A2", bot_user_id="U0ACMEBOT",
            bot_id="B0ACME", bot_token=ACME_BOT_TOKEN, app_token=ACME_APP_TOKEN,
            ack_timeout=ack_timeout) as acme:
        yield home, acme


def apps_config(tmp: Path, home: dict[str, Any], acme: dict[str, Any], **extra: Any) -> Path:
    """Two agents and two apps, the default app's keys `home` and the app acme's `acme`."""
    config = base_config(tmp)
    config["agent"] = named_agent(tmp, "family")
    config["agents"] = {"coder": named_agent(tmp, "coder")}
    config["routes"] = [{"agent": "coder", "bot": "acme"}]
    config["slack"] = {**home, "apps": [{"name": "acme", **acme}]}
    config.update(extra)
    return write_config(tmp, config)


def texts(fake: FakeSlack) -> list[str]:
    return [m.text for m in fake.posted_messages()]


@dataclass
class Env:
    home: FakeSlack
    acme: FakeSlack
    config: Path
    tmp: Path

    def agent_got(self, name: str) -> list[dict[str, Any]]:
        return AgentJournal(self.tmp / f"agent-{name}").messages()

    async def settled(self) -> None:
        """Once the daemon has finished what the tests before gave it."""
        await settle(self.tmp / "state" / "picobridge.db", lambda: all_acked(self.home),
                     lambda: all_acked(self.acme))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    tmp = tmp_path_factory.mktemp("slack-several-apps")
    async with two_workspaces() as (home, acme):
        path = apps_config(tmp, app_keys(home, [DEFAULT_USER, OUTSIDER, FILER]),
                           app_keys(acme, [DEFAULT_USER, FILER]))
        daemon = Daemon(path)
        async with daemon:
            await home.wait_for_socket()
            await acme.wait_for_socket()
            yield Env(home, acme, path, tmp)
        assert daemon.returncode == 0
        for secret in (ACME_BOT_TOKEN, ACME_APP_TOKEN, home.bot_token, home.app_token):
            assert not any(secret in line for line in daemon.log_lines + daemon.stdout_lines)
        assert "Traceback" not in daemon.log
    # Whatever came after a test's own checks: still no answer by the other app's agent.
    assert not any("[coder]" in text for text in texts(home))
    assert not any("[family]" in text for text in texts(acme))


@SHARED
async def test_two_apps_same_ids_each_answered_by_its_own_agent(env: Env) -> None:
    home, acme = env.home, env.acme
    await env.settled()
    seen = {name: len(env.agent_got(name)) for name in ("family", "coder")}
    # The same DM channel, user and message ts on both workspaces.
    first = home.dm_message("hello home")
    await home.send_event(first)
    await acme.send_event(acme.dm_message("hello acme", ts=first["ts"]))
    await reply_to(home, first["channel"], "[family] echo: hello home")
    await reply_to(acme, first["channel"], "[coder] echo: hello acme")
    # The acme app's own allow list.
    await acme.send_event(acme.dm_message("let me in", user=OUTSIDER))
    notices = await acme.wait_for(
        lambda: [e for e in acme.ephemeral_messages if e.user == OUTSIDER])
    assert f"picobridge access allow slack@acme:{OUTSIDER}" in notices[0].text
    second = home.dm_message("what did I just say")
    await home.send_event(second)
    await acme.send_event(acme.dm_message("what did I just say", ts=second["ts"]))
    await reply_to(home, first["channel"], "[family] You said: hello home")
    await reply_to(acme, first["channel"], "[coder] You said: hello acme")

    assert not any("[coder]" in text for text in texts(home))
    assert not any("[family]" in text for text in texts(acme))
    family = [m["content"] for m in env.agent_got("family")[seen["family"]:]]
    coder = [m["content"] for m in env.agent_got("coder")[seen["coder"]:]]
    assert family == ["hello home", "what did I just say"]
    assert coder == ["hello acme", "what did I just say"]
    lines = await sessions_by_chat(env.config)
    assert "\tagent default\t" in lines[f"slack:{first['channel']}"]
    assert "\tagent coder\t" in lines[f"slack@acme:{first['channel']}"]
    assert not any(key.startswith("slack@acme:") and OUTSIDER in key for key in lines)


BURST_USERS = [f"U0BURST{n}" for n in range(6)]
PER_USER = 6
TAG = re.compile(r"\b(home|acme)(\d+)-(\d+)\b")


def answers(fake: FakeSlack, app: str) -> Counter[tuple[int, int]]:
    """How often each tagged message of `app` was answered in its own user's DM."""
    seen: Counter[tuple[int, int]] = Counter()
    for message in fake.posted_messages():
        for which, user, index in TAG.findall(message.text):
            if which == app and message.channel == fake.dm_channel(BURST_USERS[int(user)]):
                seen[(int(user), int(index))] += 1
    return seen


def tags_seen(journal: AgentJournal, app: str) -> Counter[tuple[int, int]]:
    return Counter((int(u), int(i)) for m in journal.messages()
                   for w, u, i in TAG.findall(m["content"]) if w == app)


async def test_sigkill_mid_backlog_loses_nothing_and_crosses_nothing(tmp_path: Path) -> None:
    everything = {(u, i) for u in range(len(BURST_USERS)) for i in range(PER_USER)}
    # A short ack timeout: Slack's redelivery of what was not acknowledged comes quickly.
    async with two_workspaces(ack_timeout=1.0) as (home, acme):
        config = apps_config(tmp_path, app_keys(home, BURST_USERS), app_keys(acme, BURST_USERS))
        daemon = await Daemon(config).start()
        await home.wait_for_socket()
        await acme.wait_for_socket()
        acme_events = []
        for i in range(PER_USER):
            for n, user in enumerate(BURST_USERS):
                # The same user, DM channel and ts on both workspaces.
                event = home.dm_message(f"home{n}-{i} #slow=0.05", user=user)
                await home.send_event(event)
                acme_events.append(acme.dm_message(f"acme{n}-{i} #slow=0.05", user=user,
                                                   ts=event["ts"]))
                await acme.send_event(acme_events[-1])
        twelfth = acme_events[12]
        await daemon.wait_for_log(rf"received platform=slack@acme chat=\S+ "
                                  rf"id={twelfth['channel']}:{twelfth['ts']} ")
        await daemon.kill()
        before = {"home": answers(home, "home"), "acme": answers(acme, "acme")}
        assert len(before["home"]) + len(before["acme"]) < 2 * len(everything), \
            "the kill came too late to test anything"

        async with Daemon(config) as restarted:
            await home.wait_for(lambda: set(answers(home, "home")) >= everything, timeout=90,
                                what="every home message answered after the restart")
            await acme.wait_for(lambda: set(answers(acme, "acme")) >= everything, timeout=90,
                                what="every acme message answered after the restart")
        assert restarted.returncode == 0
        for secret in (ACME_BOT_TOKEN, ACME_APP_TOKEN, home.bot_token, home.app_token):
            assert not any(secret in line for line in daemon.log_lines + restarted.log_lines)

    for app, fake in (("home", home), ("acme", acme)):
        # Answered twice only where the kill came between posting an answer and recording
        # it as sent (the documented redelivery rule): a message answered before the kill.
        twice = {tag for tag, count in answers(fake, app).items() if count > 1}
        assert twice <= set(before[app]), (app, twice)
        assert max(answers(fake, app).values()) <= 2
    # Each app's messages reached its own agent, every one; none crossed over.
    family, coder = AgentJournal(tmp_path / "agent-family"), AgentJournal(tmp_path / "agent-coder")
    assert set(tags_seen(family, "home")) == everything and not tags_seen(family, "acme")
    assert set(tags_seen(coder, "acme")) == everything and not tags_seen(coder, "home")
    assert not answers(home, "acme") and not answers(acme, "home")
    assert not any("[coder]" in text for text in texts(home))
    assert not any("[family]" in text for text in texts(acme))
    print(f"\n{2 * len(everything)} messages on two apps, "
          f"{len(before['home']) + len(before['acme'])} answered before SIGKILL")


HOME_SECRET, ACME_SECRET = "home-signing-secret-0b1e", "acme-signing-secret-77c4"


async def test_two_apps_in_http_mode_each_on_its_own_path_and_secret(tmp_path: Path) -> None:
    async with two_workspaces() as (home, acme):
        path = apps_config(tmp_path, http_app(home, HOME_SECRET), http_app(acme, ACME_SECRET),
                           http={"listen": "127.0.0.1:0"})
        async with Daemon(path) as daemon:
            port = await http_port(daemon)
            home_url = f"http://127.0.0.1:{port}/slack/events"
            acme_url = f"http://127.0.0.1:{port}/slack/acme/events"
            # Each path takes its own app's signature only.
            crossed = [
                await acme.post_event_http(acme_url, acme.dm_message("signed by home"),
                                           HOME_SECRET),
                await home.post_event_http(home_url, home.dm_message("signed by acme"),
                                           ACME_SECRET)]
            assert [d.status for d in crossed] == [401, 401]
            first = home.dm_message("hello home over http")
            assert (await home.post_event_http(home_url, first, HOME_SECRET)).status == 200
            same = acme.dm_message("hello acme over http", ts=first["ts"])
            assert (await acme.post_event_http(acme_url, same, ACME_SECRET)).status == 200
            await reply_to(home, first["channel"], "[family] echo: hello home over http")
            await reply_to(acme, first["channel"], "[coder] echo: hello acme over http")
            command = await acme.post_slash_command_http(acme_url, "/picobridge", "status",
                                                         ACME_SECRET)
            assert command.status == 200
            await reply_to(acme, acme.dm_channel(), "Agent: coder")
        assert daemon.returncode == 0
        for secret in (ACME_BOT_TOKEN, home.bot_token, HOME_SECRET, ACME_SECRET):
            assert not any(secret in line for line in daemon.log_lines + daemon.stdout_lines)

    # Each reply went out with its own app's bot token (each fake refuses any other).
    for fake in (home, acme):
        posts = fake.calls_to("chat.postMessage")
        assert posts and {call.token for call in posts} == {fake.bot_token}
        assert fake.socket_connects == 0
    contents = [m["content"] for m in AgentJournal(tmp_path / "agent-family").messages()]
    contents += [m["content"] for m in AgentJournal(tmp_path / "agent-coder").messages()]
    assert "signed by home" not in contents and "signed by acme" not in contents
    assert not any("signed by" in text for text in texts(home) + texts(acme))
    assert not any("[coder]" in text for text in texts(home))
    assert not any("[family]" in text for text in texts(acme))


def http_app(fake: FakeSlack, secret: str) -> dict[str, Any]:
    keys = {**app_keys(fake, [DEFAULT_USER]), "mode": "http", "signing_secret": secret}
    del keys["app_token"]
    return keys


@SHARED
async def test_each_app_keeps_the_files_people_share_in_a_folder_of_its_own(env: Env) -> None:
    await env.settled()
    seen = {name: len(env.agent_got(name)) for name in ("family", "coder")}
    for fake, name in ((env.home, "home"), (env.acme, "acme")):
        shared = fake.add_file(b"\x00" + name.encode(), "same.bin", "application/octet-stream",
                               user=FILER)
        await fake.send_event(fake.file_share_message([shared], f"{name} file", user=FILER))
        await reply_to(fake, fake.dm_channel(FILER), f"\n\n{name} file")
    media = (env.tmp / "state" / "media").resolve()
    for agent_name, folder, content in (("family", "slack", b"\x00home"),
                                        ("coder", "slack@acme", b"\x00acme")):
        (message,) = env.agent_got(agent_name)[seen[agent_name]:]
        (attachment,) = message["attachments"]
        saved = Path(attachment["content"].split("saved to ", 1)[1].split("\n", 1)[0])
        assert saved.parent == media / folder
        assert saved.read_bytes() == content  # noqa: ASYNC240 (a test's check, nothing waits)
