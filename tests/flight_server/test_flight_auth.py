"""Bearer tokens (no, wrong, expired, malformed -> UNAUTHENTICATED), token files, TLS, the loopback rule."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.flight as flight
import pytest
from flight_testkit import (
    EXPIRED_TOKEN,
    GOOD_TOKEN,
    first_line,
    raw_client,
    running_server,
    self_signed_cert,
)

pytestmark = pytest.mark.ray

TICKET = flight.Ticket(json.dumps({"v": 1, "kind": "statistics", "table": "sales", "columns": ["price"]}).encode())


def _every_call(client: flight.FlightClient, options: flight.FlightCallOptions) -> list:
    """One of each Flight call; each either returns or raises (collected)."""
    calls = [
        lambda: client.do_get(TICKET, options).read_all(),
        lambda: list(client.list_flights(b"", options)),
        lambda: client.get_flight_info(flight.FlightDescriptor.for_command(TICKET.ticket), options),
        lambda: client.get_schema(flight.FlightDescriptor.for_path("sales"), options),
        lambda: list(client.do_action(flight.Action("health", b""), options)),
        lambda: list(client.list_actions(options)),
    ]
    outcomes = []
    for call in calls:
        try:
            outcomes.append(call())
        except Exception as exc:
            outcomes.append(exc)
    return outcomes


def _is_unauthenticated(outcome: object) -> bool:
    """UNAUTHENTICATED as pyarrow's client reports it. Its get_schema loses the error class
    (a plain OSError whose message keeps the status: '... Detail: Unauthenticated')."""
    if isinstance(outcome, flight.FlightUnauthenticatedError):
        return True
    return type(outcome) is OSError and "Detail: Unauthenticated" in str(outcome)


def _assert_unauthenticated(outcomes: list, reason: str) -> None:
    for outcome in outcomes:
        assert _is_unauthenticated(outcome), outcome
        assert reason in first_line(outcome), first_line(outcome)


def test_no_token_is_unauthenticated(flight_server) -> None:
    c, opts = raw_client(flight_server.location)
    _assert_unauthenticated(_every_call(c, opts), "authentication required")


def test_wrong_token_is_unauthenticated(flight_server) -> None:
    c, opts = raw_client(flight_server.location, "not-the-token")
    _assert_unauthenticated(_every_call(c, opts), "invalid token")


def test_expired_token_is_unauthenticated(flight_server) -> None:
    c, opts = raw_client(flight_server.location, EXPIRED_TOKEN)
    _assert_unauthenticated(_every_call(c, opts), "token expired")


@pytest.mark.parametrize(
    "header",
    [
        [(b"authorization", b"Basic Z29vZDp0b2tlbg==")],
        [(b"authorization", b"Bearer")],
        [(b"authorization", b"Bearer ")],
        [(b"authorization", b"Token " + GOOD_TOKEN.encode())],
        [(b"authorization", GOOD_TOKEN.encode())],
        [(b"authorization", b"Bearer " + GOOD_TOKEN.encode() + b" extra")],
        [(b"authorization", b"Bearer " + b"x" * 5000)],
        [(b"authorization", b"Bearer " + GOOD_TOKEN.encode()), (b"authorization", b"Bearer " + GOOD_TOKEN.encode())],
    ],
    ids=["basic", "bearer-only", "bearer-space", "other-scheme", "no-scheme", "two-words", "too-long", "twice"],
)
def test_malformed_authorization_is_unauthenticated(flight_server, header: list) -> None:
    c = flight.FlightClient(flight_server.location)
    opts = flight.FlightCallOptions(headers=header, timeout=30)
    for outcome in _every_call(c, opts):
        assert _is_unauthenticated(outcome), outcome
        text = first_line(outcome)
        assert "malformed" in text or "invalid token" in text, text


def test_right_token_works_for_every_call(flight_server) -> None:
    c, opts = raw_client(flight_server.location, GOOD_TOKEN)
    for outcome in _every_call(c, opts):
        assert not isinstance(outcome, Exception), outcome
    lower = flight.FlightCallOptions(headers=[(b"authorization", b"bearer " + GOOD_TOKEN.encode())])
    assert c.do_get(TICKET, lower).read_all().num_rows == 1  # the scheme is case-insensitive


def test_rejections_do_not_count_as_calls_and_server_keeps_serving(flight_server, client) -> None:
    before = client.health()
    c, opts = raw_client(flight_server.location, "nope")
    for _ in range(20):
        with pytest.raises(flight.FlightUnauthenticatedError):
            c.do_get(TICKET, opts).read_all()
    after = client.health()
    assert after["rejected"] >= before["rejected"] + 20
    assert after["status"] == "ok"


# ============================================================== token files and expiry
def test_token_file_with_expiry_and_rotation(flight_data, tmp_path: Path) -> None:
    soon = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    past = (datetime.now(UTC) - timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(f"# planners\nalpha-token\nbeta-token   {past}\ngamma-token {soon}  # expires in an hour\n")
    with running_server(flight_data.store, token_file=str(tokens)) as server:
        for token, expected in [("alpha-token", None), ("beta-token", "token expired"), ("gamma-token", None), ("delta-token", "invalid token")]:
            c, opts = raw_client(server.location, token)
            if expected is None:
                assert c.do_get(TICKET, opts).read_all().num_rows == 1
            else:
                with pytest.raises(flight.FlightUnauthenticatedError, match=expected):
                    c.do_get(TICKET, opts).read_all()
        # rotate: alpha out, delta in; the server re-reads the file when it changes
        tokens.write_text("delta-token\n")
        os.utime(tokens, (time.time() + 5, time.time() + 5))
        time.sleep(1.2)
        c, opts = raw_client(server.location, "delta-token")
        assert c.do_get(TICKET, opts).read_all().num_rows == 1
        c, opts = raw_client(server.location, "alpha-token")
        with pytest.raises(flight.FlightUnauthenticatedError, match="invalid token"):
            c.do_get(TICKET, opts).read_all()


def test_an_unusable_token_file_refuses_every_call(flight_data, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Revocation must not fail open: after a rotation to C, a file with D and a bad line, a deleted,
    unreadable or non-UTF-8 file refuse every token (C included) and the log says why."""
    import logging

    from engine.tokens import Token, TokenConfigError
    from flight_server.client import MetastoreClient

    tokens = tmp_path / "tokens.txt"
    tokens.write_text("c-token-0123\n")
    caplog.set_level(logging.INFO, logger="metastore.flight")

    def outcome(token: str) -> str:
        c, opts = raw_client(server.location, token)
        try:
            c.do_get(TICKET, opts).read_all()
            return "ok"
        except flight.FlightUnauthenticatedError as exc:
            return first_line(exc)

    def settles(token: str, expected: str) -> None:
        """Within a few seconds (the file is checked at most once a second), ``token`` gets ``expected``."""
        deadline = time.monotonic() + 10
        while not ((got := outcome(token)) == expected or (expected != "ok" and expected in got)):
            assert time.monotonic() < deadline, (token, got)
            time.sleep(0.1)

    unusable = "token file is unusable: every call is refused"
    with running_server(flight_data.store, token_file=str(tokens), tokens=[Token.of("static-token-0123")]) as server:
        assert outcome("c-token-0123") == "ok" and outcome("static-token-0123") == "ok"
        with MetastoreClient(server.location, token="c-token-0123") as c:
            health = c.health()
        assert health["token_file"]["state"] == "ok" and health["token_file"]["tokens"] == 1
        assert str(tokens) not in json.dumps(health["token_file"])

        tokens.write_text("d-token-0123\ne-token-0123 not-a-date\n")  # the case: C stayed valid, D invalid
        settles("c-token-0123", unusable)
        assert unusable in outcome("d-token-0123") and unusable in outcome("static-token-0123")
        assert any("line 2: bad token expiry" in r.getMessage() and str(tokens) in r.getMessage() for r in caplog.records)

        tokens.write_text("d-token-0123\n")  # fixed: D in, C out
        settles("d-token-0123", "ok")
        assert outcome("c-token-0123") == "invalid token" and outcome("static-token-0123") == "ok"

        tokens.unlink()  # deleted: C was kept valid before
        settles("d-token-0123", unusable)
        assert any("is missing" in r.getMessage() for r in caplog.records)
        tokens.write_text("d-token-0123\n")
        settles("d-token-0123", "ok")

        tokens.unlink()
        tokens.mkdir()  # cannot be read (a mode of 000 would not stop root)
        settles("d-token-0123", unusable)
        assert any("is unreadable" in r.getMessage() for r in caplog.records)
        tokens.rmdir()
        tokens.write_text("d-token-0123\n")
        settles("d-token-0123", "ok")
        tokens.write_bytes(b"d-token-0123\n\xff\xfe\n")
        settles("d-token-0123", unusable)
        assert any("is invalid (not UTF-8 text)" in r.getMessage() for r in caplog.records)
        tokens.write_text("d-token-0123\n")
        settles("d-token-0123", "ok")
        with MetastoreClient(server.location, token="d-token-0123") as c:
            assert c.health()["token_file"]["state"] == "ok"
        assert server.tracker.rejected > 0
    with pytest.raises(TokenConfigError, match="line 1: bad token expiry"):  # at start: refuses to start
        tokens.write_text("x-token-0123 soon\n")
        with running_server(flight_data.store, token_file=str(tokens)):
            pass


