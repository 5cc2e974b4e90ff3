"""GET / on the daemon's local listener (`http.listen`): a status page for a person.

Plain HTML and CSS that reload themselves every few seconds (meta refresh; no script): the
verdict of /healthz with its reasons, each agent worker's state, the platforms, the queue,
and the latest deliveries and failures. It shows counts, times and states: never a message's
text, a token, anything from the configuration, or a user's or chat's id (a Telegram private
chat's key is its user's id): chats appear as their platform and a short keyed hash, the same
for one chat until the daemon restarts, so a reader can tell chats apart without learning who
they are.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from html import escape

from aiohttp import web

from picobridge import __version__
from picobridge.core.stats import OutboxStats
from picobridge.ops.health import HealthSnapshot, SnapshotFn, take_snapshot

REFRESH_SECONDS = 5

_STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 60rem;
       padding: 0 1rem; color: #1d2330; background: #f6f7f9; }
h1 { font-size: 1.5rem; margin: 0 0 .2rem; }
h2 { font-size: 1.05rem; margin: 1.6rem 0 .5rem; }
.sub { color: #5b6475; margin: 0 0 1rem; }
.verdict { display: inline-block; padding: .3rem .8rem; border-radius: 1rem; font-weight: 600; }
.ok, .ready, .connected, .delivered { color: #0f6b2f; background: #dcf5e3; }
.degraded, .starting, .restarting, .silent { color: #7a4b00; background: #fdf0d2; }
.unhealthy, .stopped, .disconnected, .failed { color: #8c1d18; background: #fbe0de; }
table { border-collapse: collapse; width: 100%; background: #fff; }
th, td { text-align: left; padding: .45rem .7rem; border-bottom: 1px solid #e3e6eb; }
th { font-size: .8rem; text-transform: uppercase; letter-spacing: .04em; color: #5b6475; }
td.state span { padding: .1rem .5rem; border-radius: .6rem; }
.figures { display: flex; flex-wrap: wrap; gap: .8rem; }
.figure { background: #fff; border: 1px solid #e3e6eb; border-radius: .5rem;
          padding: .6rem 1rem; min-width: 9rem; }
.figure b { display: block; font-size: 1.6rem; }
ul.reasons { margin: .6rem 0 0; }
footer { margin-top: 2rem; color: #5b6475; font-size: .85rem; }
"""


def _clock(ts: float | None) -> str:
    if ts is None:
        return "never"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _ago(ts: float | None, now: float) -> str:
    if ts is None:
        return "never"
    seconds = max(0, int(now - ts))
    if seconds < 120:
        return f"{seconds} s ago"
    return f"{seconds // 60} min ago" if seconds < 7200 else f"{seconds // 3600} h ago"


def _badge(word: str) -> str:
    return f'<span class="{escape(word)}">{escape(word)}</span>'


def _table(headers: Iterable[str], rows: list[list[str]], empty: str) -> str:
    if not rows:
        return f"<p>{escape(empty)}</p>"
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(text: object) -> str:
    return f"<td>{escape(str(text))}</td>"


def _workers(snap: HealthSnapshot, now: float) -> str:
    several = len({w.agent for w in snap.workers}) > 1  # named agents: say whose each is
    rows = [[_cell(w.name), f'<td class="state">{_badge(w.state)}</td>', _cell(w.busy),
             _cell(w.pid or "-"), _cell(_ago(w.last_pong, now)), _cell(w.restarts),
             *([_cell(w.agent)] if several else [])]
            for w in snap.workers]
    return _table(("worker", "state", "turns running", "pid", "last answered ping",
                   "restarts", *(["agent"] if several else [])), rows, "No agent worker.")


