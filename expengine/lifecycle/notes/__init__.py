"""Notes: a conversation's turns consolidate into self-contained, dated statements that stand in for them.

Each cycle, every active message not yet noted is read sentence by sentence (`statements.py`):
chatter makes no note; each informative statement becomes a note (unit kind "note") whose subject is
explicit (`subjects.py`: first person → the speaker, second person → the addressee when the session has
two speakers, or the other role), whose relative times are dates (`dates.py`), and which keeps the
turn's content words. The note's `as_of` is the day the fact is about. Then:
- a restatement joins the note it repeats, and a changed single-valued fact supersedes the old note
  (`merge.py`); a speaker's other new notes of one session consolidate into notes of at most
  `notes.consolidate_tokens`, the subject said once (`consolidate.py`);
- a turn whose statements are all carried by its notes, or that has nothing informative, goes
  dormant (through `store/state.py`): it stays traceable (`trace`, `show`) and is shown as an evidence
  line under its note when the note is a hit and the turn is close to the query
  (`query.note_evidence_floor`); a turn that is not fully carried stays active, and keeps only the
  notes that resolve a date (it says the rest itself). Pinned and lesson records (errors, feedback…)
  never sleep; a conversation's preference or safety turn carried by its notes does, protected ones
  ("I love…", "always…") too, and the note takes its category (and, standing for a protected record,
  never decays); a protected turn with nothing informative sleeps as chatter.

It runs as its own compaction step after the chatter step and before clustering, so clustering and
refinement work on what the notes do not carry. Templates write every note; where `llm.model_path`
names a local model, it may reword one, and its wording is kept only when grounded (`reword.py`).
"""