def test_expiry_is_checked_at_each_call() -> None:
    from engine.tokens import Token, TokenAuthenticator

    now = [1_000.0]
    auth = TokenAuthenticator([Token.of("tick-token", 1_010.0)], clock=lambda: now[0])
    assert auth.check(["Bearer tick-token"]).expires_at == 1_010.0
    now[0] = 1_010.0
    with pytest.raises(flight.FlightUnauthenticatedError, match="token expired"):
        auth.check(["Bearer tick-token"])


def test_a_verified_token_is_checked_again_after_a_revocation_or_an_unusable_file(tmp_path: Path) -> None:
    """A header value verified before skips the parse and the digest (engine/tokens.py ``_verified``),
    never the token file's changes: a revoked token, or a file gone, refuses the call at once."""
    from engine.tokens import TOKEN_FILE_UNUSABLE, TokenAuthenticator

    tokens = tmp_path / "tokens.txt"
    tokens.write_text("alpha-token\nbeta-token\n")
    auth = TokenAuthenticator(token_file=tokens)
    for _ in range(3):
        assert auth.check(["Bearer alpha-token"]).name == auth.check([b"Bearer alpha-token"]).name
        assert auth.check(["Bearer beta-token"])
    with pytest.raises(flight.FlightUnauthenticatedError, match="invalid token"):
        auth.check(["Bearer gamma-token"])
    tokens.write_text("beta-token\n")  # alpha revoked
    os.utime(tokens, (time.time() + 5, time.time() + 5))
    time.sleep(1.1)  # the file is checked at most once a second
    with pytest.raises(flight.FlightUnauthenticatedError, match="invalid token"):
        auth.check(["Bearer alpha-token"])
    assert auth.check(["Bearer beta-token"])
    tokens.unlink()
    time.sleep(1.1)
    with pytest.raises(flight.FlightUnauthenticatedError, match=TOKEN_FILE_UNUSABLE[:40]):
        auth.check(["Bearer beta-token"])


