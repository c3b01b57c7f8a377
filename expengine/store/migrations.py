"""Named, append-only schema migrations. Never edit one that has shipped: add a new function."""

from __future__ import annotations

from typing import Callable

import duckdb

MIGRATIONS: list[tuple[str, Callable[[duckdb.DuckDBPyConnection], None]]] = []


def migration(fn: Callable[[duckdb.DuckDBPyConnection], None]):
    MIGRATIONS.append((fn.__name__, fn))
    return fn


@migration
def m001_records(con: duckdb.DuckDBPyConnection) -> None:
    """Raw records (the source of truth) plus their lifecycle state."""
    con.execute(
        """
        CREATE TABLE records (
            id VARCHAR PRIMARY KEY,
            content_hash VARCHAR NOT NULL,
            agent VARCHAR NOT NULL,
            session VARCHAR,
            goal_id VARCHAR,
            ts TIMESTAMP NOT NULL,
            kind VARCHAR NOT NULL,
            role VARCHAR,
            content VARCHAR,
            text VARCHAR NOT NULL,
            tool_name VARCHAR,
            tool_args VARCHAR,
            tool_result VARCHAR,
            tool_error VARCHAR,
            tool_call_id VARCHAR,
            goal_status VARCHAR,
            goal_description VARCHAR,
            goal_long_term BOOLEAN,
            outcome VARCHAR,
            feedback_signal VARCHAR,
            feedback_target VARCHAR,
            importance DOUBLE NOT NULL,
            category VARCHAR NOT NULL,
            tags VARCHAR,
            meta VARCHAR,
            protected BOOLEAN NOT NULL DEFAULT FALSE,
            pinned BOOLEAN NOT NULL DEFAULT FALSE,
            weight DOUBLE NOT NULL DEFAULT 1.0,
            state VARCHAR NOT NULL DEFAULT 'active',
            access_count INTEGER NOT NULL DEFAULT 0,
            last_access TIMESTAMP,
            utility DOUBLE NOT NULL DEFAULT 0.0,
            merged_into VARCHAR,
            merged_ids VARCHAR,
            merged_count INTEGER NOT NULL DEFAULT 1,
            marked_at TIMESTAMP,
            state_reason VARCHAR,
            redactions INTEGER NOT NULL DEFAULT 0,
            source_file VARCHAR,
            source_line INTEGER,
            ingested_at TIMESTAMP NOT NULL
        )
        """
    )
    con.execute("CREATE INDEX records_hash ON records(content_hash)")


@migration
def m002_embeddings(con: duckdb.DuckDBPyConnection) -> None:
    """Embedding cache keyed by text hash and model, so reindex and re-ingest never re-embed."""
    con.execute(
        """
        CREATE TABLE embeddings (
            text_hash VARCHAR NOT NULL,
            model VARCHAR NOT NULL,
            vector FLOAT[] NOT NULL,
            PRIMARY KEY (text_hash, model)
        )
        """
    )


@migration
def m003_rejects(con: duckdb.DuckDBPyConnection) -> None:
    """Quarantine for input lines that failed validation, with where they came from and why."""
    con.execute(
        """
        CREATE TABLE rejects (
            file VARCHAR NOT NULL,
            line INTEGER NOT NULL,
            error VARCHAR NOT NULL,
            raw VARCHAR,
            rejected_at TIMESTAMP NOT NULL,
            PRIMARY KEY (file, line, error)
        )
        """
    )


@migration
def m004_goals(con: duckdb.DuckDBPyConnection) -> None:
    """Goals, derived from goal and outcome records; `handled_status` records what cleanup already did."""
    con.execute(
        """
        CREATE TABLE goals (
            goal_id VARCHAR PRIMARY KEY,
            agent VARCHAR NOT NULL,
            session VARCHAR,
            description VARCHAR,
            status VARCHAR NOT NULL,
            long_term BOOLEAN NOT NULL DEFAULT FALSE,
            opened TIMESTAMP,
            updated TIMESTAMP,
            handled_status VARCHAR
        )
        """
    )


