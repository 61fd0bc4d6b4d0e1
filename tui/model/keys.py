"""The panel's keys by binding id, where each is active, and remaps that would clash. Pure.

`[keys]` in the fleet config remaps a binding id to other keys. A remap that
takes a key another binding uses on the same screen silently disables that
binding (`previous = "q"`, and q no longer quits), so the config check
refuses it. tests/ui checks these defaults against the app's own bindings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_KEYS: Mapping[str, str] = {
    "quit": "q,ctrl+c", "refresh": "r", "open": "enter", "filter": "slash", "cost": "c",
    "push": "p", "push_box": "P", "stop": "s", "start": "S", "destroy": "D", "journal": "J",
    "next": "j,down", "previous": "k,up", "help": "question_mark",
    "back": "escape", "series": "m",
    "confirm_yes": "y", "confirm_no": "n,escape",
    "destroy_cancel": "escape", "destroy_push_first": "p", "destroy_override": "t",
    "destroy_without_snapshots": "w",
    "launch": "L", "monitor": "w", "launch_go": "ctrl+s", "launch_cancel": "escape",
    "check": "g", "doctor": "G", "focus_next": "tab", "focus_previous": "shift+tab",
    "cancel": "x", "profile": "P", "palette": "colon,ctrl+p",
}
# Bound on the app: active on every screen (a screen's own binding of a key wins there).
EVERYWHERE = ("quit", "refresh", "cost", "journal", "help", "focus_next", "focus_previous",
              "palette")
# Of those, the ones read before any screen's (Textual's priority bindings): their keys win
# everywhere, so a remap onto a screen's key silences that screen's binding.
PRIORITY = ("focus_next", "focus_previous", "palette")
SCREENS: Mapping[str, tuple[str, ...]] = {
    "the fleet": ("open", "filter", "push", "push_box", "stop", "start", "destroy", "next",
                  "previous", "back", "launch", "monitor", "check", "doctor", "cancel"),
    "the run detail": ("back", "series", "profile"),
    "the cost screen": ("back",),
    "the journal": ("back",),
    "the doctor": ("back",),
    "the profile": ("back",),
    "a stop/start confirmation": ("confirm_yes", "confirm_no"),
    "the destroy dialog": ("destroy_cancel", "destroy_push_first", "destroy_override",
                           "destroy_without_snapshots"),
    "the launch form": ("launch_go", "launch_cancel"),
}
_ALIASES = {"/": "slash", "?": "question_mark", ":": "colon", " ": "space", "esc": "escape",
            "return": "enter", "ctrl+C": "ctrl+c"}


@dataclass(frozen=True)
class Clash:
    binding: str  # the remapped binding id
    message: str


def key_names(keys: str) -> list[str]:
    """"j, down" -> ["j", "down"], with Textual's names for / and ?."""
    names = [k.strip() for k in keys.split(",") if k.strip()]
    return [_ALIASES.get(k, k) for k in names]


def key_clashes(remap: Mapping[str, str]) -> list[Clash]:
    """Every remapped binding whose new key would silence another binding on some screen.

    A screen's own binding wins over the app's: a remapped app binding that a
    dialog's own key shadows just does nothing in that dialog (harmless), but
    a remap that takes a key from a binding of the same level, or from an app
    binding on a screen that binds it itself, leaves that binding deaf there.
    Clashes the defaults already have (a dialog's own `p` over the app's
    push) are the design, not an error.
    """
    keys = {**DEFAULT_KEYS, **{b: k for b, k in remap.items() if b in DEFAULT_KEYS}}
    found: dict[tuple[str, str], Clash] = {}
    for screen, own in SCREENS.items():
        active = (*own, *EVERYWHERE)
        for binding in remap:
            if binding not in active:
                continue
            for key in key_names(keys[binding]):
                if (binding, key) in found:
                    continue
                silenced = [other for other in active if other != binding
                            and key in key_names(keys[other])
                            and not (other in own and binding not in own
                                     and binding not in PRIORITY)
                            and not (key in key_names(DEFAULT_KEYS[binding])
                                     and key in key_names(DEFAULT_KEYS[other]))]
                if silenced:
                    found[(binding, key)] = Clash(binding, (
                        f"{key!r} is already the key of {', '.join(silenced)} on {screen}: "
                        f"{binding} = {remap[binding]!r} would take it and {silenced[0]} "
                        f"would stop working there; pick a key no other binding uses"))
    return list(found.values())
