"""helpers.lessons.pickler_reductions_torch_text: lesson 09's sentences say what its round trips say."""

from __future__ import annotations

from helpers.lessons import pickler_reductions_torch
from helpers.lessons import pickler_reductions_torch_text as text

MiB = 1 << 20
WARM, FRESH = 0.001, 0.01  # floors (a) and (b) per MiB, seconds


def rows(medians: dict[tuple[str, str], dict[int, float]]) -> list[dict]:
    """Rows as round_trip_table gives them, from {(how, where): {size in MiB: median ms}}."""
    return [{"how": how, "where": where, "size_bytes": mib * MiB, "median_s": ms / 1e3, "runs_s": [ms / 1e3],
             "first_s": ms / 1e3, "ratio_to_warm_floor": ms / 1e3 / (WARM * mib),
             "ratio_to_fresh_floor": ms / 1e3 / (FRESH * mib), "warm_floor_s": WARM * mib,
             "fresh_floor_s": FRESH * mib}
            for (how, where), by_size in medians.items() for mib, ms in by_size.items()]


def table(remote_pickle_at_2: float) -> list[dict]:
    return rows({("pickle", "local"): {2: 7, 64: 130}, ("pickle", "remote"): {2: remote_pickle_at_2, 64: 400},
                 ("torch", "local"): {2: 20, 64: 640}, ("torch", "remote"): {2: 21, 64: 390},
                 ("torch_shared", "local"): {2: 0.3, 64: 0.3}, ("torch_shared", "remote"): {2: 0.6, 64: 0.9},
                 ("shared_memory", "local"): {2: 2.5, 64: 70}, ("shared_memory", "remote"): {2: 3, 64: 72},
                 ("shared_memory_shared", "local"): {2: 0.02, 64: 0.02},
                 ("shared_memory_shared", "remote"): {2: 0.1, 64: 0.12}})


def test_the_round_trips_paragraph_says_what_the_table_says():
    said = text.round_trips_what_to_see(table(remote_pickle_at_2=30), 32 * MiB)
    assert "grow at most 1.5× over the 32× sweep, the pickle's 13× or more." in said  # 0.9/0.6; 400/30
    assert ("Torch's private-array trip took ~1.0× (b) locally at 64 MiB; locally a pickle beat it at 2 MiB "
            "and 64 MiB") in said
    assert ("beat the pickle at every size, and an array already shared beat every other trip at every "
            "size (at 64 MiB, 900 µs against 72 ms for the fastest private trip).") in said
    assert ("The torch-free trip's first call at 64 MiB took 70 ms locally and 72 ms remote, against floor "
            "(b)'s median 640 ms (its runs 640 ms): under (b), below all its runs (one cold call each). "
            "Warm, 1.1× (a): over the predicted \"about\".\n- "
            ) in said  # 70, 72 ms; warm 70 ms over (a)'s 64 ms
    assert "trip (orange) stays off floor (b) (dotted) at every size" in said  # 0.61× remote
    assert text.torch_follows_b(rows({("torch", "local"): {2: 40, 64: 640}})) == (  # 2.0× (b) at 2 MiB
        "follows floor (b) (dotted) from 64 MiB up; below that its fixed cost keeps it above (b)")
    assert text.torch_follows_b(rows({("torch", "local"): {2: 20, 64: 640}})) == "follows floor (b) (dotted)"
    # torch 390 against 640 ms; 72 against 70
    assert ("With either reduction, through a worker a private array cost 0.61× and ~1.0× its local trip "
            "at 64 MiB (the stdlib pickle's trip: 400 ms against 130 ms, every byte through the pipe both "
            "ways), missing the predicted \"about\" (torch's under it); a remote trip added at most 2 ms, "
            "under one copy (a), 64 ms: the reply crossed as a description. ") in said
    near = [{**row, "first_s": 0.66} if row["how"] == "shared_memory" and row["size_bytes"] == 64 * MiB
            else row for row in table(remote_pickle_at_2=30)]  # 0.66 s: within 10% of (b)'s 640 ms
    assert "about (b), within 10% of its runs: one copy into new pages" in text.round_trips_what_to_see(
        near, 32 * MiB)
    assert text.cold_words([0.96, 1.04]) == "about (b)" and text.cold_words([0.7, 1.1]) == "around (b)"
    assert text.cold_words([0.90, 0.90]) == "under (b)"  # the noise band ('~1.0×'), not 0.8-1.25×
    assert text.cold_words([1.3, 1.5]) == "over (b)"
    assert ("Torch's private-array trip at 64 MiB ran 1.6× faster remote than local, though remote contains "
            "local: its runs do not overlap, so something slowed the local ones (local 640 ms, remote "
            "390 ms).") in said
    assert "The pickle cost 3.5× (a) at 2 MiB, where `malloc` reuses" in said  # 7 ms / 2 ms
    assert "so against (b): 0.20× (b) at 64 MiB." in said  # 130 ms / 640 ms
    assert "Through a worker the pickle took 0.62× (b) at 64 MiB." in said  # 400 ms / 640 ms
    assert "Through a worker the pickle took 6.2× (a) at 64 MiB" in text.round_trips_what_to_see(
        table(remote_pickle_at_2=30), 128 * MiB)  # below the threshold: over floor (a), 400 ms / 64 ms
    assert text.already_shared_fastest(table(remote_pickle_at_2=30)) == [2 * MiB, 64 * MiB]
    later = text.round_trips_what_to_see(table(remote_pickle_at_2=10), 32 * MiB)
    assert "beat the pickle from 64 MiB up" in later
    slow_shared = [{**row, "median_s": 0.005} if (row["how"], row["where"], row["size_bytes"])
                   == ("torch_shared", "remote", 2 * MiB) else row for row in table(remote_pickle_at_2=30)]
    assert text.already_shared_fastest(slow_shared) == [64 * MiB]  # 5 ms: slower than torch-free's 3 ms
    assert "and an array already shared beat every other trip from 64 MiB up" in text.round_trips_what_to_see(
        slow_shared, 32 * MiB)
    assert text.remote_pickle_slowest(table(remote_pickle_at_2=10)) == [64 * MiB]
    assert text.already_shared_spread(table(remote_pickle_at_2=10))["torch_shared", "remote"] == 1.5


