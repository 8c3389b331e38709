"""The tally counts only what passing tests recorded."""

from tests.reliability.conftest import Tally


def test_merge_adds_counts_and_unions_names() -> None:
    run = Tally()
    one = Tally()
    one.streams(3)
    one.fault("provider reset")
    one.hostile("request id ..")
    two = Tally()
    two.streams(2)
    two.fault("provider reset")
    two.bytes_lost(0)
    two.secrets_found(1)
    two.figure("peak RSS", "10 MiB")
    run.merge(one)
    run.merge(two)
    assert run.streams_held == 5
    assert run.faults == {"provider reset"}
    assert run.hostile_inputs == {"request id .."}
    assert run.found_secrets == 1
    assert run.figures == {"peak RSS": "10 MiB"}
