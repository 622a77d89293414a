"""``python -m sharedarrays sweep``: remove what killed programs left in /dev/shm, for an operator.

Standard library only: it runs where NumPy does not import. Prints each name it removed.

    python -m sharedarrays sweep                  our segments whose creating process is dead
    python -m sharedarrays sweep --semaphores     and multiprocessing's semaphores no process maps
    python -m sharedarrays sweep --everything     every segment of ours, live owners' too
"""

from __future__ import annotations

import argparse
import sys

from sharedarrays.cleanup import sweep


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sharedarrays",
                                     description="Tools for an operator of programs that use sharedarrays.")
    commands = parser.add_subparsers(dest="command", required=True)
    sweeping = commands.add_parser(
        "sweep", help="remove the shared-memory segments of dead programs (see sharedarrays.sweep)")
    sweeping.add_argument("--everything", action="store_true",
                          help="every segment of ours, whoever made it and whether it still runs")
    sweeping.add_argument("--semaphores", action="store_true",
                          help="also multiprocessing's semaphores that no process this user sees maps: "
                               "only where no other container shares this /dev/shm")
    arguments = parser.parse_args(argv)
    removed = sweep(everything=arguments.everything, semaphores=arguments.semaphores)
    for name in removed:
        print(name)
    print(f"sweep: removed {len(removed)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