PRIVATE = ("torch", "shared_memory")  # the private-array ways


def test_a_remote_trip_below_its_local_one_is_named_with_its_runs_or_not_at_all():
    noisy = [{**row, "runs_s": [row["median_s"] * 0.5, row["median_s"] * 2]} for row in table(30)]
    assert text.remote_below_local(noisy) == (
        "Torch's private-array trip at 64 MiB ran 1.6× faster remote than local, though remote contains "
        "local: noise, its runs overlap (local 320 ms–1.28 s, remote 195–780 ms). ")
    steady = [{**row, "median_s": 0.9} if row["how"] in PRIVATE and row["where"] == "remote"
              else row for row in table(30)]
    assert text.remote_below_local(steady) == ""
    close = [{**row, "median_s": row["median_s"] / 1.02} if row["how"] in PRIVATE and row["where"] == "remote"
             and row["size_bytes"] == 64 * MiB else row for row in steady]
    assert text.remote_below_local(close) == ""  # 2% faster remote: it would read "1.0× faster"


def test_the_segment_counts_and_the_warm_path_line_say_what_the_pool_counted():
    counted = [{**row, "segments_new": 1, "segments_reused": 0 if row["size_bytes"] == 2 * MiB else 1}
               if row["how"] == "shared_memory" else {**row, "segments_new": None, "segments_reused": None}
               for row in table(30)]
    assert pickler_reductions_torch.format_lent_segments(counted).splitlines() == [
        "segments new / lent again" + " " * 15 + "2 MiB    64 MiB",
        "torch-free, private array, local" + " " * 8 + "1 / 0     1 / 1",
        "torch-free, private array, remote" + " " * 7 + "1 / 0     1 / 1"]
    assert pickler_reductions_torch.warm_path_line(counted, map_reused=0, map_sends=2) == (
        "Warm segments came with the loop of sends above (each received array dropped before the next "
        "send): 2 of 8 sends lent a given-back segment again; section 2's `Pool.map`, which pickled every "
        "task before a segment came back: 0 of 2.")
    assert pickler_reductions_torch.warm_path_line(counted, map_reused=1, map_sends=2) == (
        "The loop of sends above (each received array dropped before the next send): 2 of 8 sends lent a "
        "given-back segment again; section 2's `Pool.map`: 1 of 2.")


