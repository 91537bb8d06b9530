"""Top frequencies over Flight of a table whose frequencies are kept in segments (docs/FORMAT.md,
"Segments"): the prepared head and larger k answer as one whole file of the same counts
(tests/frequency_segments.py builds both in one store)."""

from __future__ import annotations

from pathlib import Path

from flight_testkit import running_server, same

from tests.frequency_segments import HEAD, build_segmented_table


def test_top_frequencies_over_flight_read_like_the_whole_file(tmp_path: Path) -> None:
    from flight_server.client import MetastoreClient

    built = build_segmented_table(str(tmp_path / "store"))
    whole = built.oracles[-1]
    with running_server(built.store) as server, MetastoreClient(server.location, timeout=60) as client:
        for column in ("cat", "name", "day", "uid"):
            for k in (10, HEAD, HEAD + 1, 10**6):
                for typed in (False, True):
                    got = client.top_frequencies(built.table, column, k=k, typed=typed)
                    expected = client.top_frequencies(whole, column, k=k, typed=typed)
                    assert same(got, expected), (column, k, typed)
                    assert got.schema.metadata[b"stored_rows"] == expected.schema.metadata[b"stored_rows"]
        # GetFlightInfo (no data read): the merged stored rows and kind
        from flight_server.protocol import TopFrequenciesRequest

        for column in ("cat", "name"):
            request = TopFrequenciesRequest(table=built.table, column=column, k=10**6)
            assert client.flight_info(request).total_records == client.top_frequencies(whole, column, k=10**6).num_rows
