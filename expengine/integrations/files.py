"""One change to a user's configuration file: shown whole in a dry run, backed up before it is made,
and not made at all when the file would stay as it is."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

BACKUP_SUFFIX = ".expengine-backup"


@dataclass(frozen=True)
class Change:
    path: Path
    text: str | None  # the file's new content; None: nothing to write (e.g. no file to disconnect from)

    @property
    def current(self) -> str | None:
        return self.path.read_text(encoding="utf-8") if self.path.exists() else None

    @property
    def changes(self) -> bool:
        return self.text is not None and self.text != self.current

    def apply(self) -> Path | None:
        """Write the new content (the old one copied to a timestamped backup first); the backup's path."""
        if not self.changes or self.text is None:
            return None
        backup = None
        if self.path.exists():
            backup = self.path.with_name(f"{self.path.name}{BACKUP_SUFFIX}-{time.strftime('%Y%m%d-%H%M%S')}")
            shutil.copy2(self.path, backup)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".expengine-tmp")
        tmp.write_text(self.text, encoding="utf-8")
        os.replace(tmp, self.path)
        return backup

    def describe(self, dry_run: bool, changes: bool) -> str:
        """What a dry run prints (the exact new content) or what was done, for stdout; `changes`: whether
        the file was to change (asked before `apply`, after which it never is)."""
        if not changes:
            return f"{self.path}: unchanged"
        if dry_run:
            return f"would write {self.path}:\n{self.text}"
        return f"wrote {self.path}"


@dataclass(frozen=True)
class Removal:
    """A file `connect` wrote whole (a plugin's file, a service unit): removed, with the folders it
    leaves empty up to `top`; no backup, as nothing in it was the user's."""

    path: Path
    top: Path
    text: None = None

    @property
    def changes(self) -> bool:
        return self.path.exists()

    def apply(self) -> None:
        if not self.path.exists():
            return
        self.path.unlink()
        folder = self.path.parent
        while folder != self.top.parent and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
            folder = folder.parent

    def describe(self, dry_run: bool, changes: bool) -> str:
        if not changes:
            return f"{self.path}: not there"
        return f"would remove {self.path}" if dry_run else f"removed {self.path}"
