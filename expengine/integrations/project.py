"""A coding session's project, named from its working directory, the same way for a hook and a log.

The name is the repository's folder: the git top level above `cwd`, or, for a git worktree (its
`.git` is a file pointing into `<repo>/.git/worktrees/<name>`), the main repository's folder, so
every worktree of one repository shares its knowledge. A path that is not on this machine (a
replayed log) is named by its last folder, or `X` for `X-worktrees/<name>`, a common worktree layout.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

_WORKTREES_SUFFIX = "-worktrees"


def _from_git(folder: Path) -> str | None:
    git = folder / ".git"
    if git.is_dir():
        return folder.name
    if git.is_file():
        pointer = git.read_text(encoding="utf-8", errors="replace").partition("gitdir:")[2].strip()
        parts = Path(pointer).parts
        if "worktrees" in parts:
            at = len(parts) - 1 - parts[::-1].index("worktrees")
            if at >= 2:
                return parts[at - 2]  # <repo>/.git/worktrees/<name>
        return folder.name
    return None


def project_of(cwd: str) -> str:
    """The project a session in `cwd` works on ("" for no directory)."""
    if not cwd:
        return ""
    path = Path(cwd)
    try:
        if path.is_dir():
            for folder in (path, *path.parents):
                named = _from_git(folder)
                if named:
                    return named
    except OSError:
        pass
    pure = PurePosixPath(cwd.replace("\\", "/").rstrip("/"))
    if pure.parent.name.endswith(_WORKTREES_SUFFIX) and len(pure.parent.name) > len(_WORKTREES_SUFFIX):
        return pure.parent.name[: -len(_WORKTREES_SUFFIX)]
    return pure.name
