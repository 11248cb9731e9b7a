"""Which vaults a run uses: the personal vault, the team vaults, and which of them a folder's hooks ask.

A person has one **personal** vault (``vault`` in the user settings, ``--vault``, or the default)
and any number of **team** vaults, each a clone of a team's git remote, named in the user file::

    [vaults.platform]
    path = "~/team/platform-notes"
    projects = ["~/src/payments", "~/src/infra"]   # hooks in these folders also ask this vault
    capture_tags = ["platform"]                    # a capture tagged so goes here, not to personal

``search``, ``recall``, the MCP tools and the hooks query the personal vault and the team vaults
together (one ranking, each result naming its vault, ``team/search.py``). A team vault that lists
``projects`` is asked by hooks only inside those folders; one without is asked everywhere.
Captures go to the personal vault unless the call names a vault or carries one of a team vault's
``capture_tags``. Transcript saves always go to the personal vault. The personal vault is never
pushed to a team vault's remote (``team/sync.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .config import ConfigError, Settings, settings

PERSONAL, TEAM = "personal", "team"


@dataclass(frozen=True)
class VaultRef:
    """One vault of a run: its name in results, where it is, and what it is for."""

    name: str
    path: Path
    role: str  # personal | team
    projects: tuple[Path, ...] = ()
    capture_tags: tuple[str, ...] = ()
    remote: str | None = None

    @property
    def exists(self) -> bool:
        return self.path.is_dir()

    def serves(self, cwd: Path | None) -> bool:
        """Whether hooks running in ``cwd`` ask this vault (always, without ``projects``)."""
        if self.role == PERSONAL or not self.projects or cwd is None:
            return True
        return any(_inside(cwd, p) for p in self.projects)


@dataclass
class VaultSet:
    """The vaults of a run, the first being where captures go (the primary vault)."""

    refs: list[VaultRef]
    missing: list[VaultRef] = field(default_factory=list)  # configured but not found on disk

    @property
    def primary(self) -> VaultRef:
        return self.refs[0]

    def __len__(self) -> int:
        return len(self.refs)

    def names(self) -> list[str]:
        return [r.name for r in self.refs]

    def get(self, name: str | None) -> VaultRef:
        """The vault named ``name`` (None or "": the primary); ConfigError naming the known ones."""
        if not name:
            return self.primary
        for ref in self.refs:
            if ref.name == name:
                return ref
        known = ", ".join(self.names())
        raise ConfigError(f"no vault named {name!r} here (known: {known}); team vaults are [vaults.NAME] "
                          "tables in the user settings")

    def warnings(self) -> list[str]:
        return [f"team vault {r.name!r} is configured at {r.path} but that folder does not exist; it was "
                "not searched (clone its remote there, or fix [vaults." + r.name + "] path)" for r in self.missing]

    def capture_target(self, vault: str | None = None, tags: Iterable[str] = ()) -> VaultRef:
        """Where a capture goes: the named vault, else a team vault claiming one of its tags, else the primary."""
        if vault:
            return self.get(vault)
        wanted = {t.strip().lstrip("#").lower() for t in tags if isinstance(t, str)}
        for ref in self.refs[1:]:
            if wanted & set(ref.capture_tags):
                return ref
        return self.primary

    def split_ref(self, path: str) -> tuple[VaultRef, str]:
        """``platform:runbooks/x.md`` → (the platform vault, ``runbooks/x.md``); a plain path is the primary's."""
        head, sep, rest = path.partition(":")
        if sep and rest and "/" not in head:
            for ref in self.refs:
                if ref.name == head:
                    return ref, rest
        return self.primary, path


def _inside(path: Path, folder: Path) -> bool:
    try:
        Path(path).resolve().relative_to(Path(folder).expanduser().resolve())
        return True
    except ValueError:
        return False


def team_refs(conf: Settings) -> list[VaultRef]:
    """The team vaults of the user settings, in the file's order."""
    out = []
    for name, spec in (conf["vaults"] or {}).items():
        out.append(VaultRef(name=name, path=Path(spec["path"]).expanduser().resolve(), role=TEAM,
                            projects=tuple(Path(p).expanduser() for p in spec.get("projects", [])),
                            capture_tags=tuple(spec.get("capture_tags", [])), remote=spec.get("remote")))
    return out


def vault_set(primary: Path, *, cwd: Path | None = None, only: Iterable[str] | None = None,
              conf: Settings | None = None) -> VaultSet:
    """The vaults a run over ``primary`` uses: ``primary`` first, then every configured team vault
    (those that serve ``cwd`` when it is given; only those named in ``only`` when it is given).

    ``primary`` takes a team vault's name when it is one; otherwise the vault's own ``team.name``,
    else ``team.personal_name`` ("personal")."""
    primary = Path(primary).resolve()
    conf = conf or settings(None)
    teams = team_refs(conf)
    own = next((t for t in teams if t.path == primary), None)
    if own is None:
        name = settings(primary)["team.name"] if primary.is_dir() else ""
        own = VaultRef(name=name or conf["team.personal_name"], path=primary, role=PERSONAL)
    refs, missing = [own], []
    wanted = set(only) if only is not None else None
    for ref in teams:
        if ref.path == primary or ref.name == own.name or (wanted is not None and ref.name not in wanted):
            continue
        if not ref.serves(cwd):
            continue
        (refs if ref.exists else missing).append(ref)
    if wanted is not None:
        unknown = wanted - {r.name for r in refs + missing}
        if unknown:
            known = ", ".join(r.name for r in [own, *teams])
            raise ConfigError(f"unknown vault name(s) {', '.join(sorted(unknown))} (known: {known})")
        if own.name not in wanted and len(refs) > 1:
            refs = refs[1:]  # only team vaults asked for: the first of them is the primary of this run
    return VaultSet(refs, missing)


def is_personal(vault: Path, conf: Settings | None = None) -> bool:
    """Whether ``vault`` is a personal vault: not a configured team vault and not marked by ``team.name``."""
    vault = Path(vault).resolve()
    conf = conf or settings(None)
    if any(t.path == vault for t in team_refs(conf)):
        return False
    return not settings(vault)["team.name"]


def capture_vault(primary: Path, name: str | None = None, tags: Iterable[str] = (),
                  conf: Settings | None = None) -> VaultRef:
    """Where a capture started over ``primary`` goes: ``VaultSet.capture_target`` of its vault set,
    the one routing rule the MCP ``capture`` tool and the CLI's capturing commands share."""
    return vault_set(primary, conf=conf).capture_target(name, tags)
