"""The contract between the bridge and the chat platforms.

An adapter knows its platform and nothing of the agent; the bridge knows the agent and nothing
of any platform. They meet here: one normalised inbound message type, one outgoing reply type,
progress events, the `Adapter` base class a platform implements, the `Platform` the registry
knows it by, and the `BridgeLink` the bridge hands to every adapter. Adapters import nothing
else from the bridge.
"""

# The names load on first use (picobridge/lazy.py), each from its module: a platform's registry
# entry needs only `Platform` and the names, and the command line reads every platform's entry,
# while the message types, dialogs and the adapter interface are for the daemon.

from __future__ import annotations

from typing import TYPE_CHECKING

from picobridge.lazy import lazy_names

if TYPE_CHECKING:
    from picobridge.contract.adapter import (
        Adapter,
    )
    from picobridge.contract.commands import (
        AGENT_COMMANDS,
        ALL_COMMANDS,
        BRIDGE_COMMANDS,
        BridgeCommand,
        catalogue,
        listed_commands,
    )
    from picobridge.contract.dialogs import (
        Dialog,
        DialogAnswer,
        DialogClosed,
        DialogEnd,
        DialogKind,
    )
    from picobridge.contract.errors import (
        DeliveryError,
        StorageUnavailable,
    )
    from picobridge.contract.filenames import (
        safe_name,
    )
    from picobridge.contract.link import (
        BridgeLink,
    )
    from picobridge.contract.messages import (
        Attachment,
        ChatRef,
        InboundMessage,
        OutboundFile,
        Outcome,
        OutgoingReply,
        ProgressEvent,
        ProgressKind,
        ReplyKind,
        SubmitResult,
        scrub_surrogates,
    )
    from picobridge.contract.names import (
        DEFAULT_AGENT,
        DEFAULT_BOT,
        bot_platform,
        split_platform,
        valid_name,
    )
    from picobridge.contract.platform import (
        Platform,
    )
    from picobridge.contract.sizes import (
        human_size,
    )
    from picobridge.contract.sniff import (
        AGENT_IMAGE_TYPES,
        HEAD_BYTES,
        OGG_OPUS,
        agent_image_type,
        file_type,
        ogg_opus,
        sniff_file,
        sniff_mime,
    )

__all__ = [
    "AGENT_COMMANDS",
    "AGENT_IMAGE_TYPES",
    "ALL_COMMANDS",
    "BRIDGE_COMMANDS",
    "DEFAULT_AGENT",
    "DEFAULT_BOT",
    "HEAD_BYTES",
    "OGG_OPUS",
    "Adapter",
    "Attachment",
    "BridgeCommand",
    "BridgeLink",
    "ChatRef",
    "DeliveryError",
    "Dialog",
    "DialogAnswer",
    "DialogClosed",
    "DialogEnd",
    "DialogKind",
    "InboundMessage",
    "OutboundFile",
    "Outcome",
    "OutgoingReply",
    "Platform",
    "ProgressEvent",
    "ProgressKind",
    "ReplyKind",
    "StorageUnavailable",
    "SubmitResult",
    "agent_image_type",
    "bot_platform",
    "catalogue",
    "file_type",
    "human_size",
    "listed_commands",
    "ogg_opus",
    "safe_name",
    "scrub_surrogates",
    "sniff_file",
    "sniff_mime",
    "split_platform",
    "valid_name",
]

# Each module and the names it gives.
_MODULES: dict[str, tuple[str, ...]] = {
    "adapter": ("Adapter",),
    "commands": ("AGENT_COMMANDS", "ALL_COMMANDS", "BRIDGE_COMMANDS", "BridgeCommand",
                 "catalogue", "listed_commands"),
    "dialogs": ("Dialog", "DialogAnswer", "DialogClosed", "DialogEnd", "DialogKind"),
    "errors": ("DeliveryError", "StorageUnavailable"),
    "filenames": ("safe_name",),
    "link": ("BridgeLink",),
    "messages": ("Attachment", "ChatRef", "InboundMessage", "OutboundFile", "Outcome",
                 "OutgoingReply", "ProgressEvent", "ProgressKind", "ReplyKind", "SubmitResult",
                 "scrub_surrogates"),
    "names": ("DEFAULT_AGENT", "DEFAULT_BOT", "bot_platform", "split_platform", "valid_name"),
    "platform": ("Platform",),
    "sizes": ("human_size",),
    "sniff": ("AGENT_IMAGE_TYPES", "HEAD_BYTES", "OGG_OPUS", "agent_image_type", "file_type",
              "ogg_opus", "sniff_file", "sniff_mime"),
}

if not TYPE_CHECKING:  # type checkers see the imports above, and an unknown name stays an error
    __getattr__, __dir__ = lazy_names(__name__, _MODULES, globals())
