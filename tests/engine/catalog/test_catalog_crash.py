"""Defined state under failures and crashes at any object-store write.

Random sequences of transactions (with checkpoints every 1-5 commits, manual
checkpoints and prunes) run through a FaultyIO that fails or stops the process
at the k-th write - a transaction, a checkpoint right after it, a prune's
delete. Reopening must give exactly the state of the last committed transaction
(committed = the transaction file exists in the store), the log must verify,
and the catalog must accept the next commit.
"""

from __future__ import annotations

import uuid

import pytest
from catalog_testkit import FaultyIO, Model, SimulatedCrash, fast_io, normalize, run_intents
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from engine.catalog import Catalog
from engine.exceptions import CommitFailedError, StatisticsNotFoundError

KEYS = ["p=0", "p=1", "p=2", "p=3", ""]

intent = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(KEYS), st.integers(0, 3)),
    st.tuples(st.just("remove"), st.sampled_from(KEYS)),
    st.tuples(st.just("tomb"), st.sampled_from(KEYS)),
    st.tuples(st.just("table"), st.integers(0, 3)),
    st.tuples(st.just("upgrade")),
)
op = st.one_of(
    st.tuples(st.just("txn"), st.lists(intent, min_size=0, max_size=4)),
    st.tuples(st.just("txn"), st.lists(intent, min_size=1, max_size=3)),
    st.tuples(st.just("prune")),
    st.tuples(st.just("checkpoint")),
)
scenario = st.fixed_dictionaries(
    {
        "ops": st.lists(op, min_size=1, max_size=14),
        "interval": st.sampled_from([1, 2, 3, 5]),
        # where the fault goes, as a fraction of the scenario's writes (None: no fault)
        "fail_at": st.one_of(st.none(), st.floats(0, 1, exclude_max=True), st.floats(0, 1, exclude_max=True)),
        "mode": st.sampled_from(FaultyIO.MODES),
    }
)


def run_scenario(store_root: str, s: dict) -> None:
    if s["fail_at"] is None:
        return _run(store_root, s, None)
    writes = _run(store_root, s, None)  # a dry run counts the writes; then fail one of them
    if writes:
        _run(store_root, s, int(s["fail_at"] * writes))


def _run(store_root: str, s: dict, fail_at: int | None) -> int:
    store = f"{store_root.rstrip('/')}/{uuid.uuid4().hex[:12]}"
    table = "t"
    io = FaultyIO(fast_io(store), fail_at, s["mode"])
    cat = Catalog.open(store, table, io=io, checkpoint_interval=s["interval"])
    model = Model()
    history: dict[int, tuple[Model, str]] = {}  # committed id -> (state, snapshot)
    for n, o in enumerate(s["ops"]):
        job, snap = f"job{n}", f"snap{n}"
        try:
            if o[0] == "txn":
                txn = cat.begin(job, snap)
                after = run_intents(txn, model, o[1], job, snap)
                in_flight = f"{after.txn_id:020d}."
                try:
                    info = txn.commit()
                    committed = True
                except CommitFailedError as exc:
                    assert not exc.maybe_committed  # reads never fail here: the outcome is always known
                    committed = False
                durable = any(u.rsplit("/", 1)[-1].startswith(in_flight) and u.endswith(".transaction") for u in io.created)
                assert committed == durable, (committed, durable, io.created[-3:])
                if committed:
                    model = after
                    history[model.txn_id] = (model, snap)
                    assert info.txn_id == after.txn_id
            elif o[0] == "prune":
                names = io.inner.list_names(cat.transactions_uri)
                cps = sorted(int(x[:20]) for x in names if x.endswith(".checkpoint"))
                if cps:
                    try:
                        cat.prune(cps[-1])
                    except OSError:
                        pass
            elif o[0] == "checkpoint" and not cat.state().empty:
                try:
                    cat.write_checkpoint()
                except OSError:
                    pass
            # the writer's view is the store's
            assert normalize(cat.state()) == model
        except SimulatedCrash:
            if o[0] == "txn" and any(u.rsplit("/", 1)[-1].startswith(in_flight) and u.endswith(".transaction") for u in io.created):
                model = after  # the transaction file made it: it is committed
                history[model.txn_id] = (model, snap)
            break

    if fail_at is not None or s["fail_at"] is None:
        event(f"fault: {s['mode'] if io.fired else 'none'}")
    event(f"committed transactions: {min(model.txn_id, 10) if model.txn_id < 10 else '10+'}")
    if any(u.endswith(".checkpoint") for u in io.created):
        event("a checkpoint was written")
    if io.deleted:
        event("a prune deleted files")
    reopened = Catalog.open(store, table, io=fast_io(store))
    assert normalize(reopened.state()) == model
    assert not reopened.problems
    reopened.verify()
    # same state when replaying every transaction still there, if the history is complete
    if any(x.startswith("00000000000000000001.") and x.endswith(".transaction") for x in fast_io(store).list_names(reopened.transactions_uri)):
        assert normalize(Catalog.open(store, table, io=fast_io(store), use_checkpoints=False).state()) == model
    # and the log goes on: the next commit gets the next id
    # time travel to every committed transaction (a sample on S3): the state then, or "pruned"
    ids = sorted(history)
    if reopened.io.remote:
        ids = ids[:1] + ids[len(ids) // 2 : len(ids) // 2 + 1]
    for txn_id in ids:
        then, snap = history[txn_id]
        try:
            assert normalize(reopened.state_at(txn_id)) == then
            assert normalize(reopened.state_at_snapshot(snap)) == then
        except StatisticsNotFoundError as exc:
            assert io.deleted and "pruned" in str(exc), exc
    writes = io.writes
    info = reopened.begin("next", "snap-next").commit()
    assert info.txn_id == model.txn_id + 1
    assert Catalog.open(store, table, io=fast_io(store)).state() == info.state
    return writes


SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], derandomize=False)


@settings(max_examples=600, **SETTINGS)
@given(s=scenario)
def test_crash_local(tmp_path, s) -> None:
    run_scenario(str(tmp_path), s)


@settings(max_examples=60, **SETTINGS)
@given(s=scenario)
def test_crash_s3(s3_store, s) -> None:
    run_scenario(s3_store, s)


@pytest.mark.slow
@settings(max_examples=4000, **SETTINGS)
@given(s=scenario)
def test_crash_local_many(tmp_path, s) -> None:
    run_scenario(str(tmp_path), s)


@pytest.mark.slow
@settings(max_examples=600, **SETTINGS)
@given(s=scenario)
def test_crash_s3_many(s3_store, s) -> None:
    run_scenario(s3_store, s)


def test_crash_between_transaction_and_checkpoint(tmp_path) -> None:
    """Explicitly: the process stops after the transaction of a checkpoint id, before its checkpoint."""
    store = str(tmp_path)
    io = FaultyIO(fast_io(store), fail_at=3, mode="crash_before")  # writes: txn1 txn2 txn3 [ckpt3]
    cat = Catalog.open(store, "t", io=io, checkpoint_interval=3)
    model = Model()
    with pytest.raises(SimulatedCrash):
        for n in range(3):
            txn = cat.begin(f"j{n}", f"s{n}")
            model = run_intents(txn, model, [("add", f"p={n}", n)], f"j{n}", f"s{n}")
            txn.commit()
    names = fast_io(store).list_names(cat.transactions_uri)
    assert [x.rsplit(".", 1)[-1] for x in names] == ["transaction"] * 3  # no checkpoint
    reopened = Catalog.open(store, "t")
    assert normalize(reopened.state()) == model
    assert reopened.state().txn_id == 3