def _platforms(snap: HealthSnapshot, outbox: OutboxStats) -> str:
    def state(name: str, up: bool) -> str:
        return "silent" if up and name in snap.silent else "connected" if up else "disconnected"

    def heard(name: str) -> str:
        age = snap.last_heard.get(name)
        return "never" if age is None else f"{age:.0f} s ago"

    rows = [[_cell(name), f'<td class="state">{_badge(state(name, up))}</td>', _cell(heard(name)),
             _cell(outbox.sent.get(name, 0)), _cell(outbox.failed.get(name, 0)),
             _cell(outbox.rate_limited.get(name, 0))]
            for name, up in sorted(snap.platforms.items())]
    return _table(("platform", "connection", "last heard", "replies delivered",
                   "refused for good", "rate-limited"), rows, "No platform is enabled.")


def _figures(snap: HealthSnapshot) -> str:
    oldest = snap.oldest_undelivered_age_seconds
    figures = [("queue depth", snap.queue_depth), ("turns in flight", snap.in_flight),
               ("replies waiting for delivery", snap.outbox_pending),
               ("oldest unanswered", "-" if oldest is None else f"{oldest:.0f} s")]
    return '<div class="figures">' + "".join(
        f'<div class="figure"><b>{escape(str(value))}</b>{escape(label)}</div>'
        for label, value in figures) + "</div>"


class ChatLabels:
    """A chat key as the page shows it: `telegram:3f9a0c1b2d`, keyed by a secret of this
    process (an unkeyed hash of a numeric user id is undone by trying every id)."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key if key is not None else secrets.token_bytes(32)

    def __call__(self, chat_key: str) -> str:
        platform = chat_key.partition(":")[0]
        digest = hmac.new(self._key, chat_key.encode("utf-8", "surrogatepass"),
                          hashlib.sha256).hexdigest()
        return f"{platform}:{digest[:10]}"


def _recent(outbox: OutboxStats, now: float, label: Callable[[str], str]) -> str:
    rows = [[_cell(_clock(d.at)), _cell(_ago(d.at, now)), _cell(label(d.chat)),
             f'<td class="state">{_badge("delivered" if d.delivered else "failed")}</td>']
            for d in reversed(outbox.recent)]
    return _table(("when", "age", "chat", "outcome"), rows, "Nothing delivered since the start.")


def _reasons(snap: HealthSnapshot) -> str:
    reasons = [*snap.problems, *snap.warnings]
    if not reasons:
        return ""
    return '<ul class="reasons">' + "".join(f"<li>{escape(r)}</li>" for r in reasons) + "</ul>"


def render(snap: HealthSnapshot | str, outbox: OutboxStats, now: float | None = None,
           label: Callable[[str], str] | None = None) -> str:
    """The page for a snapshot (or the reason there is none)."""
    now = time.time() if now is None else now
    label = label if label is not None else ChatLabels()
    if isinstance(snap, str):
        body = (f'<p><span class="verdict unhealthy">unhealthy</span></p>'
                f"<p>{escape(snap)}</p>")
    else:
        body = (f'<p><span class="verdict {escape(snap.status)}">{escape(snap.status)}</span>'
                f"</p>{_reasons(snap)}"
                f"<h2>Agent</h2>{_workers(snap, now)}"
                f"<h2>Queue</h2>{_figures(snap)}"
                f"<h2>Platforms</h2>{_platforms(snap, outbox)}"
                f"<h2>Recent deliveries and failures</h2>{_recent(outbox, now, label)}")
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>picobridge status</title><style>{_STYLE}</style></head><body>"
        f"<h1>picobridge</h1><p class=\"sub\">status at {escape(_clock(now))}, "
        f"refreshed every {REFRESH_SECONDS} s</p>{body}"
        f'<footer>picobridge {escape(__version__)} · <a href="/healthz">/healthz</a> · '
        '<a href="/metrics">/metrics</a></footer></body></html>\n')


def add_status_page(app: web.Application, snapshot: SnapshotFn,
                    outbox: Callable[[], OutboxStats]) -> None:
    labels = ChatLabels()

    async def page(request: web.Request) -> web.Response:
        snap = await take_snapshot(snapshot)
        return web.Response(text=render(snap, outbox(), label=labels), content_type="text/html",
                            headers={"Cache-Control": "no-store"})

    app.router.add_get("/", page)