def test_bad_token_configuration_is_refused(tmp_path: Path) -> None:
    from engine.tokens import Token, TokenConfigError, parse_token_file

    with pytest.raises(TokenConfigError):
        Token.of("has space")
    with pytest.raises(TokenConfigError, match="line 2"):
        parse_token_file("ok-token\nother-token not-a-date\n")


# ============================================================== the loopback rule
def test_non_loopback_needs_tokens(flight_data) -> None:
    from flight_server.server import ServerConfigError

    with pytest.raises(ServerConfigError, match="needs authentication"):
        with running_server(flight_data.store, host="0.0.0.0"):
            pass


def test_non_loopback_with_a_token_requires_it(flight_data) -> None:
    from engine.tokens import Token

    with running_server(flight_data.store, host="0.0.0.0", tokens=[Token.of("public-token")]) as server:
        c, opts = raw_client(server.location)
        with pytest.raises(flight.FlightUnauthenticatedError):
            c.do_get(TICKET, opts).read_all()
        c, opts = raw_client(server.location, "public-token")
        assert c.do_get(TICKET, opts).read_all().num_rows == 1


def test_loopback_without_tokens_is_open(flight_data) -> None:
    with running_server(flight_data.store) as server:
        c, opts = raw_client(server.location)
        assert c.do_get(TICKET, opts).read_all().num_rows == 1
        health = json.loads(list(c.do_action(flight.Action("health", b""), opts))[0].body.to_pybytes())
        assert health["auth"] is False


# ============================================================== TLS
def test_tls_with_a_self_signed_certificate(flight_data) -> None:
    from engine.tokens import Token
    from flight_server.client import MetastoreClient

    cert, key = self_signed_cert("localhost")
    with running_server(flight_data.store, tls_cert=cert, tls_key=key, tokens=[Token.of("tls-token")]) as server:
        assert server.location.startswith("grpc+tls://")
        with MetastoreClient(server.location, token="tls-token", tls_root_certs=cert, timeout=30) as c:
            assert c.health()["tls"] is True
            assert c.statistics("sales", ["price"]).num_rows == 1
        with MetastoreClient(server.location, token="wrong", tls_root_certs=cert, timeout=30) as c:
            with pytest.raises(flight.FlightUnauthenticatedError):
                c.health()
        # plain text against TLS, and TLS without trusting the certificate: no connection
        plain = server.location.replace("grpc+tls://", "grpc+tcp://")
        with MetastoreClient(plain, token="tls-token", timeout=5) as c:
            with pytest.raises(flight.FlightError):
                c.health()
        other_cert, _ = self_signed_cert("localhost")
        with MetastoreClient(server.location, token="tls-token", tls_root_certs=other_cert, timeout=5) as c:
            with pytest.raises(flight.FlightError):
                c.health()


def test_tls_needs_both_certificate_and_key(flight_data) -> None:
    from flight_server.server import ServerConfigError

    cert, _ = self_signed_cert()
    with pytest.raises(ServerConfigError, match="both"):
        with running_server(flight_data.store, tls_cert=cert):
            pass