@migration
def m005_units(con: duckdb.DuckDBPyConnection) -> None:
    """Knowledge units (rules and facts) with provenance."""
    con.execute(
        """
        CREATE TABLE units (
            id VARCHAR PRIMARY KEY,
            kind VARCHAR NOT NULL,
            text VARCHAR NOT NULL,
            condition VARCHAR,
            action VARCHAR,
            expected_outcome VARCHAR,
            pitfall VARCHAR,
            statement VARCHAR,
            subject VARCHAR,
            attribute VARCHAR,
            as_of TIMESTAMP,
            category VARCHAR NOT NULL,
            agent VARCHAR NOT NULL,
            support INTEGER NOT NULL,
            success_rate DOUBLE,
            confidence DOUBLE NOT NULL,
            source_ids VARCHAR NOT NULL,
            method VARCHAR NOT NULL,
            cluster_key VARCHAR,
            created TIMESTAMP NOT NULL,
            updated TIMESTAMP NOT NULL,
            last_used TIMESTAMP,
            utility DOUBLE NOT NULL DEFAULT 0.0,
            weight DOUBLE NOT NULL DEFAULT 1.0,
            helpful INTEGER NOT NULL DEFAULT 0,
            harmful INTEGER NOT NULL DEFAULT 0,
            status VARCHAR NOT NULL DEFAULT 'active',
            supersedes VARCHAR,
            superseded_by VARCHAR
        )
        """
    )


@migration
def m006_runs_and_history(con: duckdb.DuckDBPyConnection) -> None:
    """Compaction run reports and a per-item history, so a user can see why a thing changed."""
    con.execute(
        """
        CREATE TABLE runs (
            id VARCHAR PRIMARY KEY,
            started TIMESTAMP NOT NULL,
            finished TIMESTAMP,
            dry_run BOOLEAN NOT NULL,
            status VARCHAR NOT NULL,
            snapshot_id VARCHAR,
            report VARCHAR
        )
        """
    )
    con.execute(
        """
        CREATE TABLE history (
            item_id VARCHAR NOT NULL,
            happened_at TIMESTAMP NOT NULL,
            action VARCHAR NOT NULL,
            detail VARCHAR,
            run_id VARCHAR
        )
        """
    )
    con.execute("CREATE INDEX history_item ON history(item_id)")


@migration
def m007_pending_index(con: duckdb.DuckDBPyConnection) -> None:
    """Ids written to DuckDB but not yet to LanceDB: a crash between the two is healed on the next open."""
    con.execute("CREATE TABLE pending_index (id VARCHAR PRIMARY KEY, target VARCHAR NOT NULL)")


@migration
def m008_clusters(con: duckdb.DuckDBPyConnection) -> None:
    """Cluster membership from pruning, so refinement knows which clusters changed since their unit."""
    con.execute(
        """
        CREATE TABLE clusters (
            cluster_key VARCHAR PRIMARY KEY,
            agent VARCHAR NOT NULL,
            size INTEGER NOT NULL,
            centroid FLOAT[],
            signature VARCHAR NOT NULL,
            updated TIMESTAMP NOT NULL
        )
        """
    )
    con.execute(
        "CREATE TABLE cluster_members (cluster_key VARCHAR NOT NULL, record_id VARCHAR NOT NULL, PRIMARY KEY (cluster_key, record_id))"
    )
    con.execute("ALTER TABLE units ADD COLUMN cluster_signature VARCHAR")


@migration
def m009_store_meta(con: duckdb.DuckDBPyConnection) -> None:
    """Facts about the store as a whole, by key; `vectors`: the name of the encoder that wrote its vectors."""
    con.execute("CREATE TABLE store_meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)")


