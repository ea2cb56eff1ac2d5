"""TokenStep: the desktop app by default; `trace` and `download` run headless without importing Qt."""

import sys

HEADLESS_COMMANDS = ("trace", "download")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in HEADLESS_COMMANDS:
        from inference.cli import main as cli_main

        return cli_main(argv)
    from gui.app import main as gui_main

    return gui_main(argv)


if __name__ == "__main__":
    sys.exit(main())