def test_the_warm_trip_and_remote_against_local_say_when_they_miss_the_predicted_about():
    assert text.warm_against_a(1.04) == "Warm, ~1.0× (a), as predicted."
    assert text.warm_against_a(1.065) == 'Warm, 1.1× (a): over the predicted "about".'  # 6.86 / 6.44 ms
    assert text.warm_against_a(0.9) == 'Warm, 0.90× (a): under the predicted "about".'

    def private(local_ms: float, remote_ms: float, torch_remote_ms: float = 650) -> list[dict]:  # (a): 64 ms
        return rows({("torch", "local"): {64: 640}, ("torch", "remote"): {64: torch_remote_ms},
                     ("shared_memory", "local"): {64: local_ms},
                     ("shared_memory", "remote"): {64: remote_ms}})

    assert text.remote_like_local(private(70, 71)) == (
        "With either reduction, through a worker a private array cost about what it cost locally at 64 MiB: "
        "the reply crossed as a description. ")
    with_pickle = rows({("pickle", "local"): {64: 130}, ("pickle", "remote"): {64: 400}})
    assert text.remote_like_local(private(70, 71) + with_pickle) == (  # the pickle's 3.1×: not a reduction's
        "With either reduction, through a worker a private array cost about what it cost locally at 64 MiB "
        "(the stdlib pickle's trip: 400 ms against 130 ms, every byte through the pipe both ways): the reply "
        "crossed as a description. ")
    pickle_near = rows({("pickle", "local"): {64: 130}, ("pickle", "remote"): {64: 133}})  # within the noise
    assert text.remote_like_local(private(70, 71) + pickle_near) == text.remote_like_local(private(70, 71))
    pickle_faster = rows({("pickle", "local"): {64: 130}, ("pickle", "remote"): {64: 100}})
    assert "stdlib" not in text.remote_like_local(private(70, 71) + pickle_faster)
    assert text.remote_like_local(private(70, 75)) == (  # 1.07×: 5 ms more, under a copy (a)
        "With either reduction, through a worker a private array cost ~1.0× and 1.1× its local trip at "
        "64 MiB, missing the predicted \"about\" (the torch-free one's over it); a remote trip added at most "
        "10 ms, under one copy (a), 64 ms: the reply crossed as a description. ")
    assert text.remote_like_local(private(70, 140)).endswith(  # 70 ms more: a copy's worth, no verdict
        "(the torch-free one's over it); a remote trip added up to 70 ms, one copy (a) (64 ms) or more. ")
    assert text.remote_like_local(private(70, 60, torch_remote_ms=630)).endswith(  # no remote trip added time
        "(the torch-free one's under it): the reply crossed as a description. ")


def test_the_pool_map_sentence_says_what_it_made_lent_and_why_the_copies_sat_together():
    assert text.pool_map_copies(8, 2, 6, 2, 96 * MiB) == (  # this run's section 2
        "8 tasks on 2 workers made 6 new segments and lent 2 given-back ones. `Pool.map` pickles tasks "
        "ahead of its workers, so 6 copies (96 MiB) sat in `/dev/shm` at once until sharing stopped")
    assert text.pool_map_copies(8, 2, 8, 0, 128 * MiB).startswith(  # none came back in time
        "8 tasks on 2 workers made 8 new segments and lent none given back. `Pool.map` pickles tasks ahead "
        "of its workers, so 8 copies (128 MiB)")
    assert text.pool_map_copies(4, 1, 3, 1, 48 * MiB).startswith(  # 1 CPU: one worker
        "4 tasks on 1 worker made 3 new segments and lent 1 given-back one. ")
    assert text.pool_map_copies(4, 1, 1, 3, 16 * MiB) == (  # every later task got the first segment back
        "4 tasks on 1 worker made 1 new segment and lent 3 given-back ones. Its one segment (16 MiB) sat in "
        "`/dev/shm` until sharing stopped")
    for said in (text.pool_map_copies(8, 2, 6, 2, 96 * MiB), text.pool_map_copies(4, 1, 1, 3, 16 * MiB)):
        assert " They " not in said and " got one" not in said  # nothing left to point back to
