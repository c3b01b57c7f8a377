"""The recent-vector files alone: merges keep every vector and few files, a kill mid-merge loses none,
files written before levels and sorted rows are still read, and a forget rewrites a merged file."""

from __future__ import annotations

import numpy as np

import expengine.store.recent_vectors as recent_vectors
from expengine.store.recent_vectors import RecentVectors, _level

MODEL = "test-model"


def vectors_of(names: list[str], dim: int = 8) -> dict[str, np.ndarray]:
    """hash -> a vector drawn from the name, so the same name always has the same vector."""
    out = {}
    for name in names:
        rng = np.random.default_rng(abs(hash(name)) % 2**32)
        out[f"{name:0>32}"[-32:]] = rng.standard_normal(dim).astype(np.float32)
    return out


def test_writes_past_fan_in_merge_into_levels_and_every_vector_reads_back(tmp_path, monkeypatch):
    monkeypatch.setattr(recent_vectors, "FAN_IN", 4)
    monkeypatch.setattr(recent_vectors, "MERGE_BLOCK_ROWS", 3)  # a merge copies in several blocks
    recent, written = RecentVectors(tmp_path / "recent"), {}
    for call in range(37):
        batch = vectors_of([f"c{call}-{n}" for n in range(call % 5 + 1)] + ["shared"])
        recent.add(MODEL, batch)
        written |= batch
    files = recent.files(MODEL)
    levels = [_level(f) for f in files]
    assert max(levels) == 2 and all(levels.count(level) < 4 for level in set(levels))
    fresh = RecentVectors(tmp_path / "recent")  # another process: reads the files, not this one's memory
    for reader in (recent, fresh):
        found = reader.get(MODEL, [*written, "0" * 32])
        assert found.keys() == written.keys()
        assert all(np.array_equal(found[h], v) for h, v in written.items())
    _, every = fresh.everything(MODEL)
    assert every.keys() == written.keys()


def test_a_kill_between_a_merge_and_its_sources_deletion_loses_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(recent_vectors, "FAN_IN", 3)
    recent, written = RecentVectors(tmp_path / "recent"), {}
    for call in range(2):
        batch = vectors_of([f"k{call}"])
        recent.add(MODEL, batch)
        written |= batch

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # the process dies with the merged file in place, its sources not yet gone

    monkeypatch.setattr(RecentVectors, "delete", killed)
    batch = vectors_of(["k2"])
    try:
        recent.add(MODEL, batch)
    except KeyboardInterrupt:
        pass
    written |= batch
    monkeypatch.undo()
    monkeypatch.setattr(recent_vectors, "FAN_IN", 3)
    assert len(recent.files(MODEL)) == 4  # the three sources and their merge: the same vectors twice
    reopened = RecentVectors(tmp_path / "recent")
    assert reopened.get(MODEL, list(written)).keys() == written.keys()
    more = vectors_of(["k3"])
    reopened.add(MODEL, more)  # the next write merges the sources again, each hash once in the new file
    written |= more
    assert reopened.get(MODEL, list(written)).keys() == written.keys()
    assert [(_level(f), len(np.load(f))) for f in reopened.files(MODEL)] in ([(1, 3), (1, 4)], [(1, 4), (1, 3)])


def test_a_half_written_file_is_skipped_and_cleaned(tmp_path):
    recent = RecentVectors(tmp_path / "recent")
    batch = vectors_of(["a", "b"])
    recent.add(MODEL, batch)
    cut = tmp_path / "recent" / f"{recent.files(MODEL)[0].name.split('-')[0]}-0-{'f' * 32}.npy"
    cut.write_bytes(recent.files(MODEL)[0].read_bytes()[:100])
    assert RecentVectors(tmp_path / "recent").get(MODEL, list(batch)).keys() == batch.keys()
    (tmp_path / "recent" / ".tmp-x.npy").write_bytes(b"half")
    recent.delete([])
    assert not list((tmp_path / "recent").glob(".tmp-*"))


def test_a_file_of_unsorted_rows_from_before_levels_is_read(tmp_path):
    recent = RecentVectors(tmp_path / "recent")
    recent.add(MODEL, vectors_of(["new"]))
    key = recent.files(MODEL)[0].name.split("-")[0]
    old = vectors_of(["z", "m", "a", "q"])
    rows = np.zeros(len(old), dtype=[("hash", "S32"), ("vector", "<f4", (8,))])
    rows["hash"] = [h.encode("ascii") for h in old]
    rows["vector"] = np.stack(list(old.values()))
    np.save(tmp_path / "recent" / f"{key}-{'e' * 32}.npy", rows)
    found = RecentVectors(tmp_path / "recent").get(MODEL, list(old))
    assert all(np.array_equal(found[h], v) for h, v in old.items())


def test_keep_only_rewrites_a_merged_file_without_the_forgotten(tmp_path, monkeypatch):
    monkeypatch.setattr(recent_vectors, "FAN_IN", 2)
    recent, written = RecentVectors(tmp_path / "recent"), {}
    for name in ("a", "b", "c"):
        batch = vectors_of([name, name + "2"])
        recent.add(MODEL, batch)
        written |= batch
    gone = next(iter(written))
    recent.keep_only(set(written) - {gone})
    _, every = RecentVectors(tmp_path / "recent").everything(MODEL)
    assert every.keys() == set(written) - {gone}
    assert {_level(f) for f in recent.files(MODEL)} == {0, 1}


def test_move_into_the_table_streams_every_file_in_blocks_and_leaves_what_it_is_told(tmp_path, monkeypatch):
    from expengine.store.db import close_database, open_database
    from expengine.store.vector_bytes import blob_vectors

    monkeypatch.setattr(recent_vectors, "FAN_IN", 3)
    monkeypatch.setattr(recent_vectors, "MERGE_BLOCK_ROWS", 2)
    recent, written = RecentVectors(tmp_path / "recent"), {}
    for call in range(5):
        batch = vectors_of([f"m{call}-{n}" for n in range(3)])
        recent.add(MODEL, batch)
        written |= batch
    left = sorted(written)[:2]
    con = open_database(tmp_path / "db.duckdb")
    try:
        con.execute("CREATE TABLE leave_these (h VARCHAR)")
        con.execute("INSERT INTO leave_these SELECT unnest(?)", [left])
        files = recent.move_into(con, MODEL, leave="SELECT h FROM leave_these")
        rows = con.execute("SELECT text_hash, vector, float16 FROM embeddings WHERE model = ?", [MODEL]).fetchall()
    finally:
        close_database(con)
    assert files == recent.files(MODEL)
    moved = dict(zip((h for h, _, _ in rows), blob_vectors([v for _, v, _ in rows], [f for _, _, f in rows])))
    assert moved.keys() == written.keys() - set(left)
    assert all(np.array_equal(moved[h], written[h]) for h in moved)
