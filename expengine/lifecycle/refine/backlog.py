"""Which of the changed clusters a night refines: those an earlier night left first, in the order they
waited, up to a bound on their members; the rest wait for the next night (`store.refined.carry`)."""

from __future__ import annotations

from .inputs import ClusterInput


def tonights(
    changed: list[ClusterInput], carried: list[str], members: int
) -> tuple[list[ClusterInput], list[ClusterInput]]:
    """The clusters to refine now and those left: `changed` with the `carried` keys first, cut where
    their members pass `members` in all (0: no cut)."""
    waited = {key: position for position, key in enumerate(carried)}
    ordered = sorted(changed, key=lambda c: waited.get(c.key, len(waited)))
    return _within(ordered, members) if members else (ordered, [])


def _within(changed: list[ClusterInput], members: int) -> tuple[list[ClusterInput], list[ClusterInput]]:
    """The first clusters, in order, holding at most `members` members in all (the first one whatever
    its size), and the rest: a cluster's refinement costs what its members do (a 1M store's hold up to
    ~12,000), so the bound is on them rather than on clusters."""
    total = 0
    for position, cluster in enumerate(changed):
        total += len(cluster.member_ids)
        if position and total > members:
            return changed[:position], changed[position:]
    return changed, []