@migration
def m010_query_log(con: duckdb.DuckDBPyConnection) -> None:
    """Which units and memories each answered query showed (fit in its prompt), and for which session
    and goal: what an outcome credits. Written only through store/query_log.py."""
    con.execute(
        """
        CREATE TABLE query_log (
            asked_at TIMESTAMP NOT NULL,
            session VARCHAR,
            goal_id VARCHAR,
            query VARCHAR NOT NULL,
            unit_ids VARCHAR NOT NULL,
            memory_ids VARCHAR NOT NULL
        )
        """
    )
    con.execute("CREATE INDEX query_log_session ON query_log(session)")


@migration
def m011_embeddings_blob(con: duckdb.DuckDBPyConnection) -> None:
    """The embedding cache's vectors as BLOBs (`vector_bytes`), converted in this
    migration's transaction, so a kill leaves the old table whole and the next open converts again."""

    from .vector_bytes import vector_blobs

    con.execute(
        """
        CREATE TABLE embeddings_blob (
            text_hash VARCHAR NOT NULL,
            model VARCHAR NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY (text_hash, model)
        )
        """
    )
    for (model,) in con.execute("SELECT DISTINCT model FROM embeddings").fetchall():  # one vector length each
        after = ""
        while True:  # in pages by key: the connection cannot read and write at once
            page = con.sql(
                "SELECT text_hash, model, vector FROM embeddings WHERE model = $model AND text_hash > $after "
                "ORDER BY text_hash LIMIT 20000",
                params={"model": model, "after": after},
            ).to_arrow_table()
            if not page.num_rows:
                break
            lists = page.column(2).combine_chunks()
            flat = lists.flatten().to_numpy(zero_copy_only=False).reshape(len(lists), -1)
            converted = page.set_column(2, "vector", vector_blobs(flat))
            con.register("converted_vectors", converted)
            con.execute("INSERT INTO embeddings_blob SELECT * FROM converted_vectors")
            con.unregister("converted_vectors")
            after = page.column(0)[-1].as_py()
    con.execute("DROP TABLE embeddings")
    con.execute("ALTER TABLE embeddings_blob RENAME TO embeddings")


@migration
def m012_embeddings_float16(con: duckdb.DuckDBPyConnection) -> None:
    """Which cached vectors are float16 bytes (`vector_bytes.ARCHIVED_TYPE`): archived memories', as LanceDB
    held them; the rows before are all float32."""
    con.execute("ALTER TABLE embeddings ADD COLUMN float16 BOOLEAN NOT NULL DEFAULT false")


@migration
def m013_clusters_without_centroid(con: duckdb.DuckDBPyConnection) -> None:
    """Clusters without their float32 centroids: nothing read them (0.3 MB of the sample logs' store,
    and as much again in each snapshot)."""
    con.execute("ALTER TABLE clusters DROP COLUMN centroid")


@migration
def m014_source_cursors(con: duckdb.DuckDBPyConnection) -> None:
    """How far each agent log file has been read (store/cursors.py), so a nightly ingest reads only what
    was appended or created since, and a rewritten or rotated file is read again from its start."""
    con.execute(
        """
        CREATE TABLE source_cursors (
            path VARCHAR PRIMARY KEY,
            tool VARCHAR NOT NULL,
            format VARCHAR NOT NULL,
            inode BIGINT NOT NULL,
            size BIGINT NOT NULL,
            mtime_ns BIGINT NOT NULL,
            "offset" BIGINT NOT NULL,
            line INTEGER NOT NULL,
            head_bytes INTEGER NOT NULL,
            head_hash VARCHAR NOT NULL,
            updated_at TIMESTAMP NOT NULL
        )
        """
    )


