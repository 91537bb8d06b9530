"""Verification of a table's catalog log from its own files: the transactions its files show to
be missing (:func:`missing_in_log`) and the check of the whole log (:func:`verify_log`: every
transaction's chain, every checkpoint against the state its transactions build).

The evidence outside the catalog (``CURRENT``, the runs) and the check of the statistics
files are in engine/catalog/integrity.py; :class:`~engine.catalog.catalog.Catalog`'s
``missing_transactions`` and ``verify`` call these.
"""

from __future__ import annotations

from engine.catalog import codec
from engine.catalog.logindex import LogIndex, MissingTransactions, transaction_name
from engine.catalog.model import CatalogState
from engine.catalog.replay import CatalogLog
from engine.exceptions import CatalogCorruptError

__all__ = ["missing_in_log", "verify_log"]


def missing_in_log(cat: CatalogLog, index: LogIndex | None = None) -> list[MissingTransactions]:
    """Transactions the catalog's own files show to be missing (one listing; reads at most one file).

    - a hole: an id between the oldest kept transaction and the newest transaction or
      checkpoint without a transaction file (a checkpoint records the id it follows, so
      a deleted newest transaction that had a checkpoint shows);
    - ids before the oldest kept transaction that no prune recorded (prune writes
      ``<checkpoint id>.<uuid8>.pruned`` before it deletes anything): a lost first
      transaction is not a prune.
    The evidence outside the catalog (``CURRENT``, the runs) is in engine.catalog.integrity.
    """
    index = index if index is not None else cat.full_index()
    if not index.txns and not index.checkpoints:
        return []
    timeline = cat.state().timeline
    if not timeline:
        for i in sorted(index.txns):
            try:
                timeline = codec.decode_transaction(cat.io.read(cat.file_uri(index.txns[i][0].name))).timeline
                break
            except Exception:  # noqa: BLE001 - a damaged file is reported elsewhere
                continue
    if not timeline and index.checkpoints:
        try:
            cid = max(index.checkpoints)
            timeline = cat.decode_checkpoint(index.checkpoints[cid][0], cat.io.read(cat.file_uri(index.checkpoints[cid][0].name))).timeline
        except Exception:  # noqa: BLE001
            timeline = ""

    def name(i: int) -> str:
        return transaction_name(i, timeline)

    out: list[MissingTransactions] = []
    head = index.head
    first = min(index.txns) if index.txns else head
    if first > 1:
        recorded = [
            m for m, names in index.prunes.items()
            if timeline and any(n.uuid8 == codec.txn_uuid(timeline, m).replace("-", "")[:8] for n in names)
        ]  # fmt: skip
        pruned_to = max(recorded, default=0)
        if first > pruned_to:
            lo = pruned_to if pruned_to else 1
            if lo < first:
                why = (
                    f"the oldest kept transaction is {first} and no prune recorded deleting them"
                    if not pruned_to
                    else f"the last prune deleted up to before {pruned_to}, but the oldest kept transaction is {first}"
                )
                out.append(MissingTransactions(lo, first - 1, name(lo), why))
    gap: list[int] = [i for i in range(first, head + 1) if i not in index.txns]
    runs: list[list[int]] = []
    for i in gap:
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    for r in runs:
        after = [i for i in index.txns if i > r[-1]]
        if after:
            why = f"the log goes on to {max(index.txns)}"
        else:
            why = f"checkpoint {head} records the state after transaction {head}"
        out.append(MissingTransactions(r[0], r[-1], name(r[0]), why))
    return out


def verify_log(cat: CatalogLog) -> dict[str, int]:
    """Check the whole catalog: the chain of every transaction, every checkpoint against the
    state its transactions build, and that no transaction is missing (:func:`missing_in_log`).
    Raises CatalogCorruptError on the first problem."""
    missing = missing_in_log(cat)
    if missing:
        m = missing[0]
        raise CatalogCorruptError(m.message(cat.table), uri=cat.file_uri(m.file))
    history = cat.history()
    index = cat.full_index()
    if not history:
        return {"transactions": 0, "checkpoints": len(index.checkpoints), "checkpoints_checked": 0}
    first = history[0].id
    checkpoints: dict[int, list[tuple[codec.Name, CatalogState]]] = {}
    for cid, names in index.checkpoints.items():
        for n in names:
            checkpoints.setdefault(cid, []).append((n, cat.decode_checkpoint(n, cat.io.read_many([cat.file_uri(n.name)])[0])))
    if first == 1:
        state = CatalogState(table=cat.table)
    else:
        # after a prune (possibly interrupted): replay from the oldest checkpoint at or after the
        # state the oldest kept transaction builds on; transactions before it are checked as a chain only
        usable = sorted(c for c in checkpoints if c >= first - 1)
        if not usable:
            raise cat.corrupt_error(cat.missing_checkpoint_name(index, first), "no checkpoint holds the state the oldest kept transaction builds on")
        state = checkpoints[usable[0]][0][1]
    checked = 0
    for info in history:
        if info.id <= state.txn_id:
            if info.id == state.txn_id:
                for n, cp in checkpoints.get(info.id, ()):
                    if cp != state:
                        raise cat.corrupt_error(n.name, "checkpoint differs from the state its transactions build")
                    checked += 1
            continue
        if info.id > state.txn_id:
            rec = cat.cached_record(info.id)
            assert rec is not None  # history() decoded every kept transaction
            state = cat.apply_record(info.uri.rsplit("/", 1)[-1], state, rec)
        for n, cp in checkpoints.get(info.id, ()):
            if cp != state:
                raise cat.corrupt_error(n.name, "checkpoint differs from the state its transactions build")
            checked += 1
    return {"transactions": len(history), "checkpoints": len(index.checkpoints), "checkpoints_checked": checked}
