"""The team vaults a server serves beside its own vault: their searchers, recallers and watchers.

A server started on a personal vault with ``[vaults.NAME]`` tables in the user settings answers
search, recall and the hooks over every configured vault (``vaults.py``). Each team vault keeps its
own index, opened once per server (``Searcher``), its own ``Recaller`` (fed by the same change
listener as the server's own, so a prompt never pays for a stat walk), and, when the server
watches files, its own ``Watcher``: a note that ``sync --remote`` pulled into a team vault, or
that a person edited there, is searchable a moment later without a restart (and embedded, once a
hybrid search of that vault has loaded its model). Where file events are
not available the watcher falls back to polling, as for the server's own vault (``watcher.py``).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from ..config import ConfigError
from ..vaults import VaultRef, VaultSet, vault_set

log = logging.getLogger("memory_hub.team")

_lock = threading.Lock()


class TeamVaults:
    """One server's team vaults (``vaults`` is the vault set, the server's own vault first)."""

    def __init__(self, state: Any, vaults: VaultSet) -> None:
        self.state = state
        self.vaults = vaults
        self._searchers: dict[Path, Any] = {}
        self._recallers: dict[Path, Any] = {}
        self.watchers: dict[str, Any] = {}
        self._lock = threading.RLock()

    def searcher(self, ref: VaultRef) -> Any:
        """The team vault's searcher, its index brought up to date when first opened."""
        with self._lock:
            found = self._searchers.get(ref.path)
            if found is None:
                from ..config import settings
                from ..index.sync import sync
                from ..retrieval.searcher import Searcher

                found = Searcher(ref.path, mode=settings(ref.path)["search.mode"])
                own = self.state.searcher
                if isinstance(own, Searcher):
                    found.share_models(own)  # one embedding model in the server, not one per vault
                sync(ref.path, store=found.store, progress=False)  # what changed while no server ran
                self._searchers[ref.path] = found
            return found

    def recaller(self, ref: VaultRef) -> Any:
        """The team vault's long-lived Recaller, ranking through that vault's open index."""
        if ref.path == self.state.vault:
            from ..retrieval.recall import recaller_for_state

            return recaller_for_state(self.state)
        with self._lock:
            found = self._recallers.get(ref.path)
            if found is None:
                from ..index.sync import on_change
                from ..retrieval.recall import Recaller, change_listener

                watched = ref.name in self.watchers
                self.searcher(ref)  # its index caught up first, as the watcher would have
                # Built as a cold process builds it (same mode, same index file), so warm and cold agree.
                # A background stat walk every few seconds even when watched: a pull that `sync
                # --remote` indexed itself leaves the watcher nothing to report to the listener.
                found = Recaller(ref.path, refresh_interval=5.0)
                if watched:
                    on_change(change_listener(found))
                self._recallers[ref.path] = found
            return found

    def for_prompt(self, cwd: Path | None) -> Any:
        """The ``VaultsRecaller`` for a prompt asked in ``cwd`` (the team vaults whose ``projects``
        hold it, or every team vault when ``cwd`` is None)."""
        from ..team.recall import VaultsRecaller, not_recalled

        refs = [r for r in self.vaults.refs if r is self.vaults.primary or r.serves(cwd)]
        named, warnings = [], self.vaults.warnings()
        for ref in refs:
            try:
                named.append((ref.name, self.recaller(ref)))
            except Exception as exc:  # noqa: BLE001 - one broken team vault must not cost the block
                warnings.append(not_recalled(ref.name, exc))
        return VaultsRecaller(named, warnings)

    def watch(self, rescan_every: float | None) -> None:
        """Start a watcher on every team vault (its own vault has the server's)."""
        from .watcher import Watcher

        for ref in self.vaults.refs[1:]:
            if ref.name in self.watchers:
                continue
            try:
                searcher = self.searcher(ref)
                watcher = Watcher(ref.path, searcher.store, rescan_every=rescan_every,
                                  on_synced=_embed_changes(searcher, ref.name)).start()
                # what changed before its watches were in place (while no server ran, or in the
                # seconds before this timer fired) raised no event: catch up once, as the
                # server's own vault does, instead of waiting for the periodic rescan
                watcher.request_full()
                self.watchers[ref.name] = watcher
            except Exception as exc:  # noqa: BLE001 - searched on demand, refreshed by recall's walk instead
                log.warning("team vault %s is not watched (searches sync it on first use only): %s", ref.name, exc)
                continue
            try:
                self.recaller(ref).refresh()  # loaded now, so the first prompt does not pay for it
            except Exception as exc:  # noqa: BLE001 - the first prompt tries again and reports it
                log.warning("team vault %s: recall index not loaded: %s", ref.name, exc)

    def status(self) -> dict[str, Any]:
        """What ``status`` says of each team vault's freshness."""
        out = {}
        for ref in self.vaults.refs[1:]:
            w = self.watchers.get(ref.name)
            out[ref.name] = {"path": str(ref.path), "watcher": "off" if w is None else {
                "alive": w.alive, "mode": w.mode, "pending": w.pending, "syncs": w.syncs,
                **({"reason": w.fallback_reason} if w.fallback_reason else {}),
                **({"last_error": w.last_error} if w.last_error else {})}}
        for ref in self.vaults.missing:
            out[ref.name] = {"path": str(ref.path), "missing": True}
        return out

    def close(self) -> None:
        for watcher in self.watchers.values():
            watcher.stop()
        self.watchers.clear()


def _embed_changes(searcher: Any, name: str) -> Any:
    """After a team vault's watcher synced a change: embed it too, once a hybrid search of that vault
    has loaded its model (before that no model is loaded for it here; ``index`` embeds later)."""
    def after(report: Any) -> None:
        if not getattr(report, "changed", True) or not searcher.vectors_open:
            return
        try:
            searcher.sync_vectors(progress=False)
        except Exception as exc:  # noqa: BLE001 - the lexical index is fresh; the next change tries again
            log.warning("team vault %s: vectors not updated: %s", name, exc)

    return after


def for_state(state: Any) -> TeamVaults | None:
    """The server's team vaults when any are configured with its vault, else None (read once)."""
    with _lock:
        if "team" not in state.extras:
            try:
                found = vault_set(state.vault)
            except ConfigError as exc:
                log.warning("team vaults not searched: %s", exc)
                found = None
            useful = found is not None and (len(found) > 1 or found.missing)
            state.extras["team"] = TeamVaults(state, found) if useful else None
        return state.extras["team"]


def prompt_recaller(state: Any, cwd: Path | None) -> Any:
    """What a prompt on this server recalls from: every vault its hooks ask in ``cwd``."""
    team = for_state(state)
    if team is None:
        from ..retrieval.recall import recaller_for_state

        return recaller_for_state(state)
    return team.for_prompt(cwd)