@migration
def m015_users(con: duckdb.DuckDBPyConnection) -> None:
    """Whose memory a row is: the person a record is about, and the person a note, fact or personal
    unit was made from (NULL: shared, no one's in particular); the user a query was asked for (what
    `forget --user` erases); the user a cluster's members belong to (clusters never mix users). A shared
    unit's `quotes`: the users whose own words its wording carries (JSON list; `users.quoted_users`)."""
    for table in ("records", "units", "query_log", "clusters"):
        con.execute(f"ALTER TABLE {table} ADD COLUMN user VARCHAR")
    con.execute("ALTER TABLE units ADD COLUMN quotes VARCHAR")
    con.execute("CREATE INDEX records_user ON records(user)")


@migration
def m017_cluster_centroids(con: duckdb.DuckDBPyConnection) -> None:
    """Each cluster's centroid (float16, L2-normalised), so an incremental cycle assigns new records to the
    nearest existing cluster and re-plans only the clusters they joined; NULL until a cycle clusters it."""
    con.execute("ALTER TABLE clusters ADD COLUMN centroid BLOB")


@migration
def m018_refined_clusters(con: duckdb.DuckDBPyConnection) -> None:
    """Per cluster, the signature refinement last looked at and got no unit from (too few concrete
    members), so it is not refined again every cycle until its members change."""
    con.execute("CREATE TABLE refined_clusters (cluster_key VARCHAR PRIMARY KEY, signature VARCHAR NOT NULL)")


@migration
def m019_derived_runs(con: duckdb.DuckDBPyConnection) -> None:
    """Per (pass, run), what refinement's whole-store passes distilled from the run's records (an intent's
    run, a project's commands) with the fingerprint of those records, so a night re-reads only the runs
    whose records or outcome changed (store/derived_runs.py); derived, and dropped by `forget`. And each
    record's token count."""
    con.execute(
        "CREATE TABLE derived_runs (pass VARCHAR NOT NULL, run_key VARCHAR NOT NULL, fingerprint VARCHAR NOT NULL, "
        "payload VARCHAR NOT NULL, PRIMARY KEY (pass, run_key))"
    )
    # each record's token count (textutil.approx_tokens of its text), so a cycle's hot-text figures sum a
    # column instead of reading every record's text (store/stats.hot_text)
    con.execute("CREATE TABLE record_tokens (id VARCHAR PRIMARY KEY, tokens INTEGER NOT NULL)")


@migration
def m020_record_tokens_unkeyed(con: duckdb.DuckDBPyConnection) -> None:
    """Token counts without their key on `id`: nothing looks a count up by id (`hot_text` inserts those
    not there yet and sums a join), and DuckDB writes a key index again whole at every checkpoint that
    changes its table (14 blocks of 16 KiB over 4 of data on the sample logs' store)."""
    con.execute("CREATE TABLE record_tokens_unkeyed (id VARCHAR NOT NULL, tokens INTEGER NOT NULL)")
    con.execute("INSERT INTO record_tokens_unkeyed SELECT id, tokens FROM record_tokens")
    con.execute("DROP TABLE record_tokens")
    con.execute("ALTER TABLE record_tokens_unkeyed RENAME TO record_tokens")


@migration
def m021_embeddings_uncompressed(con: duckdb.DuckDBPyConnection) -> None:
    """The embedding cache's vectors stored uncompressed: float bytes do not compress (the file is as
    large), but DuckDB compresses a row group's BLOBs again whole at every checkpoint that changes it,
    which grew with the cache (0.11 CPU s for 946 vectors, 0.005 uncompressed)."""
    con.execute(
        """
        CREATE TABLE embeddings_uncompressed (
            text_hash VARCHAR NOT NULL,
            model VARCHAR NOT NULL,
            vector BLOB USING COMPRESSION uncompressed NOT NULL,
            float16 BOOLEAN NOT NULL DEFAULT false,
            PRIMARY KEY (text_hash, model)
        )
        """
    )
    con.execute("INSERT INTO embeddings_uncompressed SELECT text_hash, model, vector, float16 FROM embeddings")
    con.execute("DROP TABLE embeddings")
    con.execute("ALTER TABLE embeddings_uncompressed RENAME TO embeddings")
