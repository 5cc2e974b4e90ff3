"""Whether a Slack payload can be read at all, as pure functions of its shape.

Slack, a proxy or a bug may deliver an envelope or event that does not parse: a payload that
is not an object, an event without a channel, a number where a string belongs. Handed on, it
makes bolt or the adapter fail; the delivery is then not acknowledged and Slack sends the same
broken thing again, each time failing the same way. Such a payload is instead named here,
acknowledged and skipped. The reasons name fields and types only, never values: a payload's
content is what users wrote and stays out of the log.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_MESSAGE_EVENTS = frozenset({"message", "app_mention"})

# Fields of an event_callback payload and the types they may have when present.
_PAYLOAD_FIELDS: Mapping[str, tuple[type, ...]] = {
    "event_id": (str,), "team_id": (str,), "api_app_id": (str,), "enterprise_id": (str,),
    "authorizations": (list,), "is_ext_shared_channel": (bool,), "event_time": (int, float),
}
# Fields bolt's context builder reads from any event (it takes an object with an "id" too).
_ANY_EVENT_FIELDS: Mapping[str, tuple[type, ...]] = {
    "channel": (str, dict), "user": (str, dict), "team": (str, dict), "enterprise": (str, dict),
    "thread_ts": (str,), "item": (dict,), "message": (dict,), "previous_message": (dict,),
    "assistant_thread": (dict,), "user_team": (str,),
}
# Fields of a message the adapter reads (a message event, or the one inside message_changed).
_MESSAGE_FIELDS: Mapping[str, tuple[type, ...]] = {
    "channel": (str,), "ts": (str,), "user": (str,), "text": (str,), "thread_ts": (str,),
    "subtype": (str,), "channel_type": (str,), "bot_id": (str,), "files": (list,),
    "user_profile": (dict,), "message": (dict,), "event_ts": (str,),
}
# A slash command's fields, as Slack sends them (strings) and as the adapter reads them.
_COMMAND_FIELDS: Mapping[str, tuple[type, ...]] = {
    "command": (str,), "text": (str,), "user_id": (str,), "channel_id": (str,),
    "trigger_id": (str,), "user_name": (str,), "team_id": (str,),
}


def kind_of(value: object) -> str:
    """How a value looks, for a log line that must not show the value."""
    if value is None:
        return "missing"
    names = {dict: "an object", list: "a list", str: "text", bool: "a boolean",
             int: "a number", float: "a number"}
    return names.get(type(value), f"a {type(value).__name__}")


def _field_problem(where: str, data: Mapping[str, Any],
                   fields: Mapping[str, tuple[type, ...]]) -> str | None:
    for name, types in fields.items():
        value = data.get(name)
        if value is not None and not isinstance(value, types):
            return f"{where}.{name} is {kind_of(value)}"
    return None


def payload_problem(payload: object) -> str | None:
    """Why an Events API payload cannot be read, or None when it can."""
    if not isinstance(payload, dict):
        return f"the payload is {kind_of(payload)}, not an object"
    kind = payload.get("type")
    if not isinstance(kind, str):
        return f"the payload type is {kind_of(kind)}"
    if kind != "event_callback":
        return None  # url_verification, app_rate_limited...: bolt answers those itself
    problem = _field_problem("payload", payload, _PAYLOAD_FIELDS)
    if problem is not None:
        return problem
    if any(not isinstance(a, dict) for a in payload.get("authorizations") or ()):
        return "payload.authorizations holds something other than objects"
    event = payload.get("event")
    if not isinstance(event, dict):
        return f"the event is {kind_of(event)}"
    return event_problem(event)


def event_problem(event: Mapping[str, Any]) -> str | None:
    kind = event.get("type")
    if not isinstance(kind, str):
        return f"the event type is {kind_of(kind)}"
    problem = _field_problem("event", event, _ANY_EVENT_FIELDS)
    if problem is not None or kind not in _MESSAGE_EVENTS:
        return problem
    for required in ("channel", "ts"):
        if not isinstance(event.get(required), str) or not event[required]:
            return f"the {kind} event has no {required}"
    problem = _message_problem("event", event)
    inner = event.get("message")
    if problem is None and isinstance(inner, dict):
        problem = _message_problem("event.message", inner)
    return problem


def _message_problem(where: str, message: Mapping[str, Any]) -> str | None:
    problem = _field_problem(where, message, _MESSAGE_FIELDS)
    if problem is None and any(not isinstance(f, dict) for f in message.get("files") or ()):
        return f"{where}.files holds something other than objects"
    return problem


def command_problem(payload: object) -> str | None:
    """Why a slash command payload cannot be read, or None when it can."""
    if not isinstance(payload, dict):
        return f"the command payload is {kind_of(payload)}, not an object"
    if not isinstance(payload.get("command"), str):
        return f"the command is {kind_of(payload.get('command'))}"
    return _field_problem("command", payload, _COMMAND_FIELDS)


# Fields of a block_actions payload the adapter (and bolt) read, and their types.
_CLICK_FIELDS: Mapping[str, tuple[type, ...]] = {
    "user": (dict,), "channel": (dict,), "container": (dict,), "message": (dict,),
    "team": (dict,), "api_app_id": (str,), "trigger_id": (str,), "response_url": (str,),
}
_CLICK_PARTS: Mapping[str, Mapping[str, tuple[type, ...]]] = {
    "user": {"id": (str,), "team_id": (str,)},
    "channel": {"id": (str,)},
    "team": {"id": (str,), "enterprise_id": (str,)},
    "container": {"channel_id": (str,), "message_ts": (str,), "thread_ts": (str,)},
    "message": {"ts": (str,), "thread_ts": (str,), "text": (str,), "blocks": (list,)},
}
_ACTION_FIELDS: Mapping[str, tuple[type, ...]] = {
    "action_id": (str,), "block_id": (str,), "value": (str,), "type": (str,),
}


def interaction_problem(payload: object) -> str | None:
    """Why an interactivity payload cannot be read, or None when it can (or is of a kind
    the adapter does not take: bolt finds no listener for it, and it is skipped)."""
    if not isinstance(payload, dict):
        return f"the interaction payload is {kind_of(payload)}, not an object"
    if not isinstance(payload.get("type"), str):
        return f"the interaction type is {kind_of(payload.get('type'))}"
    if payload["type"] != "block_actions":
        return None
    problem = _field_problem("payload", payload, _CLICK_FIELDS)
    for name, fields in _CLICK_PARTS.items():
        if problem is None and isinstance(payload.get(name), dict):
            problem = _field_problem(f"payload.{name}", payload[name], fields)
    if problem is not None:
        return problem
    actions = payload.get("actions")
    if not isinstance(actions, list) or not actions:
        return "payload.actions is not a list of actions"
    if not all(isinstance(a, dict) for a in actions):
        return "payload.actions holds something other than objects"
    return _field_problem("payload.actions[0]", actions[0], _ACTION_FIELDS)


def envelope_problem(envelope: Mapping[str, Any]) -> str | None:
    """Why a Socket Mode envelope cannot be read, or None when it can (or is not ours to
    judge: hello, disconnect and other messages without an envelope id)."""
    kind = envelope.get("type")
    if not isinstance(kind, str):
        return f"the envelope type is {kind_of(kind)}"
    payload = envelope.get("payload")
    if kind == "events_api":
        return payload_problem(payload)
    if kind == "slash_commands":
        return command_problem(payload)
    if kind == "interactive":
        return interaction_problem(payload)
    if not isinstance(payload, dict):
        return f"the {kind} payload is {kind_of(payload)}, not an object"
    return None
