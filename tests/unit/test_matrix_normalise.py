"""Which Matrix events reach the agent, and as what: the pure rules of
adapters/matrix/normalise.py, without a homeserver."""

from __future__ import annotations

from typing import Any

from picobridge.adapters.matrix.client import Identity
from picobridge.adapters.matrix.normalise import (
    Candidate,
    Edit,
    Encrypted,
    Room,
    Skip,
    normalise,
    strip_reply_fallback,
)
from picobridge.contract import ChatRef

ME = Identity("@bot:example.org", "DEV", ("bot", "Helper"))
DIRECT = Room("!dm:example.org", direct=True, policy="mentions")
GROUP = Room("!team:example.org", direct=False, policy="mentions")


def event(content: dict[str, Any], sender: str = "@alice:example.org",
          kind: str = "m.room.message", event_id: str = "$e1") -> dict[str, Any]:
    return {"type": kind, "sender": sender, "event_id": event_id,
            "origin_server_ts": 1_700_000_000_000, "content": content}


def text(body: str, **extra: Any) -> dict[str, Any]:
    return {"msgtype": "m.text", "body": body, **extra}


def test_a_direct_message_is_a_chat_of_its_own() -> None:
    found = normalise(DIRECT, event(text("hello")), ME, prefix="!")
    assert isinstance(found, Candidate)
    assert found.chat == ChatRef("matrix", "!dm:example.org", None)
    assert (found.text, found.sender, found.event_id) == ("hello", "@alice:example.org", "$e1")
    assert found.sent_at == 1_700_000_000.0 and found.direct


def test_a_prefixed_command_is_a_bridge_command_and_only_as_one_word() -> None:
    texts = {}
    for body in ("!NEW please", "! new", "!newer"):
        found = normalise(DIRECT, event(text(body)), ME, prefix="!")
        assert isinstance(found, Candidate)
        texts[body] = found.text
    # "! new" became "/neww" while Matrix had its own copy of the translation.
    assert texts == {"!NEW please": "/new please", "! new": "! new", "!newer": "!newer"}


def test_own_events_and_notices_are_skipped() -> None:
    assert isinstance(normalise(DIRECT, event(text("x"), sender=ME.user_id), ME, prefix="!"),
                      Skip)
    notice = {"msgtype": "m.notice", "body": "another bot"}
    assert isinstance(normalise(DIRECT, event(notice), ME, prefix="!"), Skip)


def test_a_room_needs_a_mention_and_strips_it() -> None:
    assert isinstance(normalise(GROUP, event(text("just chatting")), ME, prefix="!"), Skip)
    for content in (text("bot: what now?"), text("Helper, what now?"),
                    text("what now?", **{"m.mentions": {"user_ids": [ME.user_id]}})):
        found = normalise(GROUP, event(content), ME, prefix="!")
        assert isinstance(found, Candidate) and found.wants_context
        assert found.text == "what now?"
    # A word that only contains the name is no mention.
    assert isinstance(normalise(GROUP, event(text("robots are fun")), ME, prefix="!"), Skip)


def test_a_reply_in_a_room_asks_whether_it_quotes_the_bot() -> None:
    content = text("> <@bot:example.org> earlier\n\nand then?",
                   **{"m.relates_to": {"m.in_reply_to": {"event_id": "$mine"}}})
    found = normalise(GROUP, event(content), ME, prefix="!")
    assert isinstance(found, Candidate)
    assert found.needs_reply_to_me == "$mine" and found.text == "and then?"


def test_a_thread_is_its_own_chat_and_needs_a_known_thread_without_mention() -> None:
    rel = {"m.relates_to": {"rel_type": "m.thread", "event_id": "$root",
                            "is_falling_back": True, "m.in_reply_to": {"event_id": "$root"}}}
    found = normalise(GROUP, event(text("more", **rel)), ME, prefix="!")
    assert isinstance(found, Candidate)
    assert found.chat == ChatRef("matrix", "!team:example.org", "$root")
    assert found.needs_known_thread and found.needs_reply_to_me is None


def test_policies_direct_and_all() -> None:
    message = event(text("anything"))
    assert isinstance(normalise(Room("!r", False, "direct"), message, ME, prefix="!"), Skip)
    assert isinstance(normalise(Room("!r", False, "all"), message, ME, prefix="!"), Candidate)


def test_edits_commands_files_and_encrypted_events() -> None:
    edit = text("* fixed", **{"m.new_content": text("fixed"),
                              "m.relates_to": {"rel_type": "m.replace", "event_id": "$old"}})
    assert normalise(DIRECT, event(edit), ME, prefix="!") == Edit("$old", "fixed")
    command = normalise(DIRECT, event(text("!new please")), ME, prefix="!")
    assert isinstance(command, Candidate) and command.text == "/new please"
    assert isinstance(normalise(DIRECT, event(text("!unknown")), ME, prefix="!"), Candidate)
    picture = {"msgtype": "m.image", "body": "a cat", "filename": "cat.png",
               "url": "mxc://example.org/abc", "info": {"size": 10, "mimetype": "image/png"}}
    found = normalise(DIRECT, event(picture), ME, prefix="!")
    assert isinstance(found, Candidate) and found.text == "a cat"
    assert [(f.url, f.name, f.size, f.mime) for f in found.files] == [
        ("mxc://example.org/abc", "cat.png", 10, "image/png")]
    assert isinstance(normalise(DIRECT, event({}, kind="m.room.encrypted"), ME, prefix="!"),
                      Encrypted)


def test_an_encrypted_file_is_fetched_from_its_file_with_its_key() -> None:
    key = {"url": "mxc://example.org/sealed", "key": {"k": "secret"}, "iv": "iv",
           "hashes": {"sha256": "h"}, "v": "v2"}
    sealed = {"msgtype": "m.file", "body": "notes.txt", "file": key,
              "info": {"size": 7, "mimetype": "text/plain"}}
    found = normalise(DIRECT, event(sealed), ME, prefix="!")
    assert isinstance(found, Candidate)
    assert [(f.url, f.name, f.key) for f in found.files] == [
        ("mxc://example.org/sealed", "notes.txt", key)]
    plain = normalise(DIRECT, event({**sealed, "file": None, "url": "mxc://e/p"}), ME,
                      prefix="!")
    assert isinstance(plain, Candidate) and [f.key for f in plain.files] == [None]


def test_reply_fallback_lines_are_dropped() -> None:
    assert strip_reply_fallback("> <@a:b> quoted\n> more\n\nmine") == "mine"
    assert strip_reply_fallback("plain > text") == "plain > text"


def test_a_pill_in_a_quoted_reply_is_no_mention() -> None:
    quote = ('<mx-reply><blockquote><a href="https://matrix.to/#/@bot:example.org">bot</a>'
             ' earlier</blockquote></mx-reply>and then?')
    content = text("and then?", format="org.matrix.custom.html", formatted_body=quote,
                   **{"m.relates_to": {"m.in_reply_to": {"event_id": "$x"}}})
    found = normalise(GROUP, event(content), ME, prefix="!")
    assert isinstance(found, Candidate) and found.needs_reply_to_me == "$x"
    pill = text("hey", format="org.matrix.custom.html",
                formatted_body='<a href="https://matrix.to/#/@bot:example.org">b</a> hey')
    found = normalise(GROUP, event(pill), ME, prefix="!")
    assert isinstance(found, Candidate) and found.wants_context
