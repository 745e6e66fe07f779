"""``--format csv|npz|both`` of simulate, run, invert and requirements: results also as
NumPy archives.

Part of the command line (hence ``_cli``: it prints what it wrote). Hooked into
:func:`multibody_control.cli.build_parser` by :func:`add_option`, after the
animation option (so an animation is made from the CSV before it is converted).  The
commands write their CSV (and sidecar) as always; with ``npz`` or ``both`` each CSV they
wrote is converted to ``<stem>.npz`` (:func:`multibody_dynamics.result_npz.write_npz`), and
with ``npz`` the CSV and its sidecar are then removed.  ``simulate --out FILE.npz`` means
``--format npz``.
"""

from __future__ import annotations

from pathlib import Path

from multibody_dynamics.errors import InputError

FORMATS = ("csv", "npz", "both")
COMMANDS = ("simulate", "run", "invert", "requirements")


def add_option(choices: dict) -> None:
    """Add ``--format`` to simulate, run, invert and requirements (``choices``: the
    subparsers by name)."""
    for name in COMMANDS:
        p = choices[name]
        p.add_argument("--format", choices=FORMATS, default=None,
                       help="result files: csv (default), npz (NumPy archive: every column "
                       "with its name and unit, and the sidecar) or both" + (
                           "; --out FILE.npz means npz" if name == "simulate" else ""))
        p.set_defaults(func=_with_format(p.get_default("func"), name))


def _simulate_npz(args) -> Path | None:
    """``simulate --out X.npz``: the CSV goes to a hidden name beside it; returns X.npz."""
    if not args.out or Path(args.out).suffix.lower() != ".npz":
        return None
    if args.format == "csv":
        raise InputError(f"--out {args.out} with --format csv: give FILE.csv or --format npz")
    target = Path(args.out)
    args.out = str(target.with_name(f".{target.stem}.tmp.csv"))
    args.format = "npz"
    args.csv_intermediate = True  # simulate names only X.npz, not the hidden CSV
    return target


def _written(command: str, args, since: float) -> list[Path]:
    """The result CSVs ``command`` wrote (modified after ``since``, a ``time.time()``)."""
    if command == "requirements":
        found = Path(args.out).glob("*_requirements.csv") if Path(args.out).is_dir() else []
        return [p for p in found if p.stat().st_mtime >= since]
    from .animate_cli import written_results

    return written_results(command, args, since=since)


def _with_format(func, command: str):
    def wrapped(args) -> int:
        from multibody_dynamics.result_meta import meta_path
        from multibody_dynamics.result_npz import write_npz

        target = _simulate_npz(args) if command == "simulate" else None
        fmt = args.format or "csv"
        if fmt == "csv":
            return func(args)
        import time

        start = time.time() - 1.0  # file times may be coarser than the clock
        try:
            rc = func(args)
        finally:  # also after Ctrl-C: the partial CSV becomes the archive
            for csv_path in _written(command, args, start):
                npz = write_npz(csv_path, target if command == "simulate" else None)
                if fmt == "npz":
                    csv_path.unlink()
                    meta_path(csv_path).unlink(missing_ok=True)
                print(f"wrote {npz}" + (f" (the samples of {csv_path.name}, removed)"
                                        if fmt == "npz" and target is None else ""))
        return rc

    wrapped.__doc__ = func.__doc__
    return wrapped


__all__ = ["FORMATS", "add_option"]
